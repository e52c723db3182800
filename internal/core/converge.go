package core

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// Convergence: what a start does with the registry a daemon that is gone
// left behind. Converge stays the one entry on Engine: it is the engine's
// own start (New, then Converge, then serve), not a feature's counter,
// and every harness that builds an engine calls it. Its rules, one per
// interrupted operation and per disagreement with the drivers, are the
// convergence book's.

// convergeBook holds the startup rules: how an operation a crash cut off
// is finished, what an interrupted provision left in a root, and how an
// unleased ready device is checked against its driver. It keeps no state;
// its Locked methods run only inside the decision section, the others
// enter it themselves, and it reaches the engine only through
// convergeWork and the books whose devices it recovers.
type convergeBook struct {
	eng        convergeWork
	reg        *registry
	rs         *resetBook      // a reset cut off is finished by its book (recoverResetLocked)
	quarantine *quarantineBook // a quarantined device's retry is re-armed
	drivers    map[string]Driver
	log        *slog.Logger
}

// convergeWork is the engine as the startup rules see it: the section,
// facts and commits, the registry's sorted reading, the platforms, and the
// device-operation path, satisfied by *Engine.
type convergeWork interface {
	section(f func())
	emitLocked(ev events.Event)
	commitLocked(c Changes) error
	Sorted() []DeviceRecord
	Platforms() []string
	destroyOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	shutdownOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	startReclaimLocked(id string)
	runUnrecorded(ctx context.Context, info OpInfo, f func(ctx context.Context) error) error
}

