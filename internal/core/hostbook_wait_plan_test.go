package core

import (
	"slices"
	"testing"
)

// Other homes' waiters count as demand wherever warmth is weighed: the
// yield sweep shuts down only as many idle devices as they need, a
// waited-for platform's first, never a leased one, and never what a
// shutdown under way already frees.
func TestYieldVictims(t *testing.T) {
	phones := []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5), dev("i2", "ios", "Phone", StateReady, 2*gib, 1)}
	cases := []struct {
		name string
		in   PlanInput
		gone []string
		want []string
	}{
		{"one waiter costs one device, the least recently used",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}}, Devices: phones},
			nil, []string{"i1"}},
		{"two waiters cost two",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 2}}, Devices: phones},
			nil, []string{"i1", "i2"}},
		{"room left for the waiter: nothing",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 3, Waiting: map[string]int{"ios": 1}}, Devices: phones},
			nil, nil},
		{"no waiter: nothing",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2}, Devices: phones},
			nil, nil},
		{"a shutdown under way already frees the room",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}}, Devices: phones},
			[]string{"i2"}, nil},
		{"the waited-for platform's device goes first, though another is older",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"android": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 9), dev("a1", "android", "Pixel", StateReady, 4*gib, 1)}},
			nil, []string{"a1"}},
		{"under the global limit any idle device eases it",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"ios": 1}, Waiting: map[string]int{"android": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 9)}},
			nil, []string{"i1"}},
		{"a platform's host limit is eased only by that platform's devices",
			PlanInput{Limits: Limits{MaxRunning: 8}, Host: HostUsage{MaxRunning: 8, Platforms: map[string]int{"android": 1},
				Others: map[string]int{"android": 1}, Waiting: map[string]int{"android": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 9)}},
			nil, nil},
		{"leased and unusable devices are never chosen",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}},
				Devices: []PlanDevice{dev("l1", "ios", "Phone", StateLeased, 2*gib, 9), func() PlanDevice {
					d := dev("s1", "ios", "Phone", StateReady, 2*gib, 9)
					d.Usable = false // a slot's or a session's
					return d
				}()}},
			nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := YieldVictims(c.in, c.gone); !slices.Equal(got, c.want) {
				t.Fatalf("victims %v, want %v", got, c.want)
			}
		})
	}
}

// The yield sweep also covers what the host limit alone asks for, so the
// two are never shed on top of each other.
func TestYieldVictimsIncludeTheOverHostOnes(t *testing.T) {
	in := PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, External: map[string]int{"ios": 1}, Waiting: map[string]int{"ios": 1}},
		Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5), dev("i2", "ios", "Phone", StateReady, 2*gib, 1)}}
	over := HostVictims(in)
	yield := YieldVictims(in, nil)
	if !slices.Equal(over, []string{"i1"}) || !slices.Equal(yield, []string{"i1", "i2"}) {
		t.Fatalf("over-host %v, yield %v; want [i1] and [i1 i2]", over, yield)
	}
}

// The warm pool never refills into room another home waits for; without
// the waiter the same plan starts the warm device.
func TestPlanWarmHoldsBackForOtherHomesWaiters(t *testing.T) {
	in := PlanInput{Limits: Limits{MaxRunning: 4, MaxManaged: 8}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}},
		Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5), dev("i2", "ios", "Phone", StateShutdown, 2*gib, 1)},
		Warm:    []PlanWarm{{Platform: "ios", SpecKey: "ios|Phone|1", RAM: 2 * gib, Want: 1}}}
	if ds := Plan(in); len(ds) != 0 {
		t.Fatalf("warm pool planned %s while another home waits", show(ds))
	}
	in.Host.Waiting = nil
	if ds := Plan(in); len(ds) != 1 || ds[0].Kind != DecideBoot || ds[0].DeviceID != "i2" {
		t.Fatalf("warm pool alone planned %s, want the boot of i2", show(ds))
	}
	// A request of this engine's own is not held back by them.
	in.Host.Waiting = map[string]int{"ios": 1}
	in.Warm = nil
	in.Devices = in.Devices[1:]
	in.Queue = []PlanWaiter{want("ios", "Phone", 2*gib)}
	if ds := Plan(in); len(ds) != 1 || ds[0].Kind != DecideBoot {
		t.Fatalf("own request planned %s, want a boot", show(ds))
	}
}

func TestHeldForWaiters(t *testing.T) {
	g := newLedger(PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}},
		Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5)}})
	if g.heldForWaiters("ios", 0) {
		t.Fatal("one running and one waiting fit a limit of 2")
	}
	if !g.heldForWaiters("ios", 1) || !g.heldForWaiters("android", 1) {
		t.Fatal("a second start would take the waiter's room")
	}
	g = newLedger(PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2},
		Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5)}})
	if g.heldForWaiters("ios", 1) {
		t.Fatal("held back with nobody waiting")
	}
}
