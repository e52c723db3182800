package core

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/waitq"
)

// Host-wide capacity (issue #10, ADR 0023). Several simlock daemons, and
// devices booted by hand, share one machine. The engine learns what the
// rest of the host runs only through HostUsage, which the daemon sets from
// the host registry and the drivers' external probes; nothing here does
// I/O, so the planner reads it under the decision lock like any other
// limit.

// hostBook is the engine's view of the rest of the host: what it runs
// (HostUsage), which of this engine's devices another owner holds (the
// foreign claims), this engine's own requests held back by a host limit
// as the daemon last heard of them, and the warm devices it shut down for
// other homes' waiters. The daemon sets what the host runs; the book never
// does I/O. Its methods run only inside the decision section, as every
// book's do.
type hostBook struct {
	log   *slog.Logger
	usage HostUsage // the rest of the host, as the daemon last saw it
	// foreign: device id -> who else on the host holds it (SetForeignClaims).
	foreign map[string]string
	// waitFn hears of changes to HostWaits; waitLast is the account it
	// last heard; yielded counts warm devices shut down for other homes'
	// waiters.
	waitFn   func()
	waitLast []HostWait
	yielded  int
}

// hostOps is what the host book asks of the engine when it sheds devices
// for the host: the one device-operation path and the section's facts.
type hostOps interface {
	shutdownOp(id, lock, failReason string, then func(DeviceRecord)) *deviceOp
	startOpLocked(o *deviceOp) error
	emitLocked(ev events.Event)
}

// LimitHost names the host-wide running limit in a decision; a platform's
// host-wide limit is "host.platforms.<p>.maxRunning".
const (
	LimitHost         = "host." + LimitRunning
	limitHostPlatform = "host." + limitPlatform
)

func hostPlatformLimit(p string) string { return limitHostPlatform + p + "." + LimitRunning }

// HostPlatformLimit names platform p's host running limit, as refusals
// spell it (host.platforms.<p>.maxRunning).
func HostPlatformLimit(p string) string { return hostPlatformLimit(p) }

// HostDesk is the host book's counter: the claims system (internal/claims)
// tells the engine which devices other owners hold and what the rest of
// the host runs, and reads the host limits and the requests waiting on
// them. Each entry enters the decision section as the engine's own entries
// do. Engine.Host hands one out; the zero value is not usable.
type HostDesk struct{ e *Engine }

// Host is the host book's desk (internal/claims uses it).
func (e *Engine) Host() HostDesk { return HostDesk{e} }

// HostLimits are the host's running limits in force: the whole host's (its
// default resolved to this engine's own running limit; 0: none) and each
// platform's.
func (h HostDesk) HostLimits() (int, map[string]int) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	in := e.planInputLocked(nil, false)
	return in.Host.MaxRunning, maps.Clone(in.Host.Platforms)
}

// isHostLimit reports whether limit is one of the host-wide limits.
func isHostLimit(limit string) bool {
	return limit == LimitHost || (len(limit) > len(limitHostPlatform) && limit[:len(limitHostPlatform)] == limitHostPlatform)
}

// defaultHostRetryAfter is the hint a refusal at the host limit carries when
// the daemon gave none: another daemon's release is not predictable.
const defaultHostRetryAfter = 5 * time.Second

// HostUsage is what the rest of the host runs, as the daemon last saw it.
type HostUsage struct {
	// MaxRunning caps the running devices of the whole host: this
	// engine's, other homes' and external ones together. 0 means this
	// engine's own global running limit, so two daemons left at their
	// defaults never run more than one of them would alone.
	MaxRunning int
	// Platforms caps one platform's running devices on the host (absent
	// or 0: no cap of its own).
	Platforms map[string]int
	// Others counts the devices other simlock homes hold a claim on (each
	// is running or being changed), by platform. A claim whose platform
	// cannot be read is counted under "": the host total only.
	Others map[string]int
	// External counts devices running outside simlock, by platform.
	External map[string]int
	// RetryAfter is the hint a refusal at the host limit carries (0: 5 s).
	RetryAfter time.Duration
	// Waiting counts other homes' live requests held back only by a host
	// limit, by platform (ADR 0061): room this engine keeps warm is room
	// they wait for, so they count as demand when warmth is weighed.
	Waiting map[string]int
	// Held holds back every start a host limit covers because the host
	// registry refused one (HostFullError), keyed "" for the host's limit
	// or a platform for its own, with the figures of that refusal. The
	// registry counts every claim, this engine's devices shutting down
	// among them, where the planner counts those as gone, so a noWait
	// refusal meanwhile reports what the registry counted. The daemon's
	// next view of the host replaces it.
	Held map[string]HostCapacityError
}

