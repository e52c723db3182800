package waitq

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name    string
	serving bool // being served: keeps its place, takes no number
	noWait  bool // never waits: takes no number
	hidden  bool // its position is not reported (yet)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func names(es []*entry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return strings.Join(out, ",")
}

func positions(ps []Position[*entry]) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s=%d", p.Entry.name, p.Pos))
	}
	return strings.Join(out, ",")
}

func counted(e *entry) bool { return !e.serving && !e.noWait }

type stopTimer struct{ stopped int }

func (t *stopTimer) Stop() bool { t.stopped++; return true }

func TestOrderAndRemoval(t *testing.T) {
	a, b, c, d := &entry{name: "a"}, &entry{name: "b"}, &entry{name: "c"}, &entry{name: "d"}
	cases := []struct {
		name   string
		remove []*entry
		want   string
	}{
		{"arrival order", nil, "a,b,c,d"},
		{"head leaves", []*entry{a}, "b,c,d"},
		{"middle leaves", []*entry{c}, "a,b,d"},
		{"tail leaves", []*entry{d}, "a,b,c"},
		{"all leave", []*entry{b, d, a, c}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[*entry]
			for i, e := range []*entry{a, b, c, d} {
				if !q.Push(e, t0.Add(time.Duration(i)*time.Second), 0) {
					t.Fatalf("push %s refused", e.name)
				}
			}
			for _, e := range tc.remove {
				if !q.Remove(e) {
					t.Fatalf("remove %s: not queued", e.name)
				}
				if q.Remove(e) || q.Contains(e) {
					t.Fatalf("%s still queued after removal", e.name)
				}
			}
			if got := names(q.Entries()); got != tc.want || q.Len() != len(q.Entries()) {
				t.Fatalf("queue %q (len %d), want %q", got, q.Len(), tc.want)
			}
		})
	}
}

func TestPushRefusesADuplicate(t *testing.T) {
	var q Queue[*entry]
	a := &entry{name: "a"}
	q.Push(a, t0, time.Minute)
	if q.Push(a, t0.Add(time.Hour), 0) {
		t.Fatal("a second push of the same entry was accepted")
	}
	if d, ok := q.Deadline(a); !ok || !d.Equal(t0.Add(time.Minute)) || !q.EnqueuedAt(a).Equal(t0) {
		t.Fatalf("the duplicate push changed the entry: deadline %v %v, enqueued %v", d, ok, q.EnqueuedAt(a))
	}
}

// A pass walks a snapshot and may remove entries as it goes, the visited
// one or a later one, without skipping or repeating anybody.
func TestAPassMayRemoveAsItGoes(t *testing.T) {
	var q Queue[*entry]
	es := []*entry{{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}}
	for _, e := range es {
		q.Push(e, t0, 0)
	}
	var visited []*entry
	for _, e := range q.Entries() {
		if !q.Contains(e) {
			continue // removed earlier in this pass
		}
		visited = append(visited, e)
		switch e.name {
		case "a": // served: leaves
			q.Remove(e)
		case "b": // passed over: nothing can serve it yet
		case "c": // served, and its grant withdraws d
			q.Remove(e)
			q.Remove(es[3])
		}
	}
	if names(visited) != "a,b,c" || names(q.Entries()) != "b" {
		t.Fatalf("visited %s, left %s", names(visited), names(q.Entries()))
	}
}

func TestFindTakesTheOldestMatch(t *testing.T) {
	var q Queue[*entry]
	q.Push(&entry{name: "x1"}, t0, 0)
	q.Push(&entry{name: "y"}, t0, 0)
	q.Push(&entry{name: "x2"}, t0, 0)
	if e, ok := q.Find(func(e *entry) bool { return strings.HasPrefix(e.name, "x") }); !ok || e.name != "x1" {
		t.Fatalf("found %v %v", e, ok)
	}
	if _, ok := q.Find(func(e *entry) bool { return e.name == "z" }); ok {
		t.Fatal("found an entry that is not there")
	}
}

func TestPositionsSkipUncountedEntries(t *testing.T) {
	cases := []struct {
		name    string
		entries []*entry
		want    string
	}{
		{"empty", nil, ""},
		{"all wait", []*entry{{name: "a"}, {name: "b"}, {name: "c"}}, "a=1,b=2,c=3"},
		{"one being served", []*entry{{name: "a", serving: true}, {name: "b"}, {name: "c"}}, "b=1,c=2"},
		{"noWait in the middle", []*entry{{name: "a"}, {name: "n", noWait: true}, {name: "c"}}, "a=1,c=2"},
		{"none counted", []*entry{{name: "a", serving: true}, {name: "n", noWait: true}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[*entry]
			for _, e := range tc.entries {
				q.Push(e, t0, 0)
			}
			if got := positions(q.Positions(counted)); got != tc.want {
				t.Fatalf("positions %q, want %q", got, tc.want)
			}
		})
	}
	var q Queue[*entry]
	q.Push(&entry{name: "a", serving: true}, t0, 0)
	if got := positions(q.Positions(nil)); got != "a=1" {
		t.Fatalf("nil counts everything: %q", got)
	}
}

