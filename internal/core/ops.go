package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// OpKind names a device operation run by the executor below. It is also
// what a device's persisted intent says was in flight.
type OpKind string

const (
	OpKindProvision OpKind = "provision" // create a device, then boot it
	OpKindBoot      OpKind = "boot"      // boot an existing device
	OpKindShutdown  OpKind = "shutdown"
	OpKindDestroy   OpKind = "destroy"
	OpKindReclaim   OpKind = "reclaim" // purge a released device
	OpKindRecover   OpKind = "recover" // reboot a crashed leased device under its lease
)

// OpInfo describes one device operation to the hooks.
type OpInfo struct {
	Kind     OpKind
	Lock     string // the op lock's label: "evict", "cleanup", "warm", ...
	DeviceID string
	Platform string
	Handle   string
	// Attrs are the device's driver attributes (its UDID, ...), from which
	// the daemon derives the host-wide key of the device.
	Attrs map[string]string
	// LeftDown, in AfterOp, says an operation that is not a teardown left
	// the device shut down all the same: a purge that erased the device
	// and, the planner having no use for it running, did not boot it.
	LeftDown bool
}

// OpHooks is the one place to attach behaviour to every device operation:
// host-global claims (taken before any platform mutation, dropped after
// teardown) and metrics. Both methods run outside the decision section, on
// the goroutine that runs the driver call.
type OpHooks interface {
	// BeforeOp runs right before the driver call. An error fails the
	// operation exactly as a driver error would, so it settles the same way.
	BeforeOp(ctx context.Context, op OpInfo) error
	// AfterOp runs once the driver call has returned, with its (or
	// BeforeOp's) error, just before the settlement and while the device
	// is still locked: for one device, AfterOp of one operation always
	// happens before BeforeOp of the next.
	AfterOp(op OpInfo, err error)
	// Created runs inside a provision, once the new device's handle is
	// recorded and before it boots: a device has no identity to claim
	// before it exists. An error destroys the new device and fails the
	// provision.
	Created(ctx context.Context, op OpInfo) error
}

// ErrHeldElsewhere is wrapped by a hook's refusal when another owner on the
// host holds the device: such a refusal fails the waiting request at once
// rather than sending it to another device it might also find held.
var ErrHeldElsewhere = errors.New("device held by another owner on this host")

// NoOpHooks is the default OpHooks: it allows everything and records nothing.
type NoOpHooks struct{}

func (NoOpHooks) BeforeOp(context.Context, OpInfo) error { return nil }
func (NoOpHooks) AfterOp(OpInfo, error)                  {}
func (NoOpHooks) Created(context.Context, OpInfo) error  { return nil }

// deviceOp is one operation on one device: the executor takes the device's
// op lock and persists the intent (beginOpLocked), runs the driver call
// outside the decision section (run), then settles it inside one (settle)
// and drops the lock. Every site that does device work builds one of these,
// so crash recovery has one rule per kind and the hooks see everything.
type deviceOp struct {
	kind OpKind
	lock string
	id   string
	// mark, when set, adds changes to the intent's commit (a recovery counts
	// its attempt there).
	mark func(d *DeviceRecord)
	// run makes the driver call(s). It may enter sections of its own (a
	// provision records the handle between creating and booting).
	run func(ctx context.Context, o *deviceOp) error
	// settle records the outcome: state, quarantine, events, reschedule.
	// It returns an error only when its first registry commit failed, before
	// it changed anything, so running it again later is safe.
	settle func(o *deviceOp, err error) error

	began time.Time // when it took the device's op lock: the one measurement of its duration
	// down is set by run when the operation left the device shut down
	// (OpInfo.LeftDown).
	down bool

	rec     DeviceRecord // the device as of the intent commit
	drv     Driver
	tries   int  // settlement attempts the store refused
	settled bool // the settlement landed
}

// elapsed is how long the operation has run at now, in milliseconds (for a
// fact's durationMs).
func (o *deviceOp) elapsed(now time.Time) int64 { return now.Sub(o.began).Milliseconds() }

func (o *deviceOp) info() OpInfo {
	return OpInfo{Kind: o.kind, Lock: o.lock, DeviceID: o.id, Platform: o.rec.Platform, Handle: o.rec.Handle, Attrs: o.rec.Attrs}
}

