package core

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/simlock/simlock/internal/core/events"
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
	// Building: the golden is being made beside the devices, so it runs
	// for now and is charged as running.
	Building bool
	// Busy: a build of it is in flight, beside the devices or inline in a
	// provision's reservation. A busy golden is never reclaimed: the build
	// would record it again.
	Busy bool
}

// ErrGoldenBusy is a reclaim that met a build of the same golden: not a
// failure of the golden, so it is asked again at the next plan rather
// than given up on.
var ErrGoldenBusy = errors.New("golden is being built")

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

// GoldenReclaimer is the optional driver ability to delete one golden, so
// that the planner can give its managed slot to a device a request needs
// when the managed limit binds (ADR 0053). An error leaves the golden in
// place; the request then waits as it would have without the golden.
type GoldenReclaimer interface {
	RemoveGolden(ctx context.Context, handle string) error
}

// GoldenGate is how a driver asks the engine before it builds a golden:
// the engine owns capacity, so it alone can tell whether the build would
// take room a leasable device needs. inlineOK says the caller is a
// provision holding its own running reservation, which may boot the golden
// in that reservation first and then clone its device from it. start runs
// inside the decision section when the build is admitted, with the verdict,
// so the driver records the build (Goldens reports it, Building when it
// runs beside the devices) before any other decision can hand out the same
// room; it must only take the driver's view lock.
type GoldenGate interface {
	AdmitGoldenBuild(platform string, g Golden, inlineOK bool, start func(GoldenAdmission)) GoldenAdmission
}

// GoldenAdmission is the engine's answer to a golden build.
type GoldenAdmission int

const (
	// GoldenRefused: not now; asked again at the next provision.
	GoldenRefused GoldenAdmission = iota
	// GoldenBackground: build beside the devices, charged as running.
	GoldenBackground
	// GoldenInline: build inside the asking provision's own running
	// reservation, then clone the device from it; charged as managed
	// only (the reservation already holds the running room).
	GoldenInline
)

// GoldenGated is the optional driver ability to take the engine's gate.
// A driver without a gate (its own unit tests) builds as it likes.
type GoldenGated interface {
	SetGoldenGate(GoldenGate)
}

// goldenBook is the engine's own state about goldens: the removals the
// planner started, and why the last build of a spec was refused, for
// doctor.
type goldenBook struct {
	reclaiming map[string]bool   // plan id -> removal in flight
	refused    map[string]string // platform|model|runtime -> reason
	// stuck are goldens whose removal failed: not chosen again by this
	// engine, or every replan would retry at once (doctor shows them).
	stuck map[string]bool
}

const goldenIDPrefix = "golden:"

func goldenPlanID(platform, handle string) string { return goldenIDPrefix + platform + ":" + handle }

// isGoldenPlanID tells a golden's plan id from a registry device id.
func isGoldenPlanID(id string) bool { return strings.HasPrefix(id, goldenIDPrefix) }

func goldenSpecKey(platform, model, runtime string) string {
	return platform + "|golden|" + model + "|" + runtime
}

// attachGoldenGate hands the engine to every driver that asks before it
// builds a golden.
func (e *Engine) attachGoldenGate() {
	for _, drv := range e.drivers {
		if g, ok := drv.(GoldenGated); ok {
			g.SetGoldenGate(e)
		}
	}
}

// AdmitGoldenBuild implements GoldenGate (ADR 0053). A build is refused
// while a request waits for capacity (whatever the build took would be
// taken from it) and whenever the golden would take the last managed slot
// (a leasable device must always still fit). It runs beside the devices
// only where one more running device fits every running limit; otherwise
// a provision nobody waits for (a warm-pool fill: no request of the
// platform is queued) may build it inline, in its own reservation, so a
// golden never makes more simulators run than the limits allow.
func (e *Engine) AdmitGoldenBuild(platform string, g Golden, inlineOK bool, start func(GoldenAdmission)) GoldenAdmission {
	verdict := GoldenRefused
	e.section(func() {
		key := platform + "|" + g.ModelID + "|" + g.RuntimeID
		v, why := e.goldenBuildVerdictLocked(platform, g, inlineOK)
		if v == GoldenRefused {
			if e.goldens.refused == nil {
				e.goldens.refused = map[string]string{}
			}
			if e.goldens.refused[key] != why {
				e.log.Info("golden not built", "platform", platform, "deviceType", g.ModelID, "runtime", g.RuntimeID, "why", why)
			}
			e.goldens.refused[key] = why
			return
		}
		delete(e.goldens.refused, key)
		start(v)
		verdict = v
	})
	return verdict
}

