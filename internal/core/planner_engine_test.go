package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

func leaseOn(t *testing.T, h *harness, req, platform, model string) core.Grant {
	t.Helper()
	g, err := h.engine.Request(context.Background(), core.Request{
		Spec: core.SpecRequest{Platform: platform, Model: model}, RequesterID: req, OwnerID: req}, nil)
	if err != nil {
		t.Fatalf("lease %s %s: %v", platform, model, err)
	}
	return g
}

// warm leases and releases a device so it sits ready, last used now, and
// moves the clock on so later devices are more recently used.
func warm(t *testing.T, h *harness, req, platform, model string) core.Grant {
	t.Helper()
	g := leaseOn(t, h, req, platform, model)
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	h.clock.Advance(time.Minute)
	return g
}

func state(h *harness, id string) core.DeviceState {
	d, _ := h.engine.Device(id)
	return d.State
}

func countCalls(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func sawEvent(h *harness, typ string) bool {
	evs, _ := h.bus.Since(0)
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// Defect 1: maxRunning 3, platforms.android.maxRunning 1, one Android device
// leased and two warm iPhones. The Android request is blocked by its own
// platform's limit, which no iPhone shutdown eases: it waits, and both
// iPhones stay warm. (The old planner shut down both and still timed out.)
func TestAndroidBlockedByItsPlatformLimitEvictsNoIPhone(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 9, Platforms: map[string]core.PlatformLimits{"android": {MaxRunning: 1}}})
	leaseOn(t, h, "droid", "android", "Pixel")
	// Two warm iPhones: lease both at once, then release them.
	a := leaseOn(t, h, "p3", "ios", "Phone")
	b := leaseOn(t, h, "p4", "ios", "Phone")
	h.engine.Release(a.Lease.ID)
	h.engine.Release(b.Lease.ID)
	h.engine.WaitIdle()
	before := countCalls(h.drv.Calls(), "shutdown")
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "android", Model: "Tablet"}, RequesterID: "w", Timeout: 10 * time.Second})
	h.engine.WaitIdle()
	h.clock.Advance(11 * time.Second)
	if r := <-waiting; !errors.Is(r.err, core.ErrQueueTimeout) {
		t.Fatalf("android request: %v", r.err)
	}
	if n := countCalls(h.drv.Calls(), "shutdown") - before; n != 0 {
		t.Fatalf("%d iPhones shut down for an android request they could not help: %v", n, h.drv.Calls())
	}
	if sawEvent(h, "device.evicted") {
		t.Fatal("device.evicted for a request no eviction could serve")
	}
	for _, g := range []core.Grant{a, b} {
		if st := state(h, g.Device.ID); st != core.StateReady {
			t.Fatalf("iPhone %s is %s, want ready", g.Device.ID, st)
		}
	}
}

// Defect 1, startup sweep: iOS is over its own limit after a restart with a
// smaller one; the sweep shuts down iPhones only, never the Android device,
// even though that one is the least recently used.
func TestConvergeSweepOverIOSLimitKeepsAndroidWarm(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 9})
	droid := warm(t, h, "d", "android", "Pixel")
	a := leaseOn(t, h, "p1", "ios", "Phone")
	b := leaseOn(t, h, "p2", "ios", "Phone")
	h.engine.Release(a.Lease.ID)
	h.engine.Release(b.Lease.ID)
	h.engine.WaitIdle()
	h.limits = core.Limits{MaxRunning: 3, MaxManaged: 9, Platforms: map[string]core.PlatformLimits{"ios": {MaxRunning: 1}}}
	h.start()
	if st := state(h, droid.Device.ID); st != core.StateReady {
		t.Fatalf("android device %s after the sweep, want ready (calls %v)", st, h.droid.Calls())
	}
	if countCalls(h.droid.Calls(), "shutdown") != 0 {
		t.Fatalf("android device shut down by the iOS sweep: %v", h.droid.Calls())
	}
	ready := 0
	for _, g := range []core.Grant{a, b} {
		if state(h, g.Device.ID) == core.StateReady {
			ready++
		}
	}
	if ready != 1 {
		t.Fatalf("%d iPhones ready after the sweep, want 1", ready)
	}
}

// Defect 2: a noWait request nothing can serve is refused with nothing
// changed: no eviction started, the warm device still ready.
func TestNoWaitRefusalHasNoSideEffects(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 6, Platforms: map[string]core.PlatformLimits{"ios": {MaxRunning: 1}}})
	droid := warm(t, h, "d", "android", "Pixel")
	leaseOn(t, h, "p", "ios", "Phone")
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "nw", NoWait: true}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("noWait: %v", err)
	}
	h.engine.WaitIdle()
	if st := state(h, droid.Device.ID); st != core.StateReady {
		t.Fatalf("warm android device is %s after a refusal, want ready", st)
	}
	if sawEvent(h, "device.evicted") || countCalls(h.droid.Calls(), "shutdown") != 0 {
		t.Fatalf("a refused request evicted a device: %v", h.droid.Calls())
	}
}

// ADR 0010: a noWait request whose only way in is an eviction that does make
// room is committed to it (the gateway sends every request with noWait): it
// waits through the eviction and is granted, never refused after the fact.
func TestNoWaitIsCommittedToAnEvictionThatMakesRoom(t *testing.T) {
	h := newHarness(t, one(1))
	phone := warm(t, h, "a", "ios", "Phone")
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "nw", NoWait: true}, nil)
	if err != nil {
		t.Fatalf("noWait with an eviction that makes room: %v", err)
	}
	if g.Device.Spec.Model != "Tablet" || state(h, phone.Device.ID) != core.StateShutdown {
		t.Fatalf("granted %+v, phone %s", g.Device.Spec, state(h, phone.Device.ID))
	}
}

