package gateway

import (
	"context"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
)

// The resource operations act on one leased device, so the gateway only
// forwards them to the worker holding the lease; the dispatcher's ownsLease
// check ran here already, against the gateway's own lease index.

func (g *Gateway) resourcesGet(ctx context.Context, _ *dispatch.Call, in contract.ResourcesGetIn) (contract.ResourceResult, error) {
	return g.forwardResources(ctx, in.LeaseID, contract.ResourcesGet.Name, func(lid string) any { in.LeaseID = lid; return in })
}

func (g *Gateway) resourcesSet(ctx context.Context, _ *dispatch.Call, in contract.ResourcesSetIn) (contract.ResourceResult, error) {
	return g.forwardResources(ctx, in.LeaseID, contract.ResourcesSet.Name, func(lid string) any { in.LeaseID = lid; return in })
}

func (g *Gateway) resourcesReconcile(ctx context.Context, _ *dispatch.Call, in contract.ResourcesReconcileIn) (contract.ResourceResult, error) {
	return g.forwardResources(ctx, in.LeaseID, contract.ResourcesReconcile.Name, func(lid string) any { in.LeaseID = lid; return in })
}

func (g *Gateway) forwardResources(ctx context.Context, leaseID, method string, with func(lid string) any) (contract.ResourceResult, error) {
	var out contract.ResourceResult
	if _, _, err := g.forward(ctx, leaseID, method, with, &out); err != nil {
		return contract.ResourceResult{}, err
	}
	return out, nil
}
