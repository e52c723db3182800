package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

func eventTypes(h *harness, deviceID string) []string {
	evs, _ := h.bus.Since(0)
	var out []string
	for _, e := range evs {
		if deviceID == "" || e.DeviceID == deviceID {
			if e.Type != "device.state-changed" {
				out = append(out, e.Type)
			}
		}
	}
	return out
}

func has(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

func withPolicies(t *testing.T, limits core.Limits, mutate func(*core.Config)) *harness {
	h := newHarness(t, limits)
	mutate(&h.cfg)
	h.start()
	return h
}

func TestQuarantineRetryRecoversThePurgedDevice(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 3, Backoff: 10 * time.Second, Multiplier: 2, Cap: time.Minute}
	})
	g, _ := h.lease("a", "")
	h.drv.SetFail("reclaim", 2) // the release purge and the first retry fail
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateQuarantined || d.Health.QuarantineReason != "purge-failed" {
		t.Fatalf("%+v", d)
	}
	h.clock.Advance(10 * time.Second) // first retry: fails, next in 20s
	h.engine.WaitIdle()
	d, _ = h.engine.Device(g.Device.ID)
	if d.State != core.StateQuarantined || d.Health.QuarantineAttempts != 1 {
		t.Fatalf("after a failed retry %+v", d)
	}
	h.clock.Advance(19 * time.Second)
	h.engine.WaitIdle()
	if d, _ = h.engine.Device(g.Device.ID); d.State != core.StateQuarantined {
		t.Fatal("retried before the backoff elapsed")
	}
	h.clock.Advance(time.Second)
	h.engine.WaitIdle()
	d, _ = h.engine.Device(g.Device.ID)
	if d.State != core.StateReady || d.Health != (core.DeviceHealth{}) {
		t.Fatalf("after a good retry %+v", d)
	}
	evs := eventTypes(h, g.Device.ID)
	for _, want := range []string{"device.purge-failed", "device.quarantined", "device.quarantine-retry-failed", "device.quarantine-recovered"} {
		if !has(evs, want) {
			t.Errorf("missing %s in %v", want, evs)
		}
	}
}

func TestQuarantineExhaustionDestroysNeverShutsDown(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 2, Backoff: time.Second, Multiplier: 1, Cap: time.Second}
	})
	g, _ := h.lease("a", "")
	h.drv.SetFail("reclaim", 100)
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	for i := 0; i < 3; i++ {
		h.clock.Advance(time.Second)
		h.engine.WaitIdle()
	}
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("device still in the registry after its retry budget")
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatal("abandoned device not destroyed in the driver")
	}
	if !has(eventTypes(h, g.Device.ID), "device.quarantine-abandoned") {
		t.Fatal("no device.quarantine-abandoned")
	}
	// Capacity came back: a new request provisions a fresh device.
	if _, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", NoWait: true}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestQuarantineRetrySurvivesRestart(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 3, Backoff: time.Minute}
	})
	g, _ := h.lease("a", "")
	h.drv.SetFail("reclaim", 1)
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.clock.Advance(30 * time.Second)
	h.start() // crash and restart
	h.clock.Advance(29 * time.Second)
	h.engine.WaitIdle()
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateQuarantined {
		t.Fatal("retry fired early after restart")
	}
	h.clock.Advance(time.Second)
	h.engine.WaitIdle()
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateReady {
		t.Fatalf("retry not re-armed from its persisted deadline: %s", d.State)
	}
}

func healthHarness(t *testing.T) *harness {
	return withPolicies(t, one(1), func(c *core.Config) {
		c.Health = core.HealthPolicy{Interval: 5 * time.Second, StableObservations: 2, MaxRecoveryAttempts: 2}
	})
}

