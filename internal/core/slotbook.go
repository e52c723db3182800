package core

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/simlock/simlock/internal/core/events"
)

// Managed slots (ADR 0049) take devices out of the general pool for good:
// a device assigned to a slot, or in the managed free pool, is granted,
// booted, evicted, warmed, cleaned and swept by nobody but its slot's own
// execution. The daemon derives the map from the host registry (as it does
// the foreign claims); the engine only reads this in-memory copy.

// FreePoolSlot is the assignment label of a device in the managed free
// pool: no slot's execution may use it until a slot adopts it.
const FreePoolSlot = "free-pool"

// slotBook is which devices managed slots hold: the daemon's map (device
// id -> slot key, or FreePoolSlot), whether that map is known at all, the
// devices ProvisionAssigned made that the map does not name yet, and the
// acquisitions in flight that pin a slot's device. Its methods run only
// inside the decision section, as every book's do.
type slotBook struct {
	assigned map[string]string // device id -> managed slot key holding it (SetAssigned)
	// unknown: the daemon has not yet handed in a map of the slots'
	// devices it could read (SetAssignedUnknown); the pool gives out
	// nothing until then.
	unknown bool
	made    map[string]string // devices ProvisionAssigned made, by slot key, until forgotten
	pins    map[string]int    // slot key -> acquisitions in flight (PinSlot): its device does not yield
}

func newSlotBook() slotBook {
	return slotBook{made: map[string]string{}, pins: map[string]int{}}
}

// set replaces the map, ending an unknown one. It reports whether anything
// changed and whether the map was unknown until now.
func (b *slotBook) set(held map[string]string) (changed, wasUnknown bool) {
	if !b.unknown && maps.Equal(b.assigned, held) {
		return false, false
	}
	wasUnknown = b.unknown
	b.assigned, b.unknown = maps.Clone(held), false
	return true, wasUnknown
}

// slotOf reports the slot key holding device id, if any: one the daemon
// set, or one ProvisionAssigned made and the registry has not reported
// back yet.
func (b *slotBook) slotOf(id string) (string, bool) {
	if s, ok := b.assigned[id]; ok {
		return s, true
	}
	s, ok := b.made[id]
	return s, ok
}

// pin and unpin count the acquisitions of slot in flight (PinSlot).
func (b *slotBook) pin(slot string) { b.pins[slot]++ }

func (b *slotBook) unpin(slot string) {
	if b.pins[slot]--; b.pins[slot] <= 0 {
		delete(b.pins, slot)
	}
}

// pinned reports whether an acquisition of slot is in flight.
func (b *slotBook) pinned(slot string) bool { return b.pins[slot] > 0 }

// ErrAssigned refuses general work on a device a managed slot holds.
var ErrAssigned = errors.New("device assigned to a managed slot")

// ErrAssignedUnknown refuses a request while the engine has no map of the
// devices managed slots hold (SetAssignedUnknown): any idle device might be
// a slot's, and a device of unknown assignment is never handed out as free.
var ErrAssignedUnknown = errors.New("which devices managed slots hold is not known yet, so no device is handed out")

// SlotDesk is the slot book's counter: the managed-slot system
// (internal/slots) tells the engine which devices its slots hold and has
// the engine provision, stop, destroy and make room for them. Each entry
// enters the decision section as the engine's own entries do. Engine.Slots
// hands one out; the zero value is not usable.
type SlotDesk struct{ e *Engine }

// Slots is the slot book's desk (internal/slots uses it).
func (e *Engine) Slots() SlotDesk { return SlotDesk{e} }

// SetAssigned replaces the map of devices managed slots hold (device id ->
// slot key, or FreePoolSlot). It ends a SetAssignedUnknown.
func (s SlotDesk) SetAssigned(held map[string]string) {
	e := s.e
	e.section(func() {
		changed, wasUnknown := e.slots.set(held)
		if !changed {
			return
		}
		if wasUnknown {
			// Startup's destroy of ended preparations' devices judged none
			// idle while the map was unknown: judge them now.
			for _, d := range e.Sorted() {
				e.owners.retireUnwantedLocked(d.ID)
			}
		}
		e.scheduleLocked()
	})
	e.notifyPositions()
}

// SetAssignedUnknown says no map of the slots' devices exists yet: the
// daemon has not read the slot tables, or could never read them. Until
// the next SetAssigned no device counts as idle inventory (nothing is
// granted, swept or counted warm), no warm device is made, and every
// request is refused with ErrAssignedUnknown. A daemon whose later read
// fails keeps its last map instead of calling this.
func (s SlotDesk) SetAssignedUnknown() {
	e := s.e
	e.section(func() { e.slots.unknown = true })
}

// AssignedSlot reports the slot key holding device id, if any: one the
// daemon set, or one ProvisionAssigned made and the registry has not
// reported back yet.
func (s SlotDesk) AssignedSlot(id string) (string, bool) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots.slotOf(id)
}

