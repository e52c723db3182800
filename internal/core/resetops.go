package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// The device operations of a session reset: the destroy, the reuse reset
// that runs a mode (resetmodes.go) and settles the device back to the pool
// or destroys it, and the restart rule for a device found mid-reset. Their
// run parts work on the device outside the decision section; their
// settlements run inside it.

// DefaultResetTimeout bounds a whole reset when its policy sets none.
const DefaultResetTimeout = 10 * time.Minute

// resetDestroyFailed is the quarantine reason of a reset whose destroy
// failed: its retry destroys again, and settles the reset when it lands.
const resetDestroyFailed = "reset-destroy-failed"

// startResetLocked runs device id's reset for released lease leaseID by
// policy p: the destroy directly, any other mode as a reset operation
// whose settlement returns the device to the pool or destroys it.
func (b *resetBook) startResetLocked(id, leaseID string, p ReleasePolicy) {
	b.addDevice(leaseID, id)
	if p.Mode == "" || p.Mode == contract.ResetDestroy {
		b.startResetDestroyLocked(id, leaseID, p, resetResult{outcome: contract.ResetOutcomeDestroyed})
		return
	}
	o := b.resetOp(id, leaseID, p)
	if err := b.eng.startOrDeferOpLocked(o); err != nil {
		b.log.Warn("session reset not started", "device", id, "err", err)
	}
}

// keepIntent keeps the release's policy and lease in the intent of every
// operation of a reset, so a restart at any step recognises the device.
func keepIntent(id string, p ReleasePolicy, leaseID string) func(d *DeviceRecord) {
	return func(d *DeviceRecord) {
		d.Intent.Release, d.Intent.LeaseID = p, leaseID
		if d.Intent.Release.IsZero() {
			// A zero policy would read as the pool's purge on restart.
			d.Intent.Release = ReleasePolicy{Mode: contract.ResetDestroy}
		}
	}
}

// startResetDestroyLocked destroys device id as (the end of) a reset, r
// carrying what the reset measured so far. The record stays, counted
// against capacity, until the driver has confirmed the device absent.
func (b *resetBook) startResetDestroyLocked(id, leaseID string, p ReleasePolicy, r resetResult) {
	o := b.resetDestroyOp(id, leaseID, p, r)
	if err := b.eng.startOrDeferOpLocked(o); err != nil {
		b.log.Warn("session reset destroy not started", "device", id, "err", err)
	}
}

// resetDestroyOp deletes the device, then proves it gone from a fresh
// listing: only then is the record dropped, which is what frees its
// capacity. A destroy that fails or leaves the device listed quarantines
// it for a destroy retry; the reset stays pending until that lands.
func (b *resetBook) resetDestroyOp(id, leaseID string, p ReleasePolicy, r resetResult) *deviceOp {
	var took time.Duration
	return &deviceOp{kind: OpKindDestroy, lock: "reset", id: id, mark: keepIntent(id, p, leaseID),
		run: func(ctx context.Context, o *deviceOp) error {
			if o.rec.Handle == "" {
				return nil
			}
			start := b.eng.now()
			defer func() { took = b.eng.now().Sub(start) }()
			return destroyConfirmed(ctx, o.drv, o.rec)
		},
		settle: func(o *deviceOp, err error) error {
			r.phase("destroy", took)
			if err != nil {
				b.log.Warn("session reset: destroy failed", "device", id, "err", err)
				if qerr := b.quarantine(id, resetDestroyFailed, OpKindDestroy); qerr != nil {
					return qerr
				}
				if t := b.get(leaseID); t != nil {
					t.fold(r) // the quarantine's destroy settles the reset (resetDeviceGoneLocked)
				}
				b.eng.scheduleLocked()
				return nil
			}
			if cerr := b.eng.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: o.rec.Platform, Reason: "session-reset"})
			r.outcome = contract.ResetOutcomeDestroyed
			b.settleResetLocked(leaseID, id, o.rec.Platform, r)
			b.eng.scheduleLocked()
			return nil
		}}
}

// errStillPresent is a destroy the driver reported done while a fresh
// listing still shows the device.
var errStillPresent = errors.New("device still listed after its destroy")

