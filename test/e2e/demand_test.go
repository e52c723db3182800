package e2e

import (
	"strings"
	"testing"
	"time"
)

// demandConfig: room for four running devices, a 4 s demand window sampled
// every 250 ms with the spare, and an idle rule that shuts a ready device
// down after 1 s, checked every 500 ms.
const demandConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":8}},
 "warmPool":{"demand":{"enabled":true,"windowMs":4000,"sampleMs":250,"spare":true}},
 "cleanup":{"intervalMs":500,"idleShutdownMs":1000,"idleDestroyMs":600000}}`

type warmStatus struct {
	Devices  []device
	WarmPool struct {
		Demand   bool
		WindowMs int64
		Targets  []struct {
			Spec, Reason, Explanation       string
			Count, DemandP90, Leased, Ready int
		}
	}
}

func (w *world) warm() warmStatus {
	var st warmStatus
	w.json(&st, "status", "--json")
	return st
}

func countDevices(st warmStatus, state string) int {
	n := 0
	for _, d := range st.Devices {
		if d.State == state {
			n++
		}
	}
	return n
}

// A burst of leases makes the pool grow (a spare beside the leased
// devices, then the burst's p90 kept ready after the release), and
// idleness shrinks it back to nothing, on the real binary and drivers.
func TestDemandPoolGrowsWithABurstAndShrinksWhenIdle(t *testing.T) {
	w := newWorld(t, demandConfig)
	w.mustRun("daemon", "start")
	// No demand history: nothing is provisioned.
	time.Sleep(time.Second)
	if st := w.warm(); len(st.Devices) != 0 || !st.WarmPool.Demand || st.WarmPool.WindowMs != 4000 || len(st.WarmPool.Targets) != 0 {
		t.Fatalf("a fresh daemon with demand on: %+v", st)
	}
	var ids []string
	for _, r := range []string{"a", "b", "c"} {
		var l lease
		w.json(&l, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", r)
		ids = append(ids, l.LeaseID)
	}
	// The spare: a fourth, ready device beside the three leased.
	eventually(t, "a spare beside the burst", 20*time.Second, func() bool {
		st := w.warm()
		return countDevices(st, "leased") == 3 && countDevices(st, "ready") == 1 &&
			len(st.WarmPool.Targets) == 1 && st.WarmPool.Targets[0].Reason == "spare"
	})
	human := w.mustRun("status")
	if !strings.Contains(human, "warm     following demand over 4 s") || !strings.Contains(human, "iPhone 16 / iOS ") ||
		!strings.Contains(human, "1 warm: spare beside 3 leased") {
		t.Fatalf("status does not explain the spare:\n%s", human)
	}
	for _, id := range ids {
		w.mustRun("release", id)
	}
	// Right after the burst the p90 asks for more than the spare, and the
	// idle rule leaves those devices alone.
	st := w.warm()
	if len(st.WarmPool.Targets) != 1 || st.WarmPool.Targets[0].Reason != "demand" || st.WarmPool.Targets[0].DemandP90 < 2 {
		t.Fatalf("after the burst: %+v", st.WarmPool)
	}
	if !strings.Contains(st.WarmPool.Targets[0].Explanation, "warm because p90 concurrency") {
		t.Fatalf("explanation %q", st.WarmPool.Targets[0].Explanation)
	}
	// Idle for a window: no target is left and the idle rule shuts every
	// device down.
	eventually(t, "the pool to shrink to nothing", 30*time.Second, func() bool {
		st := w.warm()
		return len(st.WarmPool.Targets) == 0 && countDevices(st, "ready") == 0 && countDevices(st, "shutdown") == 4
	})
}
