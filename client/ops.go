package client

import (
	"context"

	"github.com/simlock/simlock/contract"
)

// One method per contract operation, named after it (lease.requestStatus
// is LeaseRequestStatus). Each is Do with the operation fixed: the input
// and output are the contract's own types, and a refusal is a
// *contract.Error (errors.As, or IsCode). An input that is one identifier
// is a plain argument; anything larger is the contract's request struct, so
// a field the daemon gains later needs no new method. Durations are
// CallOptions. TestEveryOperationHasAMethod keeps this set equal to
// contract.Registry().

// doWith is Do after writing opts into in.
func doWith[In, Out any](ctx context.Context, c *Client, op contract.Operation[In, Out], in In, opts []CallOption) (Out, error) {
	if err := apply(op.Name, &in, opts); err != nil {
		var zero Out
		return zero, err
	}
	return Do(ctx, c, op, in)
}

// StatusGet is the daemon's health, devices, leases, capacity and queue
// (status.get).
func (c *Client) StatusGet(ctx context.Context) (contract.StatusGetOut, error) {
	return Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
}

// QueueList is one page of the queued lease requests, oldest first
// (queue.list).
func (c *Client) QueueList(ctx context.Context, in contract.QueueListIn) (contract.QueueListOut, error) {
	return Do(ctx, c, contract.QueueList, in)
}

// ListGet is every managed device with its state (list.get, admin).
func (c *Client) ListGet(ctx context.Context, in contract.ListGetIn) (contract.ListGetOut, error) {
	return Do(ctx, c, contract.ListGet, in)
}

// CatalogGet is the models and OS runtimes a platform can serve, or every
// platform's when platform is empty (catalog.get).
func (c *Client) CatalogGet(ctx context.Context, platform string) (contract.CatalogGetOut, error) {
	return Do(ctx, c, contract.CatalogGet, contract.CatalogGetIn{Platform: platform})
}

// ConfigGet is the daemon's effective configuration (config.get, admin).
func (c *Client) ConfigGet(ctx context.Context) (contract.ConfigGetOut, error) {
	return Do(ctx, c, contract.ConfigGet, contract.ConfigGetIn{})
}

// LeaseRenew extends a lease by its stored TTL, or by TTL(d) when given
// (lease.renew).
func (c *Client) LeaseRenew(ctx context.Context, leaseID string, opts ...CallOption) (contract.Lease, error) {
	return doWith(ctx, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: leaseID}, opts)
}

// LeaseRelease gives a lease back; the device is reclaimed in the
// background (lease.release).
func (c *Client) LeaseRelease(ctx context.Context, leaseID string) (contract.LeaseReleaseOut, error) {
	return Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: leaseID})
}

// LeaseReleaseAll releases the leases of one requester, the caller's own by
// default (lease.releaseAll).
func (c *Client) LeaseReleaseAll(ctx context.Context, in contract.LeaseReleaseAllIn) (contract.LeaseReleaseAllOut, error) {
	return Do(ctx, c, contract.LeaseReleaseAll, in)
}

// LeaseCancel withdraws the queued lease requests of requesterID, the
// caller's own when empty (lease.cancel).
func (c *Client) LeaseCancel(ctx context.Context, requesterID string) (contract.LeaseCancelOut, error) {
	return Do(ctx, c, contract.LeaseCancel, contract.LeaseCancelIn{RequesterID: requesterID})
}

// LeaseGet is one lease by id (lease.get).
func (c *Client) LeaseGet(ctx context.Context, leaseID string) (contract.Lease, error) {
	return Do(ctx, c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: leaseID})
}

// LeaseRequestStatus is one lease request's receipt by its request id,
// readable after a disconnect or a daemon restart (lease.requestStatus).
func (c *Client) LeaseRequestStatus(ctx context.Context, requestID string) (contract.LeaseRequestReceipt, error) {
	return Do(ctx, c, contract.LeaseRequestStatus, contract.LeaseRequestStatusIn{RequestID: requestID})
}

// LeaseList is the leases the caller owns, or every lease for an admin
// (lease.list).
func (c *Client) LeaseList(ctx context.Context) (contract.LeaseListOut, error) {
	return Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
}

