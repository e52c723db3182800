package core

import "testing"

// The host's limits in the one ledger: what other homes and external
// devices run is charged before this engine's own devices, and only this
// engine's own idle devices can ease it.
func TestPlanHostLimit(t *testing.T) {
	cases := []struct {
		name string
		in   PlanInput
		want string
	}{
		{"host limit binds while the engine's own limit has room",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"ios": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Phone", StateLeased, 2*gib, 1)},
				Queue:   []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  host.maxRunning]"},
		{"external devices count like other homes' ones",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, External: map[string]int{"android": 2}},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  host.maxRunning]"},
		{"room on the host: provisioned",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 3, Others: map[string]int{"ios": 1}, External: map[string]int{"ios": 1}},
				Queue: []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 provision ]"},
		{"the engine's own limit is reported first when both bind",
			PlanInput{Limits: Limits{MaxRunning: 1}, Host: HostUsage{MaxRunning: 1, Others: map[string]int{"ios": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Phone", StateLeased, 2*gib, 1)},
				Queue:   []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  maxRunning]"},
		{"evicting the engine's own idle device eases the host limit",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"android": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Tablet", StateReady, 2*gib, 3)},
				Queue:   []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 evict i1 host.maxRunning then provision]"},
		{"nothing of the engine's own to evict: the host limit waits",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"android": 2}},
				Devices: []PlanDevice{dev("i1", "ios", "Tablet", StateShutdown, 2*gib, 3)},
				Queue:   []PlanWaiter{want("ios", "Phone", 2*gib)}},
			"[0 wait  host.maxRunning]"},
		{"a platform's host limit binds only its platform",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 4, Platforms: map[string]int{"android": 1}, External: map[string]int{"android": 1}},
				Queue: []PlanWaiter{want("android", "Pixel", 4*gib), want("ios", "Phone", 2*gib)}},
			"[0 wait  host.platforms.android.maxRunning][1 provision ]"},
		{"a platform's host limit is eased only by that platform's device",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 4, Platforms: map[string]int{"android": 1}},
				Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 9), dev("a1", "android", "Tablet", StateReady, 4*gib, 1)},
				Queue:   []PlanWaiter{want("android", "Pixel", 4*gib)}},
			"[0 evict a1 host.platforms.android.maxRunning then provision]"},
		{"the warm pool stops at the host limit",
			PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"ios": 1}},
				Warm: []PlanWarm{{Platform: "ios", SpecKey: "ios|Phone|1", RAM: 2 * gib, Want: 3}}},
			"[-1 provision ]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := show(Plan(c.in)); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// Other homes' devices put the host over its limit: the startup sweep and
// the keep-or-shutdown after a reclaim see it, and stop this engine's own
// idle devices first.
func TestSweepOverHostLimit(t *testing.T) {
	in := PlanInput{Limits: Limits{MaxRunning: 4}, Host: HostUsage{MaxRunning: 2, Others: map[string]int{"android": 1}},
		Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 5), dev("i2", "ios", "Phone", StateReady, 2*gib, 1)}}
	if got := SweepVictims(in); len(got) != 1 || got[0] != "i1" {
		t.Fatalf("sweep chose %v, want [i1]", got)
	}
}

// Shedding over the host limit picks only what eases the limit exceeded: a
// platform's host limit costs only that platform's warm devices.
func TestHostVictims(t *testing.T) {
	in := PlanInput{Limits: Limits{MaxRunning: 8}, Host: HostUsage{MaxRunning: 8, Platforms: map[string]int{"android": 1}, External: map[string]int{"android": 1}},
		Devices: []PlanDevice{dev("i1", "ios", "Phone", StateReady, 2*gib, 9), dev("a1", "android", "Pixel", StateReady, 4*gib, 1),
			dev("a2", "android", "Pixel", StateLeased, 4*gib, 5)}}
	if got := HostVictims(in); len(got) != 1 || got[0] != "a1" {
		t.Fatalf("victims %v, want [a1]", got)
	}
	in.Host = HostUsage{MaxRunning: 3}
	if got := HostVictims(in); len(got) != 0 {
		t.Fatalf("victims %v with the host at (not over) its limit", got)
	}
}
