package core

import (
	"slices"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// Host-wide fairness (ADR 0061). A daemon sees other homes' devices (their
// claims) but not their queues, so a home keeping idle warm devices booted
// could hold the room another home waits for indefinitely. Two halves meet
// here. This engine reports its own requests held back only by a host limit
// (HostWaits), which the daemon publishes in the host registry; and the
// other homes' published waiters reach it as HostUsage.Waiting, which counts
// as demand wherever warmth is weighed: idle warm devices are shut down for
// them (shedOverHostLocked), a released device is not kept booted for them
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
func (e *Engine) HostWaits() []HostWait {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hostWaitsLocked()
}

// OnHostWaitChange registers f, called (outside the decision section, after
// it committed) each time HostWaits changes: a request starts or stops
// being held back by a host limit, is served, cancelled or times out. f must
// not block; it reads HostWaits itself, so a late call is never stale.
func (e *Engine) OnHostWaitChange(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hostWaitFn = f
}

func (e *Engine) hostWaitsLocked() []HostWait {
	by := map[string]*HostWait{}
	for _, w := range e.queue.Entries() {
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

// noteHostWaitsLocked runs at the end of every decision section: when the
// account changed, the daemon is told once the section's facts are out.
func (e *Engine) noteHostWaitsLocked() {
	if e.hostWaitFn == nil {
		return
	}
	now := e.hostWaitsLocked()
	if slices.Equal(now, e.hostWaitLast) {
		return
	}
	e.hostWaitLast = now
	e.afterUnlock = append(e.afterUnlock, e.hostWaitFn)
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
	ps := make([]string, 0, len(g.wait))
	for p := range g.wait {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	for _, p := range ps {
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

// shedOverHostLocked shuts down this engine's idle warm devices while the
// host is over one of its limits (a simulator booted by hand, another home
// that booted meanwhile) or another home waits for room this engine keeps
// warm: a warm device is spare capacity, and the host's limit is the
// machine's. Leased devices, and any device the general pool may not use
// (a slot's, a session's, one with work in flight), are never touched.
func (e *Engine) shedOverHostLocked() {
	if e.stopping || e.maintenance {
		return
	}
	in := e.planInputLocked(nil, false)
	// A shutdown already under way for the host counts as done: shedding
	// again for the same shortfall would cost a second device its warmth.
	var gone []string
	for id, lock := range e.opLocks {
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
		p := e.devices[id].Platform
		o := e.shutdownOp(id, "host", "shutdown-failed", func(DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.evicted", DeviceID: id, Platform: p, Reason: reason})
		})
		if err := e.startOpLocked(o); err != nil {
			e.log.Warn("shut down a warm device for the host", "device", id, "reason", reason, "err", err)
			continue
		}
		if reason == "host-waiter" {
			e.yielded++
			e.log.Info("shutting down an idle warm device: another home waits for host room", "device", id, "platform", p)
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