// errBusy refuses an operation on a device another one holds.
type errBusy struct{ lock string }

func (e errBusy) Error() string { return "device busy with " + e.lock }

// beginOpLocked takes the device's op lock and persists the intent before
// any driver call. On error nothing is held and nothing was written. Once
// the engine is stopping no operation begins: whatever is left undone is
// recovered by the next start from the registry.
func (e *Engine) beginOpLocked(o *deviceOp) error {
	if e.halt.stopping {
		return ErrStopping
	}
	cur, ok := e.reg.devices[o.id]
	if !ok {
		return ErrUnknownDevice
	}
	if l := e.reg.opLocks[o.id]; l != "" {
		return errBusy{l}
	}
	drv, ok := e.drivers[cur.Platform]
	if !ok {
		return fmt.Errorf("no driver for platform %q", cur.Platform)
	}
	e.reg.opLocks[o.id] = o.lock
	o.began = e.now()
	o.rec = *cur
	if cur.Intent.Op != o.kind || o.mark != nil {
		d, err := e.reg.update(o.id, func(d *DeviceRecord) {
			d.Intent = DeviceIntent{Op: o.kind, Since: e.now()}
			if o.mark != nil {
				o.mark(d)
			}
		})
		if err != nil {
			delete(e.reg.opLocks, o.id)
			return fmt.Errorf("record %s intent: %w", o.kind, err)
		}
		o.rec = d
	}
	o.drv = drv
	return nil
}

// startOpLocked begins o and runs it in the background.
func (e *Engine) startOpLocked(o *deviceOp) error {
	if err := e.beginOpLocked(o); err != nil {
		return err
	}
	e.goBackground(func(ctx context.Context) { e.execOp(ctx, o) })
	return nil
}

// runOp begins o and runs it on the calling goroutine, returning the
// driver's error (or why it could not begin, with begun false).
func (e *Engine) runOp(ctx context.Context, o *deviceOp) (begun bool, err error) {
	e.section(func() {
		if err = e.beginOpLocked(o); err == nil {
			// Counted like background work, so Stop and a reset's drain
			// wait for it too. Added under the lock after the stopping
			// check, so never after Stop began waiting.
			e.wg.Add(1)
		}
	})
	if err != nil {
		return false, err
	}
	defer e.wg.Done()
	return true, e.execOp(ctx, o)
}

func (e *Engine) execOp(ctx context.Context, o *deviceOp) error {
	info := o.info()
	err := e.hooks.BeforeOp(ctx, info)
	if err == nil {
		err = o.run(ctx, o)
	}
	// AfterOp runs while the device is still locked, so for one device the
	// end of one operation is always seen before the start of the next.
	info.Handle, info.Attrs = o.rec.Handle, o.rec.Attrs // a provision learns them on the way
	info.LeftDown = o.down
	e.hooks.AfterOp(info, err)
	e.section(func() { e.settleOpLocked(o, err) })
	e.notifyPositions()
	return err
}

// settleOpLocked drops the op lock and runs the settlement. If the store
// refuses the settlement, the device stays locked (nothing may act on a
// device whose record lags reality) and the settlement is tried again on
// the quarantine backoff; a restart meanwhile recovers from the intent.
func (e *Engine) settleOpLocked(o *deviceOp, opErr error) {
	delete(e.reg.opLocks, o.id)
	// Whatever the settlement does next, an operation waiting for this
	// device (a resource call) looks again, and so does a refused golden
	// build (a shutdown or destroy frees the room it was refused).
	defer e.reg.signalFreed()
	e.goldens.recheckLocked()
	if serr := o.settle(o, opErr); serr != nil {
		e.reg.opLocks[o.id] = o.lock
		wait := e.cfg.Quarantine.delay(o.tries)
		o.tries++
		e.log.Error("settling a device operation failed; retrying", "device", o.id, "op", o.kind, "retryIn", wait, "err", serr)
		if t, ok := e.reg.stimers[o.id]; ok {
			t.Stop()
		}
		e.reg.stimers[o.id] = e.clock.AfterFunc(wait, func() {
			e.section(func() {
				delete(e.reg.stimers, o.id)
				// Once stopping, the store may be closing: the intent on
				// disk lets the next start finish the job instead.
				if e.halt.stopping || e.reg.opLocks[o.id] != o.lock || o.settled {
					return
				}
				e.settleOpLocked(o, opErr)
			})
			e.notifyPositions()
		})
		return
	}
	o.settled = true
	if next, ok := e.reg.deferred[o.id]; ok && e.reg.opLocks[o.id] == "" {
		// An operation that had to wait for this one (a purge behind a
		// crash recovery) runs now, under its own lock and intent.
		delete(e.reg.deferred, o.id)
		if err := e.startOpLocked(next); err != nil {
			e.log.Warn("a deferred device operation could not start", "device", o.id, "op", next.kind, "err", err)
		}
		return
	}
	if d, ok := e.reg.devices[o.id]; ok && d.Intent != (DeviceIntent{}) && e.reg.opLocks[o.id] == "" {
		// The settlement changed nothing on this record (a failure that
		// leaves the state as it was), so clear the intent on its own.
		if _, err := e.reg.update(o.id, func(*DeviceRecord) {}); err != nil {
			e.log.Warn("clear a settled intent", "device", o.id, "err", err)
		}
	}
}

