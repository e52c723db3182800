package dispatch

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// EventOut is a bus event as the contract shows it. A fleet fact carries
// its worker in the payload, surfaced as workerId.
func EventOut(e events.Event) contract.Event {
	ce := contract.Event{Seq: e.Seq, Type: e.Type, At: e.At.UTC(), DeviceID: e.DeviceID, LeaseID: e.LeaseID,
		RequesterID: e.RequesterID, Platform: e.Platform, Reason: e.Reason, Data: e.Data}
	if id, ok := e.Data["workerId"].(string); ok {
		ce.WorkerID = id
	}
	return ce
}

// ServeEvents answers events.subscribe from bus, for a worker and a gateway
// alike: the buffered events after in.Since, and with Follow every later one
// as an "event" push until ctx or stop ends. An agent sees only the facts
// about what it owns; an admin sees all. spawn runs the follower (nil: a
// plain goroutine) and may refuse (return false) when its owner is closing.
func ServeEvents(ctx context.Context, call *Call, bus *events.Bus, in contract.EventsSubscribeIn, stop <-chan struct{}, spawn func(func()) bool) contract.EventsSubscribeOut {
	visible := func(e contract.Event) bool {
		return call.Session.Role == contract.RoleAdmin || contract.OwnerOf(e) == call.Session.Principal
	}
	var ch <-chan events.Event
	var cancel func()
	if in.Follow {
		// Subscribe before reading the backlog so nothing falls in between.
		ch, cancel = bus.Subscribe(1024)
	}
	evs, dropped := bus.Since(in.Since)
	out := contract.EventsSubscribeOut{Events: []contract.Event{}, Dropped: dropped}
	last := in.Since
	for _, e := range evs {
		last = e.Seq
		if ce := EventOut(e); visible(ce) {
			out.Events = append(out.Events, ce)
		}
	}
	if !in.Follow {
		return out
	}
	if spawn == nil {
		spawn = func(f func()) bool { go f(); return true }
	}
	call.After(func() {
		started := spawn(func() {
			defer cancel()
			for {
				select {
				case <-ctx.Done():
					return
				case <-stop:
					return
				case e := <-ch:
					if ce := EventOut(e); e.Seq > last && visible(ce) {
						call.Push(contract.NotifyEvent, ce)
					}
				}
			}
		})
		if !started {
			cancel()
		}
	})
	return out
}
