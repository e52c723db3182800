package daemon

import (
	"context"
	"errors"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/claims"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/sessions"
	"github.com/simlock/simlock/internal/slots"
	"github.com/simlock/simlock/internal/store"
)

// toContractError is the one place that maps internal errors to contract
// codes. Anything it does not recognise is INTERNAL, and is logged by the
// caller.
func toContractError(err error) *contract.Error {
	if err == nil {
		return nil
	}
	if ce := contract.AsError(err); ce != nil {
		return ce
	}
	if errors.Is(err, sessions.ErrExportMismatch) {
		return contract.Errorf(contract.CodeSessionExportMismatch, "the export identity is linked to another request or digest already")
	}
	if errors.Is(err, sessions.ErrTerminal) {
		return contract.Errorf(contract.CodeSessionEnded, "%s", err.Error())
	}
	var dmg *hostreg.DamagedError
	if errors.As(err, &dmg) {
		return hostRegistryDamaged(dmg)
	}
	var held *hostreg.ConflictError
	if errors.As(err, &held) {
		return deviceInUse(held)
	}
	var slot *hostreg.SlotError
	if errors.As(err, &slot) {
		return slotRefused(slot)
	}
	if errors.Is(err, core.ErrAssigned) {
		return contract.Errorf(contract.CodeDeviceAssignedToSlot, "%s; only that slot's execution may lease it", err.Error())
	}
	if errors.Is(err, core.ErrAssignedUnknown) {
		return contract.Errorf(contract.CodeDiscoveryIncomplete, "%s", err.Error()).WithRetryAfter(slots.DiscoveryRetryMs).
			WithNext("retry after retryAfterMs: the daemon reads the host registry's slot tables again at every host poll; `simlock daemon logs` says why they could not be read")
	}
	if ce := claims.CapacityExhausted(err); ce != nil {
		return ce
	}
	var re *core.RequestError
	if errors.As(err, &re) {
		// A stored refusal replayed: the code the first caller got.
		out := contract.Normalize(contract.Errorf(contract.Code(re.Code), "%s", re.Message))
		out.Retryable = re.Retryable
		return out
	}
	var mm *core.IdempotencyMismatchError
	if errors.As(err, &mm) {
		return contract.Errorf(contract.CodeIdempotencyMismatch, "%s", err.Error()).WithDetails("requestId", mm.RequestID)
	}
	var ge *core.GrantEndedError
	if errors.As(err, &ge) {
		return contract.Errorf(contract.CodeUnknownLease, "%s", err.Error()).WithDetails("requestId", ge.RequestID, "leaseId", ge.LeaseID).
			WithNext("the request's lease has ended; use a new idempotency key for a new lease")
	}
	if ce := claims.DeviceReleaseError(err); ce != nil {
		return ce
	}
	var ru *core.ResourceUnprovenError
	if errors.As(err, &ru) {
		// The drift is the answer: which groups, and why each is unproven.
		return contract.Errorf(contract.CodeResourceUnproven, "%s", ru.Error()).
			WithDetails("resourceDrift", ru.Drift, "resources", ru.Result.Resources)
	}
	if errors.Is(err, core.ErrReconcileUnsupported) {
		return contract.Errorf(contract.CodeUnsupportedPlatform, "%s", err.Error()).WithDetails("operation", contract.ResourcesReconcile.Name).
			WithNext("reconcile is served for iOS Simulators only; on this device read the groups with `simlock resources get` and change them with `simlock resources set`")
	}
	var rl *core.RequesterLeasedError
	if errors.As(err, &rl) {
		return requesterLeased(rl, true)
	}
	var se *core.SpecError
	details := map[string]any(nil)
	if errors.As(err, &se) {
		details = se.Details
	}
	simple := []struct {
		sentinel error
		code     contract.Code
	}{
		{core.ErrNoCapacity, contract.CodeNoCapacity},
		{core.ErrQueueTimeout, contract.CodeQueueTimeout},
		{core.ErrCancelled, contract.CodeRequestCancelled},
		{core.ErrUnknownLease, contract.CodeUnknownLease},
		{core.ErrNoPending, contract.CodeNoPendingRequest},
		{core.ErrTTLTooLong, contract.CodeBadRequest},
		{core.ErrBadRequest, contract.CodeBadRequest},
		{core.ErrStopping, contract.CodeDaemonStopping},
		{core.ErrMaintenance, contract.CodeDaemonStopping},
		{core.ErrStoreFailed, contract.CodeDaemonStopping},
		{core.ErrRequesterQueue, contract.CodeRequesterQueued},
		{core.ErrUnsupportedPlatform, contract.CodeUnsupportedPlatform},
		{core.ErrUnknownModel, contract.CodeUnknownModel},
		{core.ErrOSOutOfRange, contract.CodeOSOutOfRange},
		{core.ErrRuntimeMissing, contract.CodeRuntimeMissing},
		{core.ErrDownloadForbidden, contract.CodeDownloadForbidden},
		{core.ErrInsufficientDisk, contract.CodeInsufficientDisk},
		{android.ErrLicenseNotAccepted, contract.CodeLicenseNotAccepted},
		{core.ErrDeviceFailed, contract.CodeDeviceFailed},
		{core.ErrUnknownDevice, contract.CodeUnknownDevice},
		{core.ErrDaemonRestarted, contract.CodeDaemonRestarted},
		{core.ErrUnknownRequest, contract.CodeUnknownRequest},
		{store.ErrTokenNameTaken, contract.CodeBadRequest},
		{core.ErrPassthroughRefused, contract.CodePassthroughRefused},
		{core.ErrUnknownTool, contract.CodeUnknownPassthroughTool},
		{core.ErrReceiptMismatch, contract.CodeReceiptMismatch},
		{context.Canceled, contract.CodeConnectionLost},
	}
	for _, s := range simple {
		if errors.Is(err, s.sentinel) {
			ce := contract.Errorf(s.code, "%s", err.Error())
			if s.code == contract.CodeNoCapacity || s.code == contract.CodeDaemonStopping {
				ce.WithRetryAfter(5000)
			}
			if len(details) > 0 {
				ce.Details = details
			}
			if se != nil && se.Next != "" {
				ce.WithNext(se.Next)
			}
			return ce
		}
	}
	return contract.Errorf(contract.CodeInternal, "%s", err.Error())
}

