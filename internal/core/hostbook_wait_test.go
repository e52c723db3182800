package core_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/testhost"
)

func evictedFor(h *harness, reason string) []string {
	evs, _ := h.bus.Since(0)
	var out []string
	for _, e := range evs {
		if e.Type == "device.evicted" && e.Reason == reason {
			out = append(out, e.DeviceID)
		}
	}
	return out
}

// Two idle warm phones and the host at its limit of 2: another home's
// waiter makes the engine shut down one of them (the least recently used),
// and only one; hearing of the same waiter again changes nothing.
func TestAnotherHomesWaiterTakesOneIdleWarmDevice(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2})
	a := leaseOn(t, h, "a", "ios", "Phone")
	b := leaseOn(t, h, "b", "ios", "Phone")
	for _, g := range []core.Grant{a, b} {
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		h.engine.WaitIdle()
		h.clock.Advance(10 * time.Second) // within b's TTL
	}
	if state(h, a.Device.ID) != core.StateReady || state(h, b.Device.ID) != core.StateReady {
		t.Fatal("alone on the host, the released devices are not kept warm")
	}
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}})
	h.engine.WaitIdle()
	if st := state(h, a.Device.ID); st != core.StateShutdown {
		t.Fatalf("least recently used warm phone is %s, want shut down for the waiter", st)
	}
	if st := state(h, b.Device.ID); st != core.StateReady {
		t.Fatalf("second warm phone is %s, want still ready", st)
	}
	if got := evictedFor(h, "host-waiter"); len(got) != 1 || got[0] != a.Device.ID {
		t.Fatalf("host-waiter evictions %v", got)
	}
	if got := h.engine.Capacity().Host; got.Yielded != 1 || got.OthersWaiting["ios"] != 1 {
		t.Fatalf("host report %+v", got)
	}
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}})
	h.engine.WaitIdle()
	if state(h, b.Device.ID) != core.StateReady || len(evictedFor(h, "host-waiter")) != 1 {
		t.Fatal("the same waiter cost a second device")
	}
	// Served: the other home now runs the device; the waiter is gone. The
	// engine keeps its one warm phone.
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Others: map[string]int{"ios": 1}})
	h.engine.WaitIdle()
	if state(h, b.Device.ID) != core.StateReady {
		t.Fatal("the warm phone was shed after the waiter was served")
	}
}

// Leased devices never yield; a release while another home waits shuts the
// device down instead of keeping it warm.
func TestReleaseWhileAnotherHomeWaitsShutsTheDeviceDown(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	a := leaseOn(t, h, "a", "ios", "Phone")
	b := leaseOn(t, h, "b", "ios", "Phone")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Waiting: map[string]int{"ios": 1}})
	h.engine.WaitIdle()
	if state(h, a.Device.ID) != core.StateLeased || state(h, b.Device.ID) != core.StateLeased {
		t.Fatal("a leased device yielded to another home")
	}
	if err := h.engine.Release(a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if st := state(h, a.Device.ID); st != core.StateShutdown {
		t.Fatalf("released while another home waits: %s, want shut down", st)
	}
}

// The engine reports its own requests held back only by the host limit,
// and tells the daemon on every change: queued, then served.
func TestHostWaitsFollowTheQueue(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	var calls atomic.Int32
	// The call comes after the deciding section unlocks, on the goroutine
	// that ran it, so it may follow the request.queued event the harness
	// waits for: the test waits for each call it expects.
	changed := make(chan struct{}, 16)
	h.engine.Host().OnHostWaitChange(func() { calls.Add(1); changed <- struct{}{} })
	awaitChange := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Fatalf("no change call %s", what)
		}
	}
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 1, Others: map[string]int{"ios": 1}})
	queuedAt := h.clock.Now()
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "w", OwnerID: "w"})
	h.engine.WaitIdle()
	ws := h.engine.Host().HostWaits()
	if len(ws) != 1 || ws[0].Platform != "ios" || ws[0].Limit != core.LimitHost || ws[0].Count != 1 || !ws[0].Since.Equal(queuedAt) {
		t.Fatalf("host waits %+v", ws)
	}
	awaitChange("after one waiter queued")
	h.clock.Advance(time.Second)
	// A change that frees nothing is no change to the account.
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 1, Others: map[string]int{"ios": 1}})
	if calls.Load() != 1 {
		t.Fatalf("%d change calls after a replan that changed nothing", calls.Load())
	}
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 1})
	h.engine.WaitIdle()
	select {
	case r := <-waiting:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("not granted once the host had room")
	}
	awaitChange("after the grant")
	if ws := h.engine.Host().HostWaits(); len(ws) != 0 || calls.Load() != 2 {
		t.Fatalf("after the grant: waits %+v, %d calls", ws, calls.Load())
	}
	// Held back by this engine's own limit: not a host wait.
	h2 := newHarness(t, core.Limits{MaxRunning: 1, MaxManaged: 2})
	leaseOn(t, h2, "a", "ios", "Phone")
	h2.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 1, Others: map[string]int{"ios": 1}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h2.asyncCtx(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "w", OwnerID: "w"})
	h2.engine.WaitIdle()
	if ws := h2.engine.Host().HostWaits(); len(ws) != 0 {
		t.Fatalf("a request its own limit holds is reported as a host wait: %+v", ws)
	}
}