// HostFullError is a hook's refusal of a start the host registry had no
// room for, counted inside one transaction against every home's claims and
// starts (the watcher's view this engine planned with may be a poll old).
// Others is the registry's count of the other homes, by platform; Capacity
// carries the figures a refused caller needs.
type HostFullError struct {
	Others   map[string]int
	Capacity *HostCapacityError
}

func (e *HostFullError) Error() string { return e.Capacity.Error() }
func (e *HostFullError) Unwrap() error { return e.Capacity }

// refused takes a start the host registry refused: the other
// homes are counted as the registry counted them, and starts under the
// refused limit wait until the daemon's next view of the host, so the
// planner neither repeats the start at once nor sheds anything for it.
func (b *hostBook) refused(err error) bool {
	var hf *HostFullError
	if !errors.As(err, &hf) {
		return false
	}
	b.usage.Others = maps.Clone(hf.Others)
	held := maps.Clone(b.usage.Held)
	if held == nil {
		held = map[string]HostCapacityError{}
	}
	scope := hf.Capacity.Platform
	if hf.Capacity.Limit == LimitHost {
		scope = ""
	}
	held[scope] = *hf.Capacity
	b.usage.Held = held
	b.log.Info("the host registry refused a start: the host is full", "platform", hf.Capacity.Platform, "limit", hf.Capacity.Limit,
		"booted", hf.Capacity.Booted, "max", hf.Capacity.Max)
	return true
}

// ExternalCounter is the optional driver ability to count the devices of
// its platform that run outside simlock (a simulator booted in Xcode's
// default device set, an emulator the user started). The daemon calls it
// in the background, never on a lease's path.
type ExternalCounter interface {
	ExternalRunning(ctx context.Context) (int, error)
}

// ErrHostCapacity: the host runs as many devices as its limit allows.
var ErrHostCapacity = errors.New("the host runs as many devices as its limit allows")

// HostCapacityError refuses a noWait request whose binding limit is the
// host's: every figure a caller needs to decide when to come back.
type HostCapacityError struct {
	Limit      string // the binding limit: LimitHost or host.platforms.<p>.maxRunning
	Max        int    // its value
	Booted     int    // running devices in its scope: this engine's, other homes', external
	Platform   string // the request's platform
	External   int    // devices running outside simlock in its scope
	RetryAfter time.Duration
}

func (e *HostCapacityError) Error() string {
	return fmt.Sprintf("%s: %d of %d running under %s (%d outside simlock) for a %s device", ErrHostCapacity, e.Booted, e.Max, e.Limit, e.External, e.Platform)
}

func (e *HostCapacityError) Unwrap() error { return ErrHostCapacity }

// SetHostUsage records what the rest of the host runs and replans: room
// another daemon freed is granted to the waiters at once, and a tighter
// host (a device booted outside simlock) holds back what is not yet
// started.
func (h HostDesk) SetHostUsage(u HostUsage) {
	e := h.e
	u.Platforms, u.Others, u.External, u.Waiting, u.Held = maps.Clone(u.Platforms), maps.Clone(u.Others), maps.Clone(u.External), maps.Clone(u.Waiting), maps.Clone(u.Held)
	e.section(func() {
		e.host.usage = u
		e.scheduleLocked()
		if !e.halt.halted() {
			e.host.shed(e.planInputLocked(nil, false), e.viewLocked(), e)
		}
	})
	e.notifyPositions()
}

// HostVictims are the ready devices to shut down, least recently used
// first, until no host limit is exceeded; only what eases an exceeded host
// limit is chosen (a platform's host limit: that platform's devices).
func HostVictims(in PlanInput) []string { return sweep(in, overHost) }

