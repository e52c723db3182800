package simsdk

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/store"
)

// The driver's group catalogue and the simulated runtime's optional jobs
// are one list: every driver label is a simulated job and every simulated
// job belongs to a driver group. The driver's slim footprint and the
// simulated one scale the same way, and the simulated figures are the
// published ones: stock ~4 GB / ~260 processes, slimmed (slim mode's
// default groups off) ~0.9 GB / ~70.
func TestIOSSlimCatalogueAgreesWithTheSimulatedRuntime(t *testing.T) {
	var driverLabels, slimLabels []string
	for _, g := range ios.ControlledGroups() {
		driverLabels = append(driverLabels, ios.ResourceLabels(g)...)
	}
	for _, g := range ios.SlimGroups() {
		slimLabels = append(slimLabels, ios.ResourceLabels(g)...)
	}
	var simLabels []string
	for _, j := range simJobs {
		simLabels = append(simLabels, j.Label)
	}
	slices.Sort(driverLabels)
	slices.Sort(simLabels)
	if !slices.Equal(driverLabels, simLabels) {
		t.Fatalf("driver labels %v\nsimulated jobs %v", driverLabels, simLabels)
	}
	if slices.Contains(ios.SlimGroups(), "backgroundSync") || slices.Contains(ios.SlimGroups(), "icloudSync") {
		t.Fatalf("slim groups %v include a group iOS cannot control", ios.SlimGroups())
	}
	slimmed := launchdState{Unloaded: slimLabels}
	slices.Sort(slimmed.Unloaded)
	mb, procs := iosFootprint(simJobs, slimmed)
	if mb < 800 || mb > 1000 || procs < 60 || procs > 80 {
		t.Fatalf("slimmed simulated footprint %d MB, %d processes; want ~0.9 GB, ~70", mb, procs)
	}
	if smb, sp := iosFootprint(simJobs, launchdState{}); smb != 4096 || sp != 260 {
		t.Fatalf("stock footprint %d MB, %d processes", smb, sp)
	}
	r := newIOSRig(t, "", ios.Slim{Enabled: true})
	stock := newIOSRig(t, "", ios.Slim{}).d.RAMPerDevice()
	got, want := float64(r.d.RAMPerDevice())/float64(stock), float64(mb)/stockFootprintMB
	if got < want*0.99 || got > want*1.01 {
		t.Fatalf("driver slim ratio %.3f, simulated %.3f", got, want)
	}
}

// simFootprint reads a device's simulated idle memory and process count.
func (r *iosRig) simFootprint(dev core.DeviceRef) (int, int) {
	r.t.Helper()
	ds := deviceSet{dir: r.root}
	d, err := ds.load(dev.Handle)
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := loadLaunchd(ds, d)
	if err != nil {
		r.t.Fatal(err)
	}
	s := &sdk{}
	return iosFootprint(s.jobsOf(d), st)
}

// Slim mode proves the profile after the first boot and again after each
// erase (a reclaim, and an erase followed by a later boot), and the
// simulated footprint drops with it.
func TestIOSSlimProfileAfterBootAndEachErase(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{Enabled: true})
	ctx := context.Background()
	check := func(when string, dev core.DeviceRef) {
		t.Helper()
		obs, err := r.driver(ios.Slim{}).ObserveResources(ctx, dev)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range ios.SlimGroups() {
			if obs.Resources[g].State != contract.ResourceDisabled {
				t.Fatalf("%s: %s is %+v", when, g, obs.Resources[g])
			}
		}
		if mb, procs := r.simFootprint(dev); mb > 1000 || procs > 80 {
			t.Fatalf("%s: simulated footprint %d MB, %d processes", when, mb, procs)
		}
	}
	dev := r.boot("18.0")
	check("after boot", dev)
	if err := r.d.Reclaim(ctx, dev); err != nil {
		t.Fatal(err)
	}
	check("after reclaim", dev)
	if err := r.d.Erase(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if err := r.d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	check("after erase and boot", dev)
}

// A slim profile that cannot be proven fails readiness: the device never
// joins the pool at a footprint it would not keep.
func TestIOSSlimUnprovenProfileFailsReadiness(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, faultLaunchctlWriteNoop, ios.Slim{Enabled: true, Groups: []string{"widgets"}})
	ctx := context.Background()
	spec, err := r.d.ResolveSpec(ctx, core.SpecRequest{Platform: ios.Platform, Model: "iPhone 15", OSVersion: "18.0"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.d.MakeReady(ctx, core.DeviceRef{ID: "dev-1", Handle: p.Handle}); err == nil {
		t.Fatal("a slim profile that did not stick passed readiness")
	}
	if _, err := ios.New(ios.Options{Root: filepath.Join(t.TempDir(), "x"), Slim: ios.Slim{Enabled: true, Groups: []string{"icloudSync"}}}); err == nil {
		t.Fatal("slim accepted a group iOS cannot control")
	}
}

// On one simulated machine (fixed RAM and CPUs), the resource strategy
// admits at least three times as many iOS devices with slim mode on as
// off; every admitted device passed readiness (a grant follows MakeReady,
// which proves the slim profile) and runs at the slim footprint.
func TestIOSSlimTriplesWhatTheResourceStrategyAdmits(t *testing.T) {
	t.Parallel()
	admitted := func(slim bool) int {
		r := newIOSRig(t, "", ios.Slim{Enabled: slim})
		ctx := context.Background()
		db, err := store.Open(ctx, filepath.Join(t.TempDir(), "simlock.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		stats := &fake.Stats{CPUs: 64, TotalRAM: 8 << 30}
		eng := core.New(core.Config{DefaultTTL: time.Hour, MaxTTL: time.Hour}, core.Deps{
			Clock: ports.SystemClock{}, Store: db, Drivers: []core.Driver{r.d},
			Strategy: core.ResourceStrategy{Stats: stats}, Bus: events.New(100, time.Now),
			DiskFree: func() (uint64, error) { return 1 << 40, nil },
		})
		if err := eng.Converge(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Stop(context.Background()) })
		n := 0
		for ; n < 30; n++ {
			who := fmt.Sprintf("agent-%d", n)
			g, err := eng.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: ios.Platform, Model: "iPhone 15", OSVersion: "18.0"},
				RequesterID: who, OwnerID: who, NoWait: true}, nil)
			if errors.Is(err, core.ErrNoCapacity) {
				break
			}
			if err != nil {
				t.Fatalf("request %d (slim %v): %v", n, slim, err)
			}
			if slim {
				if mb, procs := r.simFootprint(core.DeviceRef{Handle: g.Device.Handle}); mb > 1000 || procs > 80 {
					t.Fatalf("device %d runs at %d MB, %d processes", n, mb, procs)
				}
			}
		}
		return n
	}
	off, on := admitted(false), admitted(true)
	t.Logf("8 GiB, 64 CPUs, resource strategy: %d iOS devices stock, %d slim (%.1fx)", off, on, float64(on)/float64(max(off, 1)))
	if off == 0 || on < 3*off {
		t.Fatalf("admitted %d stock, %d slim: want at least 3x", off, on)
	}
}
