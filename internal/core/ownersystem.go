package core

import (
	"context"
	"fmt"
	"log/slog"

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

// ownerSystemBook holds the owner-system rules: which marked device is
// nobody's and how an owner system's device is retired. It keeps no state
// of its own (the mark is on the device record); its Locked methods run
// only inside the decision section, and it reaches the engine only
// through ownerWork.
type ownerSystemBook struct {
	eng  ownerWork
	reg  *registry
	pool *pool
	log  *slog.Logger
}

// ownerWork is the engine as the owner-system rules see it: the section,
// facts, and the device-operation path, satisfied by *Engine.
type ownerWork interface {
	section(f func())
	emitLocked(ev events.Event)
	startOpLocked(o *deviceOp) error
	runOp(ctx context.Context, o *deviceOp) (begun bool, err error)
	destroyOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	Sorted() []DeviceRecord
}

// retireOp is the destroy of an owner-system device, reported as
// device.destroyed with reason.
func (b *ownerSystemBook) retireOp(id, reason string) *deviceOp {
	return b.eng.destroyOp(id, "retire", "destroy-failed", func(d DeviceRecord) {
		b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: d.Platform, Reason: reason,
			Data: map[string]any{"ownerSystem": d.OwnerSystem}})
	})
}

// retireUnwantedLocked destroys device id when its preparation's request
// left before the grant and the device is marked (finishWorkLocked). A
// stopping engine begins nothing: the next start finds the device and
// applies the same rule (retireUnwanted).
func (b *ownerSystemBook) retireUnwantedLocked(id string) {
	d, ok := b.reg.devices[id]
	if !ok || !b.pool.unwanted(d) {
		return
	}
	if err := b.eng.startOpLocked(b.retireOp(id, "preparation-abandoned")); err != nil {
		b.log.Warn("destroy an abandoned preparation's device", "device", id, "err", err)
	}
}

// retireUnwanted is the startup half of the rule, run by Converge once
// interrupted operations are recovered and before anything is granted: a
// marked device never granted was being prepared for a request the
// restart ended (every pending request fails at a restart).
func (b *ownerSystemBook) retireUnwanted(ctx context.Context) {
	var ops []*deviceOp
	b.eng.section(func() {
		for _, d := range b.eng.Sorted() {
			if cur := b.reg.devices[d.ID]; cur != nil && b.pool.unwanted(cur) {
				ops = append(ops, b.retireOp(d.ID, "preparation-ended"))
			}
		}
	})
	for _, o := range ops {
		if _, err := b.eng.runOp(ctx, o); err != nil {
			b.log.Warn("startup: destroying an ended preparation's device failed", "device", o.id, "err", err)
		}
	}
}

// OwnerSystemDesk is the owner-system rules' counter: an owner system (the
// session broker, internal/sessions) retires one of its own idle devices
// to keep its device budget. Its entry enters the decision section as the
// engine's own entries do. Engine.OwnerSystems hands one out; the zero
// value is not usable.
type OwnerSystemDesk struct{ e *Engine }

// OwnerSystems is the owner-system rules' desk (internal/sessions uses it).
func (e *Engine) OwnerSystems() OwnerSystemDesk { return OwnerSystemDesk{e} }

// RetireIdle begins the destroy of an idle device (ready or shut down,
// unleased, no operation in flight) of owner system sys, for that
// system's own budget. The device leaves the registry once the driver
// confirmed its destruction; a failed destroy quarantines it for a retry
// (the caller watches the registry, not this call).
func (o OwnerSystemDesk) RetireIdle(id, sys string) error {
	e := o.e
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
		err = e.startOpLocked(e.owners.retireOp(id, "retired"))
	})
	return err
}