// overHost lists the host limits exceeded, global first.
func overHost(g *ledger) []string {
	var out []string
	if g.hostMax > 0 && g.runAll+g.hostAll > g.hostMax {
		out = append(out, LimitHost)
	}
	for _, p := range slices.Sorted(maps.Keys(g.hostPl)) {
		if h := g.hostPl[p]; h > 0 && g.running[p]+g.host[p] > h {
			out = append(out, hostPlatformLimit(p))
		}
	}
	return out
}

// resolved is the host usage with its default limit resolved.
func (b *hostBook) resolved(own Limits) HostUsage {
	u := b.usage
	if u.MaxRunning == 0 {
		u.MaxRunning = own.MaxRunning
	}
	if u.RetryAfter <= 0 {
		u.RetryAfter = defaultHostRetryAfter
	}
	return u
}

// refusal is the error a noWait request that could not be served is
// refused with: CAPACITY_EXHAUSTED's figures when what binds is the host,
// this daemon's own NO_CAPACITY otherwise. plan is the planner's snapshot,
// taken only when the host is what binds.
func (b *hostBook) refusal(w *waiter, plan func(queue []*waiter, warm bool) PlanInput) error {
	if !isHostLimit(w.waitLimit) {
		return ErrNoCapacity
	}
	in := plan(nil, false)
	g := newLedger(in)
	he := &HostCapacityError{Limit: w.waitLimit, Platform: w.spec.Platform, RetryAfter: in.Host.RetryAfter}
	p, scope, others, ownMax := w.spec.Platform, "", 0, in.Limits.MaxRunning
	if w.waitLimit == LimitHost {
		he.Max, he.Booted, he.External = in.Host.MaxRunning, g.runAll+g.hostAll, g.extAll
		for _, n := range in.Host.Others {
			others += n
		}
	} else {
		scope, others, ownMax = p, in.Host.Others[p], in.Limits.Platforms[p].MaxRunning
		he.Max, he.Booted, he.External = in.Host.Platforms[p], g.running[p]+g.host[p], in.Host.External[p]
	}
	r, held := in.Host.Held[scope]
	if !held || he.Booted >= he.Max {
		return he
	}
	// The planner's count leaves room, yet the registry refused a start in
	// this scope: it counted devices of this engine the planner no longer
	// does (one shutting down still holds its claim). Report the registry's
	// figures, and when this engine's own share of them already meets its
	// own limit, that limit is what binds: a request both bind is refused
	// against its own (NO_CAPACITY), as the planner does when it counts
	// them alike.
	he.Max, he.Booted, he.External = r.Max, r.Booted, r.External
	if own := r.Booted - r.External - others; ownMax > 0 && own+1 > ownMax {
		return ErrNoCapacity
	}
	return he
}

// refusedEvent is the fact of a noWait refusal, with the reason its error
// names and data the request's (refusalData).
func refusedEvent(w *waiter, err error, data map[string]any) events.Event {
	reason := "no-capacity"
	if errors.Is(err, ErrHostCapacity) {
		reason = "capacity-exhausted"
	}
	return events.Event{Type: "request.refused", RequesterID: w.requester, Platform: w.spec.Platform, Reason: reason, Data: data}
}

// HostReport is the host-wide view status shows, as the planner counts it.
type HostReport struct {
	MaxRunning int
	Booted     int // every running device on the host: ours, other homes', external
	Ours       int // this engine's running devices and reservations
	OtherHomes int
	External   int
	Platforms  map[string]HostPlatformReport
	// OthersWaiting counts other homes' requests held back by a host limit,
	// by platform, as this engine last heard of them; Yielded counts the
	// idle warm devices it shut down for such waiters (ADR 0061).
	OthersWaiting map[string]int
	Yielded       int
}

// HostPlatformReport is one platform's share of the host view.
type HostPlatformReport struct {
	MaxRunning int // 0: no platform limit of its own
	Booted     int
	Ours       int
	OtherHomes int
	External   int
}

