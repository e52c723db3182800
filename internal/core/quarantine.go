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
		d.Health.QuarantineOp = ""
		d.Health.NextRetryAt = time.Time{}
	}
	if e.opLocks[id] == "" {
		// No operation holds the device, so none is in flight: any commit
		// made now is a settlement (or a plain registry change) and the
		// intent is over.
		d.Intent = DeviceIntent{}
	}
	if err := e.commitLocked(Changes{PutDevices: []DeviceRecord{d}}); err != nil {
		return DeviceRecord{}, err
	}
	return d, nil
}

// quarantineLocked takes a device out of service: it stays in the registry
// and keeps counting against running capacity, but no grant path selects it
// (they select by exact state). It remembers op, the operation that failed,
// and arms a retry of exactly that operation on the clock. An error means
// the store refused and nothing changed. causes are the facts that led to
// the quarantine (a purge that failed): they are published first, so an
// observer reads the cause before its consequence.
func (e *Engine) quarantineLocked(id, reason string, op OpKind, causes ...events.Event) error {
	d, err := e.updateLocked(id, func(d *DeviceRecord) {
		d.State = StateQuarantined
		d.Health.QuarantineReason = reason
		d.Health.QuarantineOp = op
		d.Health.QuarantineAttempts = 0
		d.Health.NextRetryAt = e.now().Add(e.cfg.Quarantine.delay(0))
	})
	if err != nil {
		e.log.Error("quarantine commit failed", "device", id, "err", err)
		return err
	}
	for _, c := range causes {
		e.emitLocked(c)
	}
	e.emitLocked(events.Event{Type: "device.quarantined", DeviceID: id, Platform: d.Platform, Reason: reason,
		Data: map[string]any{"nextRetryAt": d.Health.NextRetryAt, "op": string(op)}})
	e.armQuarantineLocked(d)
	return nil
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

// retryQuarantine runs again the operation that put the device in
// quarantine: a failed destroy is destroyed, a failed shutdown shut down, a
// failed boot booted, and a failed purge (or a device quarantined for what
// doctor saw) purged. Only the purge and the boot can bring a device back
// to ready. Exhausting the retry budget destroys the device, never merely
// shuts it down, because a shut-down device is reusable inventory and would
// quietly bring a dirty device back.
func (e *Engine) retryQuarantine(id string) {
	e.section(func() {
		delete(e.qtimers, id)
		d, ok := e.devices[id]
		if !ok || d.State != StateQuarantined || e.opLocks[id] != "" || e.stopping || e.maintenance {
			return
		}
		if _, ok := e.drivers[d.Platform]; !ok {
			return
		}
		var o *deviceOp
		if e.retriesUsed(*d) {
			o = e.abandonOp(*d)
		} else {
			o = e.retryOp(*d)
		}
		if err := e.startOpLocked(o); err != nil {
			e.log.Warn("quarantine retry could not start", "device", id, "err", err)
		}
	})
}

// retryOp builds the retry of d's failed operation.
func (e *Engine) retryOp(d DeviceRecord) *deviceOp {
	id := d.ID
	const lock = "quarantine-retry"
	kind := d.Health.QuarantineOp
	o := &deviceOp{kind: kind, lock: lock, id: id}
	switch kind {
	case OpKindShutdown:
		o.run = func(ctx context.Context, o *deviceOp) error { return o.drv.Shutdown(ctx, o.rec.Ref()) }
	case OpKindDestroy:
		o.run = func(ctx context.Context, o *deviceOp) error { return o.drv.Destroy(ctx, o.rec.Ref()) }
	case OpKindBoot:
		o.run = func(ctx context.Context, o *deviceOp) error { return o.drv.MakeReady(ctx, o.rec.Ref()) }
	default:
		o.kind = OpKindReclaim
		o.run = func(ctx context.Context, o *deviceOp) error { return o.drv.Reclaim(ctx, o.rec.Ref()) }
	}
	o.settle = func(o *deviceOp, err error) error {
		if err != nil {
			d, uerr := e.updateLocked(id, func(d *DeviceRecord) {
				d.Health.QuarantineAttempts++
				d.Health.NextRetryAt = e.now().Add(e.cfg.Quarantine.delay(d.Health.QuarantineAttempts))
			})
			if uerr != nil {
				return uerr
			}
			e.log.Warn("quarantine retry failed", "device", id, "op", o.kind, "attempt", d.Health.QuarantineAttempts, "err", err)
			e.emitLocked(events.Event{Type: "device.quarantine-retry-failed", DeviceID: id, Platform: d.Platform, Reason: err.Error(),
				Data: map[string]any{"attempt": d.Health.QuarantineAttempts, "nextRetryAt": d.Health.NextRetryAt, "op": string(o.kind)}})
			e.armQuarantineLocked(d)
			e.scheduleLocked()
			return nil
		}
		switch o.kind {
		case OpKindShutdown:
			d, serr := e.setStateLocked(id, StateShutdown)
			if serr != nil {
				return serr
			}
			e.emitLocked(events.Event{Type: "device.quarantine-recovered", DeviceID: id, Platform: d.Platform,
				Data: map[string]any{"disposition": string(StateShutdown), "op": string(o.kind)}})
		case OpKindDestroy:
			if cerr := e.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			e.emitLocked(events.Event{Type: "device.quarantine-recovered", DeviceID: id, Platform: o.rec.Platform,
				Data: map[string]any{"disposition": string(StateDeleted), "op": string(o.kind)}})
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: o.rec.Platform, Reason: "quarantine-retry"})
			e.rs.resetDeviceGoneLocked(o.rec)
		default:
			return e.disposeLocked(id, "device.quarantine-recovered", lock, nil)
		}
		e.scheduleLocked()
		return nil
	}
	return o
}

