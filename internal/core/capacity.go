package core

import (
	"fmt"
	"sort"

	"github.com/simlock/simlock/internal/ports"
)

// Limits bound how many devices may exist (managed) and run (running).
// A zero platform limit means "only the global limit applies".
type Limits struct {
	MaxRunning int
	MaxManaged int
	Platforms  map[string]PlatformLimits
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

// ResourceStrategy derives the limits from the machine: each running device
// costs RAM (the binding constraint for emulators) and a share of the CPUs.
type ResourceStrategy struct {
	Stats ports.SystemStats
	// RAMFraction of total RAM simlock may plan to use (default 0.6).
	RAMFraction float64
	// RAMPerDevice per platform in bytes, from the drivers (Footprinter);
	// a platform without a figure is planned at 2 GiB.
	RAMPerDevice map[string]uint64
	// CPUsPerDevice (default 2).
	CPUsPerDevice int
	// ManagedPerRunning: how many devices may exist per running slot (default 3),
	// so shut-down warm inventory stays bounded on disk.
	ManagedPerRunning int
}

func (ResourceStrategy) Name() string { return "resource" }

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
	per := map[string]uint64{}
	for k, v := range s.RAMPerDevice {
		per[k] = v
	}
	budget := uint64(float64(s.Stats.TotalRAMBytes()) * frac)
	byCPU := max(1, s.Stats.CPUCount()/cpuPer)
	l := Limits{Platforms: map[string]PlatformLimits{}}
	smallest := uint64(0)
	for p, ram := range per {
		if ram == 0 {
			continue
		}
		if smallest == 0 || ram < smallest {
			smallest = ram
		}
		n := max(1, min(byCPU, int(budget/ram)))
		l.Platforms[p] = PlatformLimits{MaxRunning: n, MaxManaged: n * perRun}
	}
	if smallest == 0 {
		smallest = 2 << 30
	}
	l.MaxRunning = max(1, min(byCPU, int(budget/smallest)))
	l.MaxManaged = l.MaxRunning * perRun
	return l
}

// Footprinter is the optional driver ability to say how much RAM one
// running device of its platform needs, for the resource strategy.
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
			ram := map[string]uint64{}
			for _, d := range in.Drivers {
				if f, ok := d.(Footprinter); ok {
					ram[d.Platform()] = f.RAMPerDevice()
				} else {
					ram[d.Platform()] = 2 << 30
				}
			}
			return ResourceStrategy{Stats: in.Stats, RAMPerDevice: ram}
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

// runningStates count against running capacity: the device process is up
// (or, for quarantined, might be, and must not be silently replaced).
func isRunningState(s DeviceState) bool {
	switch s {
	case StateReady, StateLeased, StateReclaiming, StateQuarantined:
		return true
	}
	return false
}

// usage is the current accounting for one scope (a platform, or global).
type usage struct{ running, managed, reserved int }

// usageLocked computes running/managed counts. Provisioning and
// boot-from-shutdown work holds a running reservation until its outcome is
// committed, so it is counted through reservations, not through state.
func (e *Engine) usageLocked(platform string) usage {
	var u usage
	for _, d := range e.devices {
		if platform != "" && d.Platform != platform {
			continue
		}
		if d.State == StateDeleted {
			continue
		}
		u.managed++
		if isRunningState(d.State) {
			u.running++
		}
	}
	for p, n := range e.reservations {
		if platform == "" || p == platform {
			u.reserved += n
		}
	}
	return u
}

// canStartLocked reports whether one more device of platform may start
// running, and, when provisioning, whether one more may exist. Global and
// platform limits are checked together.
func (e *Engine) canStartLocked(platform string, provisioning bool) bool {
	l := e.strategy.Limits()
	g := e.usageLocked("")
	if l.MaxRunning > 0 && g.running+g.reserved >= l.MaxRunning {
		return false
	}
	if provisioning && l.MaxManaged > 0 && g.managed >= l.MaxManaged {
		return false
	}
	if pl, ok := l.Platforms[platform]; ok {
		p := e.usageLocked(platform)
		if pl.MaxRunning > 0 && p.running+p.reserved >= pl.MaxRunning {
			return false
		}
		if provisioning && pl.MaxManaged > 0 && p.managed >= pl.MaxManaged {
			return false
		}
	}
	return true
}

// runningOverLocked reports whether running devices exceed a limit that
// applies to platform (used after a reclaim to decide keep-or-shutdown).
func (e *Engine) runningOverLocked(platform string) bool {
	l := e.strategy.Limits()
	g := e.usageLocked("")
	if l.MaxRunning > 0 && g.running+g.reserved > l.MaxRunning {
		return true
	}
	if pl, ok := l.Platforms[platform]; ok && pl.MaxRunning > 0 {
		p := e.usageLocked(platform)
		if p.running+p.reserved > pl.MaxRunning {
			return true
		}
	}
	return false
}

// managedFullLocked reports whether no more devices of platform may exist.
func (e *Engine) managedFullLocked(platform string) bool {
	l := e.strategy.Limits()
	if l.MaxManaged > 0 && e.usageLocked("").managed >= l.MaxManaged {
		return true
	}
	if pl, ok := l.Platforms[platform]; ok && pl.MaxManaged > 0 && e.usageLocked(platform).managed >= pl.MaxManaged {
		return true
	}
	return false
}

// CapacityReport is the accounting as status shows it.
type CapacityReport struct {
	Strategy  string
	Limits    Limits
	Global    UsageReport
	Platforms map[string]UsageReport
}

type UsageReport struct{ Running, Managed, Reserved int }

// Capacity reports limits and current usage.
func (e *Engine) Capacity() CapacityReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.strategy.Limits()
	g := e.usageLocked("")
	r := CapacityReport{Strategy: e.strategy.Name(), Limits: l,
		Global: UsageReport{g.running, g.managed, g.reserved}, Platforms: map[string]UsageReport{}}
	for p := range e.drivers {
		u := e.usageLocked(p)
		r.Platforms[p] = UsageReport{u.running, u.managed, u.reserved}
	}
	return r
}
