package gateway

import (
	"context"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/dispatch"
)

// eventsSubscribe serves the gateway's bus: the fleet's republished facts
// and the gateway's own.
func (g *Gateway) eventsSubscribe(ctx context.Context, call *dispatch.Call, in contract.EventsSubscribeIn) (contract.EventsSubscribeOut, error) {
	return dispatch.ServeEvents(ctx, call, g.bus, in, g.ctx.Done(), g.spawn), nil
}
