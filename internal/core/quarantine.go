package core

import (
	"context"
	"log/slog"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// quarantineBook is the devices taken out of service and the retry of
// the operation that put each there (quarantine.go's policy). Its methods
// run inside the decision section, but for retry, which a timer calls and
// which enters it; it reaches the engine only through deviceWork.
type quarantineBook struct {
	eng    deviceWork
	reg    *registry // the device records and their commits
	halt   *halt     // no retry starts once the engine halts
	policy QuarantinePolicy
	clock  ports.Clock
	log    *slog.Logger
	timers map[string]ports.Timer // retry timers by device id
	// deviceGone settles a pending session reset whose device a retry has
	// just destroyed (resetBook.resetDeviceGoneLocked).
	deviceGone func(d DeviceRecord)
}

// deviceWork is the engine as a book that settles devices sees it: the
// clock, the section, facts and commits, the drivers, and the
// device-operation path (quarantine.go, resetbook.go), satisfied by
// *Engine.
type deviceWork interface {
	now() time.Time
	section(f func())
	emitLocked(ev events.Event)
	commitLocked(c Changes) error
	Driver(platform string) (Driver, bool)
	disposeLocked(id, fact, lock string, extra map[string]any) error
	scheduleLocked()
	startOpLocked(o *deviceOp) error
}

func newQuarantineBook(eng deviceWork, reg *registry, h *halt, p QuarantinePolicy, d Deps, deviceGone func(DeviceRecord)) quarantineBook {
	return quarantineBook{eng: eng, reg: reg, halt: h, policy: p, clock: d.Clock, log: d.Logger, timers: map[string]ports.Timer{}, deviceGone: deviceGone}
}

// stopTimersLocked stops every retry timer (Stop, and Nuke before it
// removes the devices).
func (b *quarantineBook) stopTimersLocked() {
	for id, t := range b.timers {
		t.Stop()
		delete(b.timers, id)
	}
}

// enterLocked takes a device out of service: it stays in the registry
// and keeps counting against running capacity, but no grant path selects it
// (they select by exact state). It remembers op, the operation that failed,
// and arms a retry of exactly that operation on the clock. An error means
// the store refused and nothing changed. causes are the facts that led to
// the quarantine (a purge that failed): they are published first, so an
// observer reads the cause before its consequence.
func (b *quarantineBook) enterLocked(id, reason string, op OpKind, causes ...events.Event) error {
	d, err := b.reg.update(id, func(d *DeviceRecord) {
		d.State = StateQuarantined
		d.Health.QuarantineReason = reason
		d.Health.QuarantineOp = op
		d.Health.QuarantineAttempts = 0
		d.Health.NextRetryAt = b.eng.now().Add(b.policy.delay(0))
	})
	if err != nil {
		b.log.Error("quarantine commit failed", "device", id, "err", err)
		return err
	}
	for _, c := range causes {
		b.eng.emitLocked(c)
	}
	b.eng.emitLocked(events.Event{Type: "device.quarantined", DeviceID: id, Platform: d.Platform, Reason: reason,
		Data: map[string]any{"nextRetryAt": d.Health.NextRetryAt, "op": string(op)}})
	b.armLocked(d)
	return nil
}

func (b *quarantineBook) armLocked(d DeviceRecord) {
	if t, ok := b.timers[d.ID]; ok {
		t.Stop()
	}
	wait := d.Health.NextRetryAt.Sub(b.clock.Now())
	if wait < 0 {
		wait = 0
	}
	id := d.ID
	b.timers[id] = b.clock.AfterFunc(wait, func() { b.retry(id) })
}

// retry runs again the operation that put the device in
// quarantine: a failed destroy is destroyed, a failed shutdown shut down, a
// failed boot booted, and a failed purge (or a device quarantined for what
// doctor saw) purged. Only the purge and the boot can bring a device back
// to ready. Exhausting the retry budget destroys the device, never merely
// shuts it down, because a shut-down device is reusable inventory and would
// quietly bring a dirty device back.
func (b *quarantineBook) retry(id string) {
	b.eng.section(func() {
		delete(b.timers, id)
		d := b.reg.device(id)
		if d == nil || d.State != StateQuarantined || b.reg.opLock(id) != "" || b.halt.halted() {
			return
		}
		if _, ok := b.eng.Driver(d.Platform); !ok {
			return
		}
		var o *deviceOp
		if b.retriesUsed(*d) {
			o = b.abandonOp(*d)
		} else {
			o = b.retryOp(*d)
		}
		if err := b.eng.startOpLocked(o); err != nil {
			b.log.Warn("quarantine retry could not start", "device", id, "err", err)
		}
	})
}

// retryOp builds the retry of d's failed operation.
func (b *quarantineBook) retryOp(d DeviceRecord) *deviceOp {
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
			d, uerr := b.reg.update(id, func(d *DeviceRecord) {
				d.Health.QuarantineAttempts++
				d.Health.NextRetryAt = b.eng.now().Add(b.policy.delay(d.Health.QuarantineAttempts))
			})
			if uerr != nil {
				return uerr
			}
			b.log.Warn("quarantine retry failed", "device", id, "op", o.kind, "attempt", d.Health.QuarantineAttempts, "err", err)
			b.eng.emitLocked(events.Event{Type: "device.quarantine-retry-failed", DeviceID: id, Platform: d.Platform, Reason: err.Error(),
				Data: map[string]any{"attempt": d.Health.QuarantineAttempts, "nextRetryAt": d.Health.NextRetryAt, "op": string(o.kind)}})
			b.armLocked(d)
			b.eng.scheduleLocked()
			return nil
		}
		switch o.kind {
		case OpKindShutdown:
			d, serr := b.reg.setState(id, StateShutdown)
			if serr != nil {
				return serr
			}
			b.eng.emitLocked(events.Event{Type: "device.quarantine-recovered", DeviceID: id, Platform: d.Platform,
				Data: map[string]any{"disposition": string(StateShutdown), "op": string(o.kind)}})
		case OpKindDestroy:
			if cerr := b.eng.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			b.eng.emitLocked(events.Event{Type: "device.quarantine-recovered", DeviceID: id, Platform: o.rec.Platform,
				Data: map[string]any{"disposition": string(StateDeleted), "op": string(o.kind)}})
			b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: o.rec.Platform, Reason: "quarantine-retry"})
			b.deviceGone(o.rec)
		default:
			return b.eng.disposeLocked(id, "device.quarantine-recovered", lock, nil)
		}
		b.eng.scheduleLocked()
		return nil
	}
	return o
}

