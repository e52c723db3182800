package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
)

// Authorization names an extra check an operation needs beyond its role. The
// dispatcher implements it, because only the daemon can look a lease up.
type Authorization string

const (
	// AuthOwnsLease: a non-admin caller must own the lease named by the
	// input's leaseId.
	AuthOwnsLease Authorization = "ownsLease"
	// AuthAdminToChange: the operation is agent-visible read-only, but the
	// input's mutating flags (doctor's fix, purgeOrphans) need admin.
	AuthAdminToChange Authorization = "adminToChange"
)

// ClaimPolicy says how an operation relates to host-global device claims
// (the host registry every simlock home on a machine shares). Every
// operation declares one; there is no default, so a new operation cannot
// slip past the claim rules unnoticed (TestEveryOperationDeclaresAClaimPolicy).
type ClaimPolicy string

const (
	// ClaimNone: the operation touches no device.
	ClaimNone ClaimPolicy = "none"
	// ClaimObserve: it may report ownership but never changes it.
	ClaimObserve ClaimPolicy = "observe"
	// ClaimRequireOwner: it acts on a device the caller's lease holds. The
	// lease proves the claim, so it does no host-registry I/O per call.
	ClaimRequireOwner ClaimPolicy = "require-owner"
	// ClaimTransientExclusive: a device mutation outside any lease; it
	// claims the device for the command's duration and refuses a device
	// another owner holds.
	ClaimTransientExclusive ClaimPolicy = "transient-exclusive"
	// ClaimAcquire: it takes a device for a lease; the claim is taken
	// before any platform mutation.
	ClaimAcquire ClaimPolicy = "acquire"
	// ClaimRelease: it gives devices back; a claim is cleared only once
	// the device's teardown reached a safe state.
	ClaimRelease ClaimPolicy = "release"
)

// ClaimPolicies lists every policy, for validation and docs.
func ClaimPolicies() []ClaimPolicy {
	return []ClaimPolicy{ClaimNone, ClaimObserve, ClaimRequireOwner, ClaimTransientExclusive, ClaimAcquire, ClaimRelease}
}

// Op describes one operation independent of its Go types.
type Op struct {
	Name  string
	Role  Role
	Claim ClaimPolicy
	Auth  Authorization
	// Unparked operations answer during startup convergence.
	Unparked bool
	Doc      string
	In, Out  reflect.Type
}

// Operation is an Op carrying its input and output types.
type Operation[In, Out any] struct{ Op }

func define[In, Out any](name string, role Role, claim ClaimPolicy, doc string, opts ...func(*Op)) Operation[In, Out] {
	op := Op{Name: name, Role: role, Claim: claim, Doc: doc,
		In: reflect.TypeFor[In](), Out: reflect.TypeFor[Out]()}
	for _, o := range opts {
		o(&op)
	}
	return Operation[In, Out]{op}
}

func ownsLease(o *Op) { o.Auth = AuthOwnsLease }
func unparked(o *Op)  { o.Unparked = true }

