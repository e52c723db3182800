package core

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// Release reasons carried on lease.released.
const (
	ReasonReleased   = "released"
	ReasonExpired    = "expired"
	ReasonDeviceLost = "device-lost"
)

// armExpiryLocked (re)arms the single expiry timer of l.
func (e *Engine) armExpiryLocked(l LeaseRecord) {
	if t, ok := e.reg.timers[l.ID]; ok {
		t.Stop()
	}
	d := l.ExpiresAt.Sub(e.clock.Now())
	if d < 0 {
		d = 0
	}
	id := l.ID
	e.reg.timers[id] = e.clock.AfterFunc(d, func() { e.expire(id) })
}

// expire ends a lease whose deadline has passed. A renew that raced the
// timer wins: the deadline is re-read inside the decision section.
func (e *Engine) expire(id string) {
	var released bool
	e.section(func() {
		l, ok := e.reg.leases[id]
		if !ok || e.halt.stopping {
			return
		}
		if e.clock.Now().Before(l.ExpiresAt) {
			e.armExpiryLocked(*l)
			return
		}
		released = e.releaseLocked(*l, ReasonExpired) == nil
	})
	if released {
		e.notifyPositions()
	}
}

// Renew extends a lease by ttl, or by its stored width when ttl is zero. The
// caller is answered once the new deadline is persisted, so a restart
// restores every deadline a holder was told of.
func (e *Engine) Renew(id string, ttl time.Duration) (LeaseRecord, error) {
	if ttl < 0 {
		return LeaseRecord{}, fmt.Errorf("%w: ttl must be positive", ErrBadRequest)
	}
	if ttl > e.cfg.MaxTTL {
		return LeaseRecord{}, fmt.Errorf("%w: asked for %s, at most %s", ErrTTLTooLong, ttl, e.cfg.MaxTTL)
	}
	var out LeaseRecord
	var err error
	// Like a grant, a renew is decided in memory and committed through the
	// writer: the decision mutex is not held across its fsync (every holder
	// renews, so a synchronous commit here queued grants behind the disk),
	// and the caller is answered only once the new deadline is durable.
	durable := e.sectionDurable(func() {
		cur, ok := e.reg.leases[id]
		if !ok {
			err = ErrUnknownLease
			return
		}
		l := *cur
		if ttl > 0 {
			l.TTL = ttl
		}
		now := e.now()
		l.ExpiresAt = now.Add(l.TTL)
		l.LastRenewedAt = now
		if _, err = e.commitAsyncLocked(Changes{PutLeases: []LeaseRecord{l}}); err != nil {
			return
		}
		e.armExpiryLocked(l)
		data := map[string]any{"expiresAt": l.ExpiresAt.Format(time.RFC3339Nano), "ownerId": l.OwnerID, "ttlMs": l.TTL.Milliseconds()}
		if l.TTL != cur.TTL {
			// A width change is worth an audit line; a plain renewal is not.
			data["previousTtlMs"] = cur.TTL.Milliseconds()
		}
		e.emitLocked(events.Event{Type: "lease.renewed", LeaseID: id, DeviceID: l.DeviceID, RequesterID: l.RequesterID, Platform: l.Platform,
			Data: data})
		out = l
	})
	if err == nil && durable != nil {
		return LeaseRecord{}, durable
	}
	return out, err
}

// Release ends a lease now. It returns as soon as the release is committed;
// the device is purged in the background.
func (e *Engine) Release(id string) error {
	var err error
	derr := e.sectionDurable(func() {
		l, ok := e.reg.leases[id]
		if !ok {
			err = ErrUnknownLease
			return
		}
		err = e.releaseLocked(*l, ReasonReleased)
	})
	if err == nil {
		err = derr // answered only once the release is durable
	}
	e.notifyPositions()
	return err
}

// ReleaseWhere releases every lease for which match returns true.
func (e *Engine) ReleaseWhere(match func(LeaseRecord) bool) []string {
	var ids []string
	e.section(func() {
		for _, id := range sortedLeaseIDs(e.reg.leases) {
			l := *e.reg.leases[id]
			if match(l) && e.releaseLocked(l, ReasonReleased) == nil {
				ids = append(ids, id)
			}
		}
	})
	e.notifyPositions()
	return ids
}

