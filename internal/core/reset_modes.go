package core

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
)

// DefaultKeepBootedMaxUses retires a keep-booted device after this many
// leases when the policy sets no MaxUses.
const DefaultKeepBootedMaxUses = 20

// KeepBootedBudget bounds one keep-booted cleaning (and one baseline
// capture) as a whole; the driver bounds each command inside it.
const KeepBootedBudget = 30 * time.Second

// runErase is the erase reset: stop, erase and boot the same device, then
// prove from a fresh read that it is still the exact device it was. Any
// failure gives the device up (destroyed, with the reason).
func (e *Engine) runErase(ctx context.Context, o *deviceOp) resetResult {
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
			release, err := e.takeResetBoot(ctx)
			if err != nil {
				return err
			}
			defer release()
			return o.drv.MakeReady(ctx, ref)
		}},
		{"verify", func() error { return ver.VerifyErased(ctx, ref) }},
	} {
		if err := e.step(&r, s.name, s.f); err != nil {
			r.fail(err.Error())
			return r
		}
	}
	r.mode, r.outcome = contract.ResetErase, contract.ResetOutcomeClean
	return r
}

// takeResetBoot waits for a slot among the erase boots allowed at once
// (the wait counts as boot time) and returns its release.
func (e *Engine) takeResetBoot(ctx context.Context) (func(), error) {
	e.mu.Lock()
	if e.cfg.MaxConcurrentResetBoots > 0 && e.rs.boots == nil {
		e.rs.boots = make(chan struct{}, e.cfg.MaxConcurrentResetBoots)
	}
	gate := e.rs.boots
	e.mu.Unlock()
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
func (e *Engine) runKeepBooted(ctx context.Context, o *deviceOp, p ReleasePolicy) resetResult {
	var r resetResult
	kb, ok := o.drv.(KeepBootedCleaner)
	if !ok {
		e.fallback(ctx, o, p, &r, "the driver cannot clean a booted device")
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
		err = e.step(&r, "health", func() error { return kb.CheckHealth(ctx, ref) })
	}
	if err != nil {
		e.fallback(ctx, o, p, &r, "keep-booted: "+err.Error())
		return r
	}
	r.mode, r.outcome = contract.ResetKeepBooted, contract.ResetOutcomeClean
	return r
}

// fallback runs the keep-booted policy's fallback after reason: the
// snapshot restore (then a fresh baseline for the new boot) or, without
// one, destroying the device.
func (e *Engine) fallback(ctx context.Context, o *deviceOp, p ReleasePolicy, r *resetResult, reason string) {
	if p.Fallback != contract.ResetSnapshot {
		r.fail(reason)
		return
	}
	r.reason = reason
	if !e.runSnapshot(ctx, o, r, "snapshot:") {
		return
	}
	kb, ok := o.drv.(KeepBootedCleaner)
	if !ok {
		return
	}
	ref := o.rec.Ref()
	err := e.step(r, "snapshot:health", func() error { return kb.CheckHealth(ctx, ref) })
	if err == nil {
		// The restore began a new boot: its baseline is captured now, so
		// the next release can clean again.
		err = e.step(r, "snapshot:baseline", func() error {
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
func (e *Engine) runSnapshot(ctx context.Context, o *deviceOp, r *resetResult, prefix string) bool {
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
	err := e.step(r, prefix+"restore", func() error { return restore(ctx, ref) })
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
	if err := e.step(r, prefix+"wipe-data", func() error { return w.WipeData(ctx, ref) }); err != nil {
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
func (e *Engine) baselineBeforeGrantLocked(w *waiter, id string) bool {
	if w.release.Mode != contract.ResetKeepBooted || w.baselined {
		return false
	}
	kb, ok := e.drivers[e.devices[id].Platform].(KeepBootedCleaner)
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
				e.log.Warn("keep-booted baseline not captured; the release will not reuse the device", "device", id, "err", err)
			}
			e.finishWorkLocked(w, id)
			return nil
		}}
	w.working = true
	if err := e.startOpLocked(o); err != nil {
		w.working = false
		return false // stopping: the grant goes on (and fails) as it would
	}
	return true
}
