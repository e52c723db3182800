package core

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/ports"
)

// warmBook is the warm pool (ADR 0042): the configured targets, resolved
// once at startup, the targets the planner fills now, and the demand they
// follow when demand is on. It reads the registry only through the view
// the engine hands it, and its methods run only inside the decision
// section, as every book's do.
type warmBook struct {
	pol    DemandPolicy
	clock  ports.Clock
	floors []warmSpec  // the configured targets, resolved at startup
	specs  []warmSpec  // the warm targets the planner fills now (refresh)
	demand demandBook  // recorded concurrency per spec
	timer  ports.Timer // the next demand sample tick (arm)

	// What the startup resolve and the sample tick need of the engine.
	eng     warmWork
	halt    *halt             // a stopping engine arms no tick
	targets []WarmTarget      // the configured targets, resolved once (resolveWarmTargets)
	drivers map[string]Driver // resolve the configured targets
	log     *slog.Logger
}

// warmWork is the engine as the warm pool's tick sees it: the section,
// the registry view and the planner, satisfied by *Engine.
type warmWork interface {
	section(f func())
	viewLocked() registryView
	scheduleLocked()
}

// DemandPolicy makes the warm pool follow the leases it has seen (ADR 0042).
// The zero value is off: the warm pool is exactly the configured targets.
type DemandPolicy struct {
	Enabled bool
	// Window is how far back demand is remembered (default 1 h).
	Window time.Duration
	// Sample is the tick that records the concurrency while nothing changes,
	// so an idle spell weighs in and the p90 decays (default Window/60).
	Sample time.Duration
	// Spare keeps one ready device beyond the leased ones for every spec
	// leased within the window, so a release's purge never makes the next
	// execution wait.
	Spare bool
}

func (p DemandPolicy) withDefaults() DemandPolicy {
	if p.Window <= 0 {
		p.Window = time.Hour
	}
	if p.Sample <= 0 {
		p.Sample = p.Window / 60
	}
	return p
}

// Reasons a warm target keeps devices ready, in the words status shows.
const (
	WarmReasonConfigured = "configured"
	WarmReasonDemand     = "demand"
	WarmReasonSpare      = "spare"
)

// demandSample is one sample period's peak concurrency: a tick opens a
// period at the level of the moment, and every change within it raises the
// period's value to the highest level seen. Keeping peaks per period, not
// one sample per change, bounds the book at window/sample values per spec
// however many leases churn, and lets idle periods weigh as much as busy
// ones.
type demandSample struct {
	at time.Time // the period's start
	n  int
}

// demandSeries is one spec's concurrency (leases held plus requests
// queued), observed on every change and on each sample tick.
type demandSeries struct {
	spec     Spec
	samples  []demandSample // oldest first, within the window
	leased   int            // leases held at the last observation
	lastHeld time.Time      // when a lease of the spec was last seen held
}

// demandBook is every spec's series. It lives in the decision section and
// in memory only: a restart starts without history, so it provisions
// nothing until leases are seen again.
type demandBook struct {
	series map[string]*demandSeries
}

// demandNow is one spec's concurrency at an instant.
type demandNow struct {
	spec   Spec
	leased int
	queued int // queued requests of the spec
}

// observe records now's concurrency per spec: a tick opens a new period,
// a change raises the current period's peak. Periods that began before the
// window are dropped, and a series with nothing left in the window is
// forgotten.
func (b *demandBook) observe(at time.Time, cur map[string]demandNow, window time.Duration, tick bool) {
	if b.series == nil {
		b.series = map[string]*demandSeries{}
	}
	for key, c := range cur {
		if _, ok := b.series[key]; !ok && c.leased+c.queued > 0 {
			b.series[key] = &demandSeries{spec: c.spec}
		}
	}
	cutoff := at.Add(-window)
	for key, s := range b.series {
		c := cur[key]
		n := c.leased + c.queued
		if last := len(s.samples) - 1; tick || last < 0 {
			s.samples = append(s.samples, demandSample{at: at, n: n})
		} else if n > s.samples[last].n {
			s.samples[last].n = n
		}
		// A lease seen held now, or one that was held at the last look and
		// is gone now, was held until now.
		if c.leased > 0 || s.leased > 0 {
			s.lastHeld = at
		}
		s.leased = c.leased
		drop := 0
		for drop < len(s.samples) && s.samples[drop].at.Before(cutoff) {
			drop++
		}
		s.samples = s.samples[drop:]
		if n == 0 && s.lastHeld.Before(cutoff) && allZero(s.samples) {
			delete(b.series, key)
		}
	}
}

