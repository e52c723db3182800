package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/testhost"
)

// One device of this engine runs and another home runs one: a host limit
// of 2 binds although the engine's own limit (4) has room. A noWait request
// is refused at once with the host's figures and nothing is started.
func TestHostLimitRefusesNoWaitWithItsFigures(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	leaseOn(t, h, "a", "ios", "Phone")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Others: map[string]int{"android": 1}, External: map[string]int{"ios": 0},
		RetryAfter: 3 * time.Second})
	before := len(h.drv.Calls())
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
		RequesterID: "b", OwnerID: "b", NoWait: true}, nil)
	var he *core.HostCapacityError
	if !errors.As(err, &he) || !errors.Is(err, core.ErrHostCapacity) {
		t.Fatalf("noWait at the host limit: %v, want a HostCapacityError", err)
	}
	want := core.HostCapacityError{Limit: core.LimitHost, Max: 2, Booted: 2, Platform: "ios", External: 0, RetryAfter: 3 * time.Second}
	if *he != want {
		t.Fatalf("refusal %+v, want %+v", *he, want)
	}
	if errors.Is(err, core.ErrNoCapacity) {
		t.Fatal("a host refusal must not read as the daemon's own NO_CAPACITY")
	}
	if n := len(h.drv.Calls()) - before; n != 0 {
		t.Fatalf("the refused request started driver work: %v", h.drv.Calls()[before:])
	}
	// The daemon's own limit binding first keeps NO_CAPACITY.
	h2 := newHarness(t, core.Limits{MaxRunning: 1, MaxManaged: 2})
	leaseOn(t, h2, "a", "ios", "Phone")
	h2.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 1, Others: map[string]int{"android": 1}})
	_, err = h2.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
		RequesterID: "b", OwnerID: "b", NoWait: true}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("own limit binding too: %v, want ErrNoCapacity", err)
	}
}

// A platform's host limit counts that platform's external devices.
func TestHostPlatformLimitRefusesWithExternalDevices(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 8, Platforms: map[string]int{"ios": 1}, External: map[string]int{"ios": 1, "android": 2}})
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
		RequesterID: "b", OwnerID: "b", NoWait: true}, nil)
	var he *core.HostCapacityError
	if !errors.As(err, &he) {
		t.Fatalf("noWait at the platform's host limit: %v", err)
	}
	if he.Limit != "host.platforms.ios.maxRunning" || he.Max != 1 || he.Booted != 1 || he.External != 1 || he.Platform != "ios" {
		t.Fatalf("refusal %+v", *he)
	}
	// Android is not held back by the iOS host limit.
	leaseOn(t, h, "droid", "android", "Pixel")
}

// A waiter held back by the host limit is granted as soon as the daemon
// reports that another home released its device: SetHostUsage replans.
func TestHostWaiterGrantedWhenAnotherHomeReleases(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	leaseOn(t, h, "a", "ios", "Phone")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Others: map[string]int{"ios": 1}})
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "b", OwnerID: "b"})
	h.engine.WaitIdle()
	select {
	case r := <-waiting:
		t.Fatalf("granted or failed past the host limit: %+v", r)
	default:
	}
	if q := h.engine.Status().Queue; len(q) != 1 {
		t.Fatalf("queue %+v, want the one waiter", q)
	}
	if got := h.engine.Capacity().Host; got.Booted != 2 || got.Ours != 1 || got.OtherHomes != 1 || got.MaxRunning != 2 {
		t.Fatalf("host view %+v", got)
	}
	// Still full: a change that frees nothing grants nothing.
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Others: map[string]int{"ios": 1}})
	h.engine.WaitIdle()
	select {
	case r := <-waiting:
		t.Fatalf("granted while the host is still full: %+v", r)
	default:
	}
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2})
	h.engine.WaitIdle()
	select {
	case r := <-waiting:
		if r.err != nil {
			t.Fatalf("waiter after the other home released: %v", r.err)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("the waiter was not granted after the other home released")
	}
}

// The engine's own warm device of another spec is the only thing that can
// ease the host limit here: it is evicted and the request served; the
// other home's device is never this engine's to touch.
func TestHostLimitEvictsOwnIdleDevice(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	tablet := warm(t, h, "t", "ios", "Tablet")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Others: map[string]int{"android": 1}})
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
		RequesterID: "b", OwnerID: "b", NoWait: true}, nil)
	if err != nil {
		t.Fatalf("noWait with an evictable own device: %v", err)
	}
	h.engine.WaitIdle()
	if st := state(h, tablet.Device.ID); st != core.StateShutdown {
		t.Fatalf("own warm tablet is %s, want shut down for the host limit", st)
	}
	if g.Device.ID == tablet.Device.ID {
		t.Fatal("granted the tablet for a phone request")
	}
	if got := h.engine.Capacity().Host; got.Booted != 2 || got.Ours != 1 {
		t.Fatalf("host view after the eviction %+v", got)
	}
}

// At a host limit another home shares, a released device is shut down
// rather than kept warm: the other home's waiter cannot be seen from here
// and would otherwise wait for this engine's idle shutdown. Alone on the
// host, the same release keeps the device warm.
func TestReleaseAtASharedHostLimitShutsTheDeviceDown(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	g := leaseOn(t, h, "a", "ios", "Phone")
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if st := state(h, g.Device.ID); st != core.StateReady {
		t.Fatalf("released alone on the host: %s, want ready", st)
	}
	g = leaseOn(t, h, "b", "ios", "Phone")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, Others: map[string]int{"android": 1}})
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if st := state(h, g.Device.ID); st != core.StateShutdown {
		t.Fatalf("released at a shared host limit: %s, want shutdown", st)
	}
}

// A simulator booted by hand puts the host over its limit: the engine's
// idle warm device is shut down to give the room back; its leased one is
// never touched.
func TestHostOverItsLimitShedsIdleWarmDevices(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	tablet := warm(t, h, "t", "ios", "Tablet")
	phone := leaseOn(t, h, "p", "ios", "Phone")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, External: map[string]int{"ios": 1}})
	h.engine.WaitIdle()
	if st := state(h, tablet.Device.ID); st != core.StateShutdown {
		t.Fatalf("idle warm tablet over the host limit is %s, want shutdown", st)
	}
	if st := state(h, phone.Device.ID); st != core.StateLeased {
		t.Fatalf("leased phone is %s, want leased", st)
	}
	// Over again (two external now), with nothing idle left: nothing else happens.
	before := countCalls(h.drv.Calls(), "shutdown")
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 2, External: map[string]int{"ios": 2}})
	h.engine.WaitIdle()
	if n := countCalls(h.drv.Calls(), "shutdown") - before; n != 0 || state(h, phone.Device.ID) != core.StateLeased {
		t.Fatalf("%d shutdowns with only a leased device left", n)
	}
}
