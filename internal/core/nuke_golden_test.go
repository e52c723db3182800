package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// goldenKeeper is a scripted driver that keeps goldens outside the
// registry, as the iOS driver does, and can be told to fail removing them.
type goldenKeeper struct {
	*fakedrv.Driver
	mu      sync.Mutex
	goldens []core.Golden
	fail    error
}

func (g *goldenKeeper) Goldens() []core.Golden {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]core.Golden(nil), g.goldens...)
}

func (g *goldenKeeper) RemoveGoldens(context.Context) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return nil, g.fail
	}
	var out []string
	for _, x := range g.goldens {
		out = append(out, x.Handle)
	}
	g.goldens = nil
	return out, nil
}

// Doctor lists goldens (not as findings), and a reset removes them too,
// and says so; they no longer count
// against managed capacity. A driver that cannot remove them fails the
// reset's report for that platform without hiding the devices it did
// destroy.
func TestDoctorListsGoldensAndNukeRemovesThem(t *testing.T) {
	h := newHarness(t, one(2))
	gk := &goldenKeeper{Driver: h.drv, goldens: []core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}}}
	h.drivers = []core.Driver{gk, h.droid}
	h.start()
	if c := h.engine.Capacity(); c.Global.Goldens != 1 {
		t.Fatalf("capacity %+v, want the golden counted", c.Global)
	}
	// Doctor's read lists it, and it is no finding.
	if gs := h.engine.Goldens().GoldenStatus().Devices; len(gs) != 1 || gs[0].Platform != "ios" || gs[0].Handle != "G1" {
		t.Fatalf("GoldenDevices = %+v", gs)
	}
	if fs, err := h.engine.Maintenance().Doctor(context.Background(), core.DoctorOptions{}); err != nil || len(fs) != 0 {
		t.Fatalf("doctor with a golden: %+v %v", fs, err)
	}
	if _, err := h.lease("a", ""); err != nil {
		t.Fatal(err)
	}
	rep, err := h.engine.Maintenance().Nuke(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.DestroyedDevices) != 2 || !has(rep.DestroyedDevices, "golden:ios:G1") || len(rep.Failed) != 0 {
		t.Fatalf("reset %+v, want the leased device and golden:ios:G1 destroyed", rep)
	}
	if c := h.engine.Capacity(); c.Global.Goldens != 0 || c.Global.Managed != 0 || len(h.engine.Goldens().GoldenStatus().Devices) != 0 {
		t.Fatalf("capacity after the reset %+v, goldens %+v", c.Global, h.engine.Goldens().GoldenStatus().Devices)
	}

	gk.goldens = []core.Golden{{Handle: "G2", ModelID: "Phone", RuntimeID: "rt-1.0"}}
	gk.fail = errors.New("simctl delete all: exit 1")
	rep, err = h.engine.Maintenance().Nuke(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed["golden:ios"] == "" {
		t.Fatalf("reset %+v, want the failed golden removal reported", rep)
	}
}
