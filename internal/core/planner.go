package core

import (
	"maps"
	"slices"
	"sort"
	"time"
)

// The acquisition planner is a pure function: Plan reads a snapshot of the
// registry, the limits and the queue and returns one decision per waiter.
// The engine builds the snapshot inside the decision section and applies the
// decisions with its existing start/grant operations; nothing here touches
// a driver, a clock or the store, so every rule is a table test.

// Names of the limits a decision can be bound by, spelled as in the config.
const (
	LimitRunning  = "maxRunning"
	LimitManaged  = "maxManaged"
	LimitRAM      = "ramBudget"
	LimitCPU      = "cpuBudget"
	limitPlatform = "platforms."
)

func platformLimit(p, which string) string { return limitPlatform + p + "." + which }

// PlanDevice is one device as the planner sees it.
type PlanDevice struct {
	ID       string
	Platform string
	SpecKey  string
	State    DeviceState
	// Usable: idle inventory (pool.idle). A device that is not
	// usable still counts against capacity.
	Usable bool
	// System is its owner-system mark: only a waiter of the same System
	// is granted or booted it ("" is the general pool, so Usable with an
	// empty System is pool.general). Evictions and sweeps,
	// which serve nobody with the device, take any mark.
	System string
	// Yields: not usable, but an idle slot device (pool.slotYields) a
	// running limit may shut down for anyone's start, as it would a warm
	// device. It is never destroyed, so it eases running limits only.
	Yields bool
	// Reserved: device work in flight holds a running reservation for it
	// (a provision or boot), so it counts as running while not yet in a
	// running state.
	Reserved bool
	// Leaving: its shutdown is already under way and it counts as stopped.
	Leaving bool
	RAM     uint64
	LastUse time.Time
	// Reclaimable: a golden (StateGolden) its driver can delete; the
	// planner may, when nothing else frees managed room (ADR 0053).
	Reclaimable bool
}

// PlanWaiter is one queued request.
type PlanWaiter struct {
	Platform string
	SpecKey  string
	RAM      uint64 // the footprint of a new device of its spec
	NoWait   bool
	// Working: device work for it is in flight; it is not planned again.
	Working bool
	// Evicting: an eviction for it is in flight; it gets no second one
	// until that settles (and is then re-planned against what it freed).
	Evicting bool
	// Group lists the members of a multi-device request (group.go); its
	// Blocking says the group's bypass budget is spent.
	Group    []PlanWaiter
	Blocking bool
	// System is the owner-system mark of the devices it may be served.
	System string
}

// PlanWarm is one warm-pool target still short of Want devices.
type PlanWarm struct {
	Platform string
	SpecKey  string
	RAM      uint64
	Want     int
}

// PlanInput is the snapshot the planner decides from.
type PlanInput struct {
	Limits  Limits
	Devices []PlanDevice
	Queue   []PlanWaiter
	Warm    []PlanWarm
	// Host is what the rest of the host runs, with its limit resolved
	// (HostUsage.MaxRunning 0 means no host-wide limit here).
	Host HostUsage
}

// DecisionKind is what the engine is told to do.
type DecisionKind string

const (
	DecideGrant     DecisionKind = "grant"     // lease the ready DeviceID now
	DecideBoot      DecisionKind = "boot"      // boot the shut-down DeviceID
	DecideProvision DecisionKind = "provision" // create a new device of the spec
	DecideEvict     DecisionKind = "evict"     // shut down (Destroy: delete) DeviceID to unblock Limit, then Then
	DecideWait      DecisionKind = "wait"      // nothing can serve it now; Limit names what binds
	DecideInFlight  DecisionKind = "in-flight" // device work for it is already running
)

// Decision is the planner's answer for one waiter (Waiter >= 0) or one
// warm-pool start (Waiter == -1, Warm the target's index).
type Decision struct {
	Kind     DecisionKind
	Waiter   int
	Warm     int
	DeviceID string
	Destroy  bool
	Limit    string
	// Then is what follows a completed eviction (boot or provision); for a
	// boot, BootID is the shut-down device it will boot.
	Then   DecisionKind
	BootID string
	// Members are a group's per-member decisions (group.go), each with
	// Waiter the member's index.
	Members []Decision
}

