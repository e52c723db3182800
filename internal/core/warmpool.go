package core

import (
	"context"
	"sort"
)

// warmSpec is a warm-pool target: a configured one is resolved once at
// startup, so keeping the pool full never calls ResolveSpec again (and can
// never trigger a download); a demand one is the spec of a leased device.
type warmSpec struct {
	spec  Spec
	count int
}

// resolveWarmTargets turns the configured targets into concrete specs.
// A target that does not resolve is logged and skipped.
func (e *Engine) resolveWarmTargets(ctx context.Context) {
	var out []warmSpec
	for _, t := range e.cfg.WarmTargets {
		drv, ok := e.drivers[t.Spec.Platform]
		if !ok || t.Count <= 0 {
			continue
		}
		req := t.Spec
		req.AllowDownload = false
		spec, err := drv.ResolveSpec(ctx, req)
		if err != nil {
			e.log.Warn("warm pool target does not resolve; skipping it", "platform", req.Platform, "model", req.Model, "os", req.OSVersion, "err", err)
			continue
		}
		out = append(out, warmSpec{spec: spec, count: t.Count})
	}
	e.section(func() {
		e.warmFloors = out
		e.scheduleLocked()
		e.armDemandTickLocked()
	})
}

// refreshWarmLocked recomputes the warm targets the planner fills: the
// configured floors and, with demand on, what the recorded demand asks for.
// Demand targets are the specs of devices leased before, so keeping them
// ready never resolves a spec and can never trigger a download.
func (e *Engine) refreshWarmLocked() {
	if !e.cfg.Demand.Enabled {
		// The hot path pays nothing for demand when it is off.
		e.warmSpecs = e.warmFloors
		return
	}
	e.sampleDemandLocked(false)
	e.warmSpecs = nil
	for _, t := range e.warmPlanLocked() {
		if t.Count > 0 {
			e.warmSpecs = append(e.warmSpecs, warmSpec{spec: t.Spec, count: t.Count})
		}
	}
}

// warmHaveLocked counts what a warm target already has: ready devices of
// the spec the pool may use, plus the pool's own work and reclaims in flight. Filling the
// rest is the planner's (Plan), off the request path: only when no request
// is waiting, since demand always comes first.
func (e *Engine) warmHaveLocked(key string) int {
	have := 0
	for _, d := range e.devices {
		// A device being reclaimed comes back ready: counting it keeps a
		// release from making the pool provision a device it does not need.
		if d.Spec.Key() == key && ((d.State == StateReady && e.generalPoolMayUseLocked(d)) || d.State == StateReclaiming || e.opLocks[d.ID] == "warm") {
			have++
		}
	}
	return have
}

// warmKeepLocked marks the ready devices the warm targets account for
// (the most recently used first), which the idle rules leave alone: shutting
// them down would only make the pool replace them.
func (e *Engine) warmKeepLocked() map[string]bool {
	keep := map[string]bool{}
	for _, ws := range e.warmSpecs {
		var ready []*DeviceRecord
		for _, d := range e.devices {
			if d.State == StateReady && d.Spec.Key() == ws.spec.Key() && e.generalPoolMayUseLocked(d) {
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
