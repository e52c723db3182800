package core

import "testing"

// slot builds an idle slot device as the planner sees it: not usable, but
// yielding its running room (ADR 0062).
func slot(id, platform, model string, st DeviceState, ram uint64, age int) PlanDevice {
	d := dev(id, platform, model, st, ram, age)
	d.Usable, d.Yields = false, st == StateReady
	return d
}

// The planner's rules for idle slot devices: a running limit may shut one
// down (least recently used first among warm and slot devices, even one of
// the waiter's own spec, since it could never be granted); a managed limit
// never picks one, since easing it takes a destroy; it is never granted or
// booted for a plain waiter; and the host sheds it like a warm device.
func TestPlanIdleSlotDevicesYieldRunningRoomOnly(t *testing.T) {
	cases := []struct {
		name string
		in   PlanInput
		want string
	}{
		{"a running limit shuts the least recently used idle slot device down",
			PlanInput{Limits: Limits{MaxRunning: 2, MaxManaged: 4}, Devices: []PlanDevice{
				slot("s1", "ios", "Phone", StateReady, 2*gib, 9), slot("s2", "ios", "Phone", StateReady, 2*gib, 1)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 evict s1 maxRunning then provision]"},
		{"a warm device used longer ago goes before a slot device",
			PlanInput{Limits: Limits{MaxRunning: 2, MaxManaged: 4}, Devices: []PlanDevice{
				slot("s1", "ios", "Phone", StateReady, 2*gib, 3), dev("w1", "android", "Pixel", StateReady, 2*gib, 7)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 evict w1 maxRunning then provision]"},
		{"a slot device is neither granted nor booted for a plain waiter",
			PlanInput{Limits: Limits{MaxRunning: 3, MaxManaged: 4}, Devices: []PlanDevice{
				slot("s1", "ios", "Phone", StateReady, 2*gib, 3), slot("s2", "ios", "Phone", StateShutdown, 2*gib, 3)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 provision ]"},
		{"a managed limit is never eased by destroying a slot device",
			PlanInput{Limits: Limits{MaxRunning: 4, MaxManaged: 2}, Devices: []PlanDevice{
				slot("s1", "ios", "Phone", StateReady, 2*gib, 9), slot("s2", "ios", "Phone", StateShutdown, 2*gib, 9)},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  maxManaged]"},
		{"a slot device with a live execution does not yield",
			PlanInput{Limits: Limits{MaxRunning: 1, MaxManaged: 4}, Devices: []PlanDevice{
				{ID: "s1", Platform: "ios", SpecKey: "ios|Phone|1", State: StateLeased, RAM: 2 * gib}},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  maxRunning]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := show(Plan(c.in)); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
	in := PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"android": 1}},
		Devices: []PlanDevice{slot("s1", "ios", "Phone", StateReady, 2*gib, 5), dev("i2", "ios", "Phone", StateReady, 2*gib, 1)}}
	if got := HostVictims(in); len(got) != 1 || got[0] != "s1" {
		t.Fatalf("host shedding chose %v, want the idle slot device [s1]", got)
	}
}
