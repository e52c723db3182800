package core

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/simlock/simlock/internal/core/events"
)

// Multi-device leases (ADR 0043). A group request asks for several devices
// and is granted all of them in one commit or none. It never holds a device
// while it waits for another: when the planner cannot serve every member at
// once, the group takes nothing and requests behind it may be served
// instead. Each such pass on one of the group's platforms is counted; once
// the count reaches the bypass budget the group stops being passed: the
// planner charges what the group can use now and makes every later request
// on the group's platforms wait, so capacity that frees up can only go to
// the group (or to requests older than it) until it is granted.

const (
	// DefaultMaxGroupSize bounds the members of one request.
	DefaultMaxGroupSize = 4
	// DefaultGroupBypass is how often a waiting group may be passed.
	DefaultGroupBypass = 8
	// LimitGroup names the wait of a request held back behind a group
	// whose bypass budget is spent.
	LimitGroup = "queue.groupBypass"
)

// Decisions for a group waiter.
const (
	// DecideGrantGroup leases every member's ready device (Members' DeviceIDs) at once.
	DecideGrantGroup DecisionKind = "grant-group"
	// DecidePrepareGroup starts the boots, provisions or evictions in
	// Members, none of it held for the group: the devices join the general
	// pool, and the group is planned again once the work has settled.
	DecidePrepareGroup DecisionKind = "prepare-group"
)

// planGroup plans a group waiter: its members one after another against a
// copy of the plan's state, so nothing is taken unless the outcome says so.
func (p *planner) planGroup(w PlanWaiter) Decision {
	block := func() {
		if !w.Blocking {
			return
		}
		if p.blocked == nil {
			p.blocked = map[string]bool{}
		}
		for _, m := range w.Group {
			p.blocked[m.Platform] = true
		}
	}
	if w.Working {
		block()
		return Decision{Kind: DecideInFlight}
	}
	taken, g := p.taken, p.g
	p.taken, p.g = make(map[string]bool, len(taken)), g.clone()
	for k, v := range taken {
		p.taken[k] = v
	}
	blocked := p.blocked
	p.blocked = nil // the group's own members are never held back by it
	members := make([]Decision, 0, len(w.Group))
	grants, waits, evicts := 0, "", false
	for i, m := range w.Group {
		d := p.planWaiter(m)
		d.Waiter = i // the member it serves
		members = append(members, d)
		switch d.Kind {
		case DecideGrant:
			grants++
		case DecideWait:
			if waits == "" {
				waits = d.Limit
			}
		case DecideEvict:
			evicts = true
		}
	}
	p.blocked = blocked
	commit := func(ok bool) {
		if !ok {
			p.taken, p.g = taken, g
		}
	}
	switch {
	case grants == len(w.Group):
		commit(true)
		return Decision{Kind: DecideGrantGroup, Members: members}
	case waits != "":
		// Passed over unless its budget is spent; then what it could use
		// now stays charged to it, and nothing behind it on its platforms
		// is served.
		commit(w.Blocking)
		block()
		return Decision{Kind: DecideWait, Limit: waits}
	}
	commit(true)
	block()
	var work []Decision
	for _, d := range members {
		// Evictions first, alone: what they free is planned next time.
		if d.Kind == DecideEvict || (!evicts && d.Kind != DecideGrant) {
			work = append(work, d)
		}
	}
	return Decision{Kind: DecidePrepareGroup, Members: work}
}

// heldBack is the wait of a request behind a group whose budget is spent.
func (p *planner) heldBack(w PlanWaiter) (Decision, bool) {
	if len(w.Group) == 0 && p.blocked[w.Platform] && !w.Working {
		return Decision{Kind: DecideWait, Limit: LimitGroup}, true
	}
	return Decision{}, false
}

// ---- the engine's side ----

// groupBook is what the engine keeps for multi-device requests (ADR
// 0043): the size bound and the bypass budget, and how a group is planned,
// prepared and checked. Its methods run only inside the decision section
// (check before it); the group's device work goes through groupOps.
type groupBook struct {
	maxSize, bypass int
	limits          func() Limits     // the capacity strategy's limits, read when a group is checked
	footprint       func(Spec) uint64 // a running device's RAM (footprintLocked)
	reg             *registry
	ops             groupOps
	log             *slog.Logger
}

