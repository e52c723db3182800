package core

import (
	"fmt"
	"testing"
)

// schedulingInput is a busy host: Android at its running limit with 40
// leased devices of 40 specs, one ready iOS "Phone" device, and queued
// Android waiters nothing can serve now, then one waiter the ready device
// serves.
func schedulingInput(unrelated int) PlanInput {
	in := PlanInput{Limits: Limits{MaxRunning: 100, MaxManaged: 100, Platforms: map[string]PlatformLimits{"android": {MaxRunning: 40}}}}
	for i := 0; i < 40; i++ {
		d := dev(fmt.Sprintf("d%02d", i), "android", fmt.Sprintf("M%d", i), StateLeased, gib, i)
		d.Usable = false
		in.Devices = append(in.Devices, d)
	}
	in.Devices = append(in.Devices, dev("ready", "ios", "Phone", StateReady, gib, 0))
	for i := 0; i < unrelated; i++ {
		in.Queue = append(in.Queue, want("android", fmt.Sprintf("M%d", i%40), gib))
	}
	in.Queue = append(in.Queue, want("ios", "Phone", gib))
	return in
}

// Scheduling cost does not grow with queued x devices: with 2,000 waiters
// nothing can serve, the planner examines about as many devices as with 40
// (each kind of waiter is decided once per change of the ledger, and a
// waiter looks only at the devices of its spec), and the waiter the ready
// device can serve still gets it.
func TestSchedulingIsIndependentOfUnrelatedWaiters(t *testing.T) {
	visits := map[int]int{}
	for _, n := range []int{40, 2000} {
		out, p := plan(schedulingInput(n))
		last := out[n]
		if last.Kind != DecideGrant || last.DeviceID != "ready" {
			t.Fatalf("%d unrelated: the servable waiter got %s", n, show(out[n:n+1]))
		}
		for _, d := range out[:n] {
			if d.Kind != DecideWait {
				t.Fatalf("%d unrelated: %s", n, show([]Decision{d}))
			}
		}
		visits[n] = p.visits
	}
	// Before the index: every waiter scanned every device twice (ready,
	// then shut down) and the victims: 2,000 x 41 x 3 visits.
	if visits[2000] > 2*visits[40] {
		t.Fatalf("device visits grew with unrelated waiters: %d with 40, %d with 2000", visits[40], visits[2000])
	}
}

func BenchmarkPlanUnrelatedWaiters(b *testing.B) {
	for _, n := range []int{20, 200, 2000} {
		in := schedulingInput(n)
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				Plan(in)
			}
		})
	}
}