// releaseLocked commits the first half of a release (lease gone, device
// reclaiming) and hands the purge to a background reclaim.
func (e *Engine) releaseLocked(l LeaseRecord, reason string) error {
	now := e.now()
	c := Changes{DeleteLeases: []string{l.ID}}
	var held []string // every member still in the registry, purged as one release
	for _, id := range l.DeviceIDs() {
		dev, ok := e.reg.devices[id]
		if !ok {
			continue
		}
		held = append(held, id)
		d := *dev
		d.State = StateReclaiming
		d.StateSince = now
		d.LastReleasedAt = now
		// Crash-recovery bookkeeping belongs to the lease that just ended.
		d.Health.RecoveryAttempts = 0
		d.Health.RecoveringSince = time.Time{}
		// The purge's intent goes in the same commit: reclaiming is
		// already the record a crash needs to finish it. A session's
		// release policy goes with it (resetbook.go): a restart that finds it
		// destroys the device.
		d.Intent = DeviceIntent{Op: OpKindReclaim, Since: now}
		if !l.Release.IsZero() {
			keepIntent(id, l.Release, l.ID)(&d)
		}
		c.PutDevices = append(c.PutDevices, d)
		e.health.forgetLocked(d.ID)
	}
	// Synchronous: a refused release must leave the lease held, and its
	// purge starts in this section (ADR 0044).
	if err := e.commitLocked(c); err != nil {
		return err
	}
	e.watches.tell(l.ID, reason)
	if t, ok := e.reg.timers[l.ID]; ok {
		t.Stop()
		delete(e.reg.timers, l.ID)
	}
	owner := map[string]any{"ownerId": l.OwnerID}
	if len(l.Members) > 0 {
		owner["devices"] = l.DeviceIDs()
	}
	if reason == ReasonExpired {
		e.emitLocked(events.Event{Type: "lease.expired", LeaseID: l.ID, DeviceID: l.DeviceID, RequesterID: l.RequesterID, Platform: l.Platform, Data: owner})
	}
	e.emitLocked(events.Event{Type: "lease.released", LeaseID: l.ID, DeviceID: l.DeviceID, RequesterID: l.RequesterID, Platform: l.Platform, Reason: reason, Data: owner})
	e.warm.sample(e.viewLocked(), false) // every release is a demand sample (warmbook.go)
	if !l.Release.IsZero() && len(held) > 0 {
		e.rs.openResetLocked(l, len(held))
	}
	for _, id := range held {
		e.startReclaimLocked(id)
	}
	return nil
}

// startReclaimLocked purges a released device in the background through
// the op executor; disposeLocked decides where it goes next. A failed purge
// quarantines the device for a purge retry. If another operation holds the
// device (a crash recovery still rebooting it), the purge waits for it
// rather than overlapping it.
func (e *Engine) startReclaimLocked(id string) {
	d := e.reg.devices[id]
	if _, ok := e.drivers[d.Platform]; !ok {
		_ = e.quarantine.enterLocked(id, "no-driver", OpKindReclaim)
		return
	}
	if !d.Intent.Release.IsZero() {
		// A session's release: its own reset, not the pool's purge.
		e.rs.startResetLocked(id, d.Intent.LeaseID, d.Intent.Release)
		return
	}
	if err := e.startOrDeferOpLocked(e.reclaimOp(id)); err != nil {
		// Only a stop refuses here; the device stays reclaiming and the
		// next start purges it.
		e.log.Warn("purge not started", "device", id, "err", err)
	}
}

func (e *Engine) reclaimOp(id string) *deviceOp {
	var stopped bool
	var kind string
	return &deviceOp{kind: OpKindReclaim, lock: "reclaim", id: id,
		run: func(ctx context.Context, o *deviceOp) error {
			var err error
			stopped, kind, err = e.rs.purge(ctx, o)
			o.down = err == nil && stopped
			return err
		},
		settle: func(o *deviceOp, err error) error {
			if err == nil && stopped {
				// Erased and left shut down: the planner had no use for it
				// running (it would have been evicted at once).
				if _, uerr := e.reg.setState(id, StateShutdown); uerr != nil {
					return uerr
				}
				e.emitLocked(events.Event{Type: "device.reclaimed", DeviceID: id, Platform: o.rec.Platform,
					Data: resetData(map[string]any{"disposition": string(StateShutdown), "durationMs": o.elapsed(e.now())}, kind)})
				e.scheduleLocked()
				return nil
			}
			if err != nil {
				e.log.Warn("purge failed", "device", id, "err", err)
				failed := events.Event{Type: "device.purge-failed", DeviceID: id, Platform: o.rec.Platform, Reason: err.Error(),
					Data: map[string]any{"durationMs": o.elapsed(e.now())}}
				if qerr := e.quarantine.enterLocked(id, "purge-failed", OpKindReclaim, failed); qerr != nil {
					return qerr
				}
				e.scheduleLocked()
				return nil
			}
			return e.disposeLocked(id, "device.reclaimed", "reclaim", resetData(map[string]any{"durationMs": o.elapsed(e.now())}, kind))
		}}
}

