package core_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// scriptDriver is the fake driver with Destroy and ListManaged scriptable,
// for crash windows and slow driver calls the fake itself cannot hold.
type scriptDriver struct {
	*fakedrv.Driver
	mu        sync.Mutex
	destroy   func(ctx context.Context, r core.DeviceRef) error // nil: the fake's own
	provision func(ctx context.Context, s core.Spec) (core.Provisioned, error)
	list      func(ctx context.Context) ([]core.Observed, error)
}

func (s *scriptDriver) Destroy(ctx context.Context, r core.DeviceRef) error {
	s.mu.Lock()
	f := s.destroy
	s.mu.Unlock()
	if f != nil {
		return f(ctx, r)
	}
	return s.Driver.Destroy(ctx, r)
}

func (s *scriptDriver) Provision(ctx context.Context, spec core.Spec) (core.Provisioned, error) {
	s.mu.Lock()
	f := s.provision
	s.mu.Unlock()
	if f != nil {
		return f(ctx, spec)
	}
	return s.Driver.Provision(ctx, spec)
}

func (s *scriptDriver) ListManaged(ctx context.Context) ([]core.Observed, error) {
	s.mu.Lock()
	f := s.list
	s.mu.Unlock()
	if f != nil {
		return f(ctx)
	}
	return s.Driver.ListManaged(ctx)
}

func (s *scriptDriver) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// scripted builds a harness whose iOS driver is a scriptDriver.
func scripted(t *testing.T, limits core.Limits, mutate func(*core.Config)) (*harness, *scriptDriver) {
	h := newHarness(t, limits)
	sd := &scriptDriver{Driver: h.drv}
	h.drivers = []core.Driver{sd, h.droid}
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.start()
	return h, sd
}

func (m *memStore) with(f func(m *memStore)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

func (m *memStore) device(id string) (core.DeviceRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.devices[id]
	return d, ok
}

func callsSince(d *fakedrv.Driver, n int) []string { return d.Calls()[n:] }

func anyCall(calls []string, verbs ...string) bool {
	for _, c := range calls {
		for _, v := range verbs {
			if strings.HasPrefix(c, v+" ") {
				return true
			}
		}
	}
	return false
}

// A warm Phone, released and purged, shut down behind the core's back and
// noticed by a restart: a shut-down device the planner may boot.
func shutDownPhone(t *testing.T, h *harness) core.DeviceRecord {
	t.Helper()
	g, err := h.lease("setup", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	h.drv.Crash(g.Device.Handle)
	h.start()
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateShutdown {
		t.Fatalf("setup: device %s, want shutdown", d.State)
	}
	return d
}

// Defect 4: a device quarantined because its destroy failed is destroyed
// on retry; it is never purged, booted or returned to ready.
func TestQuarantineRetryOfAFailedDestroyDestroys(t *testing.T) {
	h := withPolicies(t, one(2), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 3, Backoff: 10 * time.Second, Multiplier: 1, Cap: 10 * time.Second}
		c.Cleanup = core.CleanupPolicy{Interval: -1, IdleShutdown: time.Minute, IdleDestroy: 2 * time.Minute}
	})
	g, _ := h.lease("a", "")
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.clock.Advance(3 * time.Minute)
	h.drv.SetFail("destroy", 1)
	res, err := h.engine.Cleanup().RunCleanup(context.Background(), false, "idle-destroy")
	if err != nil || len(res) != 1 || res[0].Err == "" {
		t.Fatalf("cleanup %+v %v", res, err)
	}
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateQuarantined || d.Health.QuarantineOp != core.OpKindDestroy {
		t.Fatalf("after the failed destroy %+v", d)
	}
	n := len(h.drv.Calls())
	h.clock.Advance(10 * time.Second)
	h.engine.WaitIdle()
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("the retry did not destroy the device")
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatal("the device still exists in the driver")
	}
	if calls := callsSince(h.drv, n); anyCall(calls, "reclaim", "boot") || !anyCall(calls, "destroy") {
		t.Fatalf("retry ran %v, want only a destroy", calls)
	}
}