func TestCrashIsDebouncedThenRecoveredUnderTheSameLease(t *testing.T) {
	h := healthHarness(t)
	g, _ := h.lease("a", "")
	h.engine.Health().StartHealthMonitor()
	h.drv.Transitioning(g.Device.Handle)
	h.clock.Advance(30 * time.Second) // six transitioning reads: never a crash
	if has(eventTypes(h, g.Device.ID), "device.crash-detected") {
		t.Fatal("a transitioning device was treated as crashed")
	}
	h.drv.Crash(g.Device.Handle)
	h.clock.Advance(5 * time.Second) // one stopped read
	if has(eventTypes(h, g.Device.ID), "device.crash-detected") {
		t.Fatal("one stopped read must not count as a crash")
	}
	h.clock.Advance(5 * time.Second) // second stopped read: crash
	h.engine.WaitIdle()
	evs := eventTypes(h, g.Device.ID)
	if !has(evs, "device.crash-detected") || !has(evs, "device.recovered") {
		t.Fatalf("events %v", evs)
	}
	if !h.drv.Running(g.Device.Handle) {
		t.Fatal("not rebooted")
	}
	l, ok := h.engine.Lease(g.Lease.ID)
	if !ok || l.DeviceID != g.Device.ID {
		t.Fatal("the lease did not survive recovery")
	}
	if _, err := h.engine.Renew(g.Lease.ID, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range h.drv.Calls() {
		if c == "reclaim "+g.Device.Handle {
			t.Fatal("recovery erased the device")
		}
	}
}

func TestTooManyCrashesEndTheLeaseAsDeviceLost(t *testing.T) {
	h := healthHarness(t)
	g, _ := h.lease("a", "")
	h.engine.Health().StartHealthMonitor()
	for i := 0; i < 3; i++ { // MaxRecoveryAttempts (2) + 1 crashes
		h.drv.Crash(g.Device.Handle)
		h.clock.Advance(10 * time.Second)
		h.engine.WaitIdle()
	}
	if _, ok := h.engine.Lease(g.Lease.ID); ok {
		t.Fatal("lease survived max+1 crashes")
	}
	evs, _ := h.bus.Since(0)
	var reason string
	for _, e := range evs {
		if e.Type == "lease.released" && e.LeaseID == g.Lease.ID {
			reason = e.Reason
		}
	}
	if reason != core.ReasonDeviceLost {
		t.Fatalf("release reason %q", reason)
	}
}

func TestVanishedDeviceAndProvenanceDriftGiveUp(t *testing.T) {
	h := withPolicies(t, one(2), func(c *core.Config) {
		c.Health = core.HealthPolicy{Interval: 5 * time.Second, StableObservations: 2, MaxRecoveryAttempts: 2}
	})
	a, _ := h.lease("a", "")
	b, _ := h.lease("b", "")
	h.engine.Health().StartHealthMonitor()
	h.drv.Vanish(a.Device.Handle)
	h.drv.SetMark(b.Device.Handle, false)
	h.clock.Advance(5 * time.Second)
	if _, ok := h.engine.Lease(b.Lease.ID); ok {
		t.Fatal("drift is decisive on the first running read")
	}
	if _, ok := h.engine.Lease(a.Lease.ID); !ok {
		t.Fatal("one missing read must not cost a lease")
	}
	h.clock.Advance(5 * time.Second)
	if _, ok := h.engine.Lease(a.Lease.ID); ok {
		t.Fatal("vanished device kept its lease")
	}
	h.engine.WaitIdle()
}

func TestCleanupRulesShutdownThenDestroyAndPressureShortensTheWait(t *testing.T) {
	h := withPolicies(t, one(2), func(c *core.Config) {
		c.Cleanup = core.CleanupPolicy{Interval: -1, IdleShutdown: 10 * time.Minute, IdleDestroy: time.Hour, DiskPressureFreeBytes: 1 << 30}
	})
	g, _ := h.lease("a", "")
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.clock.Advance(11 * time.Minute)
	dry, err := h.engine.Cleanup().RunCleanup(context.Background(), true, "")
	if err != nil || len(dry) != 1 || dry[0].Action != core.ActionShutdown || dry[0].Executed {
		t.Fatalf("dry run %+v %v", dry, err)
	}
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateReady {
		t.Fatal("dry run acted")
	}
	res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, "")
	if len(res) != 1 || !res[0].Executed {
		t.Fatalf("%+v", res)
	}
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateShutdown {
		t.Fatalf("state %s", d.State)
	}
	// Under disk pressure the destroy threshold drops to T1.
	h.clock.Advance(11 * time.Minute)
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, "idle-destroy"); len(res) != 0 {
		t.Fatalf("destroyed before T2 without pressure: %+v", res)
	}
	h.disk = 100 << 20
	res, _ = h.engine.Cleanup().RunCleanup(context.Background(), false, "idle-destroy")
	if len(res) != 1 || res[0].Action != core.ActionDestroy || !res[0].Executed {
		t.Fatalf("%+v", res)
	}
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("device survived idle-destroy")
	}
	// Another pass under the same pressure must not announce it again.
	h.engine.Cleanup().RunCleanup(context.Background(), true, "")
	evs := eventTypes(h, "")
	n := 0
	for _, e := range evs {
		if e == "disk.pressure-detected" {
			n++
		}
	}
	if n != 1 || !has(evs, "cleanup.executed") {
		t.Fatalf("disk pressure announced %d times; events %v", n, evs)
	}
	if _, err := h.engine.Cleanup().RunCleanup(context.Background(), true, "no-such-rule"); err == nil {
		t.Fatal("unknown rule accepted")
	}
}

func TestCleanupNeverTouchesLeasedDevices(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Cleanup = core.CleanupPolicy{Interval: -1, IdleShutdown: time.Minute, IdleDestroy: 2 * time.Minute}
	})
	g, _ := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a", TTL: time.Hour}, nil)
	h.clock.Advance(30 * time.Minute)
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, ""); len(res) != 0 {
		t.Fatalf("proposed on a leased device: %+v", res)
	}
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateLeased {
		t.Fatal("leased device touched")
	}
}

