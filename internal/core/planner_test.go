package core

import (
	"fmt"
	"testing"
	"time"
)

const gib = uint64(1) << 30

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// dev builds a usable device; age orders last use (a larger age is less
// recently used).
func dev(id, platform, model string, st DeviceState, ram uint64, age int) PlanDevice {
	return PlanDevice{ID: id, Platform: platform, SpecKey: platform + "|" + model + "|1", State: st,
		Usable: st == StateReady || st == StateShutdown, RAM: ram, LastUse: t0.Add(-time.Duration(age) * time.Minute)}
}

func want(platform, model string, ram uint64) PlanWaiter {
	return PlanWaiter{Platform: platform, SpecKey: platform + "|" + model + "|1", RAM: ram}
}

func show(ds []Decision) string {
	s := ""
	for _, d := range ds {
		s += fmt.Sprintf("[%d %s %s", d.Waiter, d.Kind, d.DeviceID)
		if d.Destroy {
			s += " destroy"
		}
		if d.Limit != "" {
			s += " " + d.Limit
		}
		if d.Then != "" {
			s += " then " + string(d.Then)
		}
		s += "]"
	}
	return s
}

func TestPlan(t *testing.T) {
	android1 := map[string]PlatformLimits{"android": {MaxRunning: 1}}
	cases := []struct {
		name string
		in   PlanInput
		want string
	}{
		{"warmest ready device is granted",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{
				dev("d1", "ios", "Phone", StateReady, 2*gib, 5), dev("d2", "ios", "Phone", StateReady, 2*gib, 1)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 grant d2]"},
		{"a shut-down device is booted before a new one is provisioned",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{dev("d1", "ios", "Phone", StateShutdown, 2*gib, 5)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib), want("ios", "Phone", 2*gib)}},
			"[0 boot d1][1 provision ]"},
		{"each decision is charged before the next waiter: the second waits",
			PlanInput{Limits: Limits{MaxRunning: 1}, Queue: []PlanWaiter{want("ios", "Phone", 2*gib), want("ios", "Phone", 2*gib)}},
			"[0 provision ][1 wait  maxRunning]"},
		// Defect 1: the Android platform limit binds; shutting iPhones down
		// frees nothing it needs.
		{"platform limit binds: no iPhone is evicted for an Android request",
			PlanInput{Limits: Limits{MaxRunning: 3, Platforms: android1}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateLeased, 4*gib, 0),
				dev("i1", "ios", "Phone", StateReady, 2*gib, 9), dev("i2", "ios", "Phone", StateReady, 2*gib, 8)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib)}},
			"[0 wait  platforms.android.maxRunning]"},
		{"platform limit binds: the Android device of another spec is evicted, not the older iPhone",
			PlanInput{Limits: Limits{MaxRunning: 3, Platforms: android1}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateReady, 4*gib, 1),
				dev("i1", "ios", "Phone", StateReady, 2*gib, 9)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib)}},
			"[0 evict a1 platforms.android.maxRunning then provision]"},
		{"global limit binds: any platform's LRU ready device is evicted",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{
				dev("i1", "ios", "Phone", StateReady, 2*gib, 3), dev("i2", "ios", "Phone", StateLeased, 2*gib, 9)},
				Queue: []PlanWaiter{want("android", "Pixel", 4*gib)}},
			"[0 evict i1 maxRunning then provision]"},
		{"eviction makes room to boot the waiter's own shut-down device",
			PlanInput{Limits: Limits{MaxRunning: 1, MaxManaged: 2}, Devices: []PlanDevice{
				dev("i1", "ios", "Phone", StateReady, 2*gib, 3), dev("t1", "ios", "Tablet", StateShutdown, 2*gib, 9)},
				Queue: []PlanWaiter{want("ios", "Tablet", 2*gib)}},
			"[0 evict i1 maxRunning then boot]"},
		{"two waiters, two evictions: each waiter gets its own victim",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{
				dev("i1", "ios", "Phone", StateReady, 2*gib, 3), dev("i2", "ios", "Phone", StateReady, 2*gib, 9)},
				Queue: []PlanWaiter{want("android", "Pixel", 4*gib), want("android", "Pixel", 4*gib)}},
			"[0 evict i2 maxRunning then provision][1 evict i1 maxRunning then provision]"},
		{"an eviction in flight gets no second one",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{
				dev("i1", "ios", "Phone", StateReady, 2*gib, 3), dev("i2", "ios", "Phone", StateLeased, 2*gib, 0)},
				Queue: []PlanWaiter{{Platform: "android", SpecKey: "android|Pixel|1", RAM: 4 * gib, Evicting: true}}},
			"[0 wait  maxRunning]"},
		// Defect 7: one RAM budget, each device by its own footprint.
		{"RAM budget binds: two small devices are evicted, one at a time, for one large one",
			PlanInput{Limits: Limits{MaxRunning: 8, RAMBudget: 96 * gib / 10}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateLeased, 4*gib, 0),
				dev("i1", "ios", "Phone", StateReady, 2*gib, 3), dev("i2", "ios", "Phone", StateReady, 2*gib, 9)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib)}},
			"[0 evict i2 ramBudget then provision]"},
		{"the rest of a waiter's victim set is kept for it: a later waiter does not evict it",
			PlanInput{Limits: Limits{MaxRunning: 8, RAMBudget: 96 * gib / 10}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateLeased, 4*gib, 0),
				dev("i1", "ios", "Phone", StateReady, 2*gib, 9), dev("i2", "ios", "Phone", StateReady, 2*gib, 3)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib), want("android", "Tablet", 4*gib)}},
			"[0 evict i1 ramBudget then provision][1 wait  ramBudget]"},
		{"RAM budget binds and no eviction frees enough: nothing is evicted",
			PlanInput{Limits: Limits{MaxRunning: 8, RAMBudget: 96 * gib / 10}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateLeased, 4*gib, 0), dev("i1", "ios", "Phone", StateLeased, 2*gib, 0),
				dev("i2", "ios", "Phone", StateReady, 2*gib, 9)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib)}},
			"[0 wait  ramBudget]"},
		{"RAM budget refuses the device over budget even where counts would allow it",
			PlanInput{Limits: Limits{MaxRunning: 8, RAMBudget: 96 * gib / 10}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateLeased, 4*gib, 0), dev("a2", "android", "Pixel", StateLeased, 4*gib, 0),
				dev("i1", "ios", "Phone", StateLeased, 2*gib, 0)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  ramBudget]"},
		{"managed limit binds: a shut-down device of any platform is destroyed",
			PlanInput{Limits: Limits{MaxRunning: 4, MaxManaged: 2}, Devices: []PlanDevice{
				dev("i1", "ios", "Phone", StateShutdown, 2*gib, 3), dev("a1", "android", "Pixel", StateLeased, 4*gib, 0)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib)}},
			"[0 evict i1 destroy maxManaged then provision]"},
		{"platform managed limit binds: no iPhone is destroyed for an Android request",
			PlanInput{Limits: Limits{MaxRunning: 4, MaxManaged: 8, Platforms: map[string]PlatformLimits{"android": {MaxManaged: 1}}}, Devices: []PlanDevice{
				dev("i1", "ios", "Phone", StateShutdown, 2*gib, 3), dev("a1", "android", "Pixel", StateLeased, 4*gib, 0)},
				Queue: []PlanWaiter{want("android", "Tablet", 4*gib)}},
			"[0 wait  platforms.android.maxManaged]"},
		{"a device the general pool may not use is never evicted",
			PlanInput{Limits: Limits{MaxRunning: 1}, Devices: []PlanDevice{{ID: "i1", Platform: "ios", SpecKey: "ios|Phone|1", State: StateReady, RAM: 2 * gib, Usable: false}},
				Queue: []PlanWaiter{want("android", "Pixel", 4*gib)}},
			"[0 wait  maxRunning]"},
		{"warm pool fills only what capacity leaves, after the queue",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{dev("i1", "ios", "Phone", StateShutdown, 2*gib, 1)},
				Warm: []PlanWarm{{Platform: "ios", SpecKey: "ios|Phone|1", RAM: 2 * gib, Want: 3}}},
			"[-1 boot i1][-1 provision ]"},
		{"warm pool waits while a request waits",
			PlanInput{Limits: Limits{MaxRunning: 1}, Devices: []PlanDevice{dev("a1", "android", "Pixel", StateLeased, 4*gib, 0)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}, Warm: []PlanWarm{{Platform: "ios", SpecKey: "ios|Phone|1", RAM: 2 * gib, Want: 1}}},
			"[0 wait  maxRunning]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := show(Plan(c.in)); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// A noWait waiter is planned like any other: an eviction that makes room
// commits it (ADR 0010); when nothing can make room it waits, and waiting
// decides nothing, so the engine refuses it with nothing changed.
func TestPlanNoWait(t *testing.T) {
	w := want("ios", "Phone", 2*gib)
	w.NoWait = true
	in := PlanInput{Limits: Limits{MaxRunning: 2, Platforms: map[string]PlatformLimits{"ios": {MaxRunning: 1}}}, Devices: []PlanDevice{
		dev("i1", "ios", "Phone", StateLeased, 2*gib, 0), dev("a1", "android", "Pixel", StateReady, 4*gib, 9)},
		Queue: []PlanWaiter{w}}
	if got := show(Plan(in)); got != "[0 wait  platforms.ios.maxRunning]" {
		t.Fatalf("blocked noWait: %s", got)
	}
	in.Limits = Limits{MaxRunning: 2}
	if got := show(Plan(in)); got != "[0 evict a1 maxRunning then provision]" {
		t.Fatalf("noWait with room to make: %s", got)
	}
}

func TestSweepVictims(t *testing.T) {
	cases := []struct {
		name string
		in   PlanInput
		want string
	}{
		{"iOS over its own limit never shuts down the Android device",
			PlanInput{Limits: Limits{MaxRunning: 3, Platforms: map[string]PlatformLimits{"ios": {MaxRunning: 1}}}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateReady, 4*gib, 99),
				dev("i1", "ios", "Phone", StateReady, 2*gib, 3), dev("i2", "ios", "Phone", StateReady, 2*gib, 2), dev("i3", "ios", "Phone", StateReady, 2*gib, 1)}},
			"[i1 i2]"},
		{"global limit over: LRU of any platform",
			PlanInput{Limits: Limits{MaxRunning: 1}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateReady, 4*gib, 9), dev("i1", "ios", "Phone", StateReady, 2*gib, 1)}},
			"[a1]"},
		{"RAM budget over: the LRU devices until it fits; leased ones are never touched",
			PlanInput{Limits: Limits{MaxRunning: 8, RAMBudget: 6 * gib}, Devices: []PlanDevice{
				dev("a1", "android", "Pixel", StateLeased, 4*gib, 99), dev("i1", "ios", "Phone", StateReady, 2*gib, 5),
				dev("i2", "ios", "Phone", StateReady, 2*gib, 1)}},
			"[i1]"},
		{"within limits: nothing",
			PlanInput{Limits: Limits{MaxRunning: 2}, Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5)}},
			"[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprint(SweepVictims(c.in)); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// One predicate decides whether the general pool may use a device; every