// TokenCreate mints an API token; its secret is in the answer only
// (token.create, admin).
func (c *Client) TokenCreate(ctx context.Context, in contract.TokenCreateIn) (contract.TokenCreateOut, error) {
	return Do(ctx, c, contract.TokenCreate, in)
}

// TokenList is the tokens, without their secrets (token.list, admin).
func (c *Client) TokenList(ctx context.Context) (contract.TokenListOut, error) {
	return Do(ctx, c, contract.TokenList, contract.TokenListIn{})
}

// TokenRevoke revokes a token by id (token.revoke, admin).
func (c *Client) TokenRevoke(ctx context.Context, id string) (contract.TokenRevokeOut, error) {
	return Do(ctx, c, contract.TokenRevoke, contract.TokenRevokeIn{ID: id})
}

// DaemonStop stops the daemon gracefully (daemon.stop, admin); this
// connection ends with it.
func (c *Client) DaemonStop(ctx context.Context, in contract.DaemonStopIn) (contract.DaemonStopOut, error) {
	return Do(ctx, c, contract.DaemonStop, in)
}

// CleanupRun runs the idle-device cleanup rules once, or previews them with
// DryRun (cleanup.run, admin).
func (c *Client) CleanupRun(ctx context.Context, in contract.CleanupRunIn) (contract.CleanupRunOut, error) {
	return Do(ctx, c, contract.CleanupRun, in)
}

// DoctorRun compares the registry with the devices in simlock's roots; Fix
// and PurgeOrphans need admin (doctor.run).
func (c *Client) DoctorRun(ctx context.Context, in contract.DoctorRunIn) (contract.DoctorRunOut, error) {
	return Do(ctx, c, contract.DoctorRun, in)
}

// NukeRun releases every lease, cancels every queued request and destroys
// every managed device (nuke.run, admin).
func (c *Client) NukeRun(ctx context.Context) (contract.NukeRunOut, error) {
	return Do(ctx, c, contract.NukeRun, contract.NukeRunIn{})
}

// DeviceRelease gives back one device of this daemon by its host-registry
// key (device.release, admin).
func (c *Client) DeviceRelease(ctx context.Context, deviceKey string) (contract.DeviceReleaseOut, error) {
	return Do(ctx, c, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: deviceKey})
}

// WorkerList is the workers a gateway knows (worker.list, admin; a worker
// daemon answers UNKNOWN_OPERATION).
func (c *Client) WorkerList(ctx context.Context) (contract.WorkerListOut, error) {
	return Do(ctx, c, contract.WorkerList, contract.WorkerListIn{})
}

// WorkerDrain stops a gateway dispatching new leases to a worker
// (worker.drain, admin).
func (c *Client) WorkerDrain(ctx context.Context, id string) (contract.WorkerOut, error) {
	return Do(ctx, c, contract.WorkerDrain, contract.WorkerIn{ID: id})
}

// WorkerUndrain ends a worker's drain (worker.undrain, admin).
func (c *Client) WorkerUndrain(ctx context.Context, id string) (contract.WorkerOut, error) {
	return Do(ctx, c, contract.WorkerUndrain, contract.WorkerIn{ID: id})
}

// WorkerRemove makes a gateway forget a disconnected worker
// (worker.remove, admin).
func (c *Client) WorkerRemove(ctx context.Context, id string) (contract.WorkerOut, error) {
	return Do(ctx, c, contract.WorkerRemove, contract.WorkerIn{ID: id})
}

// DriverPassthrough resolves a simctl or adb invocation to the command
// scoped to simlock's device root, for the caller to run
// (driver.passthrough).
func (c *Client) DriverPassthrough(ctx context.Context, in contract.PassthroughIn) (contract.PassthroughOut, error) {
	return Do(ctx, c, contract.Passthrough, in)
}

// CapabilitiesGet is the contracts this daemon serves (capabilities.get).
func (c *Client) CapabilitiesGet(ctx context.Context) (contract.CapabilitiesGetOut, error) {
	return Do(ctx, c, contract.CapabilitiesGet, contract.CapabilitiesGetIn{})
}

