package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// OpKindResources is a resource call (resources.get/set/reconcile, or a
// lease request's resource step) on the device-operation path: it takes the
// device's op lock like a boot or a purge, so it never overlaps one.
const OpKindResources OpKind = "resources"

// ResourceCall is one resources.* operation on a leased device.
type ResourceCall struct {
	// Op is "get", "set" or "reconcile".
	Op        string
	Change    ResourceChange
	Reconcile ResourceReconcile
}

// ProfileOf is the profile fingerprint a request's resources and hardware
// add to its spec's key ("" when it asks for neither).
func ProfileOf(resources map[string]contract.ResourceState, hw HardwareProfile) string {
	var parts []string
	if fp := contract.ResourceFingerprint(resources); fp != "" {
		parts = append(parts, fp)
	}
	if hw != nil {
		if fp := hw.Fingerprint(); fp != "" {
			parts = append(parts, fp)
		}
	}
	return strings.Join(parts, "+")
}

// withProfile stamps a resolved spec with what the request asked to tune.
func withProfile(s Spec, r SpecRequest) Spec {
	if len(r.Resources) > 0 {
		s.Resources = maps.Clone(r.Resources)
	}
	s.Profile = ProfileOf(r.Resources, r.Hardware)
	return s
}

// ResourceDesk is the resource path's counter: resources.get/set/reconcile
// (internal/resources) run a call on a leased device through it.
type ResourceDesk struct{ e *Engine }

// Resources is the resource path's desk.
func (e *Engine) Resources() ResourceDesk { return ResourceDesk{e} }

// LeaseResources runs call against the device of lease leaseID on the
// device-operation path. If another operation holds the device (a crash
// recovery, another resource call) it waits for it, re-checking the lease
// each time: once the lease has ended the device is being reclaimed, and
// the answer is UNKNOWN_LEASE rather than a call racing the purge.
func (rd ResourceDesk) LeaseResources(ctx context.Context, leaseID string, call ResourceCall) (contract.ResourceResult, error) {
	e := rd.e
	for {
		var out contract.ResourceResult
		var o *deviceOp
		var wait chan struct{}
		var err error
		e.section(func() {
			l, ok := e.reg.leases[leaseID]
			if !ok {
				err = ErrUnknownLease
				return
			}
			if call.Op == "reconcile" {
				// Refused before the op lock or any driver command.
				if err = reconcilable(&e.reg, e.drivers, l.DeviceID); err != nil {
					return
				}
			}
			o = resourceOp(l.DeviceID, "resources", func(ctx context.Context, o *deviceOp) (contract.ResourceResult, error) {
				return runResourceCall(ctx, o.drv, o.rec, call)
			}, &out)
			err = e.beginOpLocked(o)
			var busy errBusy
			if errors.As(err, &busy) {
				wait, err = e.reg.opFreed, nil
				return
			}
			if err == nil {
				e.wg.Add(1) // as runOp: Stop waits for it
			}
		})
		if err != nil {
			return contract.ResourceResult{}, err
		}
		if wait == nil {
			err = func() error {
				defer e.wg.Done()
				return e.execOp(ctx, o)
			}()
			return out, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return contract.ResourceResult{}, ctx.Err()
		}
	}
}

// reconcilable says whether device id's driver serves resources.reconcile
// (a ResourceReconciler).
func reconcilable(reg *registry, drivers map[string]Driver, id string) error {
	rec, ok := reg.devices[id]
	if !ok {
		return ErrUnknownLease
	}
	drv, ok := drivers[rec.Platform]
	if _, can := drv.(ResourceReconciler); !ok || !can {
		return fmt.Errorf("%w: %s devices keep no record of simlock's overrides to compare with", ErrReconcileUnsupported, rec.Platform)
	}
	return nil
}

// resourceOp is a device operation that makes one resource call and stores
// its answer in out. It changes nothing in the registry: the settlement
// only drops the lock (and the intent, settleOpLocked).
func resourceOp(id, lock string, call func(ctx context.Context, o *deviceOp) (contract.ResourceResult, error), out *contract.ResourceResult) *deviceOp {
	return &deviceOp{kind: OpKindResources, lock: lock, id: id,
		run: func(ctx context.Context, o *deviceOp) error {
			res, err := call(ctx, o)
			*out = res
			return err
		},
		settle: func(*deviceOp, error) error { return nil }}
}

