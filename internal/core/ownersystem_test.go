package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/testhost"
)

// markedLease is a lease request of owner system sys that destroys its
// device on release unless p says otherwise.
func markedRequest(req, sys string, p core.ReleasePolicy) core.Request {
	return core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: req, OwnerID: req, Release: p, OwnerSystem: sys}
}

// A device made for a marked request carries the mark from its first
// record, and after an erase reset it idles in its system's pool: a plain
// request never gets it (it makes a device of its own), while a request
// of the same system reuses it.
func TestOwnerSystemDeviceIsNeverThePlainPools(t *testing.T) {
	h, _, _ := newResetHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 3})
	ctx := context.Background()
	g, err := h.engine.Request(ctx, markedRequest("s1", "sys", core.ReleasePolicy{Mode: contract.ResetErase}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Device.OwnerSystem != "sys" {
		t.Fatalf("the marked request's device carries %q", g.Device.OwnerSystem)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.settled(g.Lease.ID)
	d, ok := h.engine.Device(g.Device.ID)
	if !ok || d.State != core.StateReady || d.OwnerSystem != "sys" {
		t.Fatalf("after the erase: %+v %v", d, ok)
	}
	// Reloaded from the store, the mark is still there.
	rec := h.store.devices[g.Device.ID]
	if rec.OwnerSystem != "sys" {
		t.Fatalf("stored mark %q", rec.OwnerSystem)
	}
	// A plain no-wait request is not served the idle marked device.
	p, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "plain", OwnerID: "plain"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Device.ID == g.Device.ID || p.Device.OwnerSystem != "" {
		t.Fatalf("a plain request was served %+v", p.Device)
	}
	// A targeted plain request naming it cannot take it either.
	if _, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, DeviceID: g.Device.ID, NoWait: true,
		RequesterID: "plain2", OwnerID: "plain2"}, nil); err == nil {
		t.Fatal("a targeted plain request took the marked device")
	}
	// The same system reuses it.
	g2, err := h.engine.Request(ctx, markedRequest("s2", "sys", core.ReleasePolicy{Mode: contract.ResetDestroy}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Device.ID != g.Device.ID {
		t.Fatalf("the system's second request got %s, not its idle %s", g2.Device.ID, g.Device.ID)
	}
	// Another system does not.
	g3, err := h.engine.Request(ctx, markedRequest("o1", "other", core.ReleasePolicy{Mode: contract.ResetDestroy}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g3.Device.ID == g.Device.ID || g3.Device.ID == p.Device.ID || g3.Device.OwnerSystem != "other" {
		t.Fatalf("another system's request got %+v", g3.Device)
	}
}

// A marked preparation whose request goes away mid-boot is destroyed
// when its work finishes, instead of idling ready where nobody asked for
// it; a plain one stays warm as before.
func TestAbandonedMarkedPreparationIsDestroyed(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 2})
	h.drv.Gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() {
		_, err := h.engine.Request(ctx, markedRequest("s1", "sys", core.ReleasePolicy{Mode: contract.ResetDestroy}), nil)
		ch <- err
	}()
	var id string
	for deadline := time.Now().Add(testhost.Scale(5 * time.Second)); id == ""; {
		if time.Now().After(deadline) {
			t.Fatal("no device was made for the marked request")
		}
		for _, d := range h.engine.Devices() {
			id = d.ID
			if d.OwnerSystem != "sys" {
				t.Fatalf("the device being built carries %q", d.OwnerSystem)
			}
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-ch; err == nil {
		t.Fatal("the abandoned request was granted")
	}
	h.drv.Gate <- struct{}{} // the boot finishes after its request left
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for {
		h.engine.WaitIdle()
		if _, ok := h.engine.Device(id); !ok {
			break
		}
		if time.Now().After(deadline) {
			d, _ := h.engine.Device(id)
			t.Fatalf("the abandoned marked device is still there: %+v", d)
		}
		time.Sleep(time.Millisecond)
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left in the driver", exist)
	}
}

// A restart that finds a marked device no lease ever held (its
// preparation ended with the old daemon) destroys it before anything is
// granted; one that was leased (an idle pool device) is kept.
func TestRestartDestroysAnEndedPreparationsMarkedDevice(t *testing.T) {
	h, _, _ := newResetHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 3})
	ctx := context.Background()
	g, err := h.engine.Request(ctx, markedRequest("s1", "sys", core.ReleasePolicy{Mode: contract.ResetErase}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.settled(g.Lease.ID)
	h.engine.Stop(ctx)
	// A device of a preparation the old daemon never granted: created in
	// the driver, recorded, never leased.
	spec := core.Spec{Platform: "ios", Model: "Phone"}
	prov, err := h.drv.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	h.store.devices["dev_orphan"] = core.DeviceRecord{ID: "dev_orphan", Platform: "ios", Handle: prov.Handle, Name: prov.Name, Spec: spec,
		State: core.StateShutdown, StateSince: now, CreatedAt: now, OwnerSystem: "sys"}
	h.start()
	if _, ok := h.engine.Device("dev_orphan"); ok {
		t.Fatal("the ended preparation's device survived the restart")
	}
	if d, ok := h.engine.Device(g.Device.ID); !ok || d.OwnerSystem != "sys" {
		t.Fatalf("the idle pool device after the restart: %+v %v", d, ok)
	}
}

// A restart that converges before the slots' map is known judges no
// device idle, so an ended preparation's marked device outlives
// convergence; the first map then destroys it (found by the e2e test of
// an interrupted session preparation, which left the device behind).
func TestTheFirstSlotMapDestroysAnEndedPreparationsDevice(t *testing.T) {
	h, _, _ := newResetHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 3})
	ctx := context.Background()
	h.engine.Stop(ctx)
	spec := core.Spec{Platform: "ios", Model: "Phone"}
	prov, err := h.drv.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	h.store.devices["dev_orphan"] = core.DeviceRecord{ID: "dev_orphan", Platform: "ios", Handle: prov.Handle, Name: prov.Name, Spec: spec,
		State: core.StateShutdown, StateSince: now, CreatedAt: now, OwnerSystem: "sys"}
	startUnknown(h)
	if _, ok := h.engine.Device("dev_orphan"); !ok {
		t.Fatal("a convergence that could not tell slot devices apart destroyed a marked device")
	}
	h.engine.Slots().SetAssigned(map[string]string{})
	h.engine.WaitIdle()
	if _, ok := h.engine.Device("dev_orphan"); ok {
		t.Fatal("the ended preparation's device survived the first slot map")
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left in the driver", exist)
	}
}

// RetireIdle destroys an idle device of the named system only.
func TestRetireIdleTakesOnlyTheSystemsIdleDevice(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 3})
	ctx := context.Background()
	g, err := h.engine.Request(ctx, markedRequest("s1", "sys", core.ReleasePolicy{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.OwnerSystems().RetireIdle(g.Device.ID, "sys"); err == nil {
		t.Fatal("a leased device was retired")
	}
	p, err := h.lease("plain", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Release(p.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if err := h.engine.OwnerSystems().RetireIdle(p.Device.ID, "sys"); err == nil {
		t.Fatal("a general pool device was retired for a system")
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if err := h.engine.OwnerSystems().RetireIdle(g.Device.ID, "sys"); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("the retired device is still registered")
	}
}