// The operations the daemon serves, one variable each, named after the
// operation in Go case (lease.requestStatus is LeaseRequestStatus, the one
// exception Passthrough for driver.passthrough). Package client has a typed
// method per operation; client.Do runs any of them.
var (
	Hello              = define[HelloIn, HelloOut]("hello", RoleAgent, ClaimNone, "Negotiate the protocol range and the session's role.", unparked)
	StatusGet          = define[StatusGetIn, StatusGetOut]("status.get", RoleAgent, ClaimObserve, "Daemon health, devices, leases, capacity and queue.", unparked)
	QueueList          = define[QueueListIn, QueueListOut]("queue.list", RoleAgent, ClaimObserve, "The queued lease requests oldest first, one page at a time (cursor, limit).")
	ListGet            = define[ListGetIn, ListGetOut]("list.get", RoleAdmin, ClaimObserve, "Every managed device with its state.")
	CatalogGet         = define[CatalogGetIn, CatalogGetOut]("catalog.get", RoleAgent, ClaimNone, "Models and OS runtimes each platform can serve.")
	ConfigGet          = define[ConfigGetIn, ConfigGetOut]("config.get", RoleAdmin, ClaimNone, "The daemon's effective configuration.")
	LeaseRequest       = define[LeaseRequestIn, Lease]("lease.request", RoleAgent, ClaimAcquire, "Ask for an exclusive, TTL-bounded lease on a ready device; waits in the FIFO queue unless noWait.")
	LeaseRenew         = define[LeaseRenewIn, Lease]("lease.renew", RoleAgent, ClaimRequireOwner, "Extend a lease by its stored TTL (or a new one).", ownsLease)
	LeaseRelease       = define[LeaseReleaseIn, LeaseReleaseOut]("lease.release", RoleAgent, ClaimRelease, "Give a lease back; the device is reclaimed in the background.", ownsLease)
	LeaseReleaseAll    = define[LeaseReleaseAllIn, LeaseReleaseAllOut]("lease.releaseAll", RoleAgent, ClaimRelease, "Release the leases of one requester (the caller's own by default); everyone releases every lease and needs admin.")
	LeaseCancel        = define[LeaseCancelIn, LeaseCancelOut]("lease.cancel", RoleAgent, ClaimNone, "Withdraw a queued lease request.")
	LeaseGet           = define[LeaseGetIn, Lease]("lease.get", RoleAgent, ClaimObserve, "One lease by id.", ownsLease)
	LeaseRequestStatus = define[LeaseRequestStatusIn, LeaseRequestReceipt]("lease.requestStatus", RoleAgent, ClaimObserve, "One lease request's receipt by request id: its state, and its lease or refusal; readable after a disconnect or a restart.")
	LeaseList          = define[LeaseListIn, LeaseListOut]("lease.list", RoleAgent, ClaimObserve, "Leases the caller owns (all leases, for admin).")
	EventsSubscribe    = define[EventsSubscribeIn, EventsSubscribeOut]("events.subscribe", RoleAgent, ClaimObserve, "Buffered business events, optionally followed live; an agent sees the facts about its own leases and requests, an admin every fact.")
	TokenCreate        = define[TokenCreateIn, TokenCreateOut]("token.create", RoleAdmin, ClaimNone, "Mint an API token; the secret is returned once.")
	TokenList          = define[TokenListIn, TokenListOut]("token.list", RoleAdmin, ClaimNone, "Tokens without their secrets.")
	TokenRevoke        = define[TokenRevokeIn, TokenRevokeOut]("token.revoke", RoleAdmin, ClaimNone, "Revoke a token.")
	DaemonStop         = define[DaemonStopIn, DaemonStopOut]("daemon.stop", RoleAdmin, ClaimRelease, "Stop the daemon gracefully.", unparked)
	CleanupRun         = define[CleanupRunIn, CleanupRunOut]("cleanup.run", RoleAdmin, ClaimTransientExclusive, "Run the idle-device cleanup rules once (or preview them with dryRun).")
	DoctorRun          = define[DoctorRunIn, DoctorRunOut]("doctor.run", RoleAgent, ClaimTransientExclusive, "Compare the registry with the devices in simlock's roots; fix and purgeOrphans repair (admin).", func(o *Op) { o.Auth = AuthAdminToChange })
	NukeRun            = define[NukeRunIn, NukeRunOut]("nuke.run", RoleAdmin, ClaimRelease, "Reset: release every lease, cancel pending requests, destroy every managed device.")
	DeviceRelease      = define[DeviceReleaseIn, DeviceReleaseOut]("device.release", RoleAdmin, ClaimRelease, "Give back one device of this daemon by its host-registry key: end the lease holding it through the ordinary release, or shut it down if it is idle and running; its claim is cleared by the teardown.")
	DeviceExec         = define[DeviceExecIn, DeviceExecOut]("device.exec", RoleAgent, ClaimRequireOwner, "Run simctl or adb against a leased device on the daemon's machine, streaming output as pushes; resolves with the exit code.", ownsLease)
	DeviceUpload       = define[DeviceUploadIn, DeviceUploadOut]("device.upload", RoleAgent, ClaimRequireOwner, "Stream a file into the lease's scratch directory on the machine holding the device (deleted when the lease ends); device.exec names it as {upload:NAME}.", ownsLease)
	ResourcesGet       = define[ResourcesGetIn, ResourceResult]("resources.get", RoleAgent, ClaimRequireOwner, "Observe the resource groups of a leased device (enabled, disabled, unsupported or unknown, with per-service evidence).", ownsLease)
	ResourcesSet       = define[ResourcesSetIn, ResourceResult]("resources.set", RoleAgent, ClaimRequireOwner, "Enable or disable resource groups on a leased device and verify them by an independent re-read, or restore an Android receipt.", ownsLease)
	ResourcesReconcile = define[ResourcesReconcileIn, ResourceResult]("resources.reconcile", RoleAgent, ClaimRequireOwner, "Compare a requested resource map with the device's observed state as typed drift; repair optionally.", ownsLease)
	WorkerList         = define[WorkerListIn, WorkerListOut]("worker.list", RoleAdmin, ClaimNone, "The workers a gateway knows, with their connection state, capacity and drain flag.")
	WorkerDrain        = define[WorkerIn, WorkerOut]("worker.drain", RoleAdmin, ClaimNone, "Stop dispatching new leases to a worker; its existing leases stay. Survives restarts.")
	WorkerUndrain      = define[WorkerIn, WorkerOut]("worker.undrain", RoleAdmin, ClaimNone, "End a worker's drain.")
	WorkerRemove       = define[WorkerIn, WorkerOut]("worker.remove", RoleAdmin, ClaimNone, "Forget a disconnected worker (refused while it is connected).")
	Passthrough        = define[PassthroughIn, PassthroughOut]("driver.passthrough", RoleAgent, ClaimRequireOwner, "Resolve a platform tool invocation (simctl, adb) to the command scoped to simlock's device root, for the caller to run.")
)

