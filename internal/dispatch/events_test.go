package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// push is one notification a test frontend received.
type push struct {
	method string
	params any
}

// A follower whose pushes stall (a client that stopped reading) falls
// behind the ring; when it moves again it is pushed one gap naming exactly
// the facts it can no longer get, then everything still buffered, in
// order, then live facts.
func TestServeEventsPushesTheExactGapToASlowFollower(t *testing.T) {
	bus := events.New(4, func() time.Time { return time.Unix(0, 0) })
	bus.Publish(events.Event{Type: "old"}) // seq 1
	stall := make(chan struct{})
	got := make(chan push, 64)
	call := &Call{Session: contract.Session{Principal: "op", Role: contract.RoleAdmin, Compatible: true}}
	first := true
	call.Notify = func(method string, params any) {
		got <- push{method, params}
		if first {
			first = false
			<-stall // the client stops reading after its first push
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	out, _ := ServeEvents(context.Background(), call, bus, nil, time.Time{}, contract.EventsSubscribeIn{Since: 1, Follow: true}, stop, nil)
	if len(out.Events) != 0 || out.Gap != nil {
		t.Fatalf("backlog %+v", out)
	}
	call.RunAfter()
	bus.Publish(events.Event{Type: "a"}) // seq 2: pushed, then the push stalls
	if p := <-got; p.method != contract.NotifyEvent || p.params.(contract.Event).Seq != 2 {
		t.Fatalf("first push %+v", p)
	}
	for i := 0; i < 10; i++ { // seqs 3..12; the ring keeps 9..12
		bus.Publish(events.Event{Type: "b"})
	}
	close(stall)
	p := <-got
	if g, ok := p.params.(contract.EventsGap); p.method != contract.NotifyGap || !ok || g != (contract.EventsGap{FromSeq: 3, ToSeq: 8}) {
		t.Fatalf("after the stall %+v, want gap 3..8", p)
	}
	for want := uint64(9); want <= 13; want++ {
		if want == 13 {
			bus.Publish(events.Event{Type: "live"})
		}
		p := <-got
		if e, ok := p.params.(contract.Event); p.method != contract.NotifyEvent || !ok || e.Seq != want {
			t.Fatalf("push %+v, want event %d", p, want)
		}
	}
}

// A since the ring has moved past answers with the gap, and an agent is
// told about gaps too (they may hide its own facts) while seeing only its
// own events.
func TestServeEventsBacklogGapAndAgentVisibility(t *testing.T) {
	bus := events.New(3, func() time.Time { return time.Unix(0, 0) })
	for i := 0; i < 5; i++ {
		owner := "someone"
		if i == 4 {
			owner = "me"
		}
		bus.Publish(events.Event{Type: "lease.granted", Data: map[string]any{"ownerId": owner}})
	}
	call := &Call{Session: contract.Session{Principal: "me", Role: contract.RoleAgent, Compatible: true}}
	out, _ := ServeEvents(context.Background(), call, bus, nil, time.Time{}, contract.EventsSubscribeIn{Since: 0}, nil, nil)
	if !out.Dropped || out.Gap == nil || *out.Gap != (contract.EventsGap{FromSeq: 1, ToSeq: 2}) {
		t.Fatalf("gap %+v dropped %v", out.Gap, out.Dropped)
	}
	if len(out.Events) != 1 || out.Events[0].Seq != 5 {
		t.Fatalf("agent saw %+v", out.Events)
	}
}

// memJournal is an in-memory Journal holding facts by seq.
type memJournal map[uint64]events.Event

func (j memJournal) EventsBetween(_ context.Context, from, to uint64) ([]events.Event, error) {
	var out []events.Event
	for s := from; s <= to; s++ {
		if e, ok := j[s]; ok {
			out = append(out, e)
		}
	}
	return out, nil
}

func (j memJournal) FirstSeqAt(_ context.Context, t time.Time) (uint64, bool, error) {
	var best uint64
	for s, e := range j {
		if !e.At.Before(t) && (best == 0 || s < best) {
			best = s
		}
	}
	return best, best != 0, nil
}

func (j memJournal) LastSeq(context.Context) (uint64, error) {
	var last uint64
	for s := range j {
		last = max(last, s)
	}
	return last, nil
}

// journalWorld is a bus that continued from a journal of facts 1..10 (an
// earlier run, one a minute from t0) and then published 11..20 itself,
// of which its ring of 4 still holds 17..20 and the journal 11..16.
func journalWorld(t *testing.T, drop ...uint64) (*events.Bus, memJournal, time.Time) {
	t.Helper()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	j := memJournal{}
	for s := uint64(1); s <= 10; s++ {
		j[s] = events.Event{Seq: s, Type: "old", At: t0.Add(time.Duration(s) * time.Minute)}
	}
	bus := events.New(4, func() time.Time { return t0.Add(time.Hour) })
	bus.ContinueFrom(10)
	for i := 0; i < 10; i++ {
		e := bus.Publish(events.Event{Type: "new"})
		j[e.Seq] = e
	}
	for _, s := range drop {
		delete(j, s)
	}
	return bus, j, t0
}

func seqs(evs []contract.Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func contiguous(t *testing.T, evs []contract.Event, from, to uint64) {
	t.Helper()
	if uint64(len(evs)) != to-from+1 {
		t.Fatalf("events %v; want %d..%d", seqs(evs), from, to)
	}
	for i, e := range evs {
		if e.Seq != from+uint64(i) {
			t.Fatalf("events %v; want %d..%d", seqs(evs), from, to)
		}
	}
}

// History from the journal, then the ring, then live pushes: no gap, no
// duplicate, whether the since comes from an earlier run or from a time.
func TestServeEventsReplaysTheJournalThenFollowsWithoutGapOrDuplicate(t *testing.T) {
	admin := contract.Session{Principal: "op", Role: contract.RoleAdmin, Compatible: true}
	bus, j, t0 := journalWorld(t)
	got := make(chan contract.Event, 8)
	call := &Call{Session: admin, Notify: func(_ string, p any) { got <- p.(contract.Event) }}
	stop := make(chan struct{})
	defer close(stop)
	out, err := ServeEvents(context.Background(), call, bus, j, t0.Add(time.Hour), contract.EventsSubscribeIn{Since: 3, Follow: true}, stop, nil)
	if err != nil || out.Gap != nil || out.Dropped {
		t.Fatalf("since 3: %v, gap %+v", err, out.Gap)
	}
	contiguous(t, out.Events, 4, 20)
	call.RunAfter()
	bus.Publish(events.Event{Type: "live"})
	if e := <-got; e.Seq != 21 {
		t.Fatalf("first live push is seq %d; want 21", e.Seq)
	}

	// sinceTime: the facts at or after 10:05 (seq 5 on), across the runs.
	out, err = ServeEvents(context.Background(), &Call{Session: admin}, bus, j, t0.Add(time.Hour), contract.EventsSubscribeIn{SinceTime: "2026-12-01T10:05:00Z"}, nil, nil)
	if err != nil || out.Gap != nil {
		t.Fatalf("sinceTime: %v, gap %+v", err, out.Gap)
	}
	contiguous(t, out.Events, 5, 21)
	// A duration counts back from now (11:00): 30m reaches no journaled
	// fact of the earlier run, but this run's are all newer than it.
	out, _ = ServeEvents(context.Background(), &Call{Session: admin}, bus, j, t0.Add(time.Hour), contract.EventsSubscribeIn{SinceTime: "30m"}, nil, nil)
	contiguous(t, out.Events, 11, 21)

	// The default is this run's facts only (11 on), the journal filling
	// what this run's ring overwrote; the earlier run only on request.
	out, _ = ServeEvents(context.Background(), &Call{Session: admin}, bus, j, t0.Add(time.Hour), contract.EventsSubscribeIn{}, nil, nil)
	if out.Gap != nil {
		t.Fatalf("default read: gap %+v", out.Gap)
	}
	contiguous(t, out.Events, 11, 21)
	if _, err := ServeEvents(context.Background(), &Call{Session: admin}, bus, j, t0, contract.EventsSubscribeIn{Since: 2, SinceTime: "1h"}, nil, nil); contract.AsError(err).Code != contract.CodeBadRequest {
		t.Errorf("since with sinceTime: %v; want BAD_REQUEST", err)
	}
}

// What neither the ring nor the journal holds is one gap, before the
// facts that follow it without a hole.
func TestServeEventsReportsWhatTheJournalLacksAsOneGap(t *testing.T) {
	bus, j, t0 := journalWorld(t, 1, 2, 12) // pruned 1-2, and 12 never written
	out, err := ServeEvents(context.Background(), &Call{Session: contract.Session{Role: contract.RoleAdmin}}, bus, j, t0, contract.EventsSubscribeIn{Since: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Gap == nil || *out.Gap != (contract.EventsGap{FromSeq: 2, ToSeq: 12}) || !out.Dropped {
		t.Fatalf("gap %+v; want 2..12", out.Gap)
	}
	contiguous(t, out.Events, 13, 20)
}
