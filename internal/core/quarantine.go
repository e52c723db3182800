package core

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// updateLocked applies f to a copy of device id and commits it. Leaving the
// quarantined state clears the quarantine bookkeeping, so no code path can
// forget to.
func (e *Engine) updateLocked(id string, f func(d *DeviceRecord)) (DeviceRecord, error) {
	cur, ok := e.devices[id]
	if !ok {
		return DeviceRecord{}, ErrUnknownDevice
	}
	d := *cur
	f(&d)
	if d.State != cur.State {
		d.StateSince = e.now()
	}
	if d.State != StateQuarantined {
		d.Health.QuarantineReason, d.Health.QuarantineAttempts = "", 0
		d.Health.NextRetryAt = time.Time{}
	}
	if err := e.commitLocked(Changes{PutDevices: []DeviceRecord{d}}); err != nil {
		return DeviceRecord{}, err
	}
	return d, nil
}

// quarantineLocked takes a device out of service: it stays in the registry
// and keeps counting against running capacity, but no grant path selects it
// (they select by exact state). A retry of the triggering operation is
// armed on the clock.
func (e *Engine) quarantineLocked(id, reason string) {
	d, err := e.updateLocked(id, func(d *DeviceRecord) {
		d.State = StateQuarantined
		d.Health.QuarantineReason = reason
		d.Health.QuarantineAttempts = 0
		d.Health.NextRetryAt = e.now().Add(e.cfg.Quarantine.delay(0))
	})
	if err != nil {
		e.log.Error("quarantine commit failed", "device", id, "err", err)
		return
	}
	e.emitLocked(events.Event{Type: "device.quarantined", DeviceID: id, Platform: d.Platform, Reason: reason,
		Data: map[string]any{"nextRetryAt": d.Health.NextRetryAt}})
	e.armQuarantineLocked(d)
}

func (e *Engine) armQuarantineLocked(d DeviceRecord) {
	if t, ok := e.qtimers[d.ID]; ok {
		t.Stop()
	}
	wait := d.Health.NextRetryAt.Sub(e.clock.Now())
	if wait < 0 {
		wait = 0
	}
	id := d.ID
	e.qtimers[id] = e.clock.AfterFunc(wait, func() { e.retryQuarantine(id) })
}

// retryQuarantine re-runs the purge of a quarantined device. Success puts it
// back in service; exhausting the retry budget destroys it, never merely
// shuts it down, because a shut-down device is reusable inventory and would
// quietly bring a dirty device back.
func (e *Engine) retryQuarantine(id string) {
	e.section(func() {
		delete(e.qtimers, id)
		d, ok := e.devices[id]
		if !ok || d.State != StateQuarantined || e.opLocks[id] != "" || e.stopping || e.maintenance {
			return
		}
		drv, ok := e.drivers[d.Platform]
		if !ok {
			return
		}
		e.opLocks[id] = "quarantine-retry"
		rec := *d
		exhausted := rec.Health.QuarantineAttempts >= e.cfg.Quarantine.Retries
		e.goBackground(func(ctx context.Context) {
			if exhausted {
				e.abandonQuarantined(ctx, rec, drv)
				return
			}
			err := drv.Reclaim(ctx, rec.Ref())
			e.afterPurge(ctx, rec, drv, err, func(err error) {
				d, uerr := e.updateLocked(id, func(d *DeviceRecord) {
					d.Health.QuarantineAttempts++
					d.Health.NextRetryAt = e.now().Add(e.cfg.Quarantine.delay(d.Health.QuarantineAttempts))
				})
				if uerr != nil {
					return
				}
				e.log.Warn("quarantine retry failed", "device", id, "attempt", d.Health.QuarantineAttempts, "err", err)
				e.emitLocked(events.Event{Type: "device.quarantine-retry-failed", DeviceID: id, Platform: d.Platform, Reason: err.Error(),
					Data: map[string]any{"attempt": d.Health.QuarantineAttempts, "nextRetryAt": d.Health.NextRetryAt}})
				e.armQuarantineLocked(d)
			}, "device.quarantine-recovered")
		})
	})
}

// abandonQuarantined destroys a device whose retries are exhausted. If even
// the destroy fails the device stays quarantined (still counted, never
// granted) and the destroy is retried after the backoff cap.
func (e *Engine) abandonQuarantined(ctx context.Context, d DeviceRecord, drv Driver) {
	err := drv.Destroy(ctx, d.Ref())
	e.section(func() {
		delete(e.opLocks, d.ID)
		if err != nil {
			e.log.Error("destroying an abandoned quarantined device failed", "device", d.ID, "err", err)
			if cur, uerr := e.updateLocked(d.ID, func(r *DeviceRecord) { r.Health.NextRetryAt = e.now().Add(e.cfg.Quarantine.Cap) }); uerr == nil {
				e.armQuarantineLocked(cur)
			}
			return
		}
		if cerr := e.commitLocked(Changes{DeleteDevices: []string{d.ID}}); cerr != nil {
			e.log.Error("forget destroyed device", "device", d.ID, "err", cerr)
			return
		}
		e.emitLocked(events.Event{Type: "device.quarantine-abandoned", DeviceID: d.ID, Platform: d.Platform, Reason: d.Health.QuarantineReason,
			Data: map[string]any{"attempts": d.Health.QuarantineAttempts}})
		e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: d.ID, Platform: d.Platform, Reason: "quarantine-abandoned"})
		e.scheduleLocked()
	})
	e.notifyPositions()
}

// afterPurge settles a purge the caller ran on claimed device d. On success
// the device returns to ready when running capacity permits and is shut
// down otherwise; on failure fail runs inside the decision section. The
// claim is dropped in every case and acquisition re-run, so a waiter for
// exactly this device is granted the moment the purge settles.
func (e *Engine) afterPurge(ctx context.Context, d DeviceRecord, drv Driver, err error, fail func(error), fact string) {
	id := d.ID
	shutdown := false
	e.section(func() {
		if err != nil {
			delete(e.opLocks, id)
			fail(err)
			e.scheduleLocked()
			return
		}
		if e.runningOverLocked(d.Platform) {
			shutdown = true // keep the claim while we shut it down
			return
		}
		delete(e.opLocks, id)
		if _, uerr := e.updateLocked(id, func(r *DeviceRecord) { r.State = StateReady }); uerr == nil {
			e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: d.Platform, Data: map[string]any{"disposition": string(StateReady)}})
		}
		e.scheduleLocked()
	})
	if shutdown {
		serr := drv.Shutdown(ctx, d.Ref())
		e.section(func() {
			delete(e.opLocks, id)
			if serr != nil {
				e.log.Warn("shutdown after purge failed", "device", id, "err", serr)
				e.quarantineLocked(id, "shutdown-failed")
			} else if _, uerr := e.updateLocked(id, func(r *DeviceRecord) { r.State = StateShutdown }); uerr == nil {
				e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: d.Platform, Data: map[string]any{"disposition": string(StateShutdown)}})
			}
			e.scheduleLocked()
		})
	}
	e.notifyPositions()
}