// runResourceCall makes call through the driver's ResourceController; a
// driver without one answers that it controls nothing, which is evidence
// too (every group unsupported), not an error.
func runResourceCall(ctx context.Context, drv Driver, rec DeviceRecord, call ResourceCall) (contract.ResourceResult, error) {
	ref := rec.Ref()
	if call.Op == "reconcile" {
		rr, ok := drv.(ResourceReconciler)
		if !ok {
			return contract.ResourceResult{}, fmt.Errorf("%w: %s devices", ErrReconcileUnsupported, rec.Platform)
		}
		return rr.ReconcileResources(ctx, ref, call.Reconcile)
	}
	rc, ok := drv.(ResourceController)
	if !ok {
		if call.Op == "set" {
			return UnsupportedResult(rec, call.Change.Resources), nil
		}
		return UnsupportedResult(rec, nil), nil
	}
	switch call.Op {
	case "get":
		return rc.ObserveResources(ctx, ref)
	case "set":
		return rc.ApplyResources(ctx, ref, call.Change)
	}
	return contract.ResourceResult{}, fmt.Errorf("%w: unknown resource call %q", ErrBadRequest, call.Op)
}

// UnsupportedResult is the answer for a device whose driver controls no
// resource group: every requested group (every platform group, for a read)
// unsupported, with the reason.
func UnsupportedResult(rec DeviceRecord, requested map[string]contract.ResourceState) contract.ResourceResult {
	const why = "the driver cannot control it"
	res := contract.ResourceResult{DeviceID: rec.ID, Platform: rec.Platform, Resources: map[string]contract.ResourceObservation{},
		Services: []contract.ServiceEvidence{}, Changed: []string{}, Verification: contract.ResourceVerificationCurrentBoot}
	groups := contract.ResourceGroupsFor(rec.Platform)
	if len(requested) > 0 {
		res.Requested = maps.Clone(requested)
		res.Fingerprint = contract.ResourceFingerprint(requested)
		groups = groups[:0:0]
		for g := range requested {
			groups = append(groups, g)
		}
		slices.Sort(groups)
	}
	for _, g := range groups {
		res.Resources[g] = contract.ResourceObservation{State: contract.ResourceUnsupported, Reason: why}
	}
	// Success needs every requested group observed as asked: nothing was.
	res.Success = len(requested) == 0
	return res
}

// DriftOf types the gap between a result's requested map and its observed
// groups: unsupported, unknown (commandFailure) or the opposite state
// (missingRequested). Owned extras only a driver's record can tell.
func DriftOf(res contract.ResourceResult) contract.ResourceDrift {
	d := contract.ResourceDrift{MissingRequested: []string{}, OwnedExtra: []string{}, Unsupported: []string{}, CommandFailure: []string{}}
	groups := make([]string, 0, len(res.Requested))
	for g := range res.Requested {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		obs, ok := res.Resources[g]
		switch {
		case !ok || obs.State == contract.ResourceUnknown:
			d.CommandFailure = append(d.CommandFailure, g)
		case obs.State == contract.ResourceUnsupported:
			d.Unsupported = append(d.Unsupported, g)
		case obs.State != res.Requested[g]:
			d.MissingRequested = append(d.MissingRequested, g)
		}
	}
	if res.Drift != nil {
		d.OwnedExtra = append(d.OwnedExtra, res.Drift.OwnedExtra...)
	}
	return d
}

// ResourceUnprovenError fails an iOS lease request whose resource profile
// could not all be proven on the device it was applied to.
type ResourceUnprovenError struct {
	Result contract.ResourceResult
	Drift  contract.ResourceDrift
}

func (e *ResourceUnprovenError) Error() string {
	var groups []string
	for _, l := range [][]string{e.Drift.MissingRequested, e.Drift.Unsupported, e.Drift.CommandFailure} {
		groups = append(groups, l...)
	}
	return fmt.Sprintf("the resource profile could not be proven on the device: %s", strings.Join(groups, ", "))
}

// TuneTimeout bounds a lease request's resource step, as resources.set's
// default timeoutMs bounds the call.
const TuneTimeout = 5 * time.Minute

var errTuneTimeout = errors.New("the resource step ran past its deadline")

// resourceOutcome is what a lease request's resource step left for its
// grant: the result, or why the device cannot be granted.
type resourceOutcome struct {
	result *contract.ResourceResult
}

