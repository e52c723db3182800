package daemon

// Managed slots (issue 12, ADR 0049) are internal/slots': the daemon builds
// the slots.Manager over its engine and host registry and routes the
// slot.* operations to it.

import (
	"log/slog"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/slots"
)

func newSlotManager(d *Daemon, log *slog.Logger) *slots.Manager {
	return slots.New(slots.Config{Engine: d.engine, Desk: d.engine.Slots(), Ends: d.engine.Watch(), Named: d.engine.OneDevice(), Registry: d.host, Self: d.self, Clock: d.clock, Logger: log,
		MaxDevicesPerPrincipal: d.cfg.Slots.MaxDevicesPerPrincipal, ToContract: toContractError, OnSlotChange: d.claims.OnSlotChange})
}

func (d *Daemon) registerSlots(disp *dispatch.Dispatcher) {
	dispatch.Handle(disp, contract.SlotAcquire, d.slots.Acquire)
	dispatch.Handle(disp, contract.SlotHeartbeat, d.slots.Heartbeat)
	dispatch.Handle(disp, contract.SlotRelease, d.slots.Release)
	dispatch.Handle(disp, contract.SlotResetScope, d.slots.ResetScope)
	dispatch.Handle(disp, contract.SlotList, d.slots.List)
	// capabilities.get is the broker's (internal/sessions, wired in sessions.go); slots add theirs.
	d.extraContracts = append(d.extraContracts, contract.ContractManagedSlots)
}