// Converge loads the persisted registry and restores the running state:
// every lease's expiry timer from its persisted deadline (a restart proves
// nothing about holders, so nothing is released for it; a slot execution's
// lease gets at least SlotRebindWindow), then every
// operation a crash cut off, by the intent (or, for records written before
// intents, the state) it left, then unleased ready devices above the
// running limit shut down.
func (e *Engine) Converge(ctx context.Context) error {
	snap, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load registry: %w", err)
	}
	var sweep []*deviceOp
	var recover []*deviceOp
	var ferr error
	interrupted := map[string]int{} // platform -> provisions cut off before their handle was stored
	e.section(func() {
		for _, d := range snap.Devices {
			d := d
			e.reg.devices[d.ID] = &d
		}
		rebindBy := e.clock.Now().Add(e.cfg.SlotRebindWindow)
		for _, l := range snap.Leases {
			l := l
			if e.cfg.SlotRebindWindow > 0 && l.Release.Mode == contract.ResetNone && l.ExpiresAt.Before(rebindBy) {
				// A slot execution's proxy re-binds after the restart; its
				// heartbeats could not reach the daemon while it was away.
				l.ExpiresAt = rebindBy
			}
			e.reg.leases[l.ID] = &l
			e.reg.byRequester[l.RequesterID] = l.ID
		}
		for _, id := range sortedLeaseIDs(e.reg.leases) {
			e.armExpiryLocked(*e.reg.leases[id])
		}
		for _, d := range e.Sorted() {
			if d.State == StateProvisioning && d.Handle == "" {
				interrupted[d.Platform]++
			}
			o, err := e.converge.recoverLocked(d)
			if err != nil {
				ferr = err
			}
			if o != nil {
				recover = append(recover, o)
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	for _, p := range e.Platforms() {
		if interrupted[p] > 0 {
			e.converge.purgeInterruptedProvisions(ctx, p, interrupted[p])
		}
	}
	for _, o := range recover {
		if _, err := e.runOp(ctx, o); err != nil {
			e.log.Warn("startup: recovering an interrupted operation failed", "device", o.id, "op", o.kind, "err", err)
		}
	}
	// The registry was written by a daemon that is gone; a ready device may
	// have stopped or vanished meanwhile. Check before anything is granted.
	e.converge.reconcileReady(ctx)
	e.owners.retireUnwanted(ctx) // ownersystem.go: a marked device of an ended preparation
	e.section(func() {
		// Running-capacity convergence: shut down excess warm devices,
		// least recently used first, and only devices that ease a limit
		// that is exceeded. Leased devices are never touched.
		// The planner decides the victims at once; the executor shuts them
		// down one by one (each takes its op lock as it begins).
		for _, id := range SweepVictims(e.planInputLocked(nil, false)) {
			sweep = append(sweep, e.shutdownOp(id, "converge", "shutdown-failed", nil))
		}
	})
	for _, o := range sweep {
		_, _ = e.runOp(ctx, o)
	}
	e.warm.resolveWarmTargets(ctx)
	return e.reqs.recoverRequests(ctx)
}

// recoverLocked is the one startup rule per interrupted operation. No op
// lock survives a restart, so an intent found now was cut off by a crash
// (or a stop that abandoned it). It returns the operation that finishes the
// job, if one must run, or commits the fix itself.
func (b *convergeBook) recoverLocked(d DeviceRecord) (*deviceOp, error) {
	clear := func() error {
		if d.Intent == (DeviceIntent{}) && d.Health.RecoveringSince.IsZero() {
			return nil
		}
		_, err := b.reg.update(d.ID, func(r *DeviceRecord) { r.Health.RecoveringSince = time.Time{} })
		return err
	}
	switch {
	case d.State == StateProvisioning && d.Handle == "":
		// The create never reached the driver, or its handle was never
		// stored and the device was destroyed again (provisionAndBoot).
		return nil, b.eng.commitLocked(Changes{DeleteDevices: []string{d.ID}})
	case !d.Intent.Release.IsZero() && d.State != StateQuarantined:
		// Cut off in a session's reset, whatever its mode: a device whose
		// reset nobody saw finish is never handed out again (resetbook.go).
		return b.rs.recoverResetLocked(d), nil
	case d.Intent.Op == OpKindDestroy && d.State != StateQuarantined:
		// The destroy may or may not have happened: finish it.
		return b.eng.destroyOp(d.ID, "converge", "destroy-failed", func(DeviceRecord) {
			b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: d.ID, Platform: d.Platform, Reason: "recovered"})
		}), nil
	case d.State == StateProvisioning:
		// Created, maybe booted, never settled: make it match a shut-down
		// record, which the planner and the warm pool reuse.
		return b.eng.shutdownOp(d.ID, "converge", "shutdown-failed", nil), nil
	case d.State == StateQuarantined:
		// Re-arm the retry from its persisted deadline.
		if err := clear(); err != nil {
			return nil, err
		}
		b.quarantine.armLocked(*b.reg.devices[d.ID])
		return nil, nil
	case d.State == StateReclaiming && d.Intent.Op != OpKindShutdown:
		// Cut off mid-purge: purge it again from the start.
		b.eng.emitLocked(events.Event{Type: "device.reclaim-recovered", DeviceID: d.ID, Platform: d.Platform})
		b.eng.startReclaimLocked(d.ID)
		return nil, nil
	case d.Intent.Op == OpKindShutdown || (d.Intent.Op == OpKindBoot && d.State == StateShutdown):
		// A shutdown cut off (after a purge, an eviction, cleanup), or a
		// boot that may have left a shut-down record's device running.
		return b.eng.shutdownOp(d.ID, "converge", "shutdown-failed", nil), nil
	default:
		// A crash recovery or anything else that settles by itself: the
		// health monitor looks at a leased device again.
		return nil, clear()
	}
}

// purgeInterruptedProvisions destroys what n provisions of platform p,
// cut off between the driver creating a device and the registry storing its
// handle, may have left in simlock's root. Their records are gone; such a
// device is in the root and in no record. It acts only when the attribution
// is unambiguous (no more unknown devices than interrupted provisions) and
// the root is proven simlock's right before; anything else is left for
// doctor --purge-orphans, as any orphan is.
func (b *convergeBook) purgeInterruptedProvisions(ctx context.Context, p string, n int) {
	drv := b.drivers[p]
	if drv == nil {
		return
	}
	obs, err := drv.ListManaged(ctx)
	if err != nil {
		b.log.Warn("startup: cannot list devices after an interrupted provision", "platform", p, "err", err)
		return
	}
	var unknown []Observed
	b.eng.section(func() {
		known := map[string]bool{}
		for _, d := range b.reg.devices {
			if d.Platform == p {
				known[d.Handle] = true
			}
		}
		for _, o := range obs {
			if !known[o.Handle] {
				unknown = append(unknown, o)
			}
		}
	})
	if len(unknown) == 0 {
		return
	}
	if len(unknown) > n {
		b.log.Warn("startup: more unregistered devices than interrupted provisions; leaving them for doctor --purge-orphans",
			"platform", p, "unregistered", len(unknown), "interrupted", n)
		return
	}
	if err := drv.RevalidateRoot(ctx); err != nil {
		b.log.Warn("startup: root not proven simlock's; leaving unregistered devices alone", "platform", p, "err", err)
		return
	}
	for _, o := range unknown {
		err := b.eng.runUnrecorded(ctx, OpInfo{Kind: OpKindDestroy, Lock: "converge", Platform: p, Handle: o.Handle}, func(ctx context.Context) error {
			return drv.Destroy(ctx, DeviceRef{Handle: o.Handle, Name: o.Name})
		})
		if err != nil {
			b.log.Warn("startup: destroying a device an interrupted provision left failed", "platform", p, "handle", o.Handle, "err", err)
			continue
		}
		b.eng.section(func() {
			b.eng.emitLocked(events.Event{Type: "device.orphan-purged", Platform: p, Reason: "interrupted-provision", Data: map[string]any{"handle": o.Handle}})
		})
	}
}

// reconcileReady compares unleased ready devices with what their drivers
// see: one that stopped is recorded as shut down, one missing from two
// consecutive listings is forgotten (a root being rewritten can drop an
// entry from one listing). A driver that cannot list is no evidence and
// changes nothing.
func (b *convergeBook) reconcileReady(ctx context.Context) {
	for _, p := range b.eng.Platforms() {
		var any bool
		b.eng.section(func() {
			for _, d := range b.reg.devices {
				any = any || d.Platform == p && d.State == StateReady
			}
		})
		if !any {
			continue
		}
		seen, ok := b.listRun(ctx, p)
		if !ok {
			continue
		}
		var missing bool
		b.eng.section(func() {
			for _, d := range b.reg.devices {
				_, found := seen[d.Handle]
				missing = missing || d.Platform == p && d.State == StateReady && !found
			}
		})
		again := seen
		if missing {
			if again, ok = b.listRun(ctx, p); !ok {
				again = nil // no second reading: forget nothing
			}
		}
		b.eng.section(func() {
			for _, d := range b.eng.Sorted() {
				if d.Platform != p || d.State != StateReady || b.reg.opLocks[d.ID] != "" {
					continue
				}
				run, ok := seen[d.Handle]
				_, confirmed := again[d.Handle]
				switch {
				case !ok && again != nil && !confirmed:
					if b.eng.commitLocked(Changes{DeleteDevices: []string{d.ID}}) == nil {
						b.eng.emitLocked(events.Event{Type: "device.vanished", DeviceID: d.ID, Platform: p})
					}
				case !ok:
					// Missing once, present (or unknown) the second time.
				case run == RunStopped:
					if _, err := b.reg.setState(d.ID, StateShutdown); err == nil {
						b.eng.emitLocked(events.Event{Type: "device.found-stopped", DeviceID: d.ID, Platform: p})
					}
				}
			}
		})
	}
}

// listRun lists platform p's managed devices by handle.
func (b *convergeBook) listRun(ctx context.Context, p string) (map[string]RunState, bool) {
	obs, err := b.drivers[p].ListManaged(ctx)
	if err != nil {
		b.log.Warn("startup: cannot list devices; trusting the registry", "platform", p, "err", err)
		return nil, false
	}
	seen := map[string]RunState{}
	for _, o := range obs {
		seen[o.Handle] = o.Run
	}
	return seen, true
}
