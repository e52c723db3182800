package core

import (
	"context"
	"sort"
)

// warmSpec is a warm-pool target resolved once at startup, so keeping the
// pool full never calls ResolveSpec again (and can never trigger a download).
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
		e.warmSpecs = out
		e.scheduleLocked()
	})
}

// fillWarmPoolLocked provisions toward the warm targets, off the request
// path: only when no request is waiting (demand always comes first) and
// capacity allows a new device.
func (e *Engine) fillWarmPoolLocked() {
	if len(e.warmSpecs) == 0 || e.stopping || e.maintenance {
		return
	}
	for _, w := range e.queue {
		if !w.working {
			return
		}
	}
	for _, ws := range e.warmSpecs {
		have := 0
		for _, d := range e.devices {
			if d.Spec.Key() == ws.spec.Key() && (d.State == StateReady || e.opLocks[d.ID] == "warm") {
				have++
			}
		}
		for ; have < ws.count; have++ {
			// A shut-down device of the spec boots faster than a new one
			// provisions and keeps the managed count down.
			if d := e.pickLocked(StateShutdown, ws.spec.Key(), false); d != nil && e.canStartLocked(ws.spec.Platform, false) {
				e.startBootLocked(nil, d.ID)
				continue
			}
			if !e.canStartLocked(ws.spec.Platform, true) {
				return
			}
			e.startProvisionLocked(nil, ws.spec)
		}
	}
}

// warmKeepLocked marks the ready devices the warm targets account for
// (the most recently used first), which the idle rules leave alone: shutting
// them down would only make the pool replace them.
func (e *Engine) warmKeepLocked() map[string]bool {
	keep := map[string]bool{}
	for _, ws := range e.warmSpecs {
		var ready []*DeviceRecord
		for _, d := range e.devices {
			if d.State == StateReady && d.Spec.Key() == ws.spec.Key() {
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