// requesterLeased maps a one-lease-per-requester refusal. Only the lease's
// owner (or an admin) is told which lease it is: to anyone else the id
// would be a handle on another principal's device.
func requesterLeased(rl *core.RequesterLeasedError, visible bool) *contract.Error {
	if !visible {
		return contract.Errorf(contract.CodeRequesterLeased, "this requester id already holds a lease that is not yours").
			WithNext("use a different --requester")
	}
	return contract.Errorf(contract.CodeRequesterLeased, "this requester already holds lease %s", rl.LeaseID).
		WithDetails("leaseId", rl.LeaseID).
		WithNext("release " + rl.LeaseID + " first (`simlock release " + rl.LeaseID + "`), or use a different --requester")
}

// deviceInUse maps a host-registry conflict: another owner holds the
// device. It is not retryable: waiting does not end a live owner's claim;
// the recovery command (through that owner, or --stale/--force when the
// owner is proven gone or the record unreadable) does.
func deviceInUse(c *hostreg.ConflictError) *contract.Error {
	ce := contract.Errorf(contract.CodeDeviceInUse, "device %s is in use by home %s (%s): %s", c.DeviceKey, c.Owner.Home, c.Classification.Public(), c.Recovery)
	ce.Retryable = false
	ce.WithDetails(
		"reason", c.Reason,
		"classification", c.Classification.Public(),
		"deviceKey", string(c.DeviceKey),
		"owner", map[string]any{"home": c.Owner.Home, "leaseId": c.Owner.LeaseID,
			"daemonPid": c.Owner.DaemonPID, "daemonStartTime": c.Owner.DaemonStartTime},
		"recovery", map[string]any{"command": c.Recovery},
	)
	if c.Recovery != "" {
		ce.WithNext(c.Recovery)
	}
	return ce
}

// hostRegistryDamaged maps a host registry SQLite cannot read. It names
// the file and the repair; it is not retryable, because the file stays
// damaged until the repair replaces it (ADR 0064).
func hostRegistryDamaged(e *hostreg.DamagedError) *contract.Error {
	return contract.Errorf(contract.CodeHostRegistryDamaged, "the host registry %s is damaged: %v", e.Path, e.Err).
		WithDetails("path", e.Path, "repair", map[string]any{"command": hostreg.RepairCommand}).
		WithNext("run `" + hostreg.RepairCommand + "` (it moves " + e.Path + " aside and rebuilds the registry from every home's records), then start the daemon again")
}

// ContractError is toContractError for code that drives drivers outside a
// daemon (simlock selftest), so their errors carry the same codes.
func ContractError(err error) *contract.Error { return toContractError(err) }

// slotRefused maps a host registry slot refusal to its code.
func slotRefused(e *hostreg.SlotError) *contract.Error {
	code := map[string]contract.Code{
		hostreg.RefuseSlotInUse:        contract.CodeSlotInUse,
		hostreg.RefuseSlotSettling:     contract.CodeSlotSettling,
		hostreg.RefuseScopeInvalidated: contract.CodeScopeInvalidated,
		hostreg.RefuseScopePending:     contract.CodeScopeTransitionPending,
		// Another execution took the slot while this one worked: to the
		// caller the slot is simply in use.
		hostreg.RefuseStaleGeneration: contract.CodeSlotInUse,
		hostreg.RefuseNotOwner:        contract.CodeSlotInUse,
	}[e.Reason]
	if code == "" {
		code = contract.CodeInternal
	}
	out := contract.Errorf(code, "%s", e.Message)
	if e.Holder != nil {
		out = out.WithDetails("holderHome", e.Holder.Home, "holderPid", e.Holder.PID)
	}
	if code == contract.CodeScopeInvalidated {
		out = out.WithNext("start the runner with a new runnerIncarnation")
	}
	return out
}