// path (planner, warm pool, cleanup, eviction, startup sweep) asks it.
func TestGeneralPoolMayUse(t *testing.T) {
	e := &Engine{reg: registry{opLocks: map[string]string{}}}
	e.pool = pool{reg: &e.reg, host: &e.host, slots: &e.slots}
	for st, ok := range map[DeviceState]bool{StateReady: true, StateShutdown: true, StateLeased: false, StateReclaiming: false,
		StateQuarantined: false, StateProvisioning: false, StateDeleted: false} {
		if got := e.pool.general(&DeviceRecord{ID: "d", State: st}); got != ok {
			t.Errorf("%s: %v, want %v", st, got, ok)
		}
	}
	e.reg.opLocks["d"] = "cleanup"
	if e.pool.general(&DeviceRecord{ID: "d", State: StateReady}) {
		t.Error("a device an operation holds is the pool's")
	}
	// The same answer reaches the planner and the cleanup view.
	e.reg.devices = map[string]*DeviceRecord{"d": {ID: "d", State: StateReady, Platform: "ios"}}
	e.strategy, e.drivers, e.clock = FixedStrategy{}, map[string]Driver{}, nil
	if in := e.planInputLocked(nil, false); in.Devices[0].Usable {
		t.Error("planner sees a held device as usable")
	}
	e.warm.specs = []warmSpec{{spec: Spec{Platform: "ios"}, count: 1}}
	if e.warm.have(e.viewLocked(), Spec{Platform: "ios"}.Key()) != 0 || len(e.warm.keep(e.viewLocked())) != 0 {
		t.Error("warm pool counts a held device")
	}
}