// Defect 4, eviction: a device whose eviction shutdown failed is shut down
// on retry (not purged back to ready), and the waiter it was evicted for is
// then served.
func TestQuarantineRetryOfAFailedEvictionShutsDown(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 3, Backoff: 10 * time.Second, Multiplier: 1, Cap: 10 * time.Second}
	})
	g, _ := h.lease("a", "Phone")
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.drv.SetFail("shutdown", 1)
	n := len(h.drv.Calls())
	tablet := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "b", OwnerID: "b"})
	h.engine.WaitIdle()
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateQuarantined || d.Health.QuarantineOp != core.OpKindShutdown {
		t.Fatalf("after the failed eviction %+v", d)
	}
	h.clock.Advance(10 * time.Second)
	h.engine.WaitIdle()
	r := <-tablet
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d, _ = h.engine.Device(g.Device.ID); d.State != core.StateShutdown || h.drv.Running(d.Handle) {
		t.Fatalf("evicted device %s, running %v", d.State, h.drv.Running(d.Handle))
	}
	if calls := callsSince(h.drv, n); anyCall(calls, "reclaim") || strings.Contains(strings.Join(calls, ","), "boot "+g.Device.Handle) {
		t.Fatalf("retry purged or booted the evicted device: %v", calls)
	}
}

// Defect 5: when the new device's handle cannot be stored, the device is
// destroyed again, the waiter fails, and a restart finds nothing to adopt
// and no orphan.
func TestUnstoredHandleLeavesNoOrphan(t *testing.T) {
	h := newHarness(t, one(1))
	h.store.with(func(m *memStore) {
		m.failIf = func(c core.Changes) bool {
			for _, d := range c.PutDevices {
				if d.State == core.StateProvisioning && d.Handle != "" {
					return true
				}
			}
			return false
		}
	})
	if _, err := h.lease("a", ""); !errors.Is(err, core.ErrDeviceFailed) {
		t.Fatalf("lease over a store that cannot record the device: %v", err)
	}
	h.engine.WaitIdle()
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices exist in the driver with no record", exist)
	}
	if devs := h.engine.Devices(); len(devs) != 0 {
		t.Fatalf("registry %+v", devs)
	}
	h.store.with(func(m *memStore) { m.failIf = nil })
	h.start()
	if devs := h.engine.Devices(); len(devs) != 0 {
		t.Fatalf("after restart %+v", devs)
	}
	if _, err := h.lease("b", ""); err != nil {
		t.Fatal(err)
	}
}

// Defect 5, crash window: killed after the driver created a device and
// before its handle was stored. The intent written before the call (a
// provisioning record) tells the next start a device may exist that no
// record names; it finds it in the root and destroys it.
func TestProvisionCutOffBeforeItsHandleWasStoredLeavesNoOrphan(t *testing.T) {
	h, sd := scripted(t, one(1), nil)
	created := make(chan struct{})
	sd.set(func() {
		sd.provision = func(ctx context.Context, spec core.Spec) (core.Provisioned, error) {
			p, err := sd.Driver.Provision(ctx, spec)
			close(created)
			<-ctx.Done() // "kill -9" before the handle is committed
			return p, err
		}
	})
	go h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a"}, nil)
	<-created
	sd.set(func() { sd.provision = nil })
	h.drv.AddOrphan("unrelated") // two unregistered devices, one interrupted provision: ambiguous
	h.start()
	if exist, _ := h.drv.Count(); exist != 2 {
		t.Fatalf("an ambiguous attribution destroyed devices: %d left", exist)
	}
	h.drv.Vanish("unrelated")
	// The same crash again, now unambiguous.
	h2, sd2 := scripted(t, one(1), nil)
	created2 := make(chan struct{})
	sd2.set(func() {
		sd2.provision = func(ctx context.Context, spec core.Spec) (core.Provisioned, error) {
			p, err := sd2.Driver.Provision(ctx, spec)
			close(created2)
			<-ctx.Done()
			return p, err
		}
	})
	go h2.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a"}, nil)
	<-created2
	sd2.set(func() { sd2.provision = nil })
	h2.start()
	if exist, _ := h2.drv.Count(); exist != 0 {
		t.Fatalf("%d orphans survive the restart", exist)
	}
	if devs := h2.engine.Devices(); len(devs) != 0 {
		t.Fatalf("registry %+v", devs)
	}
	if !has(eventTypes(h2, ""), "device.orphan-purged") {
		t.Fatal("no device.orphan-purged")
	}
}

