package core

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
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

// ErrGoldenRefused is a golden build the engine's gate refused; the
// refusal and its reason are recorded by the gate itself.
var ErrGoldenRefused = errors.New("golden build refused")

// GoldenEnsurer is the optional driver ability to build a golden when the
// engine asks, so that a refused build is not left until the next
// provision of its spec. The engine calls it outside the decision section,
// at most once at a time per spec, only when the gate would now admit the
// build beside the devices. The driver asks the gate as for any build
// (never inline: there is no provision) and returns once the build is
// admitted and started, nil at once when a fresh golden exists or a build
// is in flight, and an error wrapping ErrGoldenRefused when the gate
// refused after all.
type GoldenEnsurer interface {
	EnsureGolden(ctx context.Context, spec Spec) error
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
	// GoldenRefused: not now; asked again at the next provision, or by
	// the engine once something that may clear the reason happened.
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
// planner started, why the last build of a spec was refused (for doctor,
// status and the retry), and the goldens whose removal failed. Its methods
// run inside the decision section; it reaches the engine only through
// goldenEngine, and the drivers' goldens through drivers.
type goldenBook struct {
	eng     goldenEngine
	queue   *queue            // the requests a golden build is for
	halt    *halt             // no build or removal starts once the engine halts
	drivers map[string]Driver // the engine's drivers, by platform (fixed at New)
	clock   ports.Clock
	log     *slog.Logger
	// timers are the stuck goldens' backoff timers, by plan id; the
	// engine's Stop stops them with its own (stopTimersLocked).
	timers map[string]ports.Timer

	reclaiming map[string]bool           // plan id -> removal in flight
	refused    map[string]*goldenRefusal // goldenSpecKey -> the last refusal
	// retrying holds the specs whose build the engine asked its driver
	// for and that has not answered yet: one at a time per spec.
	retrying map[string]bool
	// recheck says something that may clear a refusal happened (a
	// request left the queue, a device operation settled) since the
	// refusals were last looked at. A refusal itself never sets it, so a
	// gate that keeps refusing cannot make a retry loop.
	recheck bool
	// stuck are goldens whose removal failed: not chosen again before
	// their retryAt (a backoff, or every replan would retry at once).
	stuck map[string]*stuckGolden
}

// goldenEngine is what the golden book needs of the engine, satisfied by
// *Engine: the section and its facts, the planner's input and a device's running
// footprint, and the background work a removal or a retry runs in.
type goldenEngine interface {
	now() time.Time
	section(f func())
	emitLocked(ev events.Event)
	pushLocked(w *waiter, p Progress)
	scheduleLocked()
	notifyPositions()
	planInputLocked(queue []*waiter, warm bool) PlanInput
	footprintLocked(s Spec) uint64
	goBackground(f func(ctx context.Context))
}

func newGoldenBook(eng goldenEngine, q *queue, h *halt, drivers map[string]Driver, d Deps) goldenBook {
	return goldenBook{eng: eng, queue: q, halt: h, drivers: drivers, clock: d.Clock, log: d.Logger, timers: map[string]ports.Timer{}}
}

// goldenRefusal is why the gate last refused a spec's golden.
type goldenRefusal struct {
	platform, model, runtime string
	why                      string
}

// stuckGolden is a golden whose removal failed, and when the planner may
// choose it again.
type stuckGolden struct {
	delay   time.Duration
	retryAt time.Time
	err     string
}

// The backoff of a stuck golden: the first retry a minute after the
// failure, each further failure doubling the wait up to half an hour. A
// removal that fails once is often a simulator service hiccup; one that
// keeps failing should cost a replan only rarely.
const (
	stuckGoldenFirst = time.Minute
	stuckGoldenCap   = 30 * time.Minute
)

const goldenIDPrefix = "golden:"

func goldenPlanID(platform, handle string) string { return goldenIDPrefix + platform + ":" + handle }

// isGoldenPlanID tells a golden's plan id from a registry device id.
func isGoldenPlanID(id string) bool { return strings.HasPrefix(id, goldenIDPrefix) }

// goldenSpecKey is the one spelling of a golden's spec,
// "platform|deviceType|runtime": the key of its refusal (doctor's
// goldensNotBuilt shows it) and, behind goldenIDPrefix so it can never
// equal a leasable spec's Key, its SpecKey in a plan.
func goldenSpecKey(platform, model, runtime string) string {
	return platform + "|" + model + "|" + runtime
}

func goldenPlanSpecKey(platform, model, runtime string) string {
	return goldenIDPrefix + goldenSpecKey(platform, model, runtime)
}

// attachGoldenGate hands gate (the engine) to every driver that asks
// before it builds a golden.
func attachGoldenGate(drivers map[string]Driver, gate GoldenGate) {
	for _, drv := range drivers {
		if g, ok := drv.(GoldenGated); ok {
			g.SetGoldenGate(gate)
		}
	}
}

// GoldenDesk is the golden book's counter: cloning drivers ask it to admit
// a golden build (it is the GoldenGate the engine attaches to them), and
// the daemon's status.get and doctor.run read its report. Each entry enters the
// decision section as the engine's own entries do. Engine.Goldens hands one
// out; the zero value is not usable.
type GoldenDesk struct{ e *Engine }

// Goldens is the golden book's desk (the drivers' gate; the daemon's
// status.get and doctor.run).
func (e *Engine) Goldens() GoldenDesk { return GoldenDesk{e} }

// AdmitGoldenBuild implements GoldenGate (ADR 0053). A build is refused
// while a request waits for capacity (whatever the build took would be
// taken from it) and whenever the golden would take the last managed slot
// (a leasable device must always still fit). It runs beside the devices
// only where one more running device fits every running limit; otherwise
// a provision nobody waits for (a warm-pool fill: no request of the
// platform is queued) may build it inline, in its own reservation, so a
// golden never makes more simulators run than the limits allow.
func (gd GoldenDesk) AdmitGoldenBuild(platform string, g Golden, inlineOK bool, start func(GoldenAdmission)) GoldenAdmission {
	e := gd.e
	verdict := GoldenRefused
	e.section(func() { verdict = e.goldens.admitLocked(platform, g, inlineOK, start) })
	return verdict
}

// admitLocked is AdmitGoldenBuild's decision: the verdict, the refusal
// recorded or cleared, and start told of an admission.
func (b *goldenBook) admitLocked(platform string, g Golden, inlineOK bool, start func(GoldenAdmission)) GoldenAdmission {
	key := goldenSpecKey(platform, g.ModelID, g.RuntimeID)
	v, why := b.verdictLocked(nil, platform, g, inlineOK)
	if v == GoldenRefused {
		b.refuseLocked(platform, g.ModelID, g.RuntimeID, why)
		return v
	}
	delete(b.refused, key)
	start(v)
	return v
}

// verdictLocked is the gate's verdict on a build of want, with the
// reason of a refusal. in is a plan input the caller built already (nil:
// build one), so the retry step, which judges every refused spec in one
// schedule, builds it once, not once per spec.
func (b *goldenBook) verdictLocked(in *PlanInput, platform string, want Golden, inlineOK bool) (GoldenAdmission, string) {
	if b.halt.halted() {
		return GoldenRefused, "the daemon is stopping or resetting"
	}
	queuedHere := false
	for w := range b.queue.All() {
		if !w.working && w.device == "" {
			return GoldenRefused, "a request is waiting for capacity"
		}
		queuedHere = queuedHere || w.spec.Platform == platform || len(w.group) > 0
	}
	if in == nil {
		pi := b.eng.planInputLocked(nil, false)
		in = &pi
	}
	replaces := false
	key := goldenPlanSpecKey(platform, want.ModelID, want.RuntimeID)
	for _, d := range in.Devices {
		if d.State != StateGolden || d.SpecKey != key {
			continue
		}
		if d.Leaving {
			return GoldenRefused, "its golden is being reclaimed"
		}
		replaces = true
	}
	g := newLedger(*in)
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
	if len(g.blocks(platform, b.eng.footprintLocked(Spec{Platform: platform}), false)) == 0 {
		return GoldenBackground, ""
	}
	if inlineOK && !queuedHere {
		return GoldenInline, ""
	}
	return GoldenRefused, "no running room beside the devices, and no idle provision to build it in"
}

// refuseLocked records why a spec's golden was not built, logging
// only a change of reason (a provision asks at each request).
func (b *goldenBook) refuseLocked(platform, model, runtime, why string) {
	key := goldenSpecKey(platform, model, runtime)
	if b.refused == nil {
		b.refused = map[string]*goldenRefusal{}
	}
	if r := b.refused[key]; r == nil || r.why != why {
		b.log.Info("golden not built", "platform", platform, "deviceType", model, "runtime", runtime, "why", why)
	}
	b.refused[key] = &goldenRefusal{platform: platform, model: model, runtime: runtime, why: why}
}

// retryLocked runs at the end of every schedule: when something
// that may clear a refusal happened since the last look, and no request
// waits, each refused spec the gate would now admit beside the devices is
// asked of its driver in the background, one at a time per spec. The
// decision reads memory only (the registry, the queue and the drivers'
// golden views); the driver's own checks and commands run outside it.
// The answer does not schedule again: a build the gate refuses after all
// waits for the next event that may clear it, never for itself.
func (b *goldenBook) retryLocked() {
	if !b.recheck || b.halt.stopping {
		return
	}
	b.recheck = false
	if len(b.refused) == 0 {
		return
	}
	for w := range b.queue.All() {
		if !w.working && w.device == "" {
			return // the gate refuses while a request waits, whatever else freed
		}
	}
	// One snapshot for every refused spec of this look: judging each
	// rebuilt the whole plan input (every device, every driver's goldens).
	in := b.eng.planInputLocked(nil, false)
	keys := make([]string, 0, len(b.refused))
	for k := range b.refused {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		r := b.refused[key]
		ens, ok := b.drivers[r.platform].(GoldenEnsurer)
		if !ok || b.retrying[key] {
			continue
		}
		if v, why := b.verdictLocked(&in, r.platform, Golden{ModelID: r.model, RuntimeID: r.runtime}, false); v != GoldenBackground {
			if why != "" && why != r.why {
				b.refuseLocked(r.platform, r.model, r.runtime, why)
			}
			continue
		}
		if b.retrying == nil {
			b.retrying = map[string]bool{}
		}
		b.retrying[key] = true
		spec := Spec{Platform: r.platform, ModelID: r.model, RuntimeID: r.runtime}
		b.log.Info("retrying a refused golden build", "platform", r.platform, "deviceType", r.model, "runtime", r.runtime, "refusedFor", r.why)
		b.eng.goBackground(func(ctx context.Context) {
			err := ens.EnsureGolden(ctx, spec)
			b.eng.section(func() {
				delete(b.retrying, key)
				switch {
				case err == nil:
					// Admitted (the gate dropped the refusal) or not
					// needed: a fresh golden exists.
					delete(b.refused, key)
				case errors.Is(err, ErrGoldenRefused):
					// The gate recorded the new reason.
				default:
					// Kept: the error may be passing (a tool that failed
					// once), and only a later event asks again, never
					// this answer; the fingerprint it costs is cached.
					b.log.Warn("a retried golden build did not start", "platform", spec.Platform, "deviceType", spec.ModelID, "runtime", spec.RuntimeID, "err", err)
				}
			})
		})
	}
}

// recheckLocked marks that a refused golden build may be possible
// now; the next schedule looks.
func (b *goldenBook) recheckLocked() { b.recheck = true }

// reclaimForLocked deletes golden plan device id through its
// driver so that w gets the managed slot it held (the planner chose it
// as the last eviction candidate). The waiter counts as evicting until
// the removal settles, then is planned again.
func (b *goldenBook) reclaimForLocked(w *waiter, id string) {
	platform, handle, ok := strings.Cut(strings.TrimPrefix(id, goldenIDPrefix), ":")
	gr, can := b.drivers[platform].(GoldenReclaimer)
	if !ok || !can || b.reclaiming[id] || b.halt.stopping {
		return
	}
	if b.reclaiming == nil {
		b.reclaiming = map[string]bool{}
	}
	b.reclaiming[id] = true
	w.evicting = true
	b.eng.goBackground(func(ctx context.Context) {
		w.begin(PhaseEvict, b.eng.now())
		err := gr.RemoveGolden(ctx, handle)
		w.end(PhaseEvict, b.eng.now())
		b.eng.section(func() {
			delete(b.reclaiming, id)
			w.evicting = false
			if errors.Is(err, ErrGoldenBusy) {
				b.log.Info("a golden to reclaim is being built; planning again", "golden", id)
			} else if err != nil {
				b.stuckLocked(id, err)
			} else {
				b.unstickLocked(id)
				b.log.Info("golden reclaimed for a request", "golden", id)
				b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: platform, Reason: "golden-reclaimed"})
			}
			if !b.halt.stopping {
				b.eng.scheduleLocked()
			}
		})
	})
	b.eng.pushLocked(w, Progress{Phase: "evicting", DeviceID: id, ETA: b.drivers[platform].Estimate(OpDestroy)})
}

