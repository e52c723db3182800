package core

import (
	"fmt"
	"sort"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

// Limits bound how many devices may exist (managed) and run (running), and
// how much RAM the running devices may take together. A zero platform limit
// means "only the global limit applies"; a zero RAMBudget means RAM is not
// planned (the fixed strategy).
type Limits struct {
	MaxRunning int
	MaxManaged int
	Platforms  map[string]PlatformLimits
	// RAMBudget is the one budget every running device of every platform
	// draws from, each by its own footprint.
	RAMBudget uint64
	// CPUBudget, in thousandths of a CPU, is the processor share every
	// running device draws from, each by its platform's CPUPerDevice. Zero:
	// CPU is not planned (the fixed strategy).
	CPUBudget    uint64
	CPUPerDevice map[string]uint64
	cpuDefault   uint64 // the charge of a platform CPUPerDevice does not name
}

type PlatformLimits struct {
	MaxRunning int
	MaxManaged int
}

// CapacityStrategy decides the limits. The coordinator (the Engine) does the
// accounting; a strategy only says where the numbers come from.
type CapacityStrategy interface {
	Name() string
	Limits() Limits
}

// FixedStrategy pins the limits to configured numbers.
type FixedStrategy struct{ L Limits }

func (FixedStrategy) Name() string     { return "fixed" }
func (s FixedStrategy) Limits() Limits { return s.L }

// ResourceStrategy derives the limits from the machine: running devices
// share one RAM budget (the binding constraint for emulators) and one CPU
// budget, each device charged its own footprint in both, so a device that
// costs less (a slim simulator) is admitted by what it costs, not by a
// fixed share per device.
type ResourceStrategy struct {
	Stats ports.SystemStats
	// Drivers give each platform's CPU footprint (CPUFootprinter); a
	// platform without one is charged CPUsPerDevice.
	Drivers []Driver
	// RAMFraction of total RAM simlock may plan to use (default 0.6).
	RAMFraction float64
	// CPUsPerDevice (default 2) is what a device is charged when its
	// driver gives no figure.
	CPUsPerDevice int
	// ManagedPerRunning: how many devices may exist per running slot (default 3),
	// so shut-down warm inventory stays bounded on disk.
	ManagedPerRunning int
}

func (ResourceStrategy) Name() string { return "resource" }

// Limits gives the shared RAM and CPU budgets and a running count that
// never binds before the CPU budget does (as many of the cheapest device
// as the CPUs hold). There are deliberately no per-platform counts: those
// were computed from one platform-wide figure each and, added up, overran
// the machine (two emulators and two simulators admitted against a budget
// that fits three).
func (s ResourceStrategy) Limits() Limits {
	frac := s.RAMFraction
	if frac <= 0 || frac > 1 {
		frac = 0.6
	}
	cpuPer := s.CPUsPerDevice
	if cpuPer <= 0 {
		cpuPer = 2
	}
	perRun := s.ManagedPerRunning
	if perRun <= 0 {
		perRun = 3
	}
	def := uint64(cpuPer) * 1000
	charges := map[string]uint64{}
	cheapest, dearest := def, def
	for _, d := range s.Drivers {
		f, ok := d.(CPUFootprinter)
		if !ok {
			continue
		}
		if n := f.CPUMilliPerDevice(); n > 0 {
			charges[d.Platform()] = n
			cheapest, dearest = min(cheapest, n), max(dearest, n)
		}
	}
	// A machine smaller than one device still runs one, as before.
	budget := max(uint64(s.Stats.CPUCount())*1000, dearest)
	running := max(1, int(budget/cheapest))
	return Limits{MaxRunning: running, MaxManaged: running * perRun, Platforms: map[string]PlatformLimits{},
		RAMBudget: uint64(float64(s.Stats.TotalRAMBytes()) * frac), CPUBudget: budget, CPUPerDevice: charges, cpuDefault: def}
}

// CPUFootprinter is the optional driver ability to say what share of a CPU
// one running device of its platform takes, in thousandths of a CPU.
type CPUFootprinter interface {
	CPUMilliPerDevice() uint64
}

// cpuCharge is what one running device of platform is charged against the
// CPU budget.
func (l Limits) cpuCharge(platform string) uint64 {
	if l.CPUBudget == 0 {
		return 0
	}
	if n := l.CPUPerDevice[platform]; n > 0 {
		return n
	}
	if l.cpuDefault > 0 {
		return l.cpuDefault
	}
	return 2000
}

// defaultFootprint is what a device is charged when neither its spec nor its
// driver gives a figure.
const defaultFootprint = 2 << 30

// Footprinter is the optional driver ability to say how much RAM one
// running device of its platform needs when the device's own spec does not
// say (Spec.RAMBytes).
type Footprinter interface {
	RAMPerDevice() uint64
}

// StrategyInputs are what a strategy may derive limits from.
type StrategyInputs struct {
	Fixed   Limits
	Stats   ports.SystemStats
	Drivers []Driver
}

// StrategyFactories is the one registration point for capacity strategies:
// adding a policy touches neither the engine nor its callers.
func StrategyFactories() map[string]func(StrategyInputs) CapacityStrategy {
	return map[string]func(StrategyInputs) CapacityStrategy{
		"fixed": func(in StrategyInputs) CapacityStrategy { return FixedStrategy{L: in.Fixed} },
		"resource": func(in StrategyInputs) CapacityStrategy {
			return ResourceStrategy{Stats: in.Stats, Drivers: in.Drivers}
		},
	}
}

// NewStrategy builds the named strategy.
func NewStrategy(name string, in StrategyInputs) (CapacityStrategy, error) {
	f, ok := StrategyFactories()[name]
	if !ok {
		names := make([]string, 0)
		for n := range StrategyFactories() {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown capacity strategy %q (known: %v)", name, names)
	}
	return f(in), nil
}

// isRunningState: states that count against running capacity: the device
// process is up (or, for quarantined, might be, and must not be silently
// replaced).
func isRunningState(s DeviceState) bool {
	switch s {
	case StateReady, StateLeased, StateReclaiming, StateQuarantined:
		return true
	}
	return false
}

// footprintLocked is the RAM one running device of spec is charged: the
// spec's own figure when its driver gave one, else the driver's figure for
// the platform, else a default.
func (e *Engine) footprintLocked(s Spec) uint64 {
	if s.RAMBytes > 0 {
		return s.RAMBytes
	}
	if f, ok := e.drivers[s.Platform].(Footprinter); ok {
		if n := f.RAMPerDevice(); n > 0 {
			return n
		}
	}
	return defaultFootprint
}

// capacityBook is the capacity accounting over the registry: whether the
// running devices are over a limit, and the report status shows. It keeps
// no state of its own (the devices are the registry's, the limits the
// strategy's); its methods run only inside the decision section and reach
// the engine only through its func fields.
type capacityBook struct {
	reg      *registry
	host     *hostBook
	drivers  map[string]Driver
	strategy CapacityStrategy
	// plan is the plan's input with no queue (planInputLocked); footprint
	// a running device's RAM (footprintLocked); goldens adds the golden
	// devices' counts to a report (addGoldensLocked).
	plan      func() PlanInput
	footprint func(Spec) uint64
	goldens   func(r *CapacityReport)
}

// runningOverLocked reports whether running devices exceed a limit that
// applies to platform, or the RAM budget (used after a reclaim to decide
// keep-or-shutdown). An empty platform checks the global limits only.
// A host limit other homes or external devices share counts as over once
// it is reached: their waiters are invisible here, and a device kept warm
// would hold the slot they wait for (ADR 0023); and so does a host limit
// another home's waiter is held back by (ADR 0061).
func (b *capacityBook) runningOverLocked(platform string) bool {
	g := newLedger(b.plan())
	return len(g.over(platform)) > 0 || g.atSharedHostLimit(platform) || g.heldForWaiters(platform, 0)
}

// CapacityReport is the accounting as status shows it.
type CapacityReport struct {
	Strategy  string
	Limits    Limits
	Global    UsageReport
	Platforms map[string]UsageReport
	// DeviceRAM is the footprint each running or reserved device is charged.
	DeviceRAM map[string]uint64
	// Host is the host-wide view: every simlock home and external devices.
	Host HostReport
}

// UsageReport is one scope's usage. RAMBytes counts running devices and
// reservations together, as admission does.
type UsageReport struct {
	Running, Managed, Reserved int
	RAMBytes                   uint64
	// CPUMilli is what the same devices take from the CPU budget, in
	// thousandths of a CPU, each by its platform's charge as the planner
	// counts it (0 under a strategy that plans no CPU).
	CPUMilli uint64
	// Goldens is how many of Managed are golden devices (golden.go).
	Goldens int
}

// Capacity reports limits and current usage.
func (e *Engine) Capacity() CapacityReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.capacity.reportLocked()
}

// reportLocked is the accounting as status shows it.
func (b *capacityBook) reportLocked() CapacityReport {
	r := CapacityReport{Strategy: b.strategy.Name(), Limits: b.strategy.Limits(),
		Platforms: map[string]UsageReport{}, DeviceRAM: map[string]uint64{}, Host: b.host.report(b.plan(), b.drivers)}
	for p := range b.drivers {
		r.Platforms[p] = UsageReport{}
	}
	for _, d := range b.reg.devices {
		if d.State == StateDeleted {
			continue
		}
		u := r.Platforms[d.Platform]
		u.Managed++
		r.Global.Managed++
		charged := true
		switch {
		case isRunningState(d.State):
			u.Running++
			r.Global.Running++
		case b.reg.holdsReservation(d):
			u.Reserved++
			r.Global.Reserved++
		default:
			charged = false
		}
		if charged {
			ram := b.footprint(d.Spec)
			u.RAMBytes += ram
			r.Global.RAMBytes += ram
			r.DeviceRAM[d.ID] = ram
			cpu := r.Limits.cpuCharge(d.Platform)
			u.CPUMilli += cpu
			r.Global.CPUMilli += cpu
		}
		r.Platforms[d.Platform] = u
	}
	b.goldens(&r)
	return r
}

// StatusSnapshot is everything status.get reports about the engine, read in
// one decision section so a lease and its device always agree (never a lease
// whose device still reads reclaiming from the one before).
type StatusSnapshot struct {
	Devices []DeviceRecord // sorted by id
	Leases  []LeaseRecord  // sorted by grant time
	// Queue is the first contract.StatusQueueEntries queued requests in
	// FIFO order; QueueDepth counts them all, QueueByPlatform per platform
	// and QueueNext is the cursor that reads on (RequestDesk.QueuePage; 0:
	// Queue is the whole queue).
	Queue           []QueueEntry
	QueueDepth      int
	QueueByPlatform map[string]int
	QueueNext       uint64
	Capacity        CapacityReport
}

// Status reads devices, leases, queue and capacity at one instant.
func (e *Engine) Status() StatusSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queue.page(0, contract.StatusQueueEntries)
	s := StatusSnapshot{Devices: e.Sorted(), Capacity: e.capacity.reportLocked(), Leases: make([]LeaseRecord, 0, len(e.reg.leases)),
		Queue: q.Entries, QueueDepth: q.Depth, QueueByPlatform: q.ByPlatform, QueueNext: q.Next}
	for _, l := range e.reg.leases {
		s.Leases = append(s.Leases, *l)
	}
	sort.Slice(s.Leases, func(i, j int) bool { return s.Leases[i].GrantedAt.Before(s.Leases[j].GrantedAt) })
	return s
}
