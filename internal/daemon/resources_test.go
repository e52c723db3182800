package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// startResourced starts a daemon whose fake iOS and Android drivers have
// the resource port.
func startResourced(t *testing.T, enabled bool) (*fixture, *fakedrv.Driver) {
	t.Helper()
	home, _ := os.MkdirTemp("", "slr-")
	cfg := config.Default()
	cfg.Capacity.Strategy, cfg.Capacity.Fixed = "fixed", config.Fixed{MaxRunning: 2, MaxManaged: 4}
	cfg.Capacity.Host.MaxRunning = 8
	cfg.Resources.Enabled = enabled
	ios, droid := fakedrv.New("ios"), fakedrv.New("android")
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Version: "test",
		Drivers: []core.Driver{fakedrv.Resourced{Driver: ios}, fakedrv.Resourced{Driver: droid}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(); os.RemoveAll(home) })
	return &fixture{t: t, d: d, home: home, drv: ios}, droid
}

var off = map[string]contract.ResourceState{"animations": contract.ResourceDisabled, "widgets": contract.ResourceDisabled}

func TestResourceTuningIsOffByDefault(t *testing.T) {
	f, _ := startResourced(t, false)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID, Resources: off}); !client.IsCode(err, contract.CodeResourcesDisabled) {
		t.Fatalf("set with tuning off: %v", err)
	}
	if _, err := a.ResourcesReconcile(ctx, contract.ResourcesReconcileIn{LeaseID: l.LeaseID, Resources: off}); !client.IsCode(err, contract.CodeResourcesDisabled) {
		t.Fatalf("reconcile with tuning off: %v", err)
	}
	// Reading is never refused: it writes nothing.
	got, err := a.ResourcesGet(ctx, l.LeaseID)
	if err != nil || got.Resources["animations"].State != contract.ResourceEnabled {
		t.Fatalf("get: %+v %v", got, err)
	}
	if s := f.drv.ResourceState(f.d.Engine().Leases()[0].DeviceID, "animations"); s != contract.ResourceEnabled {
		t.Fatalf("a refused set wrote: %s", s)
	}
}

func TestLeaseRequestedWithResourcesMayTuneAndIsVerified(t *testing.T) {
	f, _ := startResourced(t, false)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Resources: off}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Resources == nil || !l.Resources.Success || l.Resources.Resources["widgets"].State != contract.ResourceDisabled {
		t.Fatalf("lease resources %+v", l.Resources)
	}
	res, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{"widgets": contract.ResourceEnabled}})
	if err != nil || !res.Success {
		t.Fatalf("set: %+v %v", res, err)
	}
	got, err := a.ResourcesGet(ctx, l.LeaseID)
	if err != nil || got.Resources["widgets"].State != contract.ResourceEnabled || got.Resources["animations"].State != contract.ResourceDisabled {
		t.Fatalf("read back %+v %v", got.Resources, err)
	}
	rec, err := a.ResourcesReconcile(ctx, contract.ResourcesReconcileIn{LeaseID: l.LeaseID, Resources: off, Repair: true})
	if err != nil || rec.Drift == nil || len(rec.Drift.MissingRequested) != 1 || rec.Drift.MissingRequested[0] != "widgets" || !rec.Success {
		t.Fatalf("reconcile %+v %v", rec, err)
	}
	// Another principal cannot reach the lease.
	bob := f.dial("bob", "")
	if _, err := bob.ResourcesGet(ctx, l.LeaseID); !client.IsCode(err, contract.CodeForbidden) && !client.IsCode(err, contract.CodeUnknownLease) {
		t.Fatalf("bob: %v", err)
	}
}

func TestResourceInputIsValidated(t *testing.T) {
	f, _ := startResourced(t, true)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]contract.ResourcesSetIn{
		"empty":        {LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{}},
		"raw service":  {LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{"com.apple.searchd": contract.ResourceDisabled}},
		"other os":     {LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{"googlePlayServices": contract.ResourceDisabled}},
		"other os new": {LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{"googleServicesFramework": contract.ResourceDisabled}},
		"bad state":    {LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{"animations": contract.ResourceUnknown}},
		"both":         {LeaseID: l.LeaseID, Resources: off, Restore: &contract.RestoreReceipt{Serial: "x"}},
		"ios receipt":  {LeaseID: l.LeaseID, Restore: &contract.RestoreReceipt{Serial: "x"}},
		"bad deadline": {LeaseID: l.LeaseID, Resources: off, TimeoutMs: -1},
	} {
		if _, err := a.ResourcesSet(ctx, in); !client.IsCode(err, contract.CodeBadRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := a.Call(ctx, contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Hardware: &contract.AndroidHardware{MemoryMB: 4096}}, nil); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("hardware on iOS: %v", err)
	}
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android", Hardware: &contract.AndroidHardware{GPUMode: "turbo"}}, nil); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("bad gpu mode: %v", err)
	}
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Resources: map[string]contract.ResourceState{"slim": contract.ResourceDisabled}}, nil); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("a profile name: %v", err)
	}
}