// Defect 3: releasing an iPhone while an Android request waits for the one
// running slot. The purge erases the iPhone and, since the planner would
// evict it at once, leaves it shut down instead of booting it for nobody.
func TestPurgeStopsAfterEraseWhenTheDeviceWouldBeEvicted(t *testing.T) {
	h := &harness{t: t, clock: fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), store: newMemStore(),
		drv: fakedrv.New("ios"), droid: fakedrv.New("android"), limits: core.Limits{MaxRunning: 1, MaxManaged: 4}}
	h.bus = events.New(100, h.clock.Now)
	n := 0
	h.engine = core.New(core.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour}, core.Deps{
		Clock: h.clock, Store: h.store, Drivers: []core.Driver{fakedrv.Erasing{Driver: h.drv}, h.droid},
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus, NewID: func() string { n++; return fmt.Sprintf("%04d", n) },
	})
	if err := h.engine.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	phone := leaseOn(t, h, "p", "ios", "Phone")
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "android"}, RequesterID: "w", OwnerID: "w"})
	before := len(h.drv.Calls())
	if err := h.engine.Release(phone.Lease.ID); err != nil {
		t.Fatal(err)
	}
	r := <-waiting
	if r.err != nil || r.g.Device.Platform != "android" {
		t.Fatalf("android waiter: %+v %v", r.g.Device, r.err)
	}
	h.engine.WaitIdle()
	if got := h.drv.Calls()[before:]; len(got) != 1 || got[0] != "erase "+phone.Device.Handle {
		t.Fatalf("iPhone calls after release %v, want only the erase (no boot, no shutdown)", got)
	}
	if st := state(h, phone.Device.ID); st != core.StateShutdown {
		t.Fatalf("iPhone %s, want shutdown", st)
	}
	// Nobody waiting: the same purge boots the device back to ready.
	if err := h.engine.Release(r.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	g := leaseOn(t, h, "p2", "ios", "Phone")
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if st := state(h, g.Device.ID); st != core.StateReady {
		t.Fatalf("purged with nobody waiting: %s, want ready", st)
	}
}

// Defect 7: one RAM budget. A 16 GiB machine plans 60%, 9.6 GiB; Android
// devices cost 4 GiB and iPhones 2 GiB. Two emulators (8 GiB) leave no room
// for a simulator: the old per-platform counts (2 Android, 4 iOS, 4 in all)
// admitted two of each, 12 GiB.
func TestOneRAMBudgetAcrossPlatforms(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.drv.RAM, h.droid.RAM = 2<<30, 4<<30
	stats := &fake.Stats{CPUs: 16, TotalRAM: 16 << 30}
	h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: newMemStore(), Drivers: []core.Driver{h.drv, h.droid},
		Strategy: core.ResourceStrategy{Stats: stats}, Bus: h.bus})
	if err := h.engine.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	leaseOn(t, h, "a1", "android", "Pixel")
	leaseOn(t, h, "a2", "android", "Pixel")
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "i1", NoWait: true}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("a 2 GiB simulator on top of 8 GiB of emulators against 9.6 GiB: %v", err)
	}
	c := h.engine.Capacity()
	if c.Limits.RAMBudget != 10307921510 || c.Global.RAMBytes != 8<<30 || c.Platforms["android"].RAMBytes != 8<<30 {
		t.Fatalf("capacity %+v", c)
	}
	for id, ram := range c.DeviceRAM {
		if ram != 4<<30 {
			t.Fatalf("device %s charged %d", id, ram)
		}
	}
}

// A device is charged the footprint its driver learned when it created it
// (an AVD's hw.ramSize), not the spec's estimate: two emulators estimated at
// 4 GiB that turn out to need 3 GiB each leave room for a simulator.
func TestProvisionedFootprintReplacesTheEstimate(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.drv.RAM, h.droid.RAM, h.droid.ProvisionedRAM = 2<<30, 4<<30, 3<<30
	stats := &fake.Stats{CPUs: 16, TotalRAM: 16 << 30}
	h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: newMemStore(), Drivers: []core.Driver{h.drv, h.droid},
		Strategy: core.ResourceStrategy{Stats: stats}, Bus: h.bus})
	if err := h.engine.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	leaseOn(t, h, "a1", "android", "Pixel")
	leaseOn(t, h, "a2", "android", "Pixel")
	if c := h.engine.Capacity(); c.Platforms["android"].RAMBytes != 6<<30 {
		t.Fatalf("emulators charged %d, want their own 6 GiB", c.Platforms["android"].RAMBytes)
	}
	if _, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "i1", NoWait: true}, nil); err != nil {
		t.Fatalf("a 2 GiB simulator beside 6 GiB of emulators fits 9.6 GiB: %v", err)
	}
}

// Hardening 7: a status snapshot is one instant: every lease's device reads
// leased in it, however releases and grants interleave.
func TestStatusIsOneSnapshot(t *testing.T) {
	h := newHarness(t, one(2))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: fmt.Sprint("r", i)}, nil)
				if err == nil {
					_ = h.engine.Release(g.Lease.ID)
				}
			}
		}(i)
	}
	for n := 0; n < 2000; n++ {
		s := h.engine.Status()
		state := map[string]core.DeviceState{}
		for _, d := range s.Devices {
			state[d.ID] = d.State
		}
		for _, l := range s.Leases {
			if state[l.DeviceID] != core.StateLeased {
				close(stop)
				wg.Wait()
				t.Fatalf("lease %s on device %s that reads %s", l.ID, l.DeviceID, state[l.DeviceID])
			}
		}
	}
	close(stop)
	wg.Wait()
	h.engine.WaitIdle()
}
