package httpapi

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

func noticeTypes(ns []contract.LeaseNotice) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Type+"/"+n.Reason)
	}
	return strings.Join(out, ",")
}

func TestNoticeRingKeepsTheNewest(t *testing.T) {
	b := newNoticeBuffer()
	owner := map[string]any{"ownerId": "token:a"}
	for i := 1; i <= noticesPerLease+5; i++ {
		b.apply(contract.Event{Type: "device.crash-detected", LeaseID: "l1", DeviceID: "d1", Reason: strconv.Itoa(i), Data: owner})
	}
	got := b.take("l1")
	if len(got) != noticesPerLease || got[0].Reason != "6" {
		t.Fatalf("kept %d, oldest %q", len(got), got[0].Reason)
	}
	b.apply(contract.Event{Type: "lease.released", LeaseID: "l1", DeviceID: "d1", Reason: "released", Data: owner})
	if n := b.takeLost("l1", contract.Session{Role: contract.RoleAdmin}); len(n) != 0 {
		t.Fatalf("an owner's own release is not a lost lease: %+v", n)
	}
	b.apply(contract.Event{Type: "lease.released", LeaseID: "l2", Reason: "reset", Data: owner})
	if n := b.takeLost("l2", contract.Session{Principal: "token:b", Role: contract.RoleAgent}); len(n) != 0 {
		t.Fatal("a stranger read a lease-lost notice")
	}
	if n := b.takeLost("l2", contract.Session{Principal: "token:a", Role: contract.RoleAgent}); noticeTypes(n) != "lease-lost/reset" {
		t.Fatalf("owner got %+v", n)
	}
}

// sseMessage is one parsed Server-Sent Events message.
type sseMessage struct{ event, id, data string }

func readSSE(t *testing.T, r *bufio.Reader) sseMessage {
	t.Helper()
	var m sseMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read SSE: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if m.data != "" {
				return m
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			m.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			m.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			m.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestEventSinkDeliversOnceInOrder(t *testing.T) {
	var got []uint64
	var gaps []contract.EventsGap
	s := newEventSink(func(e contract.Event) { got = append(got, e.Seq) }, func(g contract.EventsGap) { gaps = append(gaps, g) })
	s.notify(contract.NotifyEvent, contract.Event{Seq: 4, Type: "x"})
	s.notify(contract.NotifyEvent, contract.Event{Seq: 3, Type: "x"})
	s.notify(contract.NotifyProgress, contract.Progress{Phase: "queued"})
	s.start(contract.EventsSubscribeOut{Gap: &contract.EventsGap{FromSeq: 1, ToSeq: 1}, Events: []contract.Event{{Seq: 2, Type: "x"}, {Seq: 3, Type: "x"}}})
	s.notify(contract.NotifyEvent, map[string]any{"seq": 4, "type": "x"})
	s.notify(contract.NotifyEvent, contract.Event{Seq: 5, Type: "x"})
	s.notify(contract.NotifyGap, map[string]any{"fromSeq": 6, "toSeq": 9})
	s.notify(contract.NotifyEvent, contract.Event{Seq: 8, Type: "x"}) // inside the gap: already given up
	s.notify(contract.NotifyEvent, contract.Event{Seq: 10, Type: "x"})
	if want := "[2 3 4 5 10]"; fmtSeqs(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
	if len(gaps) != 2 || gaps[0] != (contract.EventsGap{FromSeq: 1, ToSeq: 1}) || gaps[1] != (contract.EventsGap{FromSeq: 6, ToSeq: 9}) {
		t.Fatalf("gaps %+v", gaps)
	}
}

func fmtSeqs(s []uint64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
