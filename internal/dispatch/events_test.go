package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
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
	out := ServeEvents(context.Background(), call, bus, contract.EventsSubscribeIn{Since: 1, Follow: true}, stop, nil)
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
	out := ServeEvents(context.Background(), call, bus, contract.EventsSubscribeIn{Since: 0}, nil, nil)
	if !out.Dropped || out.Gap == nil || *out.Gap != (contract.EventsGap{FromSeq: 1, ToSeq: 2}) {
		t.Fatalf("gap %+v dropped %v", out.Gap, out.Dropped)
	}
	if len(out.Events) != 1 || out.Events[0].Seq != 5 {
		t.Fatalf("agent saw %+v", out.Events)
	}
}