func (e *Engine) goldenBuildVerdictLocked(platform string, want Golden, inlineOK bool) (GoldenAdmission, string) {
	if e.stopping || e.maintenance {
		return GoldenRefused, "the daemon is stopping or resetting"
	}
	queuedHere := false
	for _, w := range e.queue.Entries() {
		if !w.working && w.device == "" {
			return GoldenRefused, "a request is waiting for capacity"
		}
		queuedHere = queuedHere || w.spec.Platform == platform || len(w.group) > 0
	}
	in := e.planInputLocked(nil, false)
	replaces := false
	key := goldenSpecKey(platform, want.ModelID, want.RuntimeID)
	for _, d := range in.Devices {
		if d.State != StateGolden || d.SpecKey != key {
			continue
		}
		if d.Leaving {
			return GoldenRefused, "its golden is being reclaimed"
		}
		replaces = true
	}
	g := newLedger(in)
	if !replaces {
		g.managed[platform]++
		g.manAll++
	}
	// With the golden counted, one more device must still fit.
	for _, l := range g.blocks(platform, 0, true) {
		if hasManaged([]string{l}) {
			return GoldenRefused, "it would take the last managed slot (" + l + ")"
		}
	}
	if len(g.blocks(platform, e.footprintLocked(Spec{Platform: platform}), false)) == 0 {
		return GoldenBackground, ""
	}
	if inlineOK && !queuedHere {
		return GoldenInline, ""
	}
	return GoldenRefused, "no running room beside the devices, and no idle provision to build it in"
}

// GoldenRefusals reports, by platform|deviceType|runtime, why the last
// build of a golden was refused (doctor explains missing goldens with it).
func (e *Engine) GoldenRefusals() map[string]string {
	out := map[string]string{}
	e.section(func() {
		for k, v := range e.goldens.refused {
			out[k] = v
		}
	})
	return out
}

// startGoldenReclaimLocked deletes golden plan device id through its
// driver so that w gets the managed slot it held (the planner chose it
// as the last eviction candidate). The waiter counts as evicting until
// the removal settles, then is planned again.
func (e *Engine) startGoldenReclaimLocked(w *waiter, id string) {
	platform, handle, ok := strings.Cut(strings.TrimPrefix(id, goldenIDPrefix), ":")
	gr, can := e.drivers[platform].(GoldenReclaimer)
	if !ok || !can || e.goldens.reclaiming[id] || e.stopping {
		return
	}
	if e.goldens.reclaiming == nil {
		e.goldens.reclaiming = map[string]bool{}
	}
	e.goldens.reclaiming[id] = true
	w.evicting = true
	e.goBackground(func(ctx context.Context) {
		w.begin(PhaseEvict, e.now())
		err := gr.RemoveGolden(ctx, handle)
		w.end(PhaseEvict, e.now())
		e.section(func() {
			delete(e.goldens.reclaiming, id)
			w.evicting = false
			if errors.Is(err, ErrGoldenBusy) {
				e.log.Info("a golden to reclaim is being built; planning again", "golden", id)
			} else if err != nil {
				e.log.Warn("reclaiming a golden failed; it stays and is not chosen again", "golden", id, "err", err)
				if e.goldens.stuck == nil {
					e.goldens.stuck = map[string]bool{}
				}
				e.goldens.stuck[id] = true
			} else {
				e.log.Info("golden reclaimed for a request", "golden", id)
				e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: platform, Reason: "golden-reclaimed"})
			}
			if !e.stopping {
				e.scheduleLocked()
			}
		})
	})
	e.pushLocked(w, Progress{Phase: "evicting", DeviceID: id, ETA: e.drivers[platform].Estimate(OpDestroy)})
}

// GoldenDevice is one golden with the platform whose driver keeps it.
type GoldenDevice struct {
	Platform string
	Golden
	// Reclaiming: the planner is deleting it to give its managed slot to
	// a request.
	Reclaiming bool
}

// GoldenDevices lists every driver's goldens, for doctor: they are not in
// the registry, so no other read shows them.
func (e *Engine) GoldenDevices() []GoldenDevice {
	var out []GoldenDevice
	e.section(func() {
		for p, drv := range e.drivers {
			if k, ok := drv.(GoldenKeeper); ok {
				for _, g := range k.Goldens() {
					out = append(out, GoldenDevice{Platform: p, Golden: g, Reclaiming: e.goldens.reclaiming[goldenPlanID(p, g.Handle)]})
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
// usable (so nothing grants or boots them), counted as managed, and as
// running with a reservation while they are being built. A shut-down one
// whose driver can delete it is Reclaimable: the planner's last eviction
// candidate when the managed limit binds; one being deleted is Leaving.
func (e *Engine) goldenPlanDevicesLocked() []PlanDevice {
	var out []PlanDevice
	for p, drv := range e.drivers {
		k, ok := drv.(GoldenKeeper)
		if !ok {
			continue
		}
		_, canRemove := drv.(GoldenReclaimer)
		for _, g := range k.Goldens() {
			id := goldenPlanID(p, g.Handle)
			out = append(out, PlanDevice{ID: id, Platform: p,
				SpecKey: goldenSpecKey(p, g.ModelID, g.RuntimeID), State: StateGolden,
				Reserved: g.Building, Leaving: e.goldens.reclaiming[id], Reclaimable: canRemove && !g.Building && !g.Busy && !e.goldens.stuck[id],
				RAM: e.footprintLocked(Spec{Platform: p})})
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