// ledger is the running and managed accounting a plan is checked against.
// It starts from the snapshot and every decision charges it with what it
// takes, so a later waiter is planned against the world the earlier
// decisions leave behind.
type ledger struct {
	lim     Limits
	running map[string]int
	managed map[string]int
	runAll  int
	manAll  int
	ram     uint64
	cpu     uint64 // thousandths of a CPU, each running device by its platform's charge
	// host counts, by platform, the running devices that are not this
	// engine's (other homes' and external ones): fixed for one plan, since
	// nothing this engine decides changes them. ext is the external share.
	host    map[string]int
	hostAll int
	extAll  int
	hostMax int
	hostPl  map[string]int
	// held: host limits a refused start holds back (HostUsage.Held).
	held map[string]HostCapacityError
	// wait counts, by platform, other homes' requests held back by a host
	// limit (hostbook.go); waitAll is their total. Never charged by a
	// decision of this engine's own requests: only warmth yields to them.
	wait    map[string]int
	waitAll int
}

func newLedger(in PlanInput) *ledger {
	g := &ledger{lim: in.Limits, running: map[string]int{}, managed: map[string]int{}, host: map[string]int{}}
	g.hostMax, g.hostPl, g.held = in.Host.MaxRunning, in.Host.Platforms, in.Host.Held
	for p, n := range in.Host.Others {
		g.host[p] += n
		g.hostAll += n
	}
	for p, n := range in.Host.External {
		g.host[p] += n
		g.hostAll += n
		g.extAll += n
	}
	g.wait = in.Host.Waiting
	for _, n := range in.Host.Waiting {
		g.waitAll += n
	}
	for _, d := range in.Devices {
		if d.State == StateDeleted {
			continue
		}
		g.managed[d.Platform]++
		g.manAll++
		if (isRunningState(d.State) && !d.Leaving) || d.Reserved {
			g.running[d.Platform]++
			g.runAll++
			g.ram += d.RAM
			g.cpu += g.lim.cpuCharge(d.Platform)
		}
	}
	return g
}

// blocks lists the limits that forbid one more running device of platform
// costing ram (and, with newDevice, one more managed device). Empty: it fits.
func (g *ledger) blocks(platform string, ram uint64, newDevice bool) []string {
	var out []string
	pl := g.lim.Platforms[platform]
	if pl.MaxRunning > 0 && g.running[platform]+1 > pl.MaxRunning {
		out = append(out, platformLimit(platform, LimitRunning))
	}
	if g.lim.MaxRunning > 0 && g.runAll+1 > g.lim.MaxRunning {
		out = append(out, LimitRunning)
	}
	if g.lim.RAMBudget > 0 && g.ram+ram > g.lim.RAMBudget {
		out = append(out, LimitRAM)
	}
	if g.lim.CPUBudget > 0 && g.cpu+g.lim.cpuCharge(platform) > g.lim.CPUBudget {
		out = append(out, LimitCPU)
	}
	// The host's limits come after this daemon's own, so a request both
	// bind is reported against its own (NO_CAPACITY): the host's figures
	// only matter once this daemon alone could serve it.
	if g.hostMax > 0 && g.runAll+g.hostAll+1 > g.hostMax {
		out = append(out, LimitHost)
	}
	if h := g.hostPl[platform]; h > 0 && g.running[platform]+g.host[platform]+1 > h {
		out = append(out, hostPlatformLimit(platform))
	}
	if _, held := g.held[""]; held && !slices.Contains(out, LimitHost) {
		out = append(out, LimitHost)
	}
	if _, held := g.held[platform]; held && platform != "" && !slices.Contains(out, hostPlatformLimit(platform)) {
		out = append(out, hostPlatformLimit(platform))
	}
	if newDevice {
		if pl.MaxManaged > 0 && g.managed[platform]+1 > pl.MaxManaged {
			out = append(out, platformLimit(platform, LimitManaged))
		}
		if g.lim.MaxManaged > 0 && g.manAll+1 > g.lim.MaxManaged {
			out = append(out, LimitManaged)
		}
	}
	return out
}