// checkAssigned refuses, at once rather than by queueing forever, a
// targeted request for a device a managed slot holds (slotOf: the
// engine's AssignedSlot), unless it is that slot's own execution.
func checkAssigned(id, slot string, slotOf func(id string) (string, bool)) error {
	held, ok := slotOf(id)
	if !ok || (slot != "" && slot != FreePoolSlot && held == slot) {
		return nil
	}
	if held == FreePoolSlot {
		return fmt.Errorf("%w: %s is in the managed free pool", ErrAssigned, id)
	}
	return fmt.Errorf("%w: %s", ErrAssigned, id)
}

// ProvisionAssigned creates and boots a new device for slot (a slot key),
// named name when the driver can, and returns it ready and idle. The device is marked as the slot's before
// the decision section that records it ends, so the general pool never
// sees it. recorded runs with the new device's id as soon as its record is
// durable and before the driver creates anything, so the caller's journal
// can name the device across a crash (a restart finds it by that id, or
// the core's recovery drops an interrupted provision).
func (s SlotDesk) ProvisionAssigned(ctx context.Context, req SpecRequest, slot, name string, recorded func(id string) error) (DeviceRecord, error) {
	e := s.e
	drv, ok := e.drivers[req.Platform]
	if !ok {
		return DeviceRecord{}, NewSpecError(ErrUnsupportedPlatform, fmt.Sprintf("no driver serves platform %q", req.Platform), "platforms", e.Platforms())
	}
	spec, err := drv.ResolveSpec(ctx, req)
	if err != nil {
		return DeviceRecord{}, err
	}
	spec.NameHint = name
	var id string
	e.section(func() {
		if e.halt.stopping {
			err = ErrStopping
			return
		}
		if id = e.startProvisionLocked(nil, spec); id == "" {
			err = fmt.Errorf("%w: could not start the provision", ErrDeviceBusy)
			return
		}
		e.slots.made[id] = slot
	})
	if err != nil {
		return DeviceRecord{}, err
	}
	var rerr error
	if recorded != nil {
		rerr = recorded(id)
	}
	rec, err := e.slots.waitOpSettled(ctx, e.section, &e.reg, id, "provision")
	if err == nil && rerr != nil {
		// The caller could not journal the device: it gets the record
		// (it must destroy it) with the reason.
		return rec, fmt.Errorf("journal the new slot device: %w", rerr)
	}
	return rec, err
}

// waitOpSettled waits for the operation on id to settle and returns the
// device, or an error if the device is gone (a failed provision drops it)
// or not ready. It waits outside the decision section and reads the
// device inside it (section).
func (b *slotBook) waitOpSettled(ctx context.Context, section func(func()), reg *registry, id, what string) (DeviceRecord, error) {
	for {
		var wait chan struct{}
		var rec DeviceRecord
		var gone bool
		section(func() {
			d, ok := reg.devices[id]
			switch {
			case !ok:
				gone = true
				delete(b.made, id)
			case reg.opLocks[id] != "":
				wait = reg.opFreed
			default:
				rec = *d
			}
		})
		switch {
		case gone:
			return DeviceRecord{}, &DeviceFailedError{Phase: what, Err: fmt.Errorf("the %s of the slot device failed", what)}
		case wait == nil:
			if rec.State != StateReady {
				return rec, &DeviceFailedError{Phase: what, Err: fmt.Errorf("the slot device is %s after its %s", rec.State, what)}
			}
			return rec, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return DeviceRecord{}, ctx.Err()
		}
	}
}

// DestroyAssigned deletes one idle device of a slot (not leased, no
// operation in flight) through the op executor, so the hooks and the host
// claim see it, and returns once the driver confirmed it.
func (s SlotDesk) DestroyAssigned(ctx context.Context, id string) error {
	e := s.e
	var o *deviceOp
	var err error
	e.section(func() {
		if err = e.reg.untouched(id); err == nil {
			o = e.destroyOp(id, "slot-replace", "slot-destroy-failed", func(DeviceRecord) { delete(e.slots.made, id) })
		}
	})
	if err != nil {
		return err
	}
	begun, err := e.runOp(ctx, o)
	if !begun {
		return fmt.Errorf("%w: %v", ErrDeviceBusy, err)
	}
	if err != nil {
		return err
	}
	if _, still := e.Device(id); still {
		return fmt.Errorf("%w: %s was not forgotten after its destroy", ErrDeviceBusy, id)
	}
	return nil
}

// HandlesPresent asks the platform's driver which handles exist in the
// root, in one listing: the proof of absence a replacement needs before it
// creates the new device, for every device a caller decides about. ok=false
// means the inventory could not be read, so absence is not proven.
func (s SlotDesk) HandlesPresent(ctx context.Context, platform string) (map[string]bool, bool) {
	e := s.e
	drv, found := e.drivers[platform]
	if !found {
		return nil, false
	}
	obs, err := drv.ListManaged(ctx)
	if err != nil {
		return nil, false
	}
	out := make(map[string]bool, len(obs))
	for _, o := range obs {
		out[o.Handle] = true
	}
	return out, true
}