// SessionPrepare asks for a device by requirements under an owner token;
// the same token and configuration always answer with the same receipt.
// Wait(d) answers with the pending receipt after d instead of waiting for
// the device (session.prepare).
func (c *Client) SessionPrepare(ctx context.Context, in contract.SessionPrepareIn, opts ...CallOption) (contract.SessionReceipt, error) {
	return doWith(ctx, c, contract.SessionPrepare, in, opts)
}

// SessionStatus reads a session request's receipt (session.status).
func (c *Client) SessionStatus(ctx context.Context, in contract.SessionStatusIn) (contract.SessionReceipt, error) {
	return Do(ctx, c, contract.SessionStatus, in)
}

// SessionAbandon consumes a session request's identity, so a late prepare
// cannot allocate from it (session.abandon).
func (c *Client) SessionAbandon(ctx context.Context, in contract.SessionAbandonIn) (contract.SessionReceipt, error) {
	return Do(ctx, c, contract.SessionAbandon, in)
}

// SessionRelease gives a session's device back through its reset;
// ReplyBudget(d) bounds the wait for the cleanup (session.release).
func (c *Client) SessionRelease(ctx context.Context, in contract.SessionReleaseIn, opts ...CallOption) (contract.SessionReleaseOut, error) {
	return doWith(ctx, c, contract.SessionRelease, in, opts)
}

// SessionHeartbeat proves the session's owner alive once; KeepSession is
// the loop (session.heartbeat).
func (c *Client) SessionHeartbeat(ctx context.Context, in contract.SessionHeartbeatIn) (contract.SessionHeartbeatOut, error) {
	return Do(ctx, c, contract.SessionHeartbeat, in)
}

// SessionInfo is a session's bound device, descriptive only
// (session.info).
func (c *Client) SessionInfo(ctx context.Context, sessionID string) (contract.SessionInfoOut, error) {
	return Do(ctx, c, contract.SessionInfo, contract.SessionInfoIn{SessionID: sessionID})
}

// SessionStats is acquisition and reset statistics over recent receipts;
// Window(d) says how far back (session.stats).
func (c *Client) SessionStats(ctx context.Context, in contract.SessionStatsIn, opts ...CallOption) (contract.SessionStatsOut, error) {
	return doWith(ctx, c, contract.SessionStats, in, opts)
}

// SessionGetExport reads a pinned session export (session.getExport).
func (c *Client) SessionGetExport(ctx context.Context, in contract.SessionExportIn) (contract.SessionExportOut, error) {
	return Do(ctx, c, contract.SessionGetExport, in)
}

// SessionAcknowledgeExport acknowledges a pinned export so its receipt may
// be pruned (session.acknowledgeExport).
func (c *Client) SessionAcknowledgeExport(ctx context.Context, in contract.SessionExportIn) (contract.SessionAcknowledgeOut, error) {
	return Do(ctx, c, contract.SessionAcknowledgeExport, in)
}

// SlotAcquire reconciles a launch configuration's slot to its spec and
// leases its device for one execution (slot.acquire).
func (c *Client) SlotAcquire(ctx context.Context, in contract.SlotAcquireIn) (contract.ManagedSlotsResult, error) {
	return Do(ctx, c, contract.SlotAcquire, in)
}

// SlotHeartbeat is an execution owner's heartbeat (slot.heartbeat).
func (c *Client) SlotHeartbeat(ctx context.Context, in contract.SlotHeartbeatIn) (contract.SlotHeartbeatOut, error) {
	return Do(ctx, c, contract.SlotHeartbeat, in)
}

// SlotRelease ends an execution; the slot keeps its device
// (slot.release).
func (c *Client) SlotRelease(ctx context.Context, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error) {
	return Do(ctx, c, contract.SlotRelease, in)
}

// SlotResetScope invalidates a runner incarnation's scope once it settles;
// Wait(d) bounds the settle wait (slot.resetScope, admin).
func (c *Client) SlotResetScope(ctx context.Context, in contract.SlotResetScopeIn, opts ...CallOption) (contract.SlotResetScopeOut, error) {
	return doWith(ctx, c, contract.SlotResetScope, in, opts)
}

// SlotList is every slot assignment and free-pool device in the host
// registry (slot.list, admin).
func (c *Client) SlotList(ctx context.Context) (contract.SlotListOut, error) {
	return Do(ctx, c, contract.SlotList, contract.SlotListIn{})
}
