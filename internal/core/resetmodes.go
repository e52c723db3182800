package core

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
)

// The reuse reset modes a release policy names (erase, keep-booted,
// snapshot), the driver abilities each needs, and the keep-booted
// baseline captured before a grant.

// EraseVerifier is the driver ability the erase reset needs on top of
// Eraser: a fresh read of the device proving it is still the exact device
// type and runtime it was, available, and booted. Without it an erase
// cannot be trusted and the reset destroys the device.
type EraseVerifier interface {
	VerifyErased(ctx context.Context, dev DeviceRef) error
}

// KeepBootedCleaner is the driver ability behind the keep-booted reset:
// the device stays booted and is cleaned back to a baseline captured for
// its incarnation (its stable identity plus its current boot).
type KeepBootedCleaner interface {
	// CaptureBaseline records the device's baseline unless its current
	// incarnation has one already. It runs after a boot, before the
	// session that asked for keep-booted uses the device.
	CaptureBaseline(ctx context.Context, dev DeviceRef) error
	// CleanToBaseline undoes what a session changed, by the baseline of
	// the current incarnation; phases are its native phases and what each
	// took. No baseline for the incarnation is an error.
	CleanToBaseline(ctx context.Context, dev DeviceRef) (phases map[string]time.Duration, err error)
	// CheckHealth proves the cleaned device usable (booted, its package
	// manager answering).
	CheckHealth(ctx context.Context, dev DeviceRef) error
}

// SnapshotRestorer is the optional driver ability to restore a device's
// baseline snapshot and nothing else (no fallback of its own), so the
// snapshot reset can tell a restore from the data wipe it falls back to.
// Without it the snapshot reset uses the driver's purge (Reclaim).
type SnapshotRestorer interface {
	RestoreSnapshot(ctx context.Context, dev DeviceRef) error
}

// DataWiper is the optional driver ability the snapshot reset falls back
// to when the snapshot cannot be restored: restart the device with its
// data wiped.
type DataWiper interface {
	WipeData(ctx context.Context, dev DeviceRef) error
}

// DefaultKeepBootedMaxUses retires a keep-booted device after this many
// leases when the policy sets no MaxUses.
const DefaultKeepBootedMaxUses = 20

// KeepBootedBudget bounds one keep-booted cleaning (and one baseline
// capture) as a whole; the driver bounds each command inside it.
const KeepBootedBudget = 30 * time.Second

// runErase is the erase reset: stop, erase and boot the same device, then
// prove from a fresh read that it is still the exact device it was. Any
// failure gives the device up (destroyed, with the reason).
func (b *resetBook) runErase(ctx context.Context, o *deviceOp) resetResult {
	var r resetResult
	er, ok := o.drv.(Eraser)
	ver, vok := o.drv.(EraseVerifier)
	if !ok || !vok {
		r.fail("the driver cannot erase and verify a device")
		return r
	}
	ref := o.rec.Ref()
	for _, s := range []struct {
		name string
		f    func() error
	}{
		{"stop", func() error { return o.drv.Shutdown(ctx, ref) }},
		{"erase", func() error { return er.Erase(ctx, ref) }},
		{"boot", func() error {
			release, err := b.takeResetBoot(ctx)
			if err != nil {
				return err
			}
			defer release()
			return o.drv.MakeReady(ctx, ref)
		}},
		{"verify", func() error { return ver.VerifyErased(ctx, ref) }},
	} {
		if err := b.step(&r, s.name, s.f); err != nil {
			r.fail(err.Error())
			return r
		}
	}
	r.mode, r.outcome = contract.ResetErase, contract.ResetOutcomeClean
	return r
}