// Idle slot devices yield capacity (issue 22, ADR 0062). A slot's device
// with no live execution is nobody else's to use, but it must not hold a
// running slot against the rest of the host: when a running limit binds
// for someone else, the planner may shut it down like a warm device, and
// the idle-shutdown rule may stop it. It is never destroyed by either (its
// assignment and its data stay), and its slot's next execution boots it (pool.slotYields).

// PinSlot keeps slot's device from yielding while an acquisition of that
// slot decides about it and leases it: without it, the planner could shut
// a device down between the reconciler choosing it and its grant. The
// returned function unpins (once).
func (s SlotDesk) PinSlot(slot string) func() {
	e := s.e
	e.section(func() { e.slots.pin(slot) })
	var once bool
	return func() {
		e.section(func() {
			if once {
				return
			}
			once = true
			e.slots.unpin(slot)
			e.scheduleLocked()
		})
	}
}

// ShutdownAssigned shuts one idle slot device down (no lease, no operation
// in flight) through the op executor and returns once the driver confirmed
// it. The device stays recorded and assigned; its slot's next execution
// boots it. It is how a principal's own idle slot devices make room for
// its next one (slots.maxDevicesPerPrincipal).
func (s SlotDesk) ShutdownAssigned(ctx context.Context, id string) error {
	e := s.e
	var o *deviceOp
	var err error
	e.section(func() {
		if err = e.reg.untouched(id); err != nil {
			return
		}
		if _, ok := e.slots.slotOf(id); !ok {
			err = fmt.Errorf("%w: %s is not a slot device", ErrBadRequest, id)
			return
		}
		if !e.pool.slotYields(e.reg.devices[id]) {
			err = fmt.Errorf("%w: %s is %s, or its slot's acquisition is in flight", ErrDeviceBusy, id, e.reg.devices[id].State)
			return
		}
		o = e.shutdownOp(id, "slot-yield", "slot-shutdown-failed", func(d DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.evicted", DeviceID: d.ID, Platform: d.Platform, Reason: "slot-bound"})
		})
	})
	if err != nil {
		return err
	}
	begun, err := e.runOp(ctx, o)
	if !begun {
		return fmt.Errorf("%w: %v", ErrDeviceBusy, err)
	}
	return err
}

// BootBlocked reports the running limits that would keep a targeted boot
// of the shut-down device id waiting now: none when the boot fits, or fits
// once an idle warm or slot device is shut down for it (what
// targetBook.serveLocked does), or when id is not shut down. A slot's
// acquisition asks before it waits, so a boot at the limit is refused at
// once (CAPACITY_EXHAUSTED) instead of outwaiting its deadline.
func (s SlotDesk) BootBlocked(id string) []string {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.reg.devices[id]
	if !ok || d.State != StateShutdown {
		return nil
	}
	in := e.planInputLocked(nil, false)
	ram := e.footprintLocked(d.Spec)
	binding := newLedger(in).blocks(d.Platform, ram, false)
	if len(binding) == 0 || targetVictim(in, d, ram) != "" {
		return nil
	}
	return binding
}

// MakeRoom is a slot's create or replacement asking for running room for
// one new device of req: when a running limit binds now, the least
// recently used idle device (warm, or another slot's with no live
// execution) whose shutdown lets it start is shut down, and MakeRoom
// returns once the driver confirmed it. It returns the binding limits when
// nothing could make room, having changed nothing. freeing, when set, is
// a device the caller is about to delete: it counts as stopped and is
// never the one shut down.
func (s SlotDesk) MakeRoom(ctx context.Context, req SpecRequest, freeing string) ([]string, error) {
	e := s.e
	drv, ok := e.drivers[req.Platform]
	if !ok {
		return nil, NewSpecError(ErrUnsupportedPlatform, fmt.Sprintf("no driver serves platform %q", req.Platform), "platforms", e.Platforms())
	}
	spec, err := drv.ResolveSpec(ctx, req)
	if err != nil {
		return nil, err
	}
	var o *deviceOp
	var binding []string
	e.section(func() {
		in := e.planInputLocked(nil, false)
		for i := range in.Devices {
			if in.Devices[i].ID == freeing {
				in.Devices[i].State, in.Devices[i].Usable, in.Devices[i].Yields = StateShutdown, false, false
			}
		}
		ram := e.footprintLocked(spec)
		if binding = newLedger(in).blocks(req.Platform, ram, false); len(binding) == 0 {
			return
		}
		victim := roomVictim(in, req.Platform, ram, freeing)
		if victim == "" {
			return
		}
		binding = nil
		p := e.reg.devices[victim].Platform
		o = e.shutdownOp(victim, "evict", "eviction-failed", func(DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.evicted", DeviceID: victim, Platform: p, Reason: "slot-boot"})
		})
	})
	if o == nil {
		return binding, nil
	}
	if begun, err := e.runOp(ctx, o); !begun || err != nil {
		// Taken meanwhile, or the shutdown failed: the caller judges the
		// limits again rather than trust room that was not made.
		return []string{LimitRunning}, nil
	}
	return nil, nil
}