// Sessions (session-broker/v1) and managed slots (managed-slots/v1). An
// operation joins Registry() in the commit that gives the daemon its
// handler; until then it is declared here only.
var (
	CapabilitiesGet          = define[CapabilitiesGetIn, CapabilitiesGetOut]("capabilities.get", RoleAgent, ClaimNone, "The contracts this daemon serves (session-broker/v1, managed-slots/v1, ...).", unparked)
	SessionPrepare           = define[SessionPrepareIn, SessionReceipt]("session.prepare", RoleAgent, ClaimAcquire, "Ask for a device by requirements under an owner token; the same token and configuration always answer with the same durable receipt.")
	SessionStatus            = define[SessionStatusIn, SessionReceipt]("session.status", RoleAgent, ClaimObserve, "Read a session request's receipt by request id and owner token.")
	SessionAbandon           = define[SessionAbandonIn, SessionReceipt]("session.abandon", RoleAgent, ClaimRelease, "Consume a session request's identity, seen or not: a late prepare cannot allocate from it; its device, if any, is destroyed.")
	SessionRelease           = define[SessionReleaseIn, SessionReleaseOut]("session.release", RoleAgent, ClaimRelease, "Give a session's device back through the session's reset; answers released, cleanup_pending or unknown_session.")
	SessionHeartbeat         = define[SessionHeartbeatIn, SessionHeartbeatOut]("session.heartbeat", RoleAgent, ClaimNone, "A keeper's proof that the session's owner is alive; without it the session ends as session_owner_exited.")
	SessionInfo              = define[SessionInfoIn, SessionInfoOut]("session.info", RoleAgent, ClaimObserve, "A session's bound device, descriptive only.")
	SessionStats             = define[SessionStatsIn, SessionStatsOut]("session.stats", RoleAgent, ClaimNone, "Acquisition and reset statistics over recent session receipts, per platform and resolved profile.")
	SessionGetExport         = define[SessionExportIn, SessionExportOut]("session.getExport", RoleAgent, ClaimObserve, "Read a pinned session export by its prepare id and request digest.")
	SessionAcknowledgeExport = define[SessionExportIn, SessionAcknowledgeOut]("session.acknowledgeExport", RoleAgent, ClaimNone, "Acknowledge a pinned session export so its receipt may be pruned.")
	SlotAcquire              = define[SlotAcquireIn, ManagedSlotsResult]("slot.acquire", RoleAgent, ClaimAcquire, "Reconcile a launch configuration's scoped slot to its spec and lease the slot's device for one execution.")
	SlotHeartbeat            = define[SlotHeartbeatIn, SlotHeartbeatOut]("slot.heartbeat", RoleAgent, ClaimNone, "An execution owner's heartbeat; without it the execution's lease ends about 10 s later.")
	SlotRelease              = define[SlotReleaseIn, SlotReleaseOut]("slot.release", RoleAgent, ClaimRelease, "End an execution: its lease ends, the slot keeps its device.")
	SlotResetScope           = define[SlotResetScopeIn, SlotResetScopeOut]("slot.resetScope", RoleAdmin, ClaimRelease, "Invalidate a runner incarnation's scope once its owners and cleanup settle, moving its devices to the managed free pool.")
	SlotList                 = define[SlotListIn, SlotListOut]("slot.list", RoleAdmin, ClaimObserve, "Every slot assignment and free-pool device in the host registry.")
)