// abandonOp destroys a device whose retries are exhausted. If even the
// destroy fails the device stays quarantined (still counted, never granted)
// and the destroy is retried after the backoff cap.
func (b *quarantineBook) abandonOp(d DeviceRecord) *deviceOp {
	id := d.ID
	return &deviceOp{kind: OpKindDestroy, lock: "quarantine-retry", id: id,
		run: func(ctx context.Context, o *deviceOp) error { return o.drv.Destroy(ctx, o.rec.Ref()) },
		settle: func(o *deviceOp, err error) error {
			if err != nil {
				b.log.Error("destroying an abandoned quarantined device failed", "device", id, "err", err)
				cur, uerr := b.reg.update(id, func(r *DeviceRecord) { r.Health.NextRetryAt = b.eng.now().Add(b.policy.Cap) })
				if uerr != nil {
					return uerr
				}
				b.armLocked(cur)
				return nil
			}
			if cerr := b.eng.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			b.eng.emitLocked(events.Event{Type: "device.quarantine-abandoned", DeviceID: id, Platform: o.rec.Platform, Reason: o.rec.Health.QuarantineReason,
				Data: map[string]any{"attempts": o.rec.Health.QuarantineAttempts}})
			b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: o.rec.Platform, Reason: "quarantine-abandoned"})
			b.deviceGone(o.rec)
			b.eng.scheduleLocked()
			return nil
		}}
}

// DestroyExhausted reports whether device id is quarantined for a destroy
// that has used up its retries: past this point only the slow abandoned
// retry is left, so a caller that needs its capacity now should not wait.
func (e *Engine) DestroyExhausted(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.reg.devices[id]
	return ok && d.State == StateQuarantined && d.Health.QuarantineOp == OpKindDestroy && e.quarantine.retriesUsed(*d)
}

// retriesUsed reports whether quarantined d has used up its quick
// retries: only the slow abandoned retry is left for it.
func (b *quarantineBook) retriesUsed(d DeviceRecord) bool {
	return d.Health.QuarantineAttempts >= b.policy.Retries
}