func failReady(c core.Changes) bool {
	for _, d := range c.PutDevices {
		if d.State == core.StateReady {
			return true
		}
	}
	return false
}

// Defect 5: a warm-pool boot whose settlement the store refuses is not left
// in provisioning: the settlement is retried and lands once the store
// recovers.
func TestWarmBootSettlementTheStoreRefusedLandsLater(t *testing.T) {
	h := newHarness(t, one(1))
	h.cfg.Quarantine = core.QuarantinePolicy{Retries: 3, Backoff: 5 * time.Second, Multiplier: 1, Cap: 5 * time.Second}
	h.cfg.WarmTargets = []core.WarmTarget{{Spec: core.SpecRequest{Platform: "ios"}, Count: 1}}
	h.store.with(func(m *memStore) { m.failIf = failReady })
	h.start()
	h.engine.WaitIdle()
	devs := h.engine.Devices()
	if len(devs) != 1 || devs[0].State != core.StateProvisioning {
		t.Fatalf("while the store refuses %+v", devs)
	}
	h.store.with(func(m *memStore) { m.failIf = nil })
	h.clock.Advance(5 * time.Second)
	h.engine.WaitIdle()
	d, _ := h.engine.Device(devs[0].ID)
	if d.State != core.StateReady || d.Intent != (core.DeviceIntent{}) {
		t.Fatalf("after the store recovered %+v", d)
	}
	if !has(eventTypes(h, d.ID), "device.warmed") {
		t.Fatal("no device.warmed")
	}
	if _, err := h.lease("a", ""); err != nil {
		t.Fatal(err)
	}
}

// Defect 5: the same refused settlement, then a crash: the next start
// finds the provisioning record by its intent, shuts the device down to
// match it, and the warm pool boots it again. One device, ready, no orphan.
func TestWarmBootCommitRefusedIsRecoveredAtRestart(t *testing.T) {
	h := newHarness(t, one(1))
	h.cfg.WarmTargets = []core.WarmTarget{{Spec: core.SpecRequest{Platform: "ios"}, Count: 1}}
	h.store.with(func(m *memStore) { m.failIf = failReady })
	h.start()
	h.engine.WaitIdle()
	h.store.with(func(m *memStore) { m.failIf = nil })
	h.start() // crash
	h.engine.WaitIdle()
	devs := h.engine.Devices()
	if len(devs) != 1 || devs[0].State != core.StateReady {
		t.Fatalf("after restart %+v", devs)
	}
	if exist, running := h.drv.Count(); exist != 1 || running != 1 {
		t.Fatalf("driver has %d devices, %d running", exist, running)
	}
}

// Defect 6: booting an existing shut-down device fails; the device goes to
// quarantine (for a boot retry) and the waiter is planned again, so it gets
// a newly provisioned device instead of the error.
func TestFailedBootOfAShutDownDeviceReplansTheWaiter(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 4})
	old := shutDownPhone(t, h)
	h.drv.SetFail("boot", 1)
	g, err := h.lease("b", "Phone")
	if err != nil {
		t.Fatalf("the waiter got the stale device's failure: %v", err)
	}
	if g.Device.ID == old.ID {
		t.Fatal("granted the device that failed to boot")
	}
	d, _ := h.engine.Device(old.ID)
	if d.State != core.StateQuarantined || d.Health.QuarantineOp != core.OpKindBoot {
		t.Fatalf("stale device %+v", d)
	}
}

// A failed provision still fails its waiter (nothing else to try would
// differ).
func TestFailedProvisionStillFailsTheWaiter(t *testing.T) {
	h := newHarness(t, one(1))
	h.drv.SetFail("provision", 1)
	if _, err := h.lease("a", ""); !errors.Is(err, core.ErrDeviceFailed) {
		t.Fatalf("got %v", err)
	}
	if devs := h.engine.Devices(); len(devs) != 0 {
		t.Fatalf("%+v", devs)
	}
}