// over lists the running limits already exceeded that apply to platform
// (the global ones only, for an empty platform).
func (g *ledger) over(platform string) []string {
	var out []string
	if platform != "" {
		if pl := g.lim.Platforms[platform]; pl.MaxRunning > 0 && g.running[platform] > pl.MaxRunning {
			out = append(out, platformLimit(platform, LimitRunning))
		}
	}
	if g.lim.MaxRunning > 0 && g.runAll > g.lim.MaxRunning {
		out = append(out, LimitRunning)
	}
	if g.lim.RAMBudget > 0 && g.ram > g.lim.RAMBudget {
		out = append(out, LimitRAM)
	}
	if g.lim.CPUBudget > 0 && g.cpu > g.lim.CPUBudget {
		out = append(out, LimitCPU)
	}
	if g.hostMax > 0 && g.runAll+g.hostAll > g.hostMax {
		out = append(out, LimitHost)
	}
	if platform != "" {
		if h := g.hostPl[platform]; h > 0 && g.running[platform]+g.host[platform] > h {
			out = append(out, hostPlatformLimit(platform))
		}
	}
	return out
}

// atSharedHostLimit reports whether a host limit that applies to platform
// is reached while devices that are not this engine's take part in it.
func (g *ledger) atSharedHostLimit(platform string) bool {
	if g.hostMax > 0 && g.hostAll > 0 && g.runAll+g.hostAll >= g.hostMax {
		return true
	}
	h := g.hostPl[platform]
	return platform != "" && h > 0 && g.host[platform] > 0 && g.running[platform]+g.host[platform] >= h
}

func (g *ledger) start(platform string, ram uint64, newDevice bool) {
	g.running[platform]++
	g.runAll++
	g.ram += ram
	g.cpu += g.lim.cpuCharge(platform)
	if newDevice {
		g.managed[platform]++
		g.manAll++
	}
}

func (g *ledger) stop(platform string, ram uint64) {
	g.running[platform]--
	g.runAll--
	g.ram -= min(ram, g.ram)
	g.cpu -= min(g.lim.cpuCharge(platform), g.cpu)
}

func (g *ledger) forget(platform string) {
	g.managed[platform]--
	g.manAll--
}

func (g *ledger) clone() *ledger {
	c := *g
	c.running, c.managed = map[string]int{}, map[string]int{}
	// host and hostPl are never written during a plan: shared.
	for k, v := range g.running {
		c.running[k] = v
	}
	for k, v := range g.managed {
		c.managed[k] = v
	}
	return &c
}

// helps reports whether taking v out of the running set (or, with forget,
// out of existence) eases at least one of the binding limits.
func helps(v PlanDevice, binding []string, forget bool) bool {
	for _, l := range binding {
		switch l {
		case LimitRunning, LimitHost, LimitCPU:
			// Only this engine's own idle devices are candidates, and
			// stopping one eases the host's total as much as its own.
			if !forget || isRunningState(v.State) {
				return true
			}
		case LimitRAM:
			if (!forget || isRunningState(v.State)) && v.RAM > 0 {
				return true
			}
		case LimitManaged:
			if forget {
				return true
			}
		case platformLimit(v.Platform, LimitRunning), hostPlatformLimit(v.Platform):
			if !forget || isRunningState(v.State) {
				return true
			}
		case platformLimit(v.Platform, LimitManaged):
			if forget {
				return true
			}
		}
	}
	return false
}

func hasManaged(ls []string) bool {
	for _, l := range ls {
		if l == LimitManaged || (len(l) > len(LimitManaged) && l[len(l)-len(LimitManaged):] == LimitManaged) {
			return true
		}
	}
	return false
}

// planner holds one Plan call's working state.
type planner struct {
	in    PlanInput
	g     *ledger
	taken map[string]bool
	order []int            // device indexes, deterministic
	byKey map[string][]int // the same, per spec key: a waiter looks only at the devices that can serve it
	// waits remembers, per kind of waiter, the wait decided for it while
	// nothing has been taken or charged since (gen): the next waiter of the
	// same kind would get the same answer, so a long queue of requests
	// nothing can serve costs one lookup each, not a scan of the devices.
	waits map[waitKind]Decision
	gen   int
	// visits counts devices examined (tests prove the cost does not grow
	// with unrelated waiters).
	visits int
	// blocked: platforms on which a group whose bypass budget is spent
	// holds later requests back (group.go).
	blocked map[string]bool
}

type waitKind struct {
	platform, key string
	ram           uint64
	gen           int
}

// Plan decides, oldest waiter first, what serves each request: a ready
// matching device (the warmest); booting a shut-down matching one; a new
// device; or an eviction that unblocks exactly the limit that binds. A
// waiter nothing can serve now waits and is passed over, not blocked on.
// Each decision charges the ledger with what it takes before the next waiter
// is planned, so a later request never takes what an earlier one was given.
// When no request is left waiting, the warm-pool targets are filled from
// what capacity remains.
func Plan(in PlanInput) []Decision {
	out, _ := plan(in)
	return out
}