// destroyConfirmed destroys dev and confirms from a fresh listing that it
// is gone.
func destroyConfirmed(ctx context.Context, drv Driver, d DeviceRecord) error {
	if err := drv.Destroy(ctx, d.Ref()); err != nil && !errors.Is(err, ErrDeviceNotFound) {
		return err
	}
	obs, err := drv.ListManaged(ctx)
	if err != nil {
		return fmt.Errorf("confirm the destroy: %w", err)
	}
	for _, o := range obs {
		if o.Handle == d.Handle {
			return errStillPresent
		}
	}
	return nil
}

// resetOp is a reuse reset (erase, keep-booted, snapshot): its run does
// the platform work, its settlement returns the device to the pool when
// the reset left it clean, and destroys it otherwise.
func (b *resetBook) resetOp(id, leaseID string, p ReleasePolicy) *deviceOp {
	var r resetResult
	return &deviceOp{kind: OpKindReclaim, lock: "reset", id: id, mark: keepIntent(id, p, leaseID),
		run: func(ctx context.Context, o *deviceOp) error {
			timeout := p.Timeout
			if timeout <= 0 {
				timeout = DefaultResetTimeout
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r = b.runReset(ctx, o, p)
			return nil
		},
		settle: func(o *deviceOp, _ error) error {
			if r.destroy {
				// The destroy is a teardown of its own (its host claim goes
				// with it). Nothing is committed before it begins, so the
				// record keeps the release's intent until the destroy's own
				// replaces it: a crash in between still destroys.
				b.startResetDestroyLocked(id, leaseID, p, r)
				return nil
			}
			d, err := b.reg.update(id, func(d *DeviceRecord) { d.ReuseCount++ })
			if err != nil {
				return err
			}
			r.reuse = d.ReuseCount
			b.settleResetLocked(leaseID, id, d.Platform, r)
			// A reuse reset leaves the device booted: ready, or shut down
			// when running capacity is over its limit.
			return b.eng.disposeLocked(id, "device.reclaimed", "reset", map[string]any{"durationMs": o.elapsed(b.eng.now()), "reset": r.mode})
		}}
}

// runReset does a reuse reset's platform work by mode.
func (b *resetBook) runReset(ctx context.Context, o *deviceOp, p ReleasePolicy) resetResult {
	switch p.Mode {
	case contract.ResetErase:
		return b.runErase(ctx, o)
	case contract.ResetKeepBooted:
		return b.runKeepBooted(ctx, o, p)
	case contract.ResetSnapshot:
		var r resetResult
		b.runSnapshot(ctx, o, &r, "")
		return r
	case contract.ResetNone:
		// A slot's device goes back to its slot as the execution left it:
		// booted, its caches warm.
		return resetResult{mode: contract.ResetNone, outcome: contract.ResetOutcomeClean}
	default:
		var r resetResult
		r.fail(fmt.Sprintf("unknown reset mode %q", p.Mode))
		return r
	}
}

// step runs one native phase, timing it into r under name.
func (b *resetBook) step(r *resetResult, name string, f func() error) error {
	start := b.eng.now()
	err := f()
	r.phase(name, b.eng.now().Sub(start))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// recoverResetLocked is the restart rule for a device found mid-reset:
// it is destroyed, and the reset is reported under its lease as
// destroyed for the interruption.
func (b *resetBook) recoverResetLocked(d DeviceRecord) *deviceOp {
	l := LeaseRecord{ID: d.Intent.LeaseID, DeviceID: d.ID, Release: d.Intent.Release}
	if l.ID != "" && b.get(l.ID) == nil {
		b.openResetLocked(l, 1)
	}
	b.addDevice(l.ID, d.ID)
	b.eng.emitLocked(events.Event{Type: "device.reset-interrupted", DeviceID: d.ID, Platform: d.Platform, LeaseID: l.ID,
		Data: map[string]any{"mode": resetModeOf(d.Intent.Release), "op": string(d.Intent.Op)}})
	return b.resetDestroyOp(d.ID, l.ID, d.Intent.Release,
		resetResult{reason: "interrupted by a restart during the " + resetModeOf(d.Intent.Release) + " reset"})
}