// purgeByErase is the erase reset (purge, resetchoice.go, picks it or the
// clone reset). A driver that can erase
// without booting (Eraser) lets the planner decide between the two steps: if
// the device would be evicted at once for a waiter it cannot serve, the boot
// is skipped (stopped) and the settlement records it shut down. A driver
// that purges in one step always comes back booted.
func (e *Engine) purgeByErase(ctx context.Context, drv Driver, d DeviceRecord) (stopped bool, err error) {
	er, ok := drv.(Eraser)
	if !ok {
		return false, drv.Reclaim(ctx, d.Ref())
	}
	if err := er.Erase(ctx, d.Ref()); err != nil {
		return false, err
	}
	keep := true
	e.section(func() { keep = e.keepRunningAfterPurgeLocked(d.ID) })
	if !keep {
		return true, nil
	}
	return false, drv.MakeReady(ctx, d.Ref())
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
			o, err := e.recoverLocked(d)
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
			e.purgeInterruptedProvisions(ctx, p, interrupted[p])
		}
	}
	for _, o := range recover {
		if _, err := e.runOp(ctx, o); err != nil {
			e.log.Warn("startup: recovering an interrupted operation failed", "device", o.id, "op", o.kind, "err", err)
		}
	}
	// The registry was written by a daemon that is gone; a ready device may
	// have stopped or vanished meanwhile. Check before anything is granted.
	e.reconcileReady(ctx)
	e.retireUnwanted(ctx) // ownersystem.go: a marked device of an ended preparation
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
	e.resolveWarmTargets(ctx)
	return e.reqs.recoverRequests(ctx)
}