// stuckLocked records a failed removal of golden plan id: it is not
// chosen again before its backoff ends, and a clock timer then plans
// again, so a request still waiting for the slot gets another try.
func (b *goldenBook) stuckLocked(id string, err error) {
	if b.stuck == nil {
		b.stuck = map[string]*stuckGolden{}
	}
	s := b.stuck[id]
	if s == nil {
		s = &stuckGolden{delay: stuckGoldenFirst}
		b.stuck[id] = s
	} else {
		s.delay = min(2*s.delay, stuckGoldenCap)
	}
	s.retryAt, s.err = b.clock.Now().Add(s.delay), err.Error()
	b.log.Warn("reclaiming a golden failed; it stays and is tried again later", "golden", id, "retryIn", s.delay, "err", err)
	if t, ok := b.timers[id]; ok {
		t.Stop()
	}
	// In b.timers, which Stop stops with the lease timers. The callback
	// drops only its own entry: a timer stopped too late to keep it from
	// firing must not take a newer backoff's timer out of the map. (tm is
	// set under the section the callback must take first.)
	var tm ports.Timer
	tm = b.clock.AfterFunc(s.delay, func() {
		b.eng.section(func() {
			if b.timers[id] != tm {
				return // superseded or unstuck meanwhile
			}
			delete(b.timers, id)
			if !b.existsLocked(id) {
				// Gone another way (a reset, a stale rebuild): nothing
				// to back off from any more.
				delete(b.stuck, id)
			}
			if !b.halt.stopping {
				b.eng.scheduleLocked()
			}
		})
		b.eng.notifyPositions()
	})
	b.timers[id] = tm
}