func plan(in PlanInput) ([]Decision, *planner) {
	p := &planner{in: in, g: newLedger(in), taken: map[string]bool{}, byKey: map[string][]int{}, waits: map[waitKind]Decision{}}
	for i := range in.Devices {
		p.order = append(p.order, i)
	}
	sort.SliceStable(p.order, func(a, b int) bool { return in.Devices[p.order[a]].ID < in.Devices[p.order[b]].ID })
	for _, i := range p.order {
		k := in.Devices[i].SpecKey
		p.byKey[k] = append(p.byKey[k], i)
	}
	out := make([]Decision, 0, len(in.Queue))
	waiting := false
	for i, w := range in.Queue {
		var d Decision
		wk := waitKind{platform: w.Platform, key: w.SpecKey, ram: w.RAM, gen: p.gen}
		// A group is planned whole every time: its first member's kind
		// says nothing about the others, so it neither uses nor leaves a
		// memo a single request of that kind would then trust.
		memoable := !w.Working && !w.Evicting && len(w.Group) == 0
		if memo, ok := p.waits[wk]; ok && memoable {
			d = memo
		} else {
			d = p.planWaiter(w)
			switch {
			case d.Kind == DecideWait && memoable:
				p.waits[wk] = d
			case d.Kind != DecideWait && d.Kind != DecideInFlight:
				p.gen++ // something was taken or charged: earlier waits may not hold
			}
		}
		d.Waiter = i
		if d.Kind == DecideWait || d.Kind == DecideEvict {
			waiting = true
		}
		out = append(out, d)
	}
	if !waiting {
		out = append(out, p.planWarm()...)
	}
	return out, p
}

// pick returns the usable, untaken device of owner system sys in exactly
// state st with key (any key when empty): the most recently used, or with
// lru the least.
func (p *planner) pick(st DeviceState, key, sys string, lru bool) (PlanDevice, bool) {
	var best PlanDevice
	found := false
	idx := p.order
	if key != "" {
		idx = p.byKey[key]
	}
	for _, i := range idx {
		p.visits++
		d := p.in.Devices[i]
		if d.State != st || !d.Usable || d.System != sys || d.Leaving || d.Reserved || p.taken[d.ID] {
			continue
		}
		if key != "" && d.SpecKey != key {
			continue
		}
		if !found {
			best, found = d, true
			continue
		}
		if (lru && d.LastUse.Before(best.LastUse)) || (!lru && d.LastUse.After(best.LastUse)) {
			best = d
		}
	}
	return best, found
}

func (p *planner) planWaiter(w PlanWaiter) Decision {
	if len(w.Group) > 0 {
		return p.planGroup(w)
	}
	if d, ok := p.heldBack(w); ok {
		return d
	}
	if w.Working {
		return Decision{Kind: DecideInFlight}
	}
	// 1. A warm device: grant at once.
	if d, ok := p.pick(StateReady, w.SpecKey, w.System, false); ok {
		p.taken[d.ID] = true
		return Decision{Kind: DecideGrant, DeviceID: d.ID}
	}
	// 2. A shut-down device of the same spec: boot it.
	boot, haveBoot := p.pick(StateShutdown, w.SpecKey, w.System, false)
	if haveBoot && len(p.g.blocks(w.Platform, boot.RAM, false)) == 0 {
		p.taken[boot.ID] = true
		p.g.start(w.Platform, boot.RAM, false)
		return Decision{Kind: DecideBoot, DeviceID: boot.ID}
	}
	// 3. A new device.
	if len(p.g.blocks(w.Platform, w.RAM, true)) == 0 {
		p.g.start(w.Platform, w.RAM, true)
		return Decision{Kind: DecideProvision}
	}
	// 4. Make room, but only where that unblocks what binds. The option
	// the eviction serves is the cheaper one: booting the shut-down device
	// needs running room only; a new device needs managed room as well.
	then, ram, newDevice := DecideProvision, w.RAM, true
	if haveBoot {
		then, ram, newDevice = DecideBoot, boot.RAM, false
	}
	binding := p.g.blocks(w.Platform, ram, newDevice)
	if w.Evicting {
		return Decision{Kind: DecideWait, Limit: binding[0]}
	}
	if haveBoot {
		p.taken[boot.ID] = true // whatever happens, no one else boots it now
	}
	victims, destroy, ok := p.victims(w, binding, ram, newDevice, boot.ID)
	if !ok {
		if haveBoot {
			delete(p.taken, boot.ID)
		}
		return Decision{Kind: DecideWait, Limit: binding[0]}
	}
	// Charge the ledger with the world after this eviction and the start it
	// makes room for, so later waiters cannot take the room being made.
	// The rest of the set is kept for this waiter's next evictions.
	v := victims[0]
	for _, x := range victims {
		p.taken[x.ID] = true
	}
	if isRunningState(v.State) {
		p.g.stop(v.Platform, v.RAM)
	}
	if destroy {
		p.g.forget(v.Platform)
	}
	p.g.start(w.Platform, ram, newDevice)
	d := Decision{Kind: DecideEvict, DeviceID: v.ID, Destroy: destroy, Limit: firstEased(v, binding, destroy), Then: then}
	if haveBoot {
		d.BootID = boot.ID
	}
	return d
}

