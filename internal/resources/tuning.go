package resources

import (
	"context"
	"errors"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
)

// defaultResourceTimeout bounds a resource call that names no timeoutMs:
// a profile of many groups runs many bounded native commands.
const defaultResourceTimeout = 5 * time.Minute

// Tuning serves resources.get/set/reconcile. Ownership of the lease is
// the dispatcher's ownsLease check; the calls run on the device's
// operation path in the core, so they serialize with its lifecycle.
type Tuning struct {
	engine Leases
	path   Path
	// enabled is resources.enabled: writes on any lease, not only on one
	// requested with resources.
	enabled bool
	// touch restarts a session's idle window: a device call is activity.
	touch func(leaseID string)
}

// NewTuning builds the resources.* operations over the engine's leases
// and its resource path. touch is called with the lease of every call
// (the session broker's TouchLease).
func NewTuning(engine Leases, path Path, enabled bool, touch func(leaseID string)) *Tuning {
	return &Tuning{engine: engine, path: path, enabled: enabled, touch: touch}
}

// Get is resources.get.
func (t *Tuning) Get(ctx context.Context, _ *dispatch.Call, in contract.ResourcesGetIn) (contract.ResourceResult, error) {
	if _, _, err := t.lease(in.LeaseID, false); err != nil {
		return contract.ResourceResult{}, err
	}
	return t.call(ctx, in.LeaseID, 0, core.ResourceCall{Op: "get"})
}

// Set is resources.set.
func (t *Tuning) Set(ctx context.Context, _ *dispatch.Call, in contract.ResourcesSetIn) (contract.ResourceResult, error) {
	l, _, err := t.lease(in.LeaseID, true)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	switch {
	case len(in.Resources) > 0 && in.Restore != nil, len(in.Resources) == 0 && in.Restore == nil:
		return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "resources.set takes exactly one of resources and restore").
			WithNext("pass a map such as {\"animations\": \"disabled\"}, or a restore receipt from an earlier Android answer")
	case in.Restore != nil && l.Platform != "android":
		return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "restore receipts are issued by Android devices only; this lease is %s", l.Platform).
			WithDetails("field", "restore")
	case in.Restore == nil:
		if err := contract.ValidateResourceRequest(l.Platform, in.Resources); err != nil {
			return contract.ResourceResult{}, err
		}
	}
	return t.call(ctx, in.LeaseID, in.TimeoutMs, core.ResourceCall{Op: "set",
		Change: core.ResourceChange{Resources: in.Resources, Restore: in.Restore}})
}

// Reconcile is resources.reconcile.
func (t *Tuning) Reconcile(ctx context.Context, _ *dispatch.Call, in contract.ResourcesReconcileIn) (contract.ResourceResult, error) {
	l, _, err := t.lease(in.LeaseID, true)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	if err := contract.ValidateResourceRequest(l.Platform, in.Resources); err != nil {
		return contract.ResourceResult{}, err
	}
	return t.call(ctx, in.LeaseID, in.TimeoutMs, core.ResourceCall{Op: "reconcile",
		Reconcile: core.ResourceReconcile{Resources: in.Resources, Repair: in.Repair, ReleaseOwnedExtras: in.ReleaseOwnedExtras}})
}

// lease finds the lease and its device. A call that may write
// (set, reconcile) needs resources.enabled, or a lease that was itself
// requested with resources: tuning is off by default.
func (t *Tuning) lease(id string, write bool) (core.LeaseRecord, core.DeviceRecord, error) {
	l, ok := t.engine.Lease(id)
	if !ok {
		return core.LeaseRecord{}, core.DeviceRecord{}, core.ErrUnknownLease
	}
	t.touch(id) // a device call restarts a session's idle window
	dev, ok := t.engine.Device(l.DeviceID)
	if !ok {
		return core.LeaseRecord{}, core.DeviceRecord{}, core.ErrUnknownLease
	}
	if write && !t.enabled && len(dev.Spec.Resources) == 0 {
		return core.LeaseRecord{}, core.DeviceRecord{}, contract.Errorf(contract.CodeResourcesDisabled,
			"resource tuning is off: resources.enabled is not set and lease %s was not requested with resources", l.ID).
			WithDetails("leaseId", l.ID)
	}
	return l, dev, nil
}

// call runs one call within its deadline (timeoutMs, default five
// minutes), which the driver's native commands are bounded by too.
func (t *Tuning) call(ctx context.Context, leaseID string, timeoutMs int64, call core.ResourceCall) (contract.ResourceResult, error) {
	if timeoutMs < 0 {
		return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "timeoutMs must not be negative").WithDetails("field", "timeoutMs")
	}
	timeout := defaultResourceTimeout
	if timeoutMs > 0 {
		timeout = time.Duration(timeoutMs) * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := t.path.LeaseResources(cctx, leaseID, call)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return contract.ResourceResult{}, contract.Errorf(contract.CodeDeviceFailed,
				"the resource call ran past its deadline (%s); what was written is unverified", timeout).
				WithNext("read the state with `simlock resources get`, or repeat with a larger timeoutMs")
		}
		return contract.ResourceResult{}, err
	}
	fillResult(&res)
	return res, nil
}

// fillResult gives the answer's lists their empty values: a client reads
// [] rather than a missing key.
func fillResult(r *contract.ResourceResult) {
	if r.Resources == nil {
		r.Resources = map[string]contract.ResourceObservation{}
	}
	if r.Services == nil {
		r.Services = []contract.ServiceEvidence{}
	}
	if r.Changed == nil {
		r.Changed = []string{}
	}
	if r.Verification == "" {
		r.Verification = contract.ResourceVerificationCurrentBoot
	}
}

// CheckLeaseTuning validates a lease request's resources and hardware for
// its platform before the request is stored or queued.
func CheckLeaseTuning(platform string, in contract.LeaseRequestIn) error {
	if in.Resources != nil {
		if err := contract.ValidateResourceRequest(platform, in.Resources); err != nil {
			return err
		}
	}
	if in.Hardware != nil {
		if in.Device != "" {
			// An existing emulator's AVD is not rewritten under it.
			return contract.Errorf(contract.CodeBadRequest, "hardware cannot be combined with device: the device already exists").
				WithDetails("field", "hardware")
		}
		if platform != "android" {
			return contract.Errorf(contract.CodeBadRequest, "hardware applies to Android emulators only, not %s", platform).
				WithDetails("field", "hardware")
		}
		if err := in.Hardware.Validate(); err != nil {
			return err
		}
	}
	return nil
}
