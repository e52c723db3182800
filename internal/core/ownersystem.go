package core

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/core/events"
)

// Owner-system devices (ADR 0063). A device made for a request that
// carries an owner-system mark (Request.OwnerSystem) keeps the mark for
// its whole life: the general pool never uses it (pool.general)
// and only requests of the same mark are served it. The core knows no
// system by name; it applies two rules that follow from the mark alone:
//
//   - a marked device that was never granted and that nobody waits for
//     any more (its request was abandoned, cancelled or cut off by a
//     restart) is nobody's: its system asked for it for one request only,
//     so it is destroyed rather than left idle;
//   - the owner system may retire one of its idle devices (RetireIdle),
//     to keep its own device budget.

// retireOp is the destroy of an owner-system device, reported as
// device.destroyed with reason.
func (e *Engine) retireOp(id, reason string) *deviceOp {
	return e.destroyOp(id, "retire", "destroy-failed", func(d DeviceRecord) {
		e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: d.Platform, Reason: reason,
			Data: map[string]any{"ownerSystem": d.OwnerSystem}})
	})
}

// retireUnwantedLocked destroys device id when its preparation's request
// left before the grant and the device is marked (finishWorkLocked). A
// stopping engine begins nothing: the next start finds the device and
// applies the same rule (retireUnwanted).
func (e *Engine) retireUnwantedLocked(id string) {
	d, ok := e.reg.devices[id]
	if !ok || !e.pool.unwanted(d) {
		return
	}
	if err := e.startOpLocked(e.retireOp(id, "preparation-abandoned")); err != nil {
		e.log.Warn("destroy an abandoned preparation's device", "device", id, "err", err)
	}
}

// retireUnwanted is the startup half of the rule, run by Converge once
// interrupted operations are recovered and before anything is granted: a
// marked device never granted was being prepared for a request the
// restart ended (every pending request fails at a restart).
func (e *Engine) retireUnwanted(ctx context.Context) {
	var ops []*deviceOp
	e.section(func() {
		for _, d := range e.Sorted() {
			if cur := e.reg.devices[d.ID]; cur != nil && e.pool.unwanted(cur) {
				ops = append(ops, e.retireOp(d.ID, "preparation-ended"))
			}
		}
	})
	for _, o := range ops {
		if _, err := e.runOp(ctx, o); err != nil {
			e.log.Warn("startup: destroying an ended preparation's device failed", "device", o.id, "err", err)
		}
	}
}

// RetireIdle begins the destroy of an idle device (ready or shut down,
// unleased, no operation in flight) of owner system sys, for that
// system's own budget. The device leaves the registry once the driver
// confirmed its destruction; a failed destroy quarantines it for a retry
// (the caller watches the registry, not this call).
func (e *Engine) RetireIdle(id, sys string) error {
	if sys == "" {
		return fmt.Errorf("%w: only an owner system's device can be retired", ErrBadRequest)
	}
	var err error
	e.section(func() {
		d, ok := e.reg.devices[id]
		switch {
		case !ok:
			return // gone already
		case !e.pool.of(d, sys) || e.reg.leased(id):
			err = fmt.Errorf("%w: device %s is not an idle device of %s", ErrBadRequest, id, sys)
			return
		}
		err = e.startOpLocked(e.retireOp(id, "retired"))
	})
	return err
}
