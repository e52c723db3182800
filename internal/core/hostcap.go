package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// Host-wide capacity (issue #10, ADR 0023). Several simlock daemons, and
// devices booted by hand, share one machine. The engine learns what the
// rest of the host runs only through HostUsage, which the daemon sets from
// the host registry and the drivers' external probes; nothing here does
// I/O, so the planner reads it under the decision lock like any other
// limit.

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

// HostLimits are the host's running limits in force: the whole host's (its
// default resolved to this engine's own running limit; 0: none) and each
// platform's.
func (e *Engine) HostLimits() (int, map[string]int) {
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

// hostRefusedLocked takes a start the host registry refused: the other
// homes are counted as the registry counted them, and starts under the
// refused limit wait until the daemon's next view of the host, so the
// planner neither repeats the start at once nor sheds anything for it.
func (e *Engine) hostRefusedLocked(err error) bool {
	var hf *HostFullError
	if !errors.As(err, &hf) {
		return false
	}
	e.host.Others = maps.Clone(hf.Others)
	held := maps.Clone(e.host.Held)
	if held == nil {
		held = map[string]HostCapacityError{}
	}
	scope := hf.Capacity.Platform
	if hf.Capacity.Limit == LimitHost {
		scope = ""
	}
	held[scope] = *hf.Capacity
	e.host.Held = held
	e.log.Info("the host registry refused a start: the host is full", "platform", hf.Capacity.Platform, "limit", hf.Capacity.Limit,
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
func (e *Engine) SetHostUsage(u HostUsage) {
	u.Platforms, u.Others, u.External, u.Waiting, u.Held = maps.Clone(u.Platforms), maps.Clone(u.Others), maps.Clone(u.External), maps.Clone(u.Waiting), maps.Clone(u.Held)
	e.section(func() {
		e.host = u
		e.scheduleLocked()
		e.shedOverHostLocked()
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
	ps := make([]string, 0, len(g.hostPl))
	for p := range g.hostPl {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	for _, p := range ps {
		if h := g.hostPl[p]; h > 0 && g.running[p]+g.host[p] > h {
			out = append(out, hostPlatformLimit(p))
		}
	}
	return out
}

// hostLocked is the host usage with its default limit resolved.
func (e *Engine) hostLocked(own Limits) HostUsage {
	u := e.host
	if u.MaxRunning == 0 {
		u.MaxRunning = own.MaxRunning
	}
	if u.RetryAfter <= 0 {
		u.RetryAfter = defaultHostRetryAfter
	}
	return u
}

// refusalLocked is the error a noWait request that could not be served is
// refused with: CAPACITY_EXHAUSTED's figures when what binds is the host,
// this daemon's own NO_CAPACITY otherwise.
func (e *Engine) refusalLocked(w *waiter) error {
	if !isHostLimit(w.waitLimit) {
		return ErrNoCapacity
	}
	in := e.planInputLocked(nil, false)
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

// refusedEventLocked records a noWait refusal with the reason its error
// names.
func (e *Engine) refusedEventLocked(w *waiter, err error) {
	reason := "no-capacity"
	if errors.Is(err, ErrHostCapacity) {
		reason = "capacity-exhausted"
	}
	e.emitLocked(events.Event{Type: "request.refused", RequesterID: w.requester, Platform: w.spec.Platform, Reason: reason, Data: e.refusalData(w.owner, err)})
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

func (e *Engine) hostReportLocked() HostReport {
	in := e.planInputLocked(nil, false)
	g := newLedger(in)
	r := HostReport{MaxRunning: in.Host.MaxRunning, Ours: g.runAll, Platforms: map[string]HostPlatformReport{},
		OthersWaiting: maps.Clone(in.Host.Waiting), Yielded: e.yielded}
	ps := map[string]bool{}
	for p := range e.drivers {
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
