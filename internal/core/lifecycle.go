package core

import (
	"context"
	"fmt"
	"time"

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
	if t, ok := e.timers[l.ID]; ok {
		t.Stop()
	}
	d := l.ExpiresAt.Sub(e.clock.Now())
	if d < 0 {
		d = 0
	}
	id := l.ID
	e.timers[id] = e.clock.AfterFunc(d, func() { e.expire(id) })
}

// expire ends a lease whose deadline has passed. A renew that raced the
// timer wins: the deadline is re-read inside the decision section.
func (e *Engine) expire(id string) {
	var released bool
	e.section(func() {
		l, ok := e.leases[id]
		if !ok || e.stopping {
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
// new deadline is persisted before the timer is re-armed, so a restart
// restores the renewed deadline.
func (e *Engine) Renew(id string, ttl time.Duration) (LeaseRecord, error) {
	if ttl < 0 {
		return LeaseRecord{}, fmt.Errorf("%w: ttl must be positive", ErrBadRequest)
	}
	if ttl > e.cfg.MaxTTL {
		return LeaseRecord{}, fmt.Errorf("%w: asked for %s, at most %s", ErrTTLTooLong, ttl, e.cfg.MaxTTL)
	}
	var out LeaseRecord
	var err error
	e.section(func() {
		cur, ok := e.leases[id]
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
		if err = e.commitLocked(Changes{PutLeases: []LeaseRecord{l}}); err != nil {
			return
		}
		e.armExpiryLocked(l)
		e.emitLocked(events.Event{Type: "lease.renewed", LeaseID: id, DeviceID: l.DeviceID, RequesterID: l.RequesterID, Platform: l.Platform,
			Data: map[string]any{"expiresAt": l.ExpiresAt.Format(time.RFC3339Nano), "ownerId": l.OwnerID}})
		out = l
	})
	return out, err
}

// Release ends a lease now. It returns as soon as the release is committed;
// the device is purged in the background.
func (e *Engine) Release(id string) error {
	var err error
	e.section(func() {
		l, ok := e.leases[id]
		if !ok {
			err = ErrUnknownLease
			return
		}
		err = e.releaseLocked(*l, ReasonReleased)
	})
	e.notifyPositions()
	return err
}

// ReleaseWhere releases every lease for which match returns true.
func (e *Engine) ReleaseWhere(match func(LeaseRecord) bool) []string {
	var ids []string
	e.section(func() {
		for _, id := range sortedLeaseIDs(e.leases) {
			l := *e.leases[id]
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
	dev, ok := e.devices[l.DeviceID]
	if ok {
		d := *dev
		d.State = StateReclaiming
		d.StateSince = now
		d.LastReleasedAt = now
		// Crash-recovery bookkeeping belongs to the lease that just ended.
		d.Health.RecoveryAttempts = 0
		d.Health.RecoveringSince = time.Time{}
		c.PutDevices = []DeviceRecord{d}
		delete(e.obs, d.ID)
	}
	if err := e.commitLocked(c); err != nil {
		return err
	}
	if t, ok := e.timers[l.ID]; ok {
		t.Stop()
		delete(e.timers, l.ID)
	}
	owner := map[string]any{"ownerId": l.OwnerID}
	if reason == ReasonExpired {
		e.emitLocked(events.Event{Type: "lease.expired", LeaseID: l.ID, DeviceID: l.DeviceID, RequesterID: l.RequesterID, Platform: l.Platform, Data: owner})
	}
	e.emitLocked(events.Event{Type: "lease.released", LeaseID: l.ID, DeviceID: l.DeviceID, RequesterID: l.RequesterID, Platform: l.Platform, Reason: reason, Data: owner})
	if ok {
		e.startReclaimLocked(l.DeviceID)
	}
	return nil
}

// startReclaimLocked purges a released device in the background under a
// reclaim claim; afterPurge decides where it goes next. A failed purge
// quarantines the device.
func (e *Engine) startReclaimLocked(id string) {
	e.opLocks[id] = "reclaim"
	d := *e.devices[id]
	drv, ok := e.drivers[d.Platform]
	if !ok {
		delete(e.opLocks, id)
		e.quarantineLocked(id, "no-driver")
		return
	}
	e.goBackground(func(ctx context.Context) {
		err := drv.Reclaim(ctx, d.Ref())
		e.afterPurge(ctx, d, drv, err, func(err error) {
			e.log.Warn("purge failed", "device", id, "err", err)
			e.emitLocked(events.Event{Type: "device.purge-failed", DeviceID: id, Platform: d.Platform, Reason: err.Error()})
			e.quarantineLocked(id, "purge-failed")
		}, "device.reclaimed")
	})
}

// Converge loads the persisted registry and restores the running state:
// every lease's expiry timer from its persisted deadline (a restart proves
// nothing about holders, so nothing is released for it), interrupted
// reclaims restarted, half-provisioned devices dropped, and unleased ready
// devices above the running limit shut down.
func (e *Engine) Converge(ctx context.Context) error {
	snap, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load registry: %w", err)
	}
	var shutdowns []DeviceRecord
	var ferr error
	e.section(func() {
		for _, d := range snap.Devices {
			d := d
			e.devices[d.ID] = &d
		}
		for _, l := range snap.Leases {
			l := l
			e.leases[l.ID] = &l
			e.byRequester[l.RequesterID] = l.ID
		}
		for _, id := range sortedLeaseIDs(e.leases) {
			e.armExpiryLocked(*e.leases[id])
		}
		for _, d := range e.Sorted() {
			switch d.State {
			case StateProvisioning:
				// The provision was interrupted: a device without a handle
				// never reached the driver; one with a handle may exist.
				if d.Handle == "" {
					if err := e.commitLocked(Changes{DeleteDevices: []string{d.ID}}); err != nil {
						ferr = err
					}
				} else if _, err := e.setStateLocked(d.ID, StateShutdown); err != nil {
					ferr = err
				}
			case StateQuarantined:
				// Re-arm the retry from its persisted deadline.
				e.armQuarantineLocked(d)
			case StateReclaiming:
				// Claims never survive a restart, so every reclaiming
				// device found now was orphaned by a crash mid-purge:
				// purge it again from the start.
				e.emitLocked(events.Event{Type: "device.reclaim-recovered", DeviceID: d.ID, Platform: d.Platform})
				e.startReclaimLocked(d.ID)
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	// The registry was written by a daemon that is gone; a ready device may
	// have stopped or vanished meanwhile. Check before anything is granted.
	e.reconcileReady(ctx)
	e.section(func() {
		// Running-capacity convergence: shut down excess warm devices,
		// least recently used first. Leased devices are never touched.
		for e.runningOverLocked("") || e.anyPlatformOverLocked() {
			d := e.pickLocked(StateReady, "", true)
			if d == nil {
				break
			}
			e.opLocks[d.ID] = "converge"
			shutdowns = append(shutdowns, *d)
			e.reservations[d.Platform]-- // count it as already gone while we shut it down
		}
	})
	if ferr != nil {
		return ferr
	}
	for _, d := range shutdowns {
		err := e.drivers[d.Platform].Shutdown(ctx, d.Ref())
		e.section(func() {
			e.reservations[d.Platform]++
			delete(e.opLocks, d.ID)
			if err != nil {
				e.quarantineLocked(d.ID, "shutdown-failed")
			} else {
				_, _ = e.setStateLocked(d.ID, StateShutdown)
			}
		})
	}
	e.resolveWarmTargets(ctx)
	return e.recoverRequests(ctx)
}

// reconcileReady compares unleased ready devices with what their drivers
// see: one that stopped is recorded as shut down, one that vanished is
// forgotten. A driver that cannot list is no evidence and changes nothing.
func (e *Engine) reconcileReady(ctx context.Context) {
	for _, p := range e.Platforms() {
		var any bool
		e.section(func() {
			for _, d := range e.devices {
				any = any || d.Platform == p && d.State == StateReady
			}
		})
		if !any {
			continue
		}
		obs, err := e.drivers[p].ListManaged(ctx)
		if err != nil {
			e.log.Warn("startup: cannot list devices; trusting the registry", "platform", p, "err", err)
			continue
		}
		seen := map[string]RunState{}
		for _, o := range obs {
			seen[o.Handle] = o.Run
		}
		e.section(func() {
			for _, d := range e.Sorted() {
				if d.Platform != p || d.State != StateReady || e.opLocks[d.ID] != "" {
					continue
				}
				run, ok := seen[d.Handle]
				switch {
				case !ok:
					if e.commitLocked(Changes{DeleteDevices: []string{d.ID}}) == nil {
						e.emitLocked(events.Event{Type: "device.vanished", DeviceID: d.ID, Platform: p})
					}
				case run == RunStopped:
					if _, err := e.setStateLocked(d.ID, StateShutdown); err == nil {
						e.emitLocked(events.Event{Type: "device.found-stopped", DeviceID: d.ID, Platform: p})
					}
				}
			}
		})
	}
}

func (e *Engine) anyPlatformOverLocked() bool {
	for p := range e.drivers {
		if e.runningOverLocked(p) {
			return true
		}
	}
	return false
}

// Sorted returns device records sorted by id; callers hold the lock.
func (e *Engine) Sorted() []DeviceRecord {
	out := make([]DeviceRecord, 0, len(e.devices))
	for _, d := range e.devices {
		out = append(out, *d)
	}
	sortDevices(out)
	return out
}

// Stop refuses new work, fails queued requests, stops timers and waits for
// in-flight reclaims to settle (so the pool is left settled), up to ctx.
func (e *Engine) Stop(ctx context.Context) {
	var waiters []*waiter
	e.section(func() {
		e.stopping = true
		for _, w := range e.queue {
			if !w.working {
				waiters = append(waiters, w)
			}
		}
		for _, w := range waiters {
			e.removeLocked(w)
		}
	})
	for _, w := range waiters {
		w.deliver(result{err: ErrStopping})
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		e.bgCancel() // abandon what is left; the next start recovers it
		<-done
	}
	e.mu.Lock()
	for id, t := range e.timers {
		t.Stop()
		delete(e.timers, id)
	}
	for id, t := range e.qtimers {
		t.Stop()
		delete(e.qtimers, id)
	}
	for _, t := range []ports.Timer{e.healthTimer, e.cleanTimer} {
		if t != nil {
			t.Stop()
		}
	}
	e.mu.Unlock()
	e.bgCancel()
	e.reqs.wg.Wait()
}
