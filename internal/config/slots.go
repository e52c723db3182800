package config

import (
	"errors"
	"fmt"
)

// Slots bounds what managed slots (ADR 0049) may keep on a host, so a
// runner's slots share it with plain leases (ADR 0062).
type Slots struct {
	// MaxDevicesPerPrincipal bounds one principal's booted slot devices
	// on this daemon. A new execution beyond it first shuts down that
	// principal's own idle slot devices, least recently used first, and is
	// refused CAPACITY_EXHAUSTED (limit slots.maxDevicesPerPrincipal) when
	// every one has a live execution.
	MaxDevicesPerPrincipal int `json:"maxDevicesPerPrincipal"`
	// RebindWindowMs keeps a slot execution's lease this long after a
	// daemon restart restored it, so its proxy can re-bind even when the
	// daemon was away longer than the execution's heartbeat TTL.
	RebindWindowMs int64 `json:"rebindWindowMs"`
}

// Bounds of the slot settings.
const (
	DefaultSlotDevicesPerPrincipal = 2
	MaxSlotDevicesPerPrincipal     = 64
	DefaultSlotRebindWindowMs      = 120_000
	MinSlotRebindWindowMs          = 10_000
	MaxSlotRebindWindowMs          = 3_600_000
)

func defaultSlots() Slots {
	return Slots{MaxDevicesPerPrincipal: DefaultSlotDevicesPerPrincipal, RebindWindowMs: DefaultSlotRebindWindowMs}
}

func (s Slots) validate() []error {
	var errs []error
	if s.MaxDevicesPerPrincipal < 1 || s.MaxDevicesPerPrincipal > MaxSlotDevicesPerPrincipal {
		errs = append(errs, fmt.Errorf("slots.maxDevicesPerPrincipal must be between 1 and %d", MaxSlotDevicesPerPrincipal))
	}
	if s.RebindWindowMs < MinSlotRebindWindowMs || s.RebindWindowMs > MaxSlotRebindWindowMs {
		errs = append(errs, errors.New("slots.rebindWindowMs must be between 10000 (10 s) and 3600000 (an hour)"))
	}
	return errs
}
