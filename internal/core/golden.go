package core

import (
	"context"
	"sort"
)

// StateGolden is the state of a golden device (ADR 0041): a clean, shut-down
// device a driver keeps per (device type, runtime) to clone new devices
// from. It is not a state leased devices move through: a golden is never
// granted, booted for a request, evicted or purged. The engine sees the
// goldens only through their driver's record (GoldenKeeper) and plans with
// them so that they count against managed capacity, and, while one is
// being built (booted once), against running capacity and the RAM budget.
const StateGolden DeviceState = "golden"

// Golden is one golden device as its driver records it.
type Golden struct {
	Handle    string
	ModelID   string
	RuntimeID string
	// Building: the golden is being made, so it runs for now.
	Building bool
}

// GoldenKeeper is the optional driver ability to report its golden
// devices. Goldens is called inside the decision section, so it must
// answer from memory, without a command or a file read.
type GoldenKeeper interface {
	Goldens() []Golden
}

// GoldenRemover is the optional driver ability to delete every golden it
// keeps, for a reset (Nuke): goldens are not in the registry, so the
// reset's sweep of managed devices never reaches them. It returns the
// handles of the goldens it removed.
type GoldenRemover interface {
	RemoveGoldens(ctx context.Context) ([]string, error)
}

// GoldenDevice is one golden with the platform whose driver keeps it.
type GoldenDevice struct {
	Platform string
	Golden
}

// GoldenDevices lists every driver's goldens, for doctor: they are not in
// the registry, so no other read shows them.
func (e *Engine) GoldenDevices() []GoldenDevice {
	var out []GoldenDevice
	e.section(func() {
		for p, drv := range e.drivers {
			if k, ok := drv.(GoldenKeeper); ok {
				for _, g := range k.Goldens() {
					out = append(out, GoldenDevice{Platform: p, Golden: g})
				}
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Platform != out[j].Platform {
			return out[i].Platform < out[j].Platform
		}
		return out[i].Handle < out[j].Handle
	})
	return out
}

// goldenPlanDevicesLocked are the goldens as the planner sees them: never
// usable (so nothing grants, boots or evicts them), counted as managed,
// and as running with a reservation while they are being built.
func (e *Engine) goldenPlanDevicesLocked() []PlanDevice {
	var out []PlanDevice
	for p, drv := range e.drivers {
		k, ok := drv.(GoldenKeeper)
		if !ok {
			continue
		}
		for _, g := range k.Goldens() {
			out = append(out, PlanDevice{ID: "golden:" + p + ":" + g.Handle, Platform: p,
				SpecKey: p + "|golden|" + g.ModelID + "|" + g.RuntimeID, State: StateGolden,
				Reserved: g.Building, RAM: e.footprintLocked(Spec{Platform: p})})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// addGoldensLocked charges the goldens to a capacity report as the
// planner charges them: managed, and reserved while being built.
func (e *Engine) addGoldensLocked(r *CapacityReport) {
	for _, g := range e.goldenPlanDevicesLocked() {
		u := r.Platforms[g.Platform]
		u.Managed++
		u.Goldens++
		r.Global.Managed++
		r.Global.Goldens++
		if g.Reserved {
			u.Reserved++
			r.Global.Reserved++
			u.RAMBytes += g.RAM
			r.Global.RAMBytes += g.RAM
		}
		r.Platforms[g.Platform] = u
	}
}
