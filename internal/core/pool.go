package core

// pool answers which devices the engine's pools may use: the general pool,
// an owner system's pool (ADR 0063), a slot's own execution, and the slot
// devices that may yield room. Its answers are pure reads of the registry,
// the host's foreign claims and the slot assignments, inside the decision
// section; every path that grants, boots, evicts, warms, cleans up or
// retires a device asks here, so one rule decides each question.
type pool struct {
	reg   *registry
	host  *hostBook
	slots *slotBook
}

// general is the one answer to "may the general pool use this device":
// grant it, boot it, evict it, count it as warm, clean it up or shut it
// down in the startup sweep. Every one of those paths asks here,
// so a device taken out of the pool (an operation in flight today; a slot
// assignment or a host-wide claim later) leaves all of them at once. Only
// idle inventory qualifies; each path then selects the exact state it acts
// on.
//
// A device with an owner-system mark is never the general pool's: it is
// served only to requests of its own system (of), so a session's device
// can never reach a plain lease on any of these paths.
func (p pool) general(d *DeviceRecord) bool {
	return d.OwnerSystem == "" && p.idle(d)
}

// of is general for the pool of one owner system ("" is the general
// pool): the same idle inventory, of that mark.
func (p pool) of(d *DeviceRecord, system string) bool {
	return d.OwnerSystem == system && p.idle(d)
}

// idle is idle inventory whatever its mark: no operation in flight, no
// foreign claim, no slot assignment (and the assignments known at all),
// ready or shut down. The planner sees it as Usable and
// matches the mark per waiter.
func (p pool) idle(d *DeviceRecord) bool {
	if p.reg.opLocks[d.ID] != "" {
		return false
	}
	if _, held := p.host.holder(d.ID); held {
		return false
	}
	if _, slot := p.slots.slotOf(d.ID); slot || p.slots.unknown {
		return false
	}
	return d.State == StateReady || d.State == StateShutdown
}

// slotMayUse is the targeted path's exception to the general pool:
// a slot's own execution may use its assigned device, idle and untouched
// by anyone else on the host.
func (p pool) slotMayUse(w *waiter, d *DeviceRecord) bool {
	if w.slot == "" || w.slot == FreePoolSlot {
		return false
	}
	if s, ok := p.slots.slotOf(d.ID); !ok || s != w.slot {
		return false
	}
	if p.reg.opLocks[d.ID] != "" {
		return false
	}
	if _, held := p.host.holder(d.ID); held {
		return false
	}
	return d.State == StateReady || d.State == StateShutdown
}

// slotYields reports whether d is a slot device that may be shut
// down to make room: assigned (or in the free pool), ready, not leased, no
// operation or foreign claim on it, and no acquisition of its slot in
// flight (PinSlot), which is about to take it.
func (p pool) slotYields(d *DeviceRecord) bool {
	slot, ok := p.slots.slotOf(d.ID)
	if !ok || d.State != StateReady || p.reg.opLocks[d.ID] != "" || p.slots.pinned(slot) {
		return false
	}
	if _, held := p.host.holder(d.ID); held {
		return false
	}
	return !p.reg.leased(d.ID)
}

// unwanted reports whether d is a marked device no request holds or
// ever held: made for a request that left before the grant.
func (p pool) unwanted(d *DeviceRecord) bool {
	return d.OwnerSystem != "" && d.LastLeasedAt.IsZero() && p.idle(d) && !p.reg.leased(d.ID)
}
