package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/testhost"
)

func goldenHarness(t *testing.T, limits core.Limits) (*harness, *fakedrv.Cloning) {
	t.Helper()
	h := newHarness(t, limits)
	c := fakedrv.NewCloning(h.drv, nil)
	h.drivers = []core.Driver{c, h.droid}
	h.start()
	return h, c
}

func noWait(h *harness, req, model string) (core.Grant, error) {
	return h.engine.Request(context.Background(), core.Request{
		Spec: core.SpecRequest{Platform: "ios", Model: model}, RequesterID: req, OwnerID: req, NoWait: true}, nil)
}

// A golden takes a managed slot: with two slots, one golden and one leased
// phone, a tablet cannot be made; without the golden it can. The golden is
// never what a request gets.
func TestGoldenCountsAgainstManagedCapacity(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 2})
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}})
	if r := h.engine.Capacity(); r.Global.Managed != 1 || r.Global.Goldens != 1 || r.Global.Running != 0 {
		t.Fatalf("capacity with one golden: %+v", r.Global)
	}
	phone := leaseOn(t, h, "a", "ios", "Phone")
	if strings.HasPrefix(phone.Device.ID, "golden") || phone.Device.Handle == "G1" {
		t.Fatalf("granted the golden: %+v", phone.Device)
	}
	// The golden holds the second slot: the tablet gets it only by the
	// golden's removal (ADR 0053), never beside it.
	if _, err := noWait(h, "b", "Tablet"); err != nil {
		t.Fatalf("tablet with the managed slots full (golden + phone): %v", err)
	}
	if !slices.Contains(c.Calls(), "remove-golden G1") {
		t.Fatalf("tablet made beside the golden: %v", c.Calls())
	}
	if r := h.engine.Capacity(); r.Global.Managed != 2 || r.Global.Goldens != 0 {
		t.Fatalf("capacity after the tablet: %+v", r.Global)
	}
}

// A golden being built runs (it boots once), so it holds a running slot
// until it is shut down.
func TestBuildingGoldenHoldsARunningSlot(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 1, MaxManaged: 4})
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0", Building: true}})
	if r := h.engine.Capacity(); r.Global.Reserved != 1 || r.Global.RAMBytes == 0 {
		t.Fatalf("building golden not charged: %+v", r.Global)
	}
	if _, err := noWait(h, "a", "Phone"); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("request while the golden boots: %v, want no capacity", err)
	}
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}})
	if _, err := noWait(h, "a", "Phone"); err != nil {
		t.Fatalf("request once the golden is shut down: %v", err)
	}
}

// The gate (ADR 0053): a golden that would take the last managed slot is
// not built; with one slot more it is, and is charged as running at once.
func TestGoldenBuildNeverTakesTheLastManagedSlot(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 2})
	leaseOn(t, h, "a", "ios", "Phone")
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
		t.Fatalf("golden admitted into the last managed slot: %v", v)
	}
	if got := h.engine.Goldens().GoldenRefusals()["ios|Phone|rt-1.0"]; !strings.Contains(got, "last managed slot") {
		t.Fatalf("refusal reason %q", got)
	}
	if _, err := noWait(h, "b", "Tablet"); err != nil {
		t.Fatalf("the slot the golden was refused stays for a device: %v", err)
	}

	h, c = goldenHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 3})
	leaseOn(t, h, "a", "ios", "Phone")
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", false); v != core.GoldenBackground {
		t.Fatalf("golden build with room: %v, refusals %v", v, h.engine.Goldens().GoldenRefusals())
	}
	if r := h.engine.Capacity(); r.Global.Goldens != 1 || r.Global.Reserved != 1 || r.Global.Managed != 2 {
		t.Fatalf("admitted golden not charged: %+v", r.Global)
	}
	if len(h.engine.Goldens().GoldenRefusals()) != 0 {
		t.Fatalf("an admitted build leaves a refusal: %v", h.engine.Goldens().GoldenRefusals())
	}
}