// takeResetBoot waits for a slot among the erase boots allowed at once
// (the wait counts as boot time) and returns its release.
func (b *resetBook) takeResetBoot(ctx context.Context) (func(), error) {
	// boots is made once, with the book, and only read here: this runs
	// outside the decision section.
	gate := b.boots
	if gate == nil {
		return func() {}, nil
	}
	select {
	case gate <- struct{}{}:
		return func() { <-gate }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runKeepBooted is the keep-booted reset: the device stays booted and the
// driver cleans it back to its incarnation's baseline, then proves it
// healthy. A device at its last use is retired (destroyed); a failed
// cleaning or health check falls back to the policy's fallback (the
// snapshot) or to destroying the device.
func (b *resetBook) runKeepBooted(ctx context.Context, o *deviceOp, p ReleasePolicy) resetResult {
	var r resetResult
	kb, ok := o.drv.(KeepBootedCleaner)
	if !ok {
		b.fallback(ctx, o, p, &r, "the driver cannot clean a booted device")
		return r
	}
	maxUses := p.MaxUses
	if maxUses <= 0 {
		maxUses = DefaultKeepBootedMaxUses
	}
	if uses := o.rec.ReuseCount + 1; uses >= maxUses {
		// Retired rather than cleaned: the lease just ended was its last.
		r.retired = true
		r.fail(fmt.Sprintf("retired after %d uses (maxUses %d)", uses, maxUses))
		return r
	}
	ref := o.rec.Ref()
	cctx, cancel := context.WithTimeout(ctx, KeepBootedBudget)
	phases, err := kb.CleanToBaseline(cctx, ref)
	cancel()
	for k, v := range phases {
		r.phase(k, v)
	}
	if err == nil {
		err = b.step(&r, "health", func() error { return kb.CheckHealth(ctx, ref) })
	}
	if err != nil {
		b.fallback(ctx, o, p, &r, "keep-booted: "+err.Error())
		return r
	}
	r.mode, r.outcome = contract.ResetKeepBooted, contract.ResetOutcomeClean
	return r
}

// fallback runs the keep-booted policy's fallback after reason: the
// snapshot restore (then a fresh baseline for the new boot) or, without
// one, destroying the device.
func (b *resetBook) fallback(ctx context.Context, o *deviceOp, p ReleasePolicy, r *resetResult, reason string) {
	if p.Fallback != contract.ResetSnapshot {
		r.fail(reason)
		return
	}
	r.reason = reason
	if !b.runSnapshot(ctx, o, r, "snapshot:") {
		return
	}
	kb, ok := o.drv.(KeepBootedCleaner)
	if !ok {
		return
	}
	ref := o.rec.Ref()
	err := b.step(r, "snapshot:health", func() error { return kb.CheckHealth(ctx, ref) })
	if err == nil {
		// The restore began a new boot: its baseline is captured now, so
		// the next release can clean again.
		err = b.step(r, "snapshot:baseline", func() error {
			cctx, cancel := context.WithTimeout(ctx, KeepBootedBudget)
			defer cancel()
			return kb.CaptureBaseline(cctx, ref)
		})
	}
	if err != nil {
		r.fail(err.Error())
	}
}

// runSnapshot restores the device's baseline snapshot (the platform's own
// purge), restarts it with its data wiped when that fails, and gives the
// device up when both fail. prefix marks the phases of a fallback. It
// reports whether the device came back clean.
func (b *resetBook) runSnapshot(ctx context.Context, o *deviceOp, r *resetResult, prefix string) bool {
	ref := o.rec.Ref()
	outcome := func(mode string) string {
		if prefix == "" && mode == contract.ResetSnapshot {
			return contract.ResetOutcomeClean
		}
		return contract.ResetOutcomeFallbackPrefix + mode
	}
	restore := o.drv.Reclaim
	if sr, ok := o.drv.(SnapshotRestorer); ok {
		restore = sr.RestoreSnapshot
	}
	err := b.step(r, prefix+"restore", func() error { return restore(ctx, ref) })
	if err == nil {
		r.mode, r.outcome = contract.ResetSnapshot, outcome(contract.ResetSnapshot)
		return true
	}
	why := "snapshot: " + err.Error()
	if r.reason == "" {
		r.reason = why
	} else {
		r.reason += "; " + why
	}
	w, ok := o.drv.(DataWiper)
	if !ok {
		r.destroy = true
		return false
	}
	if err := b.step(r, prefix+"wipe-data", func() error { return w.WipeData(ctx, ref) }); err != nil {
		r.fail(err.Error())
		return false
	}
	r.mode, r.outcome = contract.ResetWipeData, outcome(contract.ResetWipeData)
	return true
}

// OpKindBaseline is the keep-booted baseline capture before a grant. A
// crash during it leaves nothing to finish: the device is ready as it was.
const OpKindBaseline OpKind = "baseline"

// baselineBeforeGrantLocked starts the keep-booted baseline capture of
// device id for w, whose release keeps the device booted, when the driver
// can clean and the step has not run for w yet; its settlement grants.
// The driver captures once per incarnation, so a device cleaned before
// keeps the baseline it has. A capture that fails does not fail the
// request: the release finds no baseline and falls back or destroys.
func (b *resetBook) baselineBeforeGrantLocked(w *waiter, id string) bool {
	if w.release.Mode != contract.ResetKeepBooted || w.baselined {
		return false
	}
	drv, _ := b.eng.Driver(b.reg.device(id).Platform)
	kb, ok := drv.(KeepBootedCleaner)
	if !ok {
		return false
	}
	w.baselined = true
	o := &deviceOp{kind: OpKindBaseline, lock: "baseline", id: id,
		run: func(ctx context.Context, o *deviceOp) error {
			ctx, cancel := context.WithTimeout(ctx, KeepBootedBudget)
			defer cancel()
			return kb.CaptureBaseline(ctx, o.rec.Ref())
		},
		settle: func(o *deviceOp, err error) error {
			if err != nil {
				b.log.Warn("keep-booted baseline not captured; the release will not reuse the device", "device", id, "err", err)
			}
			b.eng.finishWorkLocked(w, id)
			return nil
		}}
	w.working = true
	if err := b.eng.startOpLocked(o); err != nil {
		w.working = false
		return false // stopping: the grant goes on (and fails) as it would
	}
	return true
}
