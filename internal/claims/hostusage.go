package claims

import (
	"context"
	"errors"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// Host-wide capacity (ADR 0023): the engine plans against a HostUsage this
// file keeps current from two background sources, never from a lease's
// path: the host watcher's claims (other homes' devices) and each driver's
// external-device count (ExternalCounter), probed every few seconds.

// hostUsage is what this daemon last learned about the rest of the host.
type hostUsage struct {
	// pushMu orders pushes: the watcher and the external probe both push,
	// and an older view must never land after a newer one.
	pushMu   sync.Mutex
	mu       sync.Mutex
	others   map[string]int // claims of other homes, by key platform
	external map[string]int // last good external count, by platform
	extKnown map[string]bool
	extErr   map[string]string
	counters map[string]core.ExternalCounter
}

// externalEvery is how often external devices are counted: a few host
// polls, since a count shells out (simctl list, adb devices).
func (s *System) externalEvery() time.Duration {
	every := time.Duration(s.hostCfg.PollIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	return 5 * every
}

// setupHostUsage subscribes to the host watcher, finds the drivers that can
// count external devices, and gives the engine the configured host limits
// before anything is planned.
func (s *System) setupHostUsage(drivers []core.Driver) {
	u := &hostUsage{others: map[string]int{}, external: map[string]int{}, extKnown: map[string]bool{},
		extErr: map[string]string{}, counters: map[string]core.ExternalCounter{}}
	for _, drv := range drivers {
		if c, ok := drv.(core.ExternalCounter); ok {
			u.counters[drv.Platform()] = c
		}
	}
	s.hostUse = u
	s.OnHostChange(func(claims []hostreg.Status) {
		others := otherHomesRunning(claims, s.self.Home)
		u.mu.Lock()
		u.others = others
		u.mu.Unlock()
		s.pushHostUsage()
	})
	s.pushHostUsage()
}

// otherHomesRunning counts, by platform, the claims held by homes other
// than ours. A claim is held on a device that runs or is being changed, so
// nearly every claim counts: a live owner's, an inconsistent one (under ""
// when its key is unreadable: an unknown device is never free room), and
// an orphan whose daemon died (simulators and emulators outlive the daemon
// that booted them). The one exception is an orphan whose home is gone:
// the device sets and AVDs a home manages live under it, so its devices
// went with it, and counting them would shrink the host for good.
func otherHomesRunning(claims []hostreg.Status, self string) map[string]int {
	out := map[string]int{}
	for _, st := range claims {
		if st.Claim.Owner.Home == self {
			continue
		}
		if st.Class == hostreg.ClassOrphaned && st.Liveness == hostreg.LivenessHomeGone {
			continue
		}
		out[st.Key.Platform()]++
	}
	return out
}

// pushHostUsage hands the current view to the engine, which replans: a
// waiter is woken when another daemon freed room.
func (s *System) pushHostUsage() {
	u := s.hostUse
	u.pushMu.Lock()
	defer u.pushMu.Unlock()
	hc := s.hostCfg
	hu := core.HostUsage{MaxRunning: hc.MaxRunning, Platforms: map[string]int{}}
	for p, pl := range hc.Platforms {
		hu.Platforms[p] = pl.MaxRunning
	}
	u.mu.Lock()
	hu.Others, hu.External = maps.Clone(u.others), maps.Clone(u.external)
	u.mu.Unlock()
	hu.Waiting = s.othersWaiting() // hostwaiters.go
	s.hostDesk.SetHostUsage(hu)
}

// probeExternal counts external devices now and then every externalEvery,
// until ctx ends. A failed count keeps the last good one: unknown is never
// zero once something was seen. Before the first success the count is 0 and
// status says it is not known.
func (s *System) probeExternal(ctx context.Context) {
	u := s.hostUse
	if len(u.counters) == 0 {
		return
	}
	ps := make([]string, 0, len(u.counters))
	for p := range u.counters {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	for {
		changed := false
		for _, p := range ps {
			n, err := u.counters[p].ExternalRunning(ctx)
			if ctx.Err() != nil {
				return
			}
			u.mu.Lock()
			if err != nil {
				if u.extErr[p] != err.Error() {
					s.log.Warn("count devices running outside simlock; keeping the last count", "platform", p, "count", u.external[p], "err", err)
				}
				u.extErr[p] = err.Error()
			} else {
				changed = changed || !u.extKnown[p] || u.external[p] != n
				u.external[p], u.extKnown[p] = n, true
				delete(u.extErr, p)
			}
			u.mu.Unlock()
		}
		if changed {
			s.pushHostUsage()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(s.externalEvery()):
		}
	}
}

// HostCapacityOut is status.get's host view: the engine's counts, as the
// planner used them, with what this daemon knows about its external probes
// (nil before Bind, or without a system: a gateway).
func (s *System) HostCapacityOut(r core.HostReport) *contract.HostCapacity {
	if s == nil || s.hostUse == nil {
		return nil
	}
	out := &contract.HostCapacity{MaxRunning: r.MaxRunning, Booted: r.Booted, Ours: r.Ours, OtherHomes: r.OtherHomes,
		ExternalDevices: r.External, Platforms: map[string]contract.HostPlatformCapacity{}}
	var known map[string]bool
	var errs map[string]string
	if u := s.hostUse; u != nil {
		u.mu.Lock()
		known, errs = maps.Clone(u.extKnown), maps.Clone(u.extErr)
		u.mu.Unlock()
	}
	out.Waiters, out.Yielded = s.hostWaitersOut(), r.Yielded // hostwaiters.go
	for p, pr := range r.Platforms {
		out.Platforms[p] = contract.HostPlatformCapacity{MaxRunning: pr.MaxRunning, Booted: pr.Booted, Ours: pr.Ours,
			OtherHomes: pr.OtherHomes, ExternalDevices: pr.External, ExternalKnown: known[p], ExternalError: errs[p]}
	}
	return out
}

// CapacityExhausted maps a refusal at the host's limit (the daemon's error
// mapping calls it first): CAPACITY_EXHAUSTED, retryable, with the figures a caller needs.
// nil for any other error.
func CapacityExhausted(err error) *contract.Error {
	var he *core.HostCapacityError
	if !errors.As(err, &he) {
		return nil
	}
	ms := he.RetryAfter.Milliseconds()
	return contract.Errorf(contract.CodeCapacityExhausted, "%s", err.Error()).WithRetryAfter(ms).
		WithDetails("limit", he.Max, "limitName", he.Limit, "booted", he.Booted, "platform", he.Platform,
			"externalDevices", he.External, "retryAfterMs", ms)
}
