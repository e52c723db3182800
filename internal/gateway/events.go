package gateway

import (
	"context"
	"encoding/json"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
)

// eventsSubscribe serves the gateway's bus: the fleet's republished facts
// and the gateway's own.
func (g *Gateway) eventsSubscribe(ctx context.Context, call *dispatch.Call, in contract.EventsSubscribeIn) (contract.EventsSubscribeOut, error) {
	return dispatch.ServeEvents(ctx, call, g.bus, g.o.Journal, g.clock.Now(), in, g.ctx.Done(), g.spawn)
}

// onWorkerPush routes one push of a worker's followed events.subscribe:
// an event, or a gap the worker's daemon reports because this uplink fell
// behind its ring.
func (g *Gateway) onWorkerPush(id string, lk *link, method string, raw json.RawMessage) {
	switch method {
	case contract.NotifyEvent:
		var e contract.Event
		if json.Unmarshal(raw, &e) == nil {
			lk.evmu.Lock()
			defer lk.evmu.Unlock()
			g.onWorkerEventLocked(id, lk, e, true)
		}
	case contract.NotifyGap:
		var gap contract.EventsGap
		if json.Unmarshal(raw, &gap) == nil && gap.FromSeq > 0 && gap.ToSeq >= gap.FromSeq {
			lk.evmu.Lock()
			defer lk.evmu.Unlock()
			g.onWorkerGapLocked(id, lk, gap, true)
		}
	}
}

// onWorkerGapLocked handles facts of a worker that will never reach the
// gateway (lk.evmu held). They cannot be republished: they never got a
// gateway sequence number. So the gateway publishes a fact of its own in
// their place, worker.events-missed with the worker's range, where its
// subscribers would have seen them, and re-reads the worker's view, which
// those facts may have changed.
func (g *Gateway) onWorkerGapLocked(id string, lk *link, gap contract.EventsGap, publish bool) {
	g.mu.Lock()
	w := g.workers[id]
	if w == nil || w.link != lk || gap.ToSeq <= w.lastSeq {
		g.mu.Unlock()
		return
	}
	gap.FromSeq = max(gap.FromSeq, w.lastSeq+1) // what was relayed is not lost
	w.lastSeq = gap.ToSeq
	g.mu.Unlock()
	if publish {
		g.publish(events.Event{Type: "worker.events-missed", Data: map[string]any{
			"workerId": id, "fromSeq": gap.FromSeq, "toSeq": gap.ToSeq}})
		g.log.Warn("worker events missed", "worker", id, "fromSeq", gap.FromSeq, "toSeq", gap.ToSeq)
	}
	lk.kick()
}