// forgetLocked starts clone provisioning over after a reset: the
// reset removed the goldens, so no refused build is owed a retry (the
// next provision asks again, as on a fresh daemon). Without it, the
// schedule that ends the reset would rebuild a golden the moment the reset
// reported the host empty. A stuck golden the reset could not remove
// either keeps its backoff.
func (b *goldenBook) forgetLocked() {
	b.refused, b.recheck = nil, false
	for id := range b.stuck {
		if !b.existsLocked(id) {
			b.unstickLocked(id)
		}
	}
}

// existsLocked reports whether some driver still keeps golden plan
// id (from memory, as GoldenKeeper promises).
func (b *goldenBook) existsLocked(id string) bool {
	for p, drv := range b.drivers {
		if k, ok := drv.(GoldenKeeper); ok {
			for _, g := range k.Goldens() {
				if goldenPlanID(p, g.Handle) == id {
					return true
				}
			}
		}
	}
	return false
}

// unstickLocked forgets id's backoff: removed, it needs none.
func (b *goldenBook) unstickLocked(id string) {
	if t, ok := b.timers[id]; ok {
		t.Stop()
		delete(b.timers, id)
	}
	delete(b.stuck, id)
}

// stuckNowLocked reports whether golden plan id is still within the
// backoff of a failed removal.
func (b *goldenBook) stuckNowLocked(id string) bool {
	s := b.stuck[id]
	return s != nil && b.clock.Now().Before(s.retryAt)
}