// GatewayOnly names the operations only a gateway answers; a worker daemon
// leaves them unregistered (UNKNOWN_OPERATION).
func GatewayOnly() []string {
	return []string{WorkerList.Name, WorkerDrain.Name, WorkerUndrain.Name, WorkerRemove.Name}
}

// WorkerOnly names the operations a gateway refuses with
// UNSUPPORTED_IN_GATEWAY_MODE: they act on one machine's devices.
func WorkerOnly() []string {
	return []string{NukeRun.Name, CleanupRun.Name, DeviceRelease.Name, DoctorRun.Name, Passthrough.Name,
		SessionPrepare.Name, SessionStatus.Name, SessionAbandon.Name, SessionRelease.Name, SessionHeartbeat.Name,
		SessionInfo.Name, SessionStats.Name, SessionGetExport.Name, SessionAcknowledgeExport.Name,
		SlotAcquire.Name, SlotHeartbeat.Name, SlotRelease.Name, SlotResetScope.Name, SlotList.Name}
}

// Registry lists every operation, in a stable order.
func Registry() []Op {
	ops := []Op{Hello.Op, StatusGet.Op, QueueList.Op, ListGet.Op, CatalogGet.Op, ConfigGet.Op,
		LeaseRequest.Op, LeaseRenew.Op, LeaseRelease.Op, LeaseReleaseAll.Op, LeaseCancel.Op,
		LeaseGet.Op, LeaseRequestStatus.Op, LeaseList.Op, EventsSubscribe.Op, TokenCreate.Op, TokenList.Op,
		TokenRevoke.Op, DaemonStop.Op, Passthrough.Op, CleanupRun.Op, DoctorRun.Op, NukeRun.Op, DeviceExec.Op, DeviceRelease.Op,
		DeviceUpload.Op, ResourcesGet.Op, ResourcesSet.Op, ResourcesReconcile.Op,
		WorkerList.Op, WorkerDrain.Op, WorkerUndrain.Op, WorkerRemove.Op,
		CapabilitiesGet.Op, SessionPrepare.Op, SessionStatus.Op, SessionAbandon.Op, SessionRelease.Op, SessionHeartbeat.Op,
		SessionInfo.Op, SessionStats.Op, SessionGetExport.Op, SessionAcknowledgeExport.Op,
		SlotAcquire.Op, SlotHeartbeat.Op, SlotRelease.Op, SlotResetScope.Op, SlotList.Op}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Name < ops[j].Name })
	return ops
}

// Lookup finds an operation by name.
func Lookup(name string) (Op, bool) {
	for _, op := range Registry() {
		if op.Name == name {
			return op, true
		}
	}
	return Op{}, false
}

// Decode strictly decodes raw into v: unknown fields and trailing data are
// BAD_REQUEST. An empty or null payload decodes to the zero value.
func Decode(raw []byte, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg, field := decodeFailure(raw, v, err)
		e := Errorf(CodeBadRequest, "invalid input: %s", msg)
		if field != "" {
			e = e.WithDetails("field", field)
		}
		return e
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(CodeBadRequest, "invalid input: trailing data after the JSON object")
	}
	return nil
}

// decodeRefiner is an input whose decode refusals have a more precise
// code for some of its fields.
type decodeRefiner interface {
	refineDecodeError(*Error) *Error
}

// DecodeInput decodes raw into a fresh value of op's input type and
// validates every identifier in it (ValidateInput).
func (op Op) DecodeInput(raw []byte) (any, error) {
	p := reflect.New(op.In)
	if err := Decode(raw, p.Interface()); err != nil {
		if r, ok := p.Interface().(decodeRefiner); ok {
			if e := r.refineDecodeError(AsError(err)); e != nil {
				return nil, e
			}
		}
		return nil, err
	}
	if err := ValidateInput(p.Elem().Interface()); err != nil {
		return nil, err
	}
	return p.Elem().Interface(), nil
}

// CheckOutput verifies out has op's output type; a mismatch is a bug.
func (op Op) CheckOutput(out any) error {
	if reflect.TypeOf(out) != op.Out {
		return Errorf(CodeInternal, "operation %s produced %T, want %s", op.Name, out, op.Out)
	}
	return nil
}

func (op Op) String() string { return fmt.Sprintf("%s (%s)", op.Name, op.Role) }