// groupOps is the device work a group's preparation starts, satisfied by
// *Engine: a boot or a provision as the general pool's own work, and the
// group's own eviction.
type groupOps interface {
	startBootLocked(w *waiter, id string)
	startProvisionLocked(w *waiter, spec Spec) string
	startEvictLocked(w *waiter, id string, destroy bool)
}

// plan is a group waiter as the planner sees it.
func (b *groupBook) plan(w *waiter) PlanWaiter {
	pw := PlanWaiter{Platform: w.spec.Platform, SpecKey: w.key, NoWait: w.noWait,
		Working: w.evicting || b.preparing(w), Blocking: w.bypassed >= b.bypass}
	for _, s := range w.group {
		pw.Group = append(pw.Group, PlanWaiter{Platform: s.Platform, SpecKey: s.Key(), RAM: b.footprint(s)})
	}
	return pw
}

// preparing reports whether device work started for group w is still in
// flight; once all of it settled the group is planned again.
func (b *groupBook) preparing(w *waiter) bool {
	for id := range w.prep {
		if _, ok := b.reg.devices[id]; ok && b.reg.opLocks[id] != "" {
			return true
		}
		delete(w.prep, id)
	}
	return false
}

// countBypass charges every waiting group with the requests behind it on
// its platforms that this plan serves.
func (b *groupBook) countBypass(ds []Decision, queue []*waiter) {
	var open []*waiter
	for _, d := range ds {
		if d.Waiter < 0 {
			continue
		}
		w := queue[d.Waiter]
		if len(w.group) > 0 {
			if d.Kind != DecideGrantGroup {
				open = append(open, w)
			}
			continue
		}
		switch d.Kind {
		case DecideGrant, DecideBoot, DecideProvision, DecideEvict:
		default:
			continue
		}
		for _, g := range open {
			if g.groupHasPlatform(w.spec.Platform) && g.bypassed < b.bypass {
				g.bypassed++
				if g.bypassed == b.bypass {
					b.log.Debug("group request's bypass budget spent; holding capacity for it", "requester", g.requester)
				}
			}
		}
	}
}

func (w *waiter) groupHasPlatform(p string) bool {
	for _, s := range w.group {
		if s.Platform == p {
			return true
		}
	}
	return false
}

// prepare starts the device work a group needs before it can be granted
// at once. Boots and provisions run as the general pool's own work
// (nothing is held for the group); an eviction is the group's, so it is
// not started twice.
func (b *groupBook) prepare(w *waiter, work []Decision) {
	w.prepared = true
	if w.prep == nil {
		w.prep = map[string]bool{}
	}
	for _, d := range work {
		switch d.Kind {
		case DecideBoot:
			w.prep[d.DeviceID] = true
			b.ops.startBootLocked(nil, d.DeviceID)
		case DecideProvision:
			if id := b.ops.startProvisionLocked(nil, w.group[d.Waiter]); id != "" {
				w.prep[id] = true
			}
		case DecideEvict:
			if !w.evicting {
				b.ops.startEvictLocked(w, d.DeviceID, d.Destroy)
			}
		}
	}
}