// profileUnproven says whether a lease-time result must fail the request:
// where the driver declares its resources all-or-nothing (iOS), any
// requested group not observed as asked does; elsewhere (Android) the
// lease is granted with the result, success false visible.
func profileUnproven(caps Capabilities, res contract.ResourceResult) bool {
	return caps.StrictResources && !res.Success
}

// tuneBook is a lease request's resource step: the profile applied to a
// ready device before it is granted, and the device's way out of the pool
// when the profile cannot be proven. It keeps no state of its own (the
// waiter carries the step's progress); its methods run only inside the
// decision section and reach the engine only through tuneEngine.
type tuneBook struct {
	reg   *registry
	queue *queue
	clock ports.Clock
	log   *slog.Logger
	eng   tuneEngine
}

// tuneEngine is the engine as the resource step sees it: facts, the
// device-operation path (ops.go) and the waiter's way on (request.go),
// satisfied by *Engine.
type tuneEngine interface {
	now() time.Time
	emitLocked(ev events.Event)
	scheduleLocked()
	startOpLocked(o *deviceOp) error
	destroyOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	startReclaimLocked(id string)
	finishWorkLocked(w *waiter, id string)
	failWorkLocked(w *waiter, err error)
	dropWaiterLocked(w *waiter, err error)
}

// startLocked applies w's resource profile to ready device id before
// it is granted: the lease request's resource step, on the device's op
// path. A device made for this request that cannot prove the profile is
// destroyed; an existing one goes back to the pool only through a purge.
func (b *tuneBook) startLocked(w *waiter, id string) {
	e := b.eng
	var out contract.ResourceResult
	o := resourceOp(id, "tune", func(ctx context.Context, o *deviceOp) (contract.ResourceResult, error) {
		// Bounded on the engine's clock like every other wait of the
		// core: a driver that never answers fails the step, not the queue.
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		t := b.clock.AfterFunc(TuneTimeout, func() { cancel(errTuneTimeout) })
		defer t.Stop()
		res, err := runResourceCall(ctx, o.drv, o.rec, ResourceCall{Op: "set", Change: ResourceChange{Resources: w.spec.Resources}})
		if err != nil && errors.Is(context.Cause(ctx), errTuneTimeout) {
			err = errTuneTimeout
		}
		return res, err
	}, &out)
	o.settle = func(o *deviceOp, err error) error {
		w.working = false
		if err == nil && !profileUnproven(o.drv.Capabilities(), out) {
			res := out
			w.tuned = &resourceOutcome{result: &res}
			e.finishWorkLocked(w, id)
			return nil
		}
		var fail error
		if err != nil {
			b.log.Warn("applying a lease's resource profile failed", "device", id, "err", err)
			fail = &DeviceFailedError{Phase: "resources", Err: err}
		} else {
			drift := DriftOf(out)
			fail = &ResourceUnprovenError{Result: out, Drift: drift}
		}
		if serr := b.discardLocked(w, id); serr != nil {
			return serr
		}
		if w.abandoned || !b.queue.Contains(w) {
			b.queue.remove(w)
			e.scheduleLocked()
			return nil
		}
		e.failWorkLocked(w, fail)
		return nil
	}
	w.working = true
	if err := e.startOpLocked(o); err != nil {
		b.log.Error("start a lease's resource step", "device", id, "err", err)
		e.dropWaiterLocked(w, err)
	}
}

// discardLocked takes a device whose profile step failed out of the
// pool: destroyed when it was made for this request (no device is left
// behind), purged otherwise (its services are back to the platform's
// defaults before anyone else gets it).
func (b *tuneBook) discardLocked(w *waiter, id string) error {
	e := b.eng
	if w.made == id {
		o := e.destroyOp(id, "tune", "destroy-failed", func(DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: w.spec.Platform, Reason: "resource-profile-unproven"})
		})
		if err := e.startOpLocked(o); err != nil {
			b.log.Warn("destroy a device whose resource profile failed", "device", id, "err", err)
		}
		return nil
	}
	now := e.now()
	if _, err := b.reg.update(id, func(d *DeviceRecord) {
		d.State, d.StateSince = StateReclaiming, now
		d.Intent = DeviceIntent{Op: OpKindReclaim, Since: now}
	}); err != nil {
		return err
	}
	e.startReclaimLocked(id)
	return nil
}
