package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
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
	if _, err := noWait(h, "b", "Tablet"); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("tablet with the managed slots full (golden + phone): %v, want no capacity", err)
	}
	c.SetGoldens(nil)
	if _, err := noWait(h, "b", "Tablet"); err != nil {
		t.Fatalf("tablet once the golden is gone: %v", err)
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