// abandonOp destroys a device whose retries are exhausted. If even the
// destroy fails the device stays quarantined (still counted, never granted)
// and the destroy is retried after the backoff cap.
func (e *Engine) abandonOp(d DeviceRecord) *deviceOp {
	id := d.ID
	return &deviceOp{kind: OpKindDestroy, lock: "quarantine-retry", id: id,
		run: func(ctx context.Context, o *deviceOp) error { return o.drv.Destroy(ctx, o.rec.Ref()) },
		settle: func(o *deviceOp, err error) error {
			if err != nil {
				e.log.Error("destroying an abandoned quarantined device failed", "device", id, "err", err)
				cur, uerr := e.updateLocked(id, func(r *DeviceRecord) { r.Health.NextRetryAt = e.now().Add(e.cfg.Quarantine.Cap) })
				if uerr != nil {
					return uerr
				}
				e.armQuarantineLocked(cur)
				return nil
			}
			if cerr := e.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			e.emitLocked(events.Event{Type: "device.quarantine-abandoned", DeviceID: id, Platform: o.rec.Platform, Reason: o.rec.Health.QuarantineReason,
				Data: map[string]any{"attempts": o.rec.Health.QuarantineAttempts}})
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: o.rec.Platform, Reason: "quarantine-abandoned"})
			e.rs.resetDeviceGoneLocked(o.rec)
			e.scheduleLocked()
			return nil
		}}
}

// disposeLocked settles a device that has just been purged or booted
// outside any lease: back to ready when running capacity permits, shut down
// (as a follow-up operation under lock) otherwise. fact is emitted with the
// disposition. The planner runs again either way, so a waiter for exactly
// this device is granted the moment it settles.
func (e *Engine) disposeLocked(id, fact, lock string, extra map[string]any) error {
	d, ok := e.devices[id]
	if !ok {
		return nil
	}
	p := d.Platform
	if e.runningOverLocked(p) {
		o := e.shutdownOp(id, lock, "shutdown-failed", func(d DeviceRecord) {
			e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: p, Data: withData(extra, "disposition", string(StateShutdown))})
		})
		if err := e.startOpLocked(o); err == nil {
			return nil
		}
		// Stopping: nothing new begins, so keep the device warm instead.
	}
	if _, err := e.updateLocked(id, func(r *DeviceRecord) { r.State = StateReady }); err != nil {
		return err
	}
	e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: p, Data: withData(extra, "disposition", string(StateReady))})
	e.scheduleLocked()
	return nil
}

// withData is a copy of extra with key set, for a fact's data.
func withData(extra map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(extra)+1)
	for k, x := range extra {
		out[k] = x
	}
	out[key] = v
	return out
}

// DestroyExhausted reports whether device id is quarantined for a destroy
// that has used up its retries: past this point only the slow abandoned
// retry is left, so a caller that needs its capacity now should not wait.
func (e *Engine) DestroyExhausted(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.devices[id]
	return ok && d.State == StateQuarantined && d.Health.QuarantineOp == OpKindDestroy && e.retriesUsed(*d)
}

// retriesUsed reports whether quarantined d has used up its quick
// retries: only the slow abandoned retry is left for it.
func (e *Engine) retriesUsed(d DeviceRecord) bool {
	return d.Health.QuarantineAttempts >= e.cfg.Quarantine.Retries
}