// report is the host view status shows, from the planner's snapshot in
// and the platforms the engine has a driver for.
func (b *hostBook) report(in PlanInput, drivers map[string]Driver) HostReport {
	g := newLedger(in)
	r := HostReport{MaxRunning: in.Host.MaxRunning, Ours: g.runAll, Platforms: map[string]HostPlatformReport{},
		OthersWaiting: maps.Clone(in.Host.Waiting), Yielded: b.yielded}
	ps := map[string]bool{}
	for p := range drivers {
		ps[p] = true
	}
	for _, m := range []map[string]int{in.Host.Others, in.Host.External, in.Host.Platforms} {
		for p := range m {
			if p != "" {
				ps[p] = true
			}
		}
	}
	for _, n := range in.Host.Others {
		r.OtherHomes += n
	}
	for _, n := range in.Host.External {
		r.External += n
	}
	r.Booted = r.Ours + r.OtherHomes + r.External
	for p := range ps {
		pr := HostPlatformReport{MaxRunning: in.Host.Platforms[p], Ours: g.running[p], OtherHomes: in.Host.Others[p], External: in.Host.External[p]}
		pr.Booted = pr.Ours + pr.OtherHomes + pr.External
		r.Platforms[p] = pr
	}
	return r
}

// Host-wide fairness (ADR 0061). A daemon sees other homes' devices (their
// claims) but not their queues, so a home keeping idle warm devices booted
// could hold the room another home waits for indefinitely. Two halves meet
// here. This engine reports its own requests held back only by a host limit
// (HostWaits), which the daemon publishes in the host registry; and the
// other homes' published waiters reach it as HostUsage.Waiting, which counts
// as demand wherever warmth is weighed: idle warm devices are shut down for
// them (hostBook.shed), a released device is not kept booted for them
// (runningOverLocked), and the warm pool does not refill into their room
// (planWarm). This engine's own requests never yield to them: a grant or a
// start for a request is decided as before.

// HostWait is this engine's requests of one platform that wait only because
// a host limit binds.
type HostWait struct {
	Platform string
	Limit    string    // the binding host limit (LimitHost or host.platforms.<p>.maxRunning)
	Count    int       // how many requests
	Since    time.Time // when the oldest of them was queued
}

// HostWaits is the engine's current account of its requests held back by
// a host limit, by platform, sorted.
func (h HostDesk) HostWaits() []HostWait {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return hostWaits(e.queue.All())
}

// OnHostWaitChange registers f, called (outside the decision section, after
// it committed) each time HostWaits changes: a request starts or stops
// being held back by a host limit, is served, cancelled or times out. f must
// not block; it reads HostWaits itself, so a late call is never stale.
func (h HostDesk) OnHostWaitChange(f func()) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.host.waitFn = f
}

// hostWaits is the account of the queued requests held back only by a
// host limit, by platform, sorted.
func hostWaits(queue iter.Seq[*waiter]) []HostWait {
	by := map[string]*HostWait{}
	for w := range queue {
		// Working or evicting: this engine is already making its room.
		if w.working || w.evicting || w.device != "" || len(w.group) > 0 || !isHostLimit(w.waitLimit) {
			continue
		}
		p := w.spec.Platform
		hw, ok := by[p]
		if !ok {
			hw = &HostWait{Platform: p, Limit: w.waitLimit, Since: w.enqueuedAt}
			by[p] = hw
		}
		hw.Count++
		if w.enqueuedAt.Before(hw.Since) {
			hw.Since = w.enqueuedAt
		}
		if w.waitLimit != LimitHost {
			hw.Limit = w.waitLimit // the platform's own host limit is the narrower ask
		}
	}
	out := make([]HostWait, 0, len(by))
	for _, hw := range by {
		out = append(out, *hw)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Platform < out[j].Platform })
	return out
}

// noteWaits runs at the end of every decision section: when the account
// changed, it returns the daemon's hook, to run once the section's facts
// are out (nil: nothing to tell).
func (b *hostBook) noteWaits(queue *waitq.Queue[*waiter]) func() {
	if b.waitFn == nil {
		return nil
	}
	now := hostWaits(queue.All())
	if slices.Equal(now, b.waitLast) {
		return nil
	}
	b.waitLast = now
	return b.waitFn
}

// heldForWaiters reports whether extra more running devices of platform
// (0: keeping what runs) would leave a host limit exceeded once other
// homes' waiters are counted as running: the room is theirs.
func (g *ledger) heldForWaiters(platform string, extra int) bool {
	if g.waitAll == 0 {
		return false
	}
	if g.hostMax > 0 && g.runAll+g.hostAll+g.waitAll+extra > g.hostMax {
		return true
	}
	h := g.hostPl[platform]
	return platform != "" && h > 0 && g.wait[platform] > 0 && g.running[platform]+g.host[platform]+g.wait[platform]+extra > h
}

