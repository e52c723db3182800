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

// GapOut is a bus gap as the contract shows it (nil stays nil).
func GapOut(g *events.Gap) *contract.EventsGap {
	if g == nil {
		return nil
	}
	return &contract.EventsGap{FromSeq: g.FromSeq, ToSeq: g.ToSeq}
}

// ServeEvents answers events.subscribe from bus, for a worker and a gateway
// alike: the buffered events after in.Since, and with Follow every later one
// as an "event" push until ctx or stop ends, in sequence order. A follower
// that reads too slowly for the ring is pushed a "gap" naming exactly what
// it missed, then continues. An agent sees only the facts about what it
// owns (and every gap, since a gap may hide its own facts); an admin sees
// all. spawn runs the follower (nil: a plain goroutine) and may refuse
// (return false) when its owner is closing.
func ServeEvents(ctx context.Context, call *Call, bus *events.Bus, in contract.EventsSubscribeIn, stop <-chan struct{}, spawn func(func()) bool) contract.EventsSubscribeOut {
	visible := func(e contract.Event) bool {
		return call.Session.Role == contract.RoleAdmin || contract.OwnerOf(e) == call.Session.Principal
	}
	var evs []events.Event
	var gap *events.Gap
	var sub *events.Follower
	if in.Follow {
		// One step: the follower starts right after the backlog, so
		// nothing falls in between and nothing is sent twice.
		evs, gap, sub = bus.Follow(in.Since)
	} else {
		evs, gap = bus.Since(in.Since)
	}
	out := contract.EventsSubscribeOut{Events: []contract.Event{}, Dropped: gap != nil, Gap: GapOut(gap)}
	for _, e := range evs {
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
			defer sub.Close()
			fctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-stop:
					cancel()
				case <-fctx.Done():
				}
			}()
			for {
				it, err := sub.Next(fctx)
				switch {
				case err != nil:
					return
				case it.Gap != nil:
					call.Push(contract.NotifyGap, *GapOut(it.Gap))
				default:
					if ce := EventOut(it.Event); visible(ce) {
						call.Push(contract.NotifyEvent, ce)
					}
				}
			}
		})
		if !started {
			sub.Close()
		}
	})
	return out
}
