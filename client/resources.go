package client

import (
	"context"

	"github.com/simlock/simlock/contract"
)

// ResourcesGet observes the resource groups of the caller's leased device.
func (c *Client) ResourcesGet(ctx context.Context, leaseID string) (contract.ResourceResult, error) {
	return Do(ctx, c, contract.ResourcesGet, contract.ResourcesGetIn{LeaseID: leaseID})
}

// ResourcesSet enables or disables groups (or restores an Android receipt)
// on the caller's leased device; the answer is the independent re-read.
// Timeout(d) bounds the whole call on the daemon's side.
func (c *Client) ResourcesSet(ctx context.Context, in contract.ResourcesSetIn, opts ...CallOption) (contract.ResourceResult, error) {
	return doWith(ctx, c, contract.ResourcesSet, in, opts)
}

// ResourcesReconcile compares a requested map with the device's observed
// state as typed drift, repairing when asked.
// Timeout(d) bounds the whole call on the daemon's side.
func (c *Client) ResourcesReconcile(ctx context.Context, in contract.ResourcesReconcileIn, opts ...CallOption) (contract.ResourceResult, error) {
	return doWith(ctx, c, contract.ResourcesReconcile, in, opts)
}