// Defect 8: Stop joins a cleanup destroy the reaper has in flight; its
// commit lands before Stop returns and nothing reaches the store after.
func TestStopJoinsTheReapersDestroyInFlight(t *testing.T) {
	h, sd := scripted(t, one(2), func(c *core.Config) {
		c.Cleanup = core.CleanupPolicy{Interval: 10 * time.Second, IdleShutdown: time.Minute, IdleDestroy: 2 * time.Minute}
	})
	g, _ := h.lease("a", "")
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	entered, returned := make(chan struct{}), make(chan struct{})
	sd.set(func() {
		sd.destroy = func(ctx context.Context, r core.DeviceRef) error {
			close(entered)
			defer close(returned)
			<-ctx.Done() // a destroy slower than Stop is willing to wait
			for i := 0; i < 10; i++ {
				runtime.Gosched() // and slow to wind down
			}
			return ctx.Err()
		}
	})
	h.clock.Advance(3 * time.Minute)
	h.engine.Cleanup().StartReaper(context.Background())
	h.bus.Publish(events.Event{Type: "daemon.started"}) // a reaper trigger: idle-destroy runs
	<-entered
	// Stop's patience is already spent: it cancels the driver call at once
	// and must still wait for it to settle.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.engine.Stop(ctx)
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned while the destroy was in flight")
	}
	if d, _ := h.store.device(g.Device.ID); d.State != core.StateQuarantined || d.Health.QuarantineOp != core.OpKindDestroy {
		t.Fatalf("the cancelled destroy had not settled when Stop returned: %+v", d)
	}
	h.store.with(func(m *memStore) { m.closed = true })
	h.engine.WaitIdle()
	h.clock.Advance(time.Hour)
	h.store.with(func(m *memStore) {
		if m.afterClose != 0 {
			t.Fatalf("%d commits reached the closed store", m.afterClose)
		}
	})
}

// Defect 14: an eviction records its intent before it destroys. Killed
// after the driver destroyed the device but before the registry forgot it,
// the next start finishes the destroy instead of keeping a record of a
// device that no longer exists.
func TestEvictionDestroyCutOffByACrashIsFinishedAtStartup(t *testing.T) {
	h, sd := scripted(t, core.Limits{MaxRunning: 2, MaxManaged: 1}, nil)
	phone := shutDownPhone(t, h)
	destroyed := make(chan struct{})
	sd.set(func() {
		sd.destroy = func(ctx context.Context, r core.DeviceRef) error {
			err := sd.Driver.Destroy(ctx, r)
			sd.set(func() { sd.destroy = nil }) // the restarted daemon's destroy goes through
			close(destroyed)
			<-ctx.Done() // "kill -9": this daemon never gets to commit
			return err
		}
	})
	go h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "b"}, nil)
	<-destroyed
	if d, _ := h.store.device(phone.ID); d.Intent.Op != core.OpKindDestroy {
		t.Fatalf("the destroy ran without a recorded intent: %+v", d)
	}
	h.start()
	if _, ok := h.engine.Device(phone.ID); ok {
		t.Fatal("the restarted registry still has the destroyed device")
	}
	if _, ok := h.store.device(phone.ID); ok {
		t.Fatal("the store still has the destroyed device")
	}
}

// hideOnce makes the first n listings of sd omit handle.
func hide(sd *scriptDriver, handle string, n int) {
	sd.set(func() {
		left := n
		sd.list = func(ctx context.Context) ([]core.Observed, error) {
			obs, err := sd.Driver.ListManaged(ctx)
			sd.mu.Lock()
			skip := left > 0
			left--
			sd.mu.Unlock()
			var out []core.Observed
			for _, o := range obs {
				if !(skip && o.Handle == handle) {
					out = append(out, o)
				}
			}
			return out, err
		}
	})
}

// Defect 14: startup forgets a ready device only when it is missing from
// two consecutive listings; missing from one, it is kept.
func TestReconcileReadyDebouncesAMissingDevice(t *testing.T) {
	h, sd := scripted(t, one(2), nil)
	g, _ := h.lease("a", "")
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()

	hide(sd, g.Device.Handle, 1)
	h.start()
	if d, ok := h.engine.Device(g.Device.ID); !ok || d.State != core.StateReady {
		t.Fatalf("one missed listing forgot the device: %+v %v", d, ok)
	}
	if has(eventTypes(h, g.Device.ID), "device.vanished") {
		t.Fatal("device.vanished after one missed listing")
	}

	hide(sd, g.Device.Handle, 2)
	h.start()
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("a device missing from two listings was kept")
	}
	if !has(eventTypes(h, g.Device.ID), "device.vanished") {
		t.Fatal("no device.vanished")
	}
}