func allZero(ss []demandSample) bool {
	for _, s := range ss {
		if s.n != 0 {
			return false
		}
	}
	return true
}

// p90 is the nearest-rank 90th percentile of the periods' peaks in the
// window.
func (s *demandSeries) p90() int {
	if len(s.samples) == 0 {
		return 0
	}
	v := make([]int, len(s.samples))
	for i, x := range s.samples {
		v[i] = x.n
	}
	sort.Ints(v)
	rank := (len(v)*9 + 9) / 10 // ceil(0.9 * n)
	return v[rank-1]
}

// WarmTargetStatus explains one warm target: how many ready devices it
// keeps and why.
type WarmTargetStatus struct {
	Spec       Spec
	Count      int    // ready devices the target keeps
	Reason     string // WarmReason*: the term that sets Count
	Configured int    // the operator's floor (0: none)
	DemandP90  int    // p90 of concurrency over the window
	Leased     int    // leases held now
	Waiting    int    // requests queued now (each is served, or being served, first)
	Spare      bool   // the spare applies (a lease in the window)
	Ready      int    // ready devices of the spec now (plus the pool's own work in flight)
}

// WarmPoolStatus is the warm pool as status shows it.
type WarmPoolStatus struct {
	Demand  bool
	Window  time.Duration
	Targets []WarmTargetStatus
}

// countDemand counts, per spec, the devices leased and the devices
// queued requests ask for. A multi-device lease or request counts every
// member under its own spec: an iPhone + Pixel pair is demand for one of
// each, not for one iPhone.
func countDemand(v registryView) map[string]demandNow {
	cur := map[string]demandNow{}
	for _, l := range v.leases {
		for _, id := range l.DeviceIDs() {
			d, ok := v.devices[id]
			if !ok {
				continue
			}
			c := cur[d.Spec.Key()]
			c.spec, c.leased = d.Spec, c.leased+1
			cur[d.Spec.Key()] = c
		}
	}
	for k, q := range v.queue.bySpec {
		c := cur[k]
		if c.spec.Platform == "" {
			c.spec = q.spec
		}
		c.queued += q.n
		cur[k] = c
	}
	return cur
}

// plan computes every warm target from the configured floors and,
// when demand is on, the demand book: ready devices wanted are the most of
// the floor, p90 − leased − queued, and the spare. That keeps the devices in
// service (leased, coming for a queued request, or ready) at the larger of
// the p90 and the demand now. Floors come first, in
// the configured order (the planner fills targets in order and stops at the
// first that does not fit), then demand targets by spec key.
func (b *warmBook) plan(v registryView) []WarmTargetStatus {
	pol := b.pol
	cur := countDemand(v)
	cutoff := b.clock.Now().Add(-pol.Window)
	var out []WarmTargetStatus
	index := map[string]int{}
	for _, f := range b.floors {
		k := f.spec.Key()
		if i, ok := index[k]; ok {
			out[i].Configured += f.count
			continue
		}
		index[k] = len(out)
		out = append(out, WarmTargetStatus{Spec: f.spec, Configured: f.count})
	}
	if pol.Enabled {
		keys := make([]string, 0, len(b.demand.series))
		for k := range b.demand.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := index[k]; !ok {
				index[k] = len(out)
				out = append(out, WarmTargetStatus{Spec: b.demand.series[k].spec})
			}
		}
	}
	for i := range out {
		t := &out[i]
		k := t.Spec.Key()
		c := cur[k]
		t.Leased, t.Waiting = c.leased, c.queued
		t.Count, t.Reason = t.Configured, WarmReasonConfigured
		if s, ok := b.demand.series[k]; ok && pol.Enabled {
			t.DemandP90 = s.p90()
			// The requests queued now are served first, by the planner, so
			// they count as taken: the pool keeps ready what the p90 asks
			// beyond the devices held or coming for them.
			// Without a floor, demand is the reason even when it asks for
			// nothing now.
			if want := t.DemandP90 - t.Leased - t.Waiting; want > t.Count || t.Configured == 0 {
				t.Count, t.Reason = max(want, t.Count), WarmReasonDemand
			}
			t.Spare = pol.Spare && !s.lastHeld.IsZero() && !s.lastHeld.Before(cutoff)
			if t.Spare && t.Count < 1 {
				t.Count, t.Reason = 1, WarmReasonSpare
			}
		}
		t.Ready = b.have(v, k)
	}
	return out
}

// sample records the concurrency now (tick: even unchanged).
func (b *warmBook) sample(v registryView, tick bool) {
	if !b.pol.Enabled {
		return
	}
	b.demand.observe(b.clock.Now(), countDemand(v), b.pol.Window, tick)
}