func firstEased(v PlanDevice, binding []string, destroy bool) string {
	for _, l := range binding {
		if helps(v, []string{l}, destroy) {
			return l
		}
	}
	return binding[0]
}

// victims finds the devices whose eviction, least recently used first,
// leaves room for one more start of the waiter's platform costing ram.
// A single device that suffices alone is preferred; otherwise a set taken
// least recently used first, each member easing a limit that still binds
// and none the others make redundant (a RAM budget freed two small devices
// at a time). When no set suffices,
// nothing is evicted: an eviction that cannot lead to a grant only costs
// the evicted device's warmth.
func (p *planner) victims(w PlanWaiter, binding []string, ram uint64, newDevice bool, boot string) ([]PlanDevice, bool, bool) {
	// Running limits are eased by shutting a ready device down; managed
	// limits by destroying a shut-down one; both at once only by destroying
	// a ready one.
	destroy := hasManaged(binding)
	runBinds := !onlyManaged(binding)
	want := StateReady
	if !runBinds {
		want = StateShutdown
	}
	var cands []PlanDevice
	for _, i := range p.order {
		p.visits++
		d := p.in.Devices[i]
		if d.Leaving || d.Reserved || p.taken[d.ID] || d.ID == boot {
			continue
		}
		// An idle slot device yields only its running room: a shutdown,
		// never a destroy. Unlike a usable device it is a candidate even
		// of the waiter's spec, since it could never be granted instead.
		if d.Yields && !destroy && d.State == StateReady {
			cands = append(cands, d)
			continue
		}
		if d.State != want || !d.Usable || d.SpecKey == w.SpecKey {
			continue
		}
		cands = append(cands, d)
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].LastUse.Before(cands[b].LastUse) })
	if destroy {
		// Goldens come last: deleting one costs every later clone its
		// speed, so a leasable idle device goes first (ADR 0053).
		for _, i := range p.order {
			d := p.in.Devices[i]
			if d.State == StateGolden && d.Reclaimable && !d.Leaving && !d.Reserved && !p.taken[d.ID] {
				cands = append(cands, d)
			}
		}
	}
	fits := func(g *ledger) bool { return len(g.blocks(w.Platform, ram, newDevice)) == 0 }
	remove := func(g *ledger, v PlanDevice) {
		if isRunningState(v.State) {
			g.stop(v.Platform, v.RAM)
		}
		if destroy {
			g.forget(v.Platform)
		}
	}
	for _, v := range cands {
		g := p.g.clone()
		remove(g, v)
		if fits(g) {
			return []PlanDevice{v}, destroy, true
		}
	}
	g := p.g.clone()
	var set []PlanDevice
	left := cands
	for {
		still := g.blocks(w.Platform, ram, newDevice)
		if len(still) == 0 {
			break
		}
		i := nextVictim(left, still, destroy)
		if i < 0 {
			return nil, false, false
		}
		remove(g, left[i])
		set = append(set, left[i])
		left = append(left[:i:i], left[i+1:]...)
	}
	// Drop any member the rest of the set does not need.
	for i := 0; i < len(set) && len(set) > 1; {
		g := p.g.clone()
		for j, v := range set {
			if j != i {
				remove(g, v)
			}
		}
		if fits(g) {
			set = append(set[:i:i], set[i+1:]...)
			continue
		}
		i++
	}
	return set, destroy, len(set) > 0
}