// overWaiting lists the host limits exceeded once other homes' waiters
// count as running (and the ones exceeded without them), global first.
func overWaiting(g *ledger) []string {
	out := overHost(g)
	if g.waitAll == 0 {
		return out
	}
	if g.hostMax > 0 && g.runAll+g.hostAll+g.waitAll > g.hostMax && !slices.Contains(out, LimitHost) {
		out = append(out, LimitHost)
	}
	for _, p := range slices.Sorted(maps.Keys(g.wait)) {
		l := hostPlatformLimit(p)
		if h := g.hostPl[p]; h > 0 && g.wait[p] > 0 && g.running[p]+g.host[p]+g.wait[p] > h && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// YieldVictims are the idle ready devices to shut down so other homes'
// waiters get the room they wait for, beyond those already being shut
// down (gone): a device of a waited-for platform first, least recently
// used first, and only while a host limit stays exceeded with the waiters
// counted. It includes what HostVictims would choose, so the two are never
// added up.
func YieldVictims(in PlanInput, gone []string) []string {
	in = markLeaving(in, gone)
	waited := func(d PlanDevice) bool { return in.Host.Waiting[d.Platform] > 0 }
	return sweepPreferring(in, overWaiting, waited)
}

// shed shuts down this engine's idle warm devices while the
// host is over one of its limits (a simulator booted by hand, another home
// that booted meanwhile) or another home waits for room this engine keeps
// warm: a warm device is spare capacity, and the host's limit is the
// machine's. Leased devices, and any device the general pool may not use
// (a slot's, a session's, one with work in flight), are never touched. in
// is the planner's snapshot; the engine sheds nothing while it stops or
// resets.
func (b *hostBook) shed(in PlanInput, v registryView, ops hostOps) {
	// A shutdown already under way for the host counts as done: shedding
	// again for the same shortfall would cost a second device its warmth.
	var gone []string
	for id, lock := range v.opLocks {
		if lock == "host" {
			gone = append(gone, id)
		}
	}
	over := HostVictims(markLeaving(in, gone))
	for _, id := range YieldVictims(in, gone) {
		reason := "host-limit"
		if !slices.Contains(over, id) {
			reason = "host-waiter"
		}
		p := v.devices[id].Platform
		o := ops.shutdownOp(id, "host", "shutdown-failed", func(DeviceRecord) {
			ops.emitLocked(events.Event{Type: "device.evicted", DeviceID: id, Platform: p, Reason: reason})
		})
		if err := ops.startOpLocked(o); err != nil {
			b.log.Warn("shut down a warm device for the host", "device", id, "reason", reason, "err", err)
			continue
		}
		if reason == "host-waiter" {
			b.yielded++
			b.log.Info("shutting down an idle warm device: another home waits for host room", "device", id, "platform", p)
		}
	}
}

// markLeaving is in with the devices in ids counted as stopping.
func markLeaving(in PlanInput, ids []string) PlanInput {
	if len(ids) == 0 {
		return in
	}
	in.Devices = slices.Clone(in.Devices)
	for i := range in.Devices {
		if slices.Contains(ids, in.Devices[i].ID) {
			in.Devices[i].Leaving = true
		}
	}
	return in
}

// SetForeignClaims replaces the engine's view of which of its devices
// another owner on the host holds (device id -> a description of the
// holder, for logs and status). Those devices leave the general pool: the
// planner grants, boots, evicts and sweeps none of them. The daemon
// derives the map from the host registry whenever that changes, so the
// engine reads only this in-memory copy under its lock and never the
// registry itself.
func (h HostDesk) SetForeignClaims(held map[string]string) {
	e := h.e
	e.section(func() {
		if maps.Equal(e.host.foreign, held) {
			return
		}
		e.host.foreign = maps.Clone(held)
		e.scheduleLocked()
	})
	e.notifyPositions()
}

// ForeignHolder reports who else on the host holds device id, if anyone,
// as of the last SetForeignClaims.
func (h HostDesk) ForeignHolder(id string) (string, bool) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.host.holder(id)
}

// holder reports who else on the host holds device id, if anyone.
func (b *hostBook) holder(id string) (string, bool) {
	h, ok := b.foreign[id]
	return h, ok
}