// Golden states as doctor and status show them.
const (
	GoldenStateReady      = "ready"
	GoldenStateBuilding   = "building"
	GoldenStateReclaiming = "reclaiming"
	GoldenStateStuck      = "stuck"
)

// GoldenDevice is one golden with the platform whose driver keeps it.
type GoldenDevice struct {
	Platform string
	Golden
	// Reclaiming: the planner is deleting it to give its managed slot to
	// a request.
	Reclaiming bool
	// State is one of the GoldenState names: reclaiming, then building,
	// then stuck (its last removal failed and it has not been removed
	// since), else ready.
	State string
	// RetryAt and StuckErr describe a stuck golden: when the planner may
	// choose it again, and why its removal failed.
	RetryAt  time.Time
	StuckErr string
}

// GoldenRefusal is a spec whose golden the gate last refused, and why.
type GoldenRefusal struct {
	// Key is the spec's "platform|deviceType|runtime" (doctor's
	// goldensNotBuilt is keyed by it).
	Key                          string
	Platform, ModelID, RuntimeID string
	Reason                       string
	// Retrying: the engine has asked the driver to build it now.
	Retrying bool
}

// GoldenReport is every golden and every refused build at one instant,
// from memory (status.get answers with it).
type GoldenReport struct {
	Devices []GoldenDevice
	Refused []GoldenRefusal
}