// arm schedules the next sample tick, fire, unless demand is off or the
// engine is stopping.
func (b *warmBook) arm(stopping bool, fire func()) {
	if !b.pol.Enabled || stopping {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer = b.clock.AfterFunc(b.pol.Sample, fire)
}

// demandTick is the demand sample tick: it records the concurrency even
// unchanged and re-plans, so a target that decayed lets its devices go and
// one that grew is filled.
func (b *warmBook) demandTick() {
	b.eng.section(func() {
		if b.halt.stopping {
			return
		}
		b.sample(b.eng.viewLocked(), true)
		b.eng.scheduleLocked()
		b.arm(b.halt.stopping, b.demandTick)
	})
}

// WarmDesk is the warm pool's counter: the daemon's status reads every
// warm target through it. Its entry enters the decision section as the
// engine's own entries do. Engine.Warm hands one out; the zero value is
// not usable.
type WarmDesk struct{ e *Engine }

// Warm is the warm pool's desk (the daemon's status uses it).
func (e *Engine) Warm() WarmDesk { return WarmDesk{e} }

// WarmPool reports every warm target and why it keeps what it keeps.
func (w WarmDesk) WarmPool() WarmPoolStatus {
	e := w.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return WarmPoolStatus{Demand: e.cfg.Demand.Enabled, Window: e.cfg.Demand.Window, Targets: e.warm.plan(e.viewLocked())}
}

// warmSpec is a warm-pool target: a configured one is resolved once at
// startup, so keeping the pool full never calls ResolveSpec again (and can
// never trigger a download); a demand one is the spec of a leased device.
type warmSpec struct {
	spec  Spec
	count int
}

// resolveWarmTargets turns the configured targets into concrete specs.
// A target that does not resolve is logged and skipped.
func (b *warmBook) resolveWarmTargets(ctx context.Context) {
	var out []warmSpec
	for _, t := range b.targets {
		drv, ok := b.drivers[t.Spec.Platform]
		if !ok || t.Count <= 0 {
			continue
		}
		req := t.Spec
		req.AllowDownload = false
		spec, err := drv.ResolveSpec(ctx, req)
		if err != nil {
			b.log.Warn("warm pool target does not resolve; skipping it", "platform", req.Platform, "model", req.Model, "os", req.OSVersion, "err", err)
			continue
		}
		out = append(out, warmSpec{spec: spec, count: t.Count})
	}
	b.eng.section(func() {
		b.floors = out
		b.eng.scheduleLocked()
		b.arm(b.halt.stopping, b.demandTick)
	})
}

// refresh recomputes the warm targets the planner fills: the configured
// floors and, with demand on, what the recorded demand asks for. Demand
// targets are the specs of devices leased before, so keeping them ready
// never resolves a spec and can never trigger a download.
func (b *warmBook) refresh(v registryView) {
	if !b.pol.Enabled {
		// The hot path pays nothing for demand when it is off.
		b.specs = b.floors
		return
	}
	b.sample(v, false)
	b.specs = nil
	for _, t := range b.plan(v) {
		if t.Count > 0 {
			b.specs = append(b.specs, warmSpec{spec: t.Spec, count: t.Count})
		}
	}
}

// have counts what a warm target already has: ready devices of
// the spec the pool may use, plus the pool's own work and reclaims in flight. Filling the
// rest is the planner's (Plan), off the request path: only when no request
// is waiting, since demand always comes first.
func (b *warmBook) have(v registryView, key string) int {
	have := 0
	for _, d := range v.devices {
		// A device being reclaimed comes back ready: counting it keeps a
		// release from making the pool provision a device it does not need.
		if d.Spec.Key() == key && ((d.State == StateReady && v.pool(d)) || d.State == StateReclaiming || v.opLocks[d.ID] == "warm") {
			have++
		}
	}
	return have
}

// keep marks the ready devices the warm targets account for
// (the most recently used first), which the idle rules leave alone: shutting
// them down would only make the pool replace them.
func (b *warmBook) keep(v registryView) map[string]bool {
	keep := map[string]bool{}
	for _, ws := range b.specs {
		var ready []*DeviceRecord
		for _, d := range v.devices {
			if d.State == StateReady && d.Spec.Key() == ws.spec.Key() && v.pool(d) {
				ready = append(ready, d)
			}
		}
		sort.Slice(ready, func(i, j int) bool { return lastUse(ready[i]).After(lastUse(ready[j])) })
		for i := 0; i < len(ready) && i < ws.count; i++ {
			keep[ready[i].ID] = true
		}
	}
	return keep
}