// Hardening 6: a release while the health monitor reboots the device does
// not overlap the purge with the reboot: the purge waits for the recovery,
// and no device.recovered is emitted for the released lease.
func TestReleaseDuringCrashRecoveryWaitsForItAndEmitsNoRecovered(t *testing.T) {
	h := healthHarness(t)
	g, _ := h.lease("a", "")
	h.engine.Health().StartHealthMonitor()
	h.drv.Gate = make(chan struct{})
	h.drv.Crash(g.Device.Handle)
	h.clock.Advance(5 * time.Second)
	h.clock.Advance(5 * time.Second) // second stopped read: recovery starts, held at the gate
	if !has(eventTypes(h, g.Device.ID), "device.crash-detected") {
		t.Fatal("no crash detected")
	}
	n := len(h.drv.Calls())
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.drv.Gate <- struct{}{} // one driver call may pass: it must be the recovery's boot
	h.drv.Gate <- struct{}{} // then the purge
	h.engine.WaitIdle()
	calls := callsSince(h.drv, n)
	want := []string{"boot " + g.Device.Handle, "reclaim " + g.Device.Handle}
	if strings.Join(calls, ",") != strings.Join(want, ",") {
		t.Fatalf("driver calls %v, want %v", calls, want)
	}
	evs, _ := h.bus.Since(0)
	for _, e := range evs {
		if e.Type == "device.recovered" {
			t.Fatalf("device.recovered for a released lease: %+v", e)
		}
	}
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateReady {
		t.Fatalf("device %s after the purge", d.State)
	}
}

type recordingHooks struct {
	mu      sync.Mutex
	before  []string
	after   []string
	created []string
	veto    core.OpKind
}

func (r *recordingHooks) BeforeOp(_ context.Context, op core.OpInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.before = append(r.before, string(op.Kind)+" "+op.Lock)
	if op.Kind == r.veto {
		return errors.New("vetoed")
	}
	return nil
}

func (r *recordingHooks) AfterOp(op core.OpInfo, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.after = append(r.after, string(op.Kind))
}

func (r *recordingHooks) Created(_ context.Context, op core.OpInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created = append(r.created, string(op.Kind)+" "+op.Handle)
	return nil
}

// The seam: every device operation passes the hooks, around its driver
// call, and a refusal settles like a driver failure.
func TestOpHooksSeeEveryOperationAndMayRefuse(t *testing.T) {
	hooks := &recordingHooks{veto: core.OpKindReclaim}
	h := newHarness(t, one(1))
	h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: h.store, Drivers: []core.Driver{h.drv, h.droid},
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus, Hooks: hooks})
	if err := h.engine.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if strings.Join(hooks.before, ",") != "provision provision,reclaim reclaim" || strings.Join(hooks.after, ",") != "provision,reclaim" {
		t.Fatalf("hooks saw before=%v after=%v", hooks.before, hooks.after)
	}
	if strings.Join(hooks.created, ",") != "provision "+g.Device.Handle {
		t.Fatalf("the provision's claim point saw %v", hooks.created)
	}
	if anyCall(h.drv.Calls(), "reclaim") {
		t.Fatal("the driver ran a vetoed operation")
	}
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateQuarantined {
		t.Fatalf("a vetoed purge left the device %s", d.State)
	}
}

// Defect 8: the startup doctor is background work too. Stop joins a doctor
// pass stuck in a driver listing; once Stop's patience ends, the listing
// is cancelled, and the pass has returned by the time Stop does.
func TestStopJoinsAHungDoctorPass(t *testing.T) {
	h, sd := scripted(t, one(1), nil)
	entered, returned := make(chan struct{}), make(chan struct{})
	sd.set(func() {
		sd.list = func(ctx context.Context) ([]core.Observed, error) {
			close(entered)
			<-ctx.Done()
			close(returned) // before the pass can leave the wait group
			return nil, ctx.Err()
		}
	})
	go h.engine.Maintenance().Doctor(context.Background(), core.DoctorOptions{})
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.engine.Stop(ctx)
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned while a doctor pass was still listing")
	}
	if _, err := h.engine.Maintenance().Doctor(context.Background(), core.DoctorOptions{}); !errors.Is(err, core.ErrStopping) {
		t.Fatalf("a doctor pass after Stop: %v", err)
	}
}