// nextVictim picks, from LRU-ordered candidates, the first that eases a
// platform's own exceeded limit (only that platform's devices can), else the
// first that eases any of them; -1 when none does.
func nextVictim(cands []PlanDevice, exceeded []string, forget bool) int {
	var platformOnly []string
	for _, l := range exceeded {
		if (len(l) > len(limitPlatform) && l[:len(limitPlatform)] == limitPlatform) || (isHostLimit(l) && l != LimitHost) {
			platformOnly = append(platformOnly, l)
		}
	}
	if len(platformOnly) > 0 {
		for i, v := range cands {
			if helps(v, platformOnly, forget) {
				return i
			}
		}
	}
	for i, v := range cands {
		if helps(v, exceeded, forget) {
			return i
		}
	}
	return -1
}

func onlyManaged(ls []string) bool {
	for _, l := range ls {
		if !hasManaged([]string{l}) {
			return false
		}
	}
	return true
}

// planWarm starts work toward the warm targets with what capacity is left:
// booting a shut-down device of the spec first (faster than a new one, and
// it keeps the managed count down), else a new device; it stops at the
// first start that does not fit. The warm pool never evicts.
func (p *planner) planWarm() []Decision {
	var out []Decision
	for i, t := range p.in.Warm {
		for n := 0; n < t.Want; n++ {
			if d, ok := p.pick(StateShutdown, t.SpecKey, "", false); ok && len(p.g.blocks(t.Platform, d.RAM, false)) == 0 && !p.g.heldForWaiters(t.Platform, 1) {
				p.taken[d.ID] = true
				p.g.start(t.Platform, d.RAM, false)
				out = append(out, Decision{Kind: DecideBoot, Waiter: -1, Warm: i, DeviceID: d.ID})
				continue
			}
			if len(p.g.blocks(t.Platform, t.RAM, true)) != 0 || p.g.heldForWaiters(t.Platform, 1) {
				return out
			}
			p.g.start(t.Platform, t.RAM, true)
			out = append(out, Decision{Kind: DecideProvision, Waiter: -1, Warm: i})
		}
	}
	return out
}

// SweepVictims is the startup capacity sweep: the ready devices to shut
// down, least recently used first, until no running limit is exceeded.
// A device is chosen only when it eases a limit that is exceeded: iOS over
// its own limit never costs the Android device its warmth.
func SweepVictims(in PlanInput) []string { return sweep(in, overAll) }

// sweep shuts down ready devices, least recently used first, while exceeded
// names a limit one of them eases.
func sweep(in PlanInput, exceeded func(*ledger) []string) []string {
	return sweepPreferring(in, exceeded, nil)
}

// sweepPreferring is sweep with the devices prefer accepts (nil: none)
// tried before all others (hostbook.go: a waited-for platform's).
func sweepPreferring(in PlanInput, exceeded func(*ledger) []string, prefer func(PlanDevice) bool) []string {
	g := newLedger(in)
	var cands []PlanDevice
	for _, d := range in.Devices {
		// An idle slot device is shed like a warm one: a shutdown only.
		if d.State == StateReady && (d.Usable || d.Yields) && !d.Leaving {
			cands = append(cands, d)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		if prefer != nil && prefer(cands[a]) != prefer(cands[b]) {
			return prefer(cands[a])
		}
		if !cands[a].LastUse.Equal(cands[b].LastUse) {
			return cands[a].LastUse.Before(cands[b].LastUse)
		}
		return cands[a].ID < cands[b].ID
	})
	var out []string
	for {
		over := exceeded(g)
		if len(over) == 0 {
			return out
		}
		i := nextVictim(cands, over, false)
		if i < 0 {
			return out
		}
		v := cands[i]
		cands = append(cands[:i:i], cands[i+1:]...)
		g.stop(v.Platform, v.RAM)
		out = append(out, v.ID)
	}
}

// overAll lists every exceeded running limit, global and per platform.
func overAll(g *ledger) []string {
	out := g.over("")
	for _, p := range slices.Sorted(maps.Keys(g.lim.Platforms)) {
		if pl := g.lim.Platforms[p]; pl.MaxRunning > 0 && g.running[p] > pl.MaxRunning {
			out = append(out, platformLimit(p, LimitRunning))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(g.hostPl)) {
		if h := g.hostPl[p]; h > 0 && g.running[p]+g.host[p] > h {
			out = append(out, hostPlatformLimit(p))
		}
	}
	return out
}