// GoldenStatus reports the goldens and the refused builds in one section.
// It runs no command: the drivers' Goldens answer from memory.
func (gd GoldenDesk) GoldenStatus() GoldenReport {
	e := gd.e
	var out GoldenReport
	e.section(func() { out = e.goldens.statusLocked() })
	sort.Slice(out.Devices, func(i, j int) bool {
		if out.Devices[i].Platform != out.Devices[j].Platform {
			return out.Devices[i].Platform < out.Devices[j].Platform
		}
		return out.Devices[i].Handle < out.Devices[j].Handle
	})
	sort.Slice(out.Refused, func(i, j int) bool {
		return out.Refused[i].Key < out.Refused[j].Key
	})
	return out
}

// planDevicesLocked are the goldens as the planner sees them: never
// usable (so nothing grants or boots them), counted as managed, and as
// running with a reservation while they are being built. A shut-down one
// whose driver can delete it is Reclaimable: the planner's last eviction
// candidate when the managed limit binds; one being deleted is Leaving.
func (b *goldenBook) planDevicesLocked() []PlanDevice {
	var out []PlanDevice
	for p, drv := range b.drivers {
		k, ok := drv.(GoldenKeeper)
		if !ok {
			continue
		}
		_, canRemove := drv.(GoldenReclaimer)
		for _, g := range k.Goldens() {
			id := goldenPlanID(p, g.Handle)
			out = append(out, PlanDevice{ID: id, Platform: p,
				SpecKey: goldenPlanSpecKey(p, g.ModelID, g.RuntimeID), State: StateGolden,
				Reserved: g.Building, Leaving: b.reclaiming[id], Reclaimable: canRemove && !g.Building && !g.Busy && !b.stuckNowLocked(id),
				RAM: b.eng.footprintLocked(Spec{Platform: p})})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// addGoldensLocked charges the goldens to a capacity report as the
// planner charges them: managed, and reserved while being built.
func (b *goldenBook) addGoldensLocked(r *CapacityReport) {
	for _, g := range b.planDevicesLocked() {
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
			cpu := r.Limits.cpuCharge(g.Platform)
			u.CPUMilli += cpu
			r.Global.CPUMilli += cpu
		}
		r.Platforms[g.Platform] = u
	}
}

// statusLocked is GoldenStatus's reading, unsorted.
func (b *goldenBook) statusLocked() GoldenReport {
	var out GoldenReport
	for p, drv := range b.drivers {
		k, ok := drv.(GoldenKeeper)
		if !ok {
			continue
		}
		for _, g := range k.Goldens() {
			id := goldenPlanID(p, g.Handle)
			gd := GoldenDevice{Platform: p, Golden: g, Reclaiming: b.reclaiming[id], State: GoldenStateReady}
			s := b.stuck[id]
			switch {
			case gd.Reclaiming:
				gd.State = GoldenStateReclaiming
			case g.Building || g.Busy:
				gd.State = GoldenStateBuilding
			case s != nil:
				gd.State = GoldenStateStuck
			}
			if s != nil {
				gd.RetryAt, gd.StuckErr = s.retryAt, s.err
			}
			out.Devices = append(out.Devices, gd)
		}
	}
	for k, r := range b.refused {
		out.Refused = append(out.Refused, GoldenRefusal{Key: k, Platform: r.platform, ModelID: r.model, RuntimeID: r.runtime,
			Reason: r.why, Retrying: b.retrying[k]})
	}
	return out
}

// stopTimersLocked stops the stuck goldens' backoff timers (Stop).
func (b *goldenBook) stopTimersLocked() {
	for id, t := range b.timers {
		t.Stop()
		delete(b.timers, id)
	}
}