func TestDoctorFindsAndFixes(t *testing.T) {
	h := newHarness(t, one(3))
	a, _ := h.lease("a", "")
	b, _ := h.lease("b", "")
	h.engine.Release(b.Lease.ID)
	h.engine.WaitIdle()
	h.drv.Crash(b.Device.Handle) // ready in the registry, stopped in reality
	h.drv.AddOrphan("stray-1")
	fs, err := h.engine.Maintenance().Doctor(context.Background(), core.DoctorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, f := range fs {
		kinds[f.Kind+" "+f.DeviceID+f.Handle] = f.Action
		if f.Fixed {
			t.Fatal("report-only run fixed something")
		}
	}
	if _, ok := kinds[core.FindingForeignState+" "+b.Device.ID+b.Device.Handle]; !ok {
		t.Fatalf("findings %v", kinds)
	}
	if _, ok := kinds[core.FindingOrphan+" stray-1"]; !ok {
		t.Fatalf("findings %v", kinds)
	}
	if _, err := h.engine.Maintenance().Doctor(context.Background(), core.DoctorOptions{Fix: true, PurgeOrphans: true}); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.engine.Device(b.Device.ID); d.State != core.StateShutdown {
		t.Fatalf("foreign state not fixed: %s", d.State)
	}
	if exist, _ := h.drv.Count(); exist != 2 {
		t.Fatalf("orphan not purged: %d devices", exist)
	}
	if _, ok := h.engine.Lease(a.Lease.ID); !ok {
		t.Fatal("doctor touched a healthy lease")
	}
}

func TestNukeReleasesCancelsAndDestroysEverything(t *testing.T) {
	h := newHarness(t, one(1))
	g, _ := h.lease("a", "")
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b"})
	rep, err := h.engine.Maintenance().Nuke(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ReleasedLeases) != 1 || rep.ReleasedLeases[0] != g.Lease.ID || len(rep.CancelledRequests) != 1 || len(rep.DestroyedDevices) != 1 {
		t.Fatalf("%+v", rep)
	}
	if r := <-waiting; r.err == nil {
		t.Fatal("pending request survived the reset")
	}
	if !has(eventTypes(h, ""), "request.cancelled") {
		t.Fatal("the reset cancelled a request without saying so")
	}
	if exist, _ := h.drv.Count(); exist != 0 || len(h.engine.Devices()) != 0 {
		t.Fatal("devices left after reset")
	}
	// Service resumes afterwards.
	if _, err := h.lease("c", ""); err != nil {
		t.Fatal(err)
	}
}

func TestWarmTargetsProvisionOffTheRequestPath(t *testing.T) {
	h := withPolicies(t, one(2), func(c *core.Config) {
		c.WarmTargets = []core.WarmTarget{{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, Count: 2}}
	})
	h.engine.WaitIdle()
	ready := 0
	for _, d := range h.engine.Devices() {
		if d.State == core.StateReady {
			ready++
		}
	}
	if ready != 2 {
		t.Fatalf("%d warm devices, want 2", ready)
	}
	// A request is a warm hit: no provisioning on its path.
	before := len(h.drv.Calls())
	if _, err := h.lease("a", "Phone"); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if calls := h.drv.Calls()[before:]; len(calls) > 0 && calls[0] == "provision Phone" {
		t.Fatalf("the request provisioned: %v", calls)
	}
}

func TestWarmPoolDevicesAreNotIdledAwayAndShutdownOnesAreRebooted(t *testing.T) {
	h := withPolicies(t, one(2), func(c *core.Config) {
		c.WarmTargets = []core.WarmTarget{{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, Count: 1}}
		c.Cleanup = core.CleanupPolicy{Interval: -1, IdleShutdown: time.Minute, IdleDestroy: time.Hour}
	})
	h.engine.WaitIdle()
	h.clock.Advance(10 * time.Minute)
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, ""); len(res) != 0 {
		t.Fatalf("idle rules proposed the warm target's device: %+v", res)
	}
	devs := h.engine.Devices()
	if len(devs) != 1 {
		t.Fatalf("%d devices", len(devs))
	}
	// Crash it behind the core's back and restart: startup finds it
	// stopped, records it shut down, and the pool boots it again rather
	// than provisioning a second device.
	h.drv.Crash(devs[0].Handle)
	h.start()
	h.engine.WaitIdle()
	devs = h.engine.Devices()
	if len(devs) != 1 || devs[0].State != core.StateReady {
		t.Fatalf("after restart %+v", devs)
	}
	if !has(eventTypes(h, devs[0].ID), "device.found-stopped") {
		t.Fatal("startup did not notice the stopped device")
	}
}

func TestBootFailureQuarantinesAndTheRetryRecovers(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 2, Backoff: time.Second, Multiplier: 1, Cap: time.Second}
	})
	h.drv.SetFail("boot", 1)
	_, err := h.lease("a", "")
	if !errors.Is(err, core.ErrDeviceFailed) {
		t.Fatalf("got %v", err)
	}
	devs := h.engine.Devices()
	if len(devs) != 1 || devs[0].State != core.StateQuarantined || devs[0].Health.QuarantineReason != "boot-failed" {
		t.Fatalf("a device that failed to boot must be quarantined, not picked again at once: %+v", devs)
	}
	h.clock.Advance(time.Second)
	h.engine.WaitIdle()
	if d, _ := h.engine.Device(devs[0].ID); d.State != core.StateReady {
		t.Fatalf("after the retry %s", d.State)
	}
	if _, err := h.lease("b", ""); err != nil {
		t.Fatal(err)
	}
}