// The groups the reference's full lists add are names a request may use
// on their own platform: a set on an iOS lease and one on an Android lease
// each go through to the driver and read back.
func TestReferenceListGroupsAreAcceptedOnTheirPlatform(t *testing.T) {
	f, droid := startResourced(t, true)
	ctx := context.Background()
	for _, c := range []struct {
		platform, who string
		groups        []string
	}{
		{"ios", "alice", []string{"familyServices", "screenTime", "walletServices", "continuity"}},
		{"android", "bob", []string{"digitalWellbeing", "healthConnect", "adServices", "googleServicesFramework"}},
	} {
		a := f.dial(c.who, "")
		l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: c.platform}, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := map[string]contract.ResourceState{}
		for _, g := range c.groups {
			req[g] = contract.ResourceDisabled
		}
		res, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID, Resources: req})
		if err != nil || !res.Success {
			t.Fatalf("%s set %v: %+v %v", c.platform, c.groups, res, err)
		}
		got, err := a.ResourcesGet(ctx, l.LeaseID)
		if err != nil {
			t.Fatal(err)
		}
		drv := f.drv
		if c.platform == "android" {
			drv = droid
		}
		dev, ok := f.d.engine.Device(l.Device.ID)
		if !ok {
			t.Fatalf("no device %s", l.Device.ID)
		}
		for _, g := range c.groups {
			if got.Resources[g].State != contract.ResourceDisabled || drv.ResourceState(dev.Handle, g) != contract.ResourceDisabled {
				t.Errorf("%s %s: read %+v, driver %s", c.platform, g, got.Resources[g], drv.ResourceState(dev.Handle, g))
			}
		}
	}
}

func TestUnprovableLeaseProfileIsRefusedAndLeavesNoDevice(t *testing.T) {
	f, _ := startResourced(t, false)
	f.drv.SetResourceUnsupported("widgets")
	ctx := context.Background()
	a := f.dial("alice", "")
	_, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Resources: off}, nil)
	if !client.IsCode(err, contract.CodeResourceUnproven) {
		t.Fatalf("err %v", err)
	}
	ce := contract.AsError(err)
	if ce.Retryable {
		t.Fatal("RESOURCE_PROFILE_UNPROVEN must not be retryable")
	}
	drift, _ := ce.Details["resourceDrift"].(map[string]any)
	if u, _ := drift["unsupported"].([]any); len(u) != 1 || u[0] != "widgets" {
		t.Fatalf("details %+v", ce.Details)
	}
	f.d.Engine().WaitIdle()
	if exist, _ := f.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left behind", exist)
	}
}

func TestAndroidLeaseCarriesItsReceiptAndRestores(t *testing.T) {
	f, droid := startResourced(t, true)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android", Hardware: &contract.AndroidHardware{MemoryMB: 4096}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID, Resources: map[string]contract.ResourceState{"animations": contract.ResourceDisabled}})
	if err != nil || res.Restore == nil || !res.Success {
		t.Fatalf("set %+v %v", res, err)
	}
	dev, _ := f.d.Engine().Device(l.DeviceID)
	if droid.ResourceState(dev.Handle, "animations") != contract.ResourceDisabled {
		t.Fatal("not written")
	}
	if _, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID, Restore: res.Restore}); err != nil {
		t.Fatal(err)
	}
	if droid.ResourceState(dev.Handle, "animations") != contract.ResourceEnabled {
		t.Fatal("not restored")
	}
	bad := *res.Restore
	bad.Serial = "emulator-9999"
	if _, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID, Restore: &bad}); !client.IsCode(err, contract.CodeReceiptMismatch) {
		t.Fatalf("another serial's receipt: %v", err)
	}
}

// Device resources, "Reconciling workload profiles": Android targets are
// rejected before any command runs. A driver that is no ResourceReconciler
// (the Android driver; here the fake's Observing) gets no call, and the
// refusal is UNSUPPORTED_PLATFORM, not retryable, naming the operation.
func TestReconcileOnADriverWithoutReconcilerIsRefusedBeforeAnyCall(t *testing.T) {
	home, _ := os.MkdirTemp("", "slr-")
	cfg := config.Default()
	cfg.Capacity.Strategy, cfg.Capacity.Fixed = "fixed", config.Fixed{MaxRunning: 2, MaxManaged: 4}
	cfg.Capacity.Host.MaxRunning = 8
	cfg.Resources.Enabled = true
	droid := fakedrv.New("android")
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Version: "test",
		Drivers: []core.Driver{fakedrv.Observing{Driver: droid}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(); os.RemoveAll(home) })
	f := &fixture{t: t, d: d, home: home, drv: droid}
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := len(droid.Calls())
	_, err = a.ResourcesReconcile(ctx, contract.ResourcesReconcileIn{LeaseID: l.LeaseID,
		Resources: map[string]contract.ResourceState{"animations": contract.ResourceDisabled}, Repair: true})
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeUnsupportedPlatform || ce.Retryable || ce.Details["operation"] != "resources.reconcile" {
		t.Fatalf("reconcile on android: %v (%+v)", err, ce)
	}
	if calls := droid.Calls()[before:]; len(calls) != 0 {
		t.Fatalf("the refused reconcile reached the driver: %v", calls)
	}
	// The same lease still reads and sets through the driver.
	if res, err := a.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: l.LeaseID,
		Resources: map[string]contract.ResourceState{"animations": contract.ResourceDisabled}}); err != nil || !res.Success {
		t.Fatalf("set after the refusal: %+v %v", res, err)
	}
}
