package gateway

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
)

// eventOut is a bus event as the contract shows it; a fleet fact carries
// its worker in the payload and in workerId.
func eventOut(e events.Event) contract.Event {
	ce := contract.Event{Seq: e.Seq, Type: e.Type, At: e.At.UTC(), DeviceID: e.DeviceID, LeaseID: e.LeaseID,
		RequesterID: e.RequesterID, Platform: e.Platform, Reason: e.Reason, Data: e.Data}
	if id, ok := e.Data["workerId"].(string); ok {
		ce.WorkerID = id
	}
	return ce
}

// eventsSubscribe serves the gateway's bus: the fleet's republished facts
// and the gateway's own. An agent sees the facts about what it owns.
func (g *Gateway) eventsSubscribe(ctx context.Context, call *dispatch.Call, in contract.EventsSubscribeIn) (contract.EventsSubscribeOut, error) {
	var ch <-chan events.Event
	var cancel func()
	if in.Follow {
		ch, cancel = g.bus.Subscribe(1024)
	}
	visible := func(e contract.Event) bool {
		return call.Session.Role == contract.RoleAdmin || contract.OwnerOf(e) == call.Session.Principal
	}
	evs, dropped := g.bus.Since(in.Since)
	out := contract.EventsSubscribeOut{Events: []contract.Event{}, Dropped: dropped}
	last := in.Since
	for _, e := range evs {
		last = e.Seq
		if ce := eventOut(e); visible(ce) {
			out.Events = append(out.Events, ce)
		}
	}
	if in.Follow {
		call.After(func() {
			started := g.spawn(func() {
				defer cancel()
				for {
					select {
					case <-ctx.Done():
						return
					case <-g.ctx.Done():
						return
					case e := <-ch:
						if ce := eventOut(e); e.Seq > last && visible(ce) {
							call.Push(contract.NotifyEvent, ce)
						}
					}
				}
			})
			if !started {
				cancel()
			}
		})
	}
	return out, nil
}
