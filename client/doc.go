// Package client is simlock's public typed Go client. It speaks the daemon
// contract over the unix socket (Dial: JSON-RPC 2.0, one object per line) or
// over the HTTP API (DialHTTP: bearer token, NDJSON for pushes); FromEnv
// picks one from SIMLOCK_URL, SIMLOCK_TOKEN and SIMLOCK_HOME.
//
// The wire types, the operations and the error codes are those of package
// github.com/simlock/simlock/contract, used directly: client declares no
// copies or aliases of them (docs/adr/0031). Every operation has a method
// named after it, context first, answering the operation's own output
// type; a refusal is a *contract.Error, found with errors.As or IsCode:
//
//	l, err := c.LeaseGet(ctx, id)
//	if client.IsCode(err, contract.CodeUnknownLease) { ... }
//
// Durations are time.Duration options written into the request's
// millisecond fields (TTL, QueueTimeout, Timeout, Wait, ReplyBudget,
// Window):
//
//	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil,
//		client.TTL(10*time.Minute), client.QueueTimeout(time.Minute))
//
// Do runs any operation with its typed input and output, for one a newer
// contract adds before this package has its method; Call and Stream run one
// by name, untyped.
//
// # Operations
//
// Connection and daemon:
//   - hello: done by Dial, DialHTTP and FromEnv; Hello is its answer
//   - capabilities.get: CapabilitiesGet
//   - status.get: StatusGet
//   - queue.list: QueueList
//   - catalog.get: CatalogGet
//   - events.subscribe: Events, or EventStream to hear about gaps
//   - list.get, config.get (admin): ListGet, ConfigGet
//   - daemon.stop, cleanup.run, doctor.run, nuke.run (admin, doctor.run
//     also agent): DaemonStop, CleanupRun, DoctorRun, NukeRun
//   - token.create, token.list, token.revoke (admin): TokenCreate,
//     TokenList, TokenRevoke
//
// Leases:
//   - lease.request: LeaseRequest (TTL, QueueTimeout; progress pushes)
//   - lease.renew: LeaseRenew (TTL); Hold renews for you
//   - lease.release, lease.releaseAll: LeaseRelease, LeaseReleaseAll
//   - lease.cancel: LeaseCancel
//   - lease.get, lease.list, lease.requestStatus: LeaseGet, LeaseList,
//     LeaseRequestStatus
//
// The leased device:
//   - device.exec: Exec (output pushes)
//   - device.upload: Upload (chunked over the socket, one PUT over HTTP)
//   - device.release (admin): DeviceRelease
//   - driver.passthrough: DriverPassthrough
//   - resources.get, resources.set, resources.reconcile: ResourcesGet,
//     ResourcesSet and ResourcesReconcile (Timeout)
//
// Broker sessions (session-broker/v1):
//   - session.prepare: SessionPrepare (Wait)
//   - session.status, session.info: SessionStatus, SessionInfo
//   - session.heartbeat: SessionHeartbeat; KeepSession is the keeper loop
//   - session.release: SessionRelease (ReplyBudget)
//   - session.abandon: SessionAbandon
//   - session.stats: SessionStats (Window)
//   - session.getExport, session.acknowledgeExport: SessionGetExport,
//     SessionAcknowledgeExport
//
// Managed slots (managed-slots/v1):
//   - slot.acquire, slot.heartbeat, slot.release: SlotAcquire,
//     SlotHeartbeat, SlotRelease
//   - slot.list, slot.resetScope (admin): SlotList, SlotResetScope (Wait)
//
// A gateway's workers (a worker daemon answers UNKNOWN_OPERATION):
//   - worker.list, worker.drain, worker.undrain, worker.remove (admin):
//     WorkerList, WorkerDrain, WorkerUndrain, WorkerRemove
//
// TestEveryOperationHasAMethod holds this method set to contract.Registry().
//
// # Connections
//
// A Client never reconnects on its own: a dead connection fails every
// pending and later call with CONNECTION_LOST, and the caller decides what
// to do (Redial opens a new one the same way). Hold is the exception by
// design: it keeps one lease alive across reconnects.
package client
