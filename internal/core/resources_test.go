package core_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// resourced builds a harness whose drivers both have the resource port.
func resourced(t *testing.T, limits core.Limits) *harness {
	h := newHarness(t, limits)
	h.drivers = []core.Driver{fakedrv.Resourced{Driver: h.drv}, fakedrv.Resourced{Driver: h.droid}}
	h.start()
	return h
}

func profiled(platform, req string, res map[string]contract.ResourceState) core.Request {
	return core.Request{Spec: core.SpecRequest{Platform: platform, Resources: res}, RequesterID: req, OwnerID: req}
}

// waitFor yields until cond holds (a goroutine of the test reaching a gate).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("condition never held")
}

var animOff = map[string]contract.ResourceState{"animations": contract.ResourceDisabled}

func TestResourceSetIsVerifiedByAnIndependentRead(t *testing.T) {
	h := resourced(t, one(1))
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	h.drv.SetResourceNoStick("widgets")
	res, err := h.engine.Resources().LeaseResources(context.Background(), g.Lease.ID, core.ResourceCall{Op: "set", Change: core.ResourceChange{
		Resources: map[string]contract.ResourceState{"animations": contract.ResourceDisabled, "widgets": contract.ResourceDisabled}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resources["animations"].State != contract.ResourceDisabled || res.Resources["widgets"].State != contract.ResourceUnknown || res.Success {
		t.Fatalf("result %+v", res)
	}
	got, err := h.engine.Resources().LeaseResources(context.Background(), g.Lease.ID, core.ResourceCall{Op: "get"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Resources["animations"].State != contract.ResourceDisabled || got.Resources["widgets"].State != contract.ResourceEnabled {
		t.Fatalf("read back %+v", got.Resources)
	}
}

// A reclaim that a release starts while a resource call holds the device
// waits for it: the purge never overlaps the write, and a call after the
// release finds no lease.
func TestResourceCallSerializesWithTheReclaim(t *testing.T) {
	h := resourced(t, one(1))
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	h.drv.ResourceGate = gate
	done := make(chan error, 1)
	go func() {
		_, err := h.engine.Resources().LeaseResources(context.Background(), g.Lease.ID, core.ResourceCall{Op: "set", Change: core.ResourceChange{Resources: animOff}})
		done <- err
	}()
	// The call holds the device's op lock while it waits at the gate.
	waitFor(t, func() bool { return h.engine.Status().Devices[0].Intent.Op == core.OpKindResources })
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(h.drv.Calls(), "reclaim ios-1") {
		t.Fatal("the reclaim started while the resource call held the device")
	}
	gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	calls := h.drv.Calls()
	if i, j := slices.Index(calls, "resources-set ios-1"), slices.Index(calls, "reclaim ios-1"); i < 0 || j < i {
		t.Fatalf("calls %v: the reclaim must follow the resource call", calls)
	}
	h.drv.ResourceGate = nil
	if _, err := h.engine.Resources().LeaseResources(context.Background(), g.Lease.ID, core.ResourceCall{Op: "get"}); !errors.Is(err, core.ErrUnknownLease) {
		t.Fatalf("after release: %v", err)
	}
}

func TestUnprovableIOSProfileFailsAndDestroysTheCreatedDevice(t *testing.T) {
	h := resourced(t, one(1))
	h.drv.SetResourceUnsupported("widgets")
	_, err := h.engine.Request(context.Background(), profiled("ios", "a",
		map[string]contract.ResourceState{"animations": contract.ResourceDisabled, "widgets": contract.ResourceDisabled}), nil)
	var ue *core.ResourceUnprovenError
	if !errors.As(err, &ue) {
		t.Fatalf("err %v", err)
	}
	if !slices.Equal(ue.Drift.Unsupported, []string{"widgets"}) || !strings.Contains(err.Error(), "widgets") {
		t.Fatalf("drift %+v, message %q", ue.Drift, err)
	}
	h.engine.WaitIdle()
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left behind; calls %v", exist, h.drv.Calls())
	}
	if n := len(h.engine.Status().Devices); n != 0 {
		t.Fatalf("%d device records left", n)
	}
	if n := len(h.engine.Status().Leases); n != 0 {
		t.Fatal("a lease was granted")
	}
}

func TestAndroidProfileIsGrantedWithTheResult(t *testing.T) {
	h := resourced(t, one(1))
	h.droid.SetResourceNoStick("animations")
	g, err := h.engine.Request(context.Background(), profiled("android", "a", animOff), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.Resources == nil || g.Lease.Resources.Success || g.Lease.Resources.Resources["animations"].State != contract.ResourceUnknown {
		t.Fatalf("lease resources %+v", g.Lease.Resources)
	}
}

// A warm device with a profile serves only requests with the same map, and
// the core re-applies and verifies the profile when it reuses it (the
// purge erased what was written).
func TestProfileKeysKeepWarmDevicesApart(t *testing.T) {
	h := resourced(t, one(3))
	g, err := h.engine.Request(context.Background(), profiled("ios", "a", animOff), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lease.Resources == nil || !g.Lease.Resources.Success || h.drv.ResourceState(g.Device.Handle, "animations") != contract.ResourceDisabled {
		t.Fatalf("first grant %+v", g.Lease.Resources)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if h.drv.ResourceState(g.Device.Handle, "animations") != contract.ResourceEnabled {
		t.Fatal("the fake's purge should have erased the override")
	}
	plain, err := h.lease("b", "")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Device.ID == g.Device.ID {
		t.Fatal("a request without the profile got the profiled warm device")
	}
	other, err := h.engine.Request(context.Background(), profiled("ios", "c",
		map[string]contract.ResourceState{"animations": contract.ResourceEnabled}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Device.ID == g.Device.ID {
		t.Fatal("a request with another profile got the profiled warm device")
	}
	if err := h.engine.Release(other.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	again, err := h.engine.Request(context.Background(), profiled("ios", "d", animOff), nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Device.ID != g.Device.ID {
		t.Fatalf("the same profile got %s, not the warm %s", again.Device.ID, g.Device.ID)
	}
	if !again.Lease.Resources.Success || h.drv.ResourceState(g.Device.Handle, "animations") != contract.ResourceDisabled {
		t.Fatalf("profile not re-applied on reuse: %+v", again.Lease.Resources)
	}
}

// A reused device whose profile cannot be proven any more is not destroyed
// (it was not made for this request) but purged before anyone else gets it.
func TestUnprovableProfileOnAReusedDevicePurgesIt(t *testing.T) {
	h := resourced(t, one(1))
	g, err := h.engine.Request(context.Background(), profiled("ios", "a", animOff), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	h.drv.SetResourceNoStick("animations")
	before := strings.Count(strings.Join(h.drv.Calls(), ","), "reclaim")
	_, err = h.engine.Request(context.Background(), profiled("ios", "b", animOff), nil)
	var ue *core.ResourceUnprovenError
	if !errors.As(err, &ue) || !slices.Equal(ue.Drift.CommandFailure, []string{"animations"}) {
		t.Fatalf("err %v", err)
	}
	h.engine.WaitIdle()
	if exist, _ := h.drv.Count(); exist != 1 {
		t.Fatalf("the reused device should stay: %d", exist)
	}
	if after := strings.Count(strings.Join(h.drv.Calls(), ","), "reclaim"); after != before+1 {
		t.Fatalf("no purge after the failed profile: %v", h.drv.Calls())
	}
	if st := h.engine.Status().Devices[0].State; st != core.StateReady {
		t.Fatalf("state %s", st)
	}
}

func TestDriverWithoutThePortAnswersUnsupported(t *testing.T) {
	h := newHarness(t, one(1))
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.engine.Resources().LeaseResources(context.Background(), g.Lease.ID, core.ResourceCall{Op: "get"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resources) != len(contract.ResourceGroupsFor("ios")) {
		t.Fatalf("groups %v", res.Resources)
	}
	for name, o := range res.Resources {
		if o.State != contract.ResourceUnsupported || o.Reason == "" {
			t.Fatalf("%s: %+v", name, o)
		}
	}
	set, err := h.engine.Resources().LeaseResources(context.Background(), g.Lease.ID, core.ResourceCall{Op: "set", Change: core.ResourceChange{Resources: animOff}})
	if err != nil || set.Success || set.Resources["animations"].State != contract.ResourceUnsupported {
		t.Fatalf("set %+v %v", set, err)
	}
}

func TestProfileIsPartOfTheKeyOnlyWhenSet(t *testing.T) {
	s := core.Spec{Platform: "ios", ModelID: "m", OSVersion: "1"}
	if s.Key() != "ios|m|1" {
		t.Fatalf("key changed for a spec without a profile: %s", s.Key())
	}
	a := core.ProfileOf(animOff, nil)
	b := core.ProfileOf(map[string]contract.ResourceState{"animations": contract.ResourceEnabled}, nil)
	hw := core.ProfileOf(nil, &contract.AndroidHardware{MemoryMB: 4096})
	if a == "" || a == b || hw == "" || core.ProfileOf(nil, &contract.AndroidHardware{}) != "" {
		t.Fatalf("profiles %q %q %q", a, b, hw)
	}
	s.Profile = a
	if s.Key() == "ios|m|1" {
		t.Fatal("the profile is not in the key")
	}
}

// A resource step that never answers fails on the engine's clock, and the
// device made for it goes with it.
func TestLeaseResourceStepIsBoundedOnTheClock(t *testing.T) {
	h := resourced(t, one(1))
	h.drv.ResourceGate = make(chan struct{}) // never opened
	base := h.clock.Pending()
	ch := make(chan result, 1)
	go func() {
		g, err := h.engine.Request(context.Background(), profiled("ios", "a", animOff), nil)
		ch <- result{g, err}
	}()
	waitFor(t, func() bool {
		d := h.engine.Status().Devices
		// The step's own deadline timer is armed once its driver call runs.
		return len(d) == 1 && d[0].Intent.Op == core.OpKindResources && h.clock.Pending() > base
	})
	h.clock.Advance(core.TuneTimeout - time.Second)
	select {
	case r := <-ch:
		t.Fatalf("finished before its deadline: %+v", r)
	default:
	}
	h.clock.Advance(time.Second)
	r := <-ch
	var df *core.DeviceFailedError
	if !errors.As(r.err, &df) || df.Phase != "resources" {
		t.Fatalf("err %v", r.err)
	}
	h.engine.WaitIdle()
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left", exist)
	}
}

// A request cancelled while its resource step runs gets no lease; the
// device, tuned for the profile, stays warm for the next request of it.
func TestCancelDuringTheResourceStepLeavesTheDeviceWarm(t *testing.T) {
	h := resourced(t, one(1))
	gate := make(chan struct{})
	h.drv.ResourceGate = gate
	ch := make(chan result, 1)
	go func() {
		g, err := h.engine.Request(context.Background(), profiled("ios", "a", animOff), nil)
		ch <- result{g, err}
	}()
	waitFor(t, func() bool {
		d := h.engine.Status().Devices
		return len(d) == 1 && d[0].Intent.Op == core.OpKindResources
	})
	cancelled := make(chan error, 1)
	go func() { cancelled <- h.engine.Cancel("a") }()
	if r := <-ch; !errors.Is(r.err, core.ErrCancelled) {
		t.Fatalf("request: %v", r.err)
	}
	close(gate)
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	st := h.engine.Status()
	if len(st.Leases) != 0 || len(st.Devices) != 1 || st.Devices[0].State != core.StateReady {
		t.Fatalf("after cancel: leases %d, devices %+v", len(st.Leases), st.Devices)
	}
	h.drv.ResourceGate = nil
	g, err := h.engine.Request(context.Background(), profiled("ios", "b", animOff), nil)
	if err != nil || g.Device.ID != st.Devices[0].ID || !g.Lease.Resources.Success {
		t.Fatalf("the next request of the profile: %+v %v", g, err)
	}
}