// grantGroupLocked commits one lease over every member's device.
func (e *Engine) grantGroupLocked(w *waiter, members []Decision) {
	now := e.now()
	ids := make([]string, len(members))
	devs := make([]DeviceRecord, len(members))
	for i, m := range members {
		d := *e.reg.devices[m.DeviceID]
		d.State, d.StateSince, d.LastLeasedAt = StateLeased, now, now
		ids[i], devs[i] = d.ID, d
	}
	l := LeaseRecord{
		ID: "lse_" + e.newID(), DeviceID: ids[0], Members: ids[1:], RequesterID: w.requester, OwnerID: w.owner,
		Platform: devs[0].Platform, TTL: w.ttl, GrantedAt: now, ExpiresAt: now.Add(w.ttl), LastRenewedAt: now,
	}
	w.stampLease(&l, now)
	if err := e.commitLocked(Changes{PutDevices: devs, PutLeases: []LeaseRecord{l}, PutRequests: e.reqs.grantedReceipt(e.store, w, l)}); err != nil {
		e.log.Error("group grant commit failed", "devices", ids, "err", err)
		e.queue.remove(w)
		w.deliver(result{err: err})
		return
	}
	e.queue.remove(w)
	e.armExpiryLocked(l)
	e.emitLocked(events.Event{Type: "lease.granted", LeaseID: l.ID, DeviceID: ids[0], RequesterID: l.RequesterID, Platform: l.Platform,
		Data: map[string]any{"ttlMs": l.TTL.Milliseconds(), "waitedMs": now.Sub(w.enqueuedAt).Milliseconds(), "ownerId": l.OwnerID,
			"requestId": l.RequestID, "timing": l.Timing.Data(), "devices": ids}})
	e.pushLocked(w, Progress{Phase: "granted", DeviceID: ids[0]})
	w.deliver(result{grant: Grant{Lease: l, Device: devs[0], Members: devs}})
}

// check refuses a group the engine could never grant: too many members,
// a member a single request could not have, or more devices of a platform
// than its limits ever allow running at once.
func (b *groupBook) check(g []SpecRequest) error {
	if len(g) > b.maxSize {
		return fmt.Errorf("%w: %d devices asked for, at most %d (queue.maxGroupSize)", ErrBadRequest, len(g), b.maxSize)
	}
	if len(g) < 2 {
		return fmt.Errorf("%w: a device group needs at least two devices", ErrBadRequest)
	}
	lim := b.limits()
	per := map[string]int{}
	for _, s := range g {
		if s.Platform == "" {
			return fmt.Errorf("%w: every device of a group names its platform", ErrBadRequest)
		}
		if len(s.Resources) > 0 || s.Hardware != nil {
			return fmt.Errorf("%w: resources and hardware are not supported for a device group", ErrBadRequest)
		}
		per[s.Platform]++
	}
	var over []string
	for p, n := range per {
		if m := lim.Platforms[p].MaxRunning; m > 0 && n > m {
			over = append(over, fmt.Sprintf("%d %s devices, %s allows %d", n, p, platformLimit(p, LimitRunning), m))
		}
	}
	if lim.MaxRunning > 0 && len(g) > lim.MaxRunning {
		over = append(over, fmt.Sprintf("%d devices, %s allows %d", len(g), LimitRunning, lim.MaxRunning))
	}
	if len(over) > 0 {
		sort.Strings(over)
		return fmt.Errorf("%w: the group can never run at once: %s", ErrNoCapacity, strings.Join(over, "; "))
	}
	return nil
}

// resolveGroup resolves every member's spec through its platform's driver
// (outside the decision section, as a single request's spec is).
func resolveGroup(ctx context.Context, drivers map[string]Driver, r Request) ([]Spec, error) {
	if len(r.Group) == 0 {
		return nil, nil
	}
	out := make([]Spec, 0, len(r.Group))
	for _, m := range r.Group {
		drv, ok := drivers[m.Platform]
		if !ok {
			return nil, NewSpecError(ErrUnsupportedPlatform, fmt.Sprintf("no driver serves platform %q", m.Platform), "platforms", platformsOf(drivers))
		}
		m.RequesterID = r.RequesterID
		s, err := drv.ResolveSpec(ctx, m)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// groupPrint is a group's members for the request fingerprint.
func groupPrint(g []SpecRequest) []string {
	var out []string
	for _, m := range g {
		out = append(out, m.Platform+"/"+m.Model+"/"+m.OSVersion)
	}
	return out
}

// noWaitStranded reports a noWait group in q that must wait after work
// was started for it (the devices it prepared were taken meanwhile): it is
// refused, since noWait never queues, and the group holds nothing, so
// nothing is lost.
func noWaitStranded(w *waiter, q *queue) bool {
	return len(w.group) > 0 && w.noWait && w.prepared && len(w.prep) == 0 && q.Contains(w)
}

// requestPlatform is the platform a receipt records: a group's first
// member's.
func requestPlatform(r Request) string {
	if len(r.Group) > 0 {
		return r.Group[0].Platform
	}
	return r.Spec.Platform
}