// recoverLocked is the one startup rule per interrupted operation. No op
// lock survives a restart, so an intent found now was cut off by a crash
// (or a stop that abandoned it). It returns the operation that finishes the
// job, if one must run, or commits the fix itself.
func (e *Engine) recoverLocked(d DeviceRecord) (*deviceOp, error) {
	clear := func() error {
		if d.Intent == (DeviceIntent{}) && d.Health.RecoveringSince.IsZero() {
			return nil
		}
		_, err := e.reg.update(d.ID, func(r *DeviceRecord) { r.Health.RecoveringSince = time.Time{} })
		return err
	}
	switch {
	case d.State == StateProvisioning && d.Handle == "":
		// The create never reached the driver, or its handle was never
		// stored and the device was destroyed again (provisionAndBoot).
		return nil, e.commitLocked(Changes{DeleteDevices: []string{d.ID}})
	case !d.Intent.Release.IsZero() && d.State != StateQuarantined:
		// Cut off in a session's reset, whatever its mode: a device whose
		// reset nobody saw finish is never handed out again (resetbook.go).
		return e.rs.recoverResetLocked(d), nil
	case d.Intent.Op == OpKindDestroy && d.State != StateQuarantined:
		// The destroy may or may not have happened: finish it.
		return e.destroyOp(d.ID, "converge", "destroy-failed", func(DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: d.ID, Platform: d.Platform, Reason: "recovered"})
		}), nil
	case d.State == StateProvisioning:
		// Created, maybe booted, never settled: make it match a shut-down
		// record, which the planner and the warm pool reuse.
		return e.shutdownOp(d.ID, "converge", "shutdown-failed", nil), nil
	case d.State == StateQuarantined:
		// Re-arm the retry from its persisted deadline.
		if err := clear(); err != nil {
			return nil, err
		}
		e.quarantine.armLocked(*e.reg.devices[d.ID])
		return nil, nil
	case d.State == StateReclaiming && d.Intent.Op != OpKindShutdown:
		// Cut off mid-purge: purge it again from the start.
		e.emitLocked(events.Event{Type: "device.reclaim-recovered", DeviceID: d.ID, Platform: d.Platform})
		e.startReclaimLocked(d.ID)
		return nil, nil
	case d.Intent.Op == OpKindShutdown || (d.Intent.Op == OpKindBoot && d.State == StateShutdown):
		// A shutdown cut off (after a purge, an eviction, cleanup), or a
		// boot that may have left a shut-down record's device running.
		return e.shutdownOp(d.ID, "converge", "shutdown-failed", nil), nil
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
func (e *Engine) purgeInterruptedProvisions(ctx context.Context, p string, n int) {
	drv := e.drivers[p]
	if drv == nil {
		return
	}
	obs, err := drv.ListManaged(ctx)
	if err != nil {
		e.log.Warn("startup: cannot list devices after an interrupted provision", "platform", p, "err", err)
		return
	}
	var unknown []Observed
	e.section(func() {
		known := map[string]bool{}
		for _, d := range e.reg.devices {
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
		e.log.Warn("startup: more unregistered devices than interrupted provisions; leaving them for doctor --purge-orphans",
			"platform", p, "unregistered", len(unknown), "interrupted", n)
		return
	}
	if err := drv.RevalidateRoot(ctx); err != nil {
		e.log.Warn("startup: root not proven simlock's; leaving unregistered devices alone", "platform", p, "err", err)
		return
	}
	for _, o := range unknown {
		err := e.runUnrecorded(ctx, OpInfo{Kind: OpKindDestroy, Lock: "converge", Platform: p, Handle: o.Handle}, func(ctx context.Context) error {
			return drv.Destroy(ctx, DeviceRef{Handle: o.Handle, Name: o.Name})
		})
		if err != nil {
			e.log.Warn("startup: destroying a device an interrupted provision left failed", "platform", p, "handle", o.Handle, "err", err)
			continue
		}
		e.section(func() {
			e.emitLocked(events.Event{Type: "device.orphan-purged", Platform: p, Reason: "interrupted-provision", Data: map[string]any{"handle": o.Handle}})
		})
	}
}

// reconcileReady compares unleased ready devices with what their drivers
// see: one that stopped is recorded as shut down, one missing from two
// consecutive listings is forgotten (a root being rewritten can drop an
// entry from one listing). A driver that cannot list is no evidence and
// changes nothing.
func (e *Engine) reconcileReady(ctx context.Context) {
	for _, p := range e.Platforms() {
		var any bool
		e.section(func() {
			for _, d := range e.reg.devices {
				any = any || d.Platform == p && d.State == StateReady
			}
		})
		if !any {
			continue
		}
		seen, ok := e.listRun(ctx, p)
		if !ok {
			continue
		}
		var missing bool
		e.section(func() {
			for _, d := range e.reg.devices {
				_, found := seen[d.Handle]
				missing = missing || d.Platform == p && d.State == StateReady && !found
			}
		})
		again := seen
		if missing {
			if again, ok = e.listRun(ctx, p); !ok {
				again = nil // no second reading: forget nothing
			}
		}
		e.section(func() {
			for _, d := range e.Sorted() {
				if d.Platform != p || d.State != StateReady || e.reg.opLocks[d.ID] != "" {
					continue
				}
				run, ok := seen[d.Handle]
				_, confirmed := again[d.Handle]
				switch {
				case !ok && again != nil && !confirmed:
					if e.commitLocked(Changes{DeleteDevices: []string{d.ID}}) == nil {
						e.emitLocked(events.Event{Type: "device.vanished", DeviceID: d.ID, Platform: p})
					}
				case !ok:
					// Missing once, present (or unknown) the second time.
				case run == RunStopped:
					if _, err := e.reg.setState(d.ID, StateShutdown); err == nil {
						e.emitLocked(events.Event{Type: "device.found-stopped", DeviceID: d.ID, Platform: p})
					}
				}
			}
		})
	}
}

// listRun lists platform p's managed devices by handle.
func (e *Engine) listRun(ctx context.Context, p string) (map[string]RunState, bool) {
	obs, err := e.drivers[p].ListManaged(ctx)
	if err != nil {
		e.log.Warn("startup: cannot list devices; trusting the registry", "platform", p, "err", err)
		return nil, false
	}
	seen := map[string]RunState{}
	for _, o := range obs {
		seen[o.Handle] = o.Run
	}
	return seen, true
}

// Sorted returns device records sorted by id; callers hold the lock.
func (e *Engine) Sorted() []DeviceRecord {
	out := make([]DeviceRecord, 0, len(e.reg.devices))
	for _, d := range e.reg.devices {
		out = append(out, *d)
	}
	sortDevices(out)
	return out
}

// Stop refuses new work, fails queued requests, and joins all background
// work: device operations in flight settle (so the pool is left settled),
// and the reaper, health ticks and cleanup or doctor passes return, up to
// ctx, after which in-flight driver calls are cancelled and still settled.
// Nothing commits once Stop has returned, so the caller may close the store.
func (e *Engine) Stop(ctx context.Context) {
	var waiters []*waiter
	e.section(func() {
		if !e.halt.stopping {
			close(e.quit)
		}
		e.halt.stopping = true
		for _, w := range e.queue.Entries() {
			if !w.working {
				waiters = append(waiters, w)
			}
		}
		for _, w := range waiters {
			e.queue.remove(w)
		}
		for _, t := range []ports.Timer{e.health.timer, e.warm.timer} {
			if t != nil {
				t.Stop()
			}
		}
		e.reg.deferred = map[string]*deviceOp{}
	})
	for _, w := range waiters {
		w.deliver(result{err: ErrStopping})
	}
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		e.loops.Wait()
		_ = e.wr.flush() // nothing handed over is left behind when the store closes
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		e.bgCancel() // abandon what is left; the next start recovers it
		<-done
	}
	e.mu.Lock()
	e.reg.stopTimers()
	e.goldens.stopTimersLocked()
	e.quarantine.stopTimersLocked()
	e.reg.stopSettleTimers()
	e.mu.Unlock()
	e.bgCancel()
	e.reqs.wg.Wait()
}