// runUnrecorded runs driver work on a device that has no record (an orphan
// in simlock's root), so there is nothing to lock or settle; it still
// passes the hooks, so a claim or a metric misses no platform mutation.
func (e *Engine) runUnrecorded(ctx context.Context, info OpInfo, f func(ctx context.Context) error) error {
	err := e.hooks.BeforeOp(ctx, info)
	if err == nil {
		err = f(ctx)
	}
	e.hooks.AfterOp(info, err)
	return err
}

// startOrDeferOpLocked starts o, or defers it behind the operation that
// holds its device.
func (e *Engine) startOrDeferOpLocked(o *deviceOp) error {
	if e.reg.opLocks[o.id] != "" {
		// Queued behind the operation holding the device: a later
		// deferral for the same device replaces an earlier one.
		e.reg.deferred[o.id] = o
		return nil
	}
	return e.startOpLocked(o)
}

// dropLocked forgets a device that has nothing behind it (a provision that
// failed or was compensated). If the store refuses the delete the record is
// forgotten in memory anyway: what stays on disk is a provisioning record
// without a handle, which the next start drops by rule.
func (e *Engine) dropLocked(id string) {
	if err := e.commitLocked(Changes{DeleteDevices: []string{id}}); err != nil {
		e.log.Error("forget a device that was never created", "device", id, "err", err)
		delete(e.reg.devices, id)
	}
}

// shutdownOp shuts a device down and records it shut down; a failure
// quarantines it for a shutdown retry. done runs after a successful
// settlement.
func (e *Engine) shutdownOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp {
	return &deviceOp{kind: OpKindShutdown, lock: lock, id: id,
		run: func(ctx context.Context, o *deviceOp) error { return o.drv.Shutdown(ctx, o.rec.Ref()) },
		settle: func(o *deviceOp, err error) error {
			if err != nil {
				e.log.Warn("shutdown failed", "device", id, "lock", lock, "err", err)
				return e.quarantine.enterLocked(id, failReason, OpKindShutdown)
			}
			d, serr := e.reg.setState(id, StateShutdown)
			if serr != nil {
				return serr
			}
			if done != nil {
				done(d)
			}
			e.scheduleLocked()
			return nil
		}}
}

// destroyOp deletes a device and forgets it; a failure quarantines it for a
// destroy retry. done runs after a successful settlement.
func (e *Engine) destroyOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp {
	return &deviceOp{kind: OpKindDestroy, lock: lock, id: id,
		run: func(ctx context.Context, o *deviceOp) error {
			if o.rec.Handle == "" {
				return nil // never reached the driver
			}
			return o.drv.Destroy(ctx, o.rec.Ref())
		},
		settle: func(o *deviceOp, err error) error {
			if err != nil {
				e.log.Warn("destroy failed", "device", id, "lock", lock, "err", err)
				return e.quarantine.enterLocked(id, failReason, OpKindDestroy)
			}
			if cerr := e.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			if done != nil {
				done(o.rec)
			}
			e.scheduleLocked()
			return nil
		}}
}