// A golden is not built while a request waits for capacity, and never
// runs above the running limit: at the limit, only a provision nobody
// waits for may build it inline, in its own reservation, and the inline
// build is charged as managed only.
func TestGoldenBuildYieldsToAWaitingRequestAndStaysWithinTheRunningLimit(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 1, MaxManaged: 6})
	a := leaseOn(t, h, "a", "ios", "Phone")
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "b", OwnerID: "b"})
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
		t.Fatalf("golden admitted while a request waits for the running slot: %v", v)
	}
	if got := h.engine.Goldens().GoldenRefusals()["ios|Phone|rt-1.0"]; !strings.Contains(got, "waiting") {
		t.Fatalf("refusal reason %q", got)
	}
	if err := h.engine.Release(a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	b := <-waiting
	if b.err != nil {
		t.Fatalf("waiting request: %v", b.err)
	}
	h.engine.WaitIdle()
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", false); v != core.GoldenRefused {
		t.Fatalf("a background golden build admitted above the running limit: %v", v)
	}
	if got := h.engine.Goldens().GoldenRefusals()["ios|Phone|rt-1.0"]; !strings.Contains(got, "no running room") {
		t.Fatalf("refusal reason %q", got)
	}
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenInline {
		t.Fatalf("inline build from an idle provision at the running limit: %v, refusals %v", v, h.engine.Goldens().GoldenRefusals())
	}
	if r := h.engine.Capacity(); r.Global.Goldens != 1 || r.Global.Reserved != 0 || r.Global.Running != 1 {
		t.Fatalf("an inline golden charged as running: %+v", r.Global)
	}
}

// When the managed limit binds and a request needs a new device, the
// planner reclaims a shut-down golden rather than refuse: the driver
// deletes it, the bus says so, and the request gets a new device.
func TestPlannerReclaimsAGoldenWhenTheManagedLimitBinds(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 2})
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}})
	leaseOn(t, h, "a", "ios", "Phone")
	evs, cancel := h.bus.Subscribe(64)
	defer cancel()
	tablet := leaseOn(t, h, "b", "ios", "Tablet")
	h.engine.WaitIdle()
	if tablet.Device.Spec.Model != "Tablet" {
		t.Fatalf("granted %+v", tablet.Device)
	}
	if !slices.Contains(c.Calls(), "remove-golden G1") {
		t.Fatalf("golden not removed through the driver: %v", c.Calls())
	}
	if r := h.engine.Capacity(); r.Global.Goldens != 0 || r.Global.Managed != 2 {
		t.Fatalf("capacity after the reclaim: %+v", r.Global)
	}
	for {
		ev := <-evs
		if ev.Type == "device.destroyed" && ev.DeviceID == "golden:ios:G1" {
			if ev.Reason != "golden-reclaimed" {
				t.Fatalf("reclaim event reason %q", ev.Reason)
			}
			break
		}
	}
}

// A golden being built is not reclaimed (the build would record it
// again), and a golden the driver fails to delete stays: the request
// then waits, as without the golden.
func TestGoldenNotReclaimedWhileBuildingOrWhenRemovalFails(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 2})
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0", Building: true}})
	leaseOn(t, h, "a", "ios", "Phone")
	if _, err := noWait(h, "b", "Tablet"); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("tablet while the golden builds: %v, want no capacity", err)
	}
	if slices.Contains(c.Calls(), "remove-golden G1") {
		t.Fatalf("a building golden was reclaimed: %v", c.Calls())
	}
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}})
	c.SetFail("remove-golden", 1)
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "c", OwnerID: "c"})
	h.engine.WaitIdle()
	if got := c.Goldens(); len(got) != 1 {
		t.Fatalf("golden gone after a failed removal: %+v", got)
	}
	// Not retried at once: the next request does not ask the driver again.
	if _, err := noWait(h, "d", "Tablet"); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("tablet with a stuck golden: %v, want no capacity", err)
	}
	if n := strings.Count(strings.Join(c.Calls(), "\n"), "remove-golden G1"); n != 1 {
		t.Fatalf("removal attempts %d, want 1: %v", n, c.Calls())
	}
	select {
	case r := <-waiting:
		t.Fatalf("the waiting tablet was answered with a stuck golden: %+v", r)
	default:
	}
}

// A golden whose build runs inline in a provision (Busy, not Building: it
// is not charged as running) is no more reclaimable than one building
// beside the devices; and a reclaim that meets a build is planned again,
// not given up on.
func TestGoldenBusyIsNotReclaimedAndABusyRemovalIsRetried(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 2})
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0", Busy: true}})
	leaseOn(t, h, "a", "ios", "Phone")
	if _, err := noWait(h, "b", "Tablet"); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("tablet while the golden builds inline: %v, want no capacity", err)
	}
	if slices.Contains(c.Calls(), "remove-golden G1") {
		t.Fatalf("a golden built inline was reclaimed: %v", c.Calls())
	}
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}})
	c.BusyRemovals(1)
	select {
	case r := <-h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "c", OwnerID: "c"}):
		if r.err != nil {
			t.Fatalf("tablet after a busy removal: %v", r.err)
		}
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatalf("the tablet was never granted after a busy removal: %v", c.Calls())
	}
	if n := strings.Count(strings.Join(c.Calls(), "\n"), "remove-golden G1"); n != 2 {
		t.Fatalf("removal attempts %d, want 2 (busy, then done): %v", n, c.Calls())
	}
}