// Renumber reports a position only when it changed and may be reported;
// a position not reported stays owed.
func TestRenumberReportsOnlyChanges(t *testing.T) {
	var q Queue[*entry]
	a, b, c := &entry{name: "a"}, &entry{name: "b", hidden: true}, &entry{name: "c"}
	reportable := func(e *entry) bool { return !e.hidden }
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"first numbering", func() { q.Push(a, t0, 0); q.Push(b, t0, 0); q.Push(c, t0, 0) }, "a=1,c=3"},
		{"nothing changed", func() {}, ""},
		{"b becomes reportable: its owed position", func() { b.hidden = false }, "b=2"},
		{"the head is served: the rest move up", func() { a.serving = true }, "b=1,c=2"},
		{"the head leaves: numbers hold", func() { q.Remove(a) }, ""},
		{"b leaves", func() { q.Remove(b) }, "c=1"},
	}
	var last uint64
	for _, s := range steps {
		s.do()
		got := q.Renumber(counted, reportable)
		if positions(got) != s.want {
			t.Fatalf("%s: reported %q, want %q", s.name, positions(got), s.want)
		}
		for _, p := range got {
			if p.Stamp <= last {
				t.Fatalf("%s: stamp %d not after %d", s.name, p.Stamp, last)
			}
			last = p.Stamp
		}
	}
}

func TestDeadlinesAndTimers(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		after   time.Duration
		overdue bool
	}{
		{"no timeout never expires", 0, 24 * time.Hour, false},
		{"negative is no timeout", -time.Second, time.Hour, false},
		{"before the deadline", 5 * time.Second, 4 * time.Second, false},
		{"at the deadline", 5 * time.Second, 5 * time.Second, true},
		{"after the deadline", 5 * time.Second, time.Minute, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[*entry]
			e := &entry{name: "a"}
			q.Push(e, t0, tc.timeout)
			if got := q.Overdue(e, t0.Add(tc.after)); got != tc.overdue {
				t.Fatalf("overdue %v, want %v", got, tc.overdue)
			}
			tm := &stopTimer{}
			q.SetTimer(e, tm)
			q.Remove(e)
			if tm.stopped != 1 {
				t.Fatalf("timer stopped %d times on removal", tm.stopped)
			}
			if q.Overdue(e, t0.Add(tc.after)) || !q.EnqueuedAt(e).IsZero() {
				t.Fatal("a removed entry still has timeout bookkeeping")
			}
			q.SetTimer(e, tm) // not queued: ignored
			q.Remove(e)
			if tm.stopped != 1 {
				t.Fatal("a timer set on an entry not queued was kept")
			}
		})
	}
}

// TestAfterPagesByPushOrderAcrossRemovals walks the queue a page at a
// time by sequence number: a page's cursor stays valid while entries
// before or at it leave, and the walk sees every entry still queued
// once, in order.
func TestAfterPagesByPushOrderAcrossRemovals(t *testing.T) {
	var q Queue[*entry]
	var all []*entry
	for i := range 7 {
		e := &entry{name: fmt.Sprintf("e%d", i)}
		all = append(all, e)
		q.Push(e, t0, 0)
	}
	page, index := q.After(0, 3)
	if names(page) != "e0,e1,e2" || index != 0 {
		t.Fatalf("first page %q at %d, want e0,e1,e2 at 0", names(page), index)
	}
	cursor := q.Seq(page[len(page)-1])
	// The cursor's own entry and one before it leave; one behind it too.
	q.Remove(all[2])
	q.Remove(all[0])
	q.Remove(all[4])
	page, index = q.After(cursor, 3)
	if names(page) != "e3,e5,e6" || index != 1 {
		t.Fatalf("second page %q at %d, want e3,e5,e6 at 1 (e1 is the only entry before them)", names(page), index)
	}
	if page, _ = q.After(q.Seq(page[len(page)-1]), 3); len(page) != 0 {
		t.Fatalf("past the tail: %q, want nothing", names(page))
	}
	if q.Seq(all[0]) != 0 || q.Seq(all[1]) == 0 {
		t.Fatalf("Seq: a removed entry reads %d (want 0), a queued one %d (want >0)", q.Seq(all[0]), q.Seq(all[1]))
	}
	if page, _ = q.After(0, 0); len(page) != 0 {
		t.Fatalf("limit 0 returned %q", names(page))
	}
}
