package daemon_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/drivers/android"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/simsdk"
)

// simRunner runs the simulated SDK's tools in this process, against a
// simulated SDK home of the test's own. Only listing commands go through
// it here, so no device process is ever started.
type simRunner struct{ home string }

func (r simRunner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	env := map[string]string{simsdk.EnvHome: r.home}
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var out, errb bytes.Buffer
	code := simsdk.Main(ctx, c.Name, c.Args, c.Stdin, &out, &errb, func(k string) string { return env[k] })
	res := ports.Result{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: code}
	if code != 0 {
		return res, &ports.ExitError{Command: c, Result: res}
	}
	return res, nil
}

// simCatalogs are the catalogs the real iOS and Android drivers read from
// a fresh simulated SDK (its Xcode 16.0 device types and preinstalled
// runtimes; its AVD profiles and Android 15 and 16 images).
func simCatalogs(t *testing.T) (core.Catalog, core.Catalog) {
	t.Helper()
	ctx := context.Background()
	run := simRunner{home: t.TempDir()}
	idrv, err := ios.New(ios.Options{Root: filepath.Join(t.TempDir(), "ios"), Runner: run})
	if err != nil {
		t.Fatal(err)
	}
	icat, err := idrv.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adrv, err := android.New(android.Options{Root: filepath.Join(t.TempDir(), "android"), Runner: run, GOARCH: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	acat, err := adrv.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return icat, acat
}

func sessionsConfig() *config.Sessions {
	return &config.Sessions{
		Defaults: map[string]config.SessionDefaults{
			"ios": {
				PolicyVersion: "sim-ios-v1",
				Hardware: config.SessionHardwareDefaults{
					Omitted: "phone",
					Archetypes: []config.SessionArchetypeMap{
						{Archetype: "phone", ModelType: config.SessionModelType{Family: "iphone", Variant: "pro"}},
						{Archetype: "tablet", ModelType: config.SessionModelType{Family: "ipad", Variant: "pro"}},
					},
					ModelTypes: []config.SessionModelTypeMap{
						{ModelType: config.SessionModelType{Family: "iphone", Variant: "pro"}, Model: config.SessionModel{Namespace: "product-model", Value: "iPhone17,1"}},
						{ModelType: config.SessionModelType{Family: "ipad", Variant: "pro"}, Model: config.SessionModel{Namespace: "product-model", Value: "iPad16,4"}},
					},
				},
				OS: config.SessionOSDefaults{Selector: config.SessionOSSelector{Kind: "latest"}, PreferredVersion: "18.0"},
			},
			"android": {
				PolicyVersion: "sim-android-v1",
				Hardware: config.SessionHardwareDefaults{
					Omitted: "phone",
					Profiles: []config.SessionAndroidProfile{
						{Archetype: "phone", ProfileID: "pixel_9", MemoryMB: 4096},
						{Archetype: "foldable", ProfileID: "pixel_9_pro_fold"},
					},
				},
				OS: config.SessionOSDefaults{Selector: config.SessionOSSelector{Kind: "latest"}},
			},
		},
		IOSClassifications:       map[string]string{"iPhone 16 Pro": "phone", "iPad Pro 11-inch (M4)": "tablet"},
		AndroidProfileArchetypes: map[string]string{"pixel_9": "phone", "pixel_9_pro_fold": "foldable"},
	}
}

// startSessions is a daemon with the simulated SDK's catalogs behind an
// iOS and an Android fake driver and the given sessions section.
func startSessions(t *testing.T, sessions *config.Sessions, withAndroid bool) (*daemontest.Stack, *fakedrv.Driver) {
	t.Helper()
	icat, acat := simCatalogs(t)
	adrv := fakedrv.New("android")
	adrv.Cat = &acat
	var extra []core.Driver
	if withAndroid {
		extra = append(extra, adrv)
	}
	s := daemontest.Start(t, daemontest.Options{Devices: 2, Extra: extra, Config: func(c *config.Config) { c.Sessions = sessions }})
	s.Driver.Cat = &icat
	return s, adrv
}

func TestResolveSessionOnSimulatedCatalog(t *testing.T) {
	s, adrv := startSessions(t, sessionsConfig(), true)
	ctx := context.Background()
	dev := func(platform string, hw *contract.HardwareRequirement, os *contract.OSRequirement) contract.DeviceRequirement {
		return contract.DeviceRequirement{SchemaVersion: 1, Platform: platform, Hardware: hw, OS: os}
	}
	archetype := func(a string) *contract.HardwareRequirement {
		return &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: a}
	}

	t.Run("ios omitted: the phone model type's model, the preferred 18.0 over the newer 26.3.1", func(t *testing.T) {
		p, err := s.Daemon.ResolveSession(ctx, dev("ios", nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		if p.Model != "iPhone 16 Pro" || p.Archetype != "phone" || p.OSVersion != "18.0" || p.RuntimeID != "com.apple.CoreSimulator.SimRuntime.iOS-18-0" ||
			p.ModelIdentifier == nil || *p.ModelIdentifier != (contract.ModelIdentity{Namespace: "product-model", Value: "iPhone17,1"}) ||
			p.ModelType == nil || p.ModelType.Variant != "pro" || p.PolicyVersion != "sim-ios-v1" {
			t.Fatalf("%+v", p)
		}
		lr := daemon.SessionLeaseRequest(p)
		if lr.Platform != "ios" || lr.Model != "iPhone 16 Pro" || lr.OSVersion != "18.0" || lr.Hardware != nil {
			t.Fatalf("lease request %+v", lr)
		}
	})
	t.Run("ios tablet on the latest", func(t *testing.T) {
		p, err := s.Daemon.ResolveSession(ctx, dev("ios", archetype("tablet"), &contract.OSRequirement{Kind: contract.OSLatest}))
		if err != nil || p.Model != "iPad Pro 11-inch (M4)" || p.OSVersion != "26.3.1" {
			t.Fatalf("%+v, %v", p, err)
		}
	})
	t.Run("android phone: release 16 is the API-36 Google APIs image, memoryMb goes into the lease", func(t *testing.T) {
		p, err := s.Daemon.ResolveSession(ctx, dev("android", archetype("phone"), &contract.OSRequirement{Kind: contract.OSExact, Version: "16"}))
		if err != nil {
			t.Fatal(err)
		}
		if p.Model != "pixel_9" || p.OSVersion != "16" || p.RuntimeID != "system-images;android-36;google_apis;x86_64" || p.MemoryMB != 4096 {
			t.Fatalf("%+v", p)
		}
		lr := daemon.SessionLeaseRequest(p)
		if lr.Model != "pixel_9" || lr.OSVersion != "16" || lr.Hardware == nil || lr.Hardware.MemoryMB != 4096 {
			t.Fatalf("lease request %+v", lr)
		}
	})
	t.Run("android foldable", func(t *testing.T) {
		p, err := s.Daemon.ResolveSession(ctx, dev("android", archetype("foldable"), nil))
		if err != nil || p.Model != "pixel_9_pro_fold" || p.Archetype != "foldable" || p.OSVersion != "16" || p.MemoryMB != 0 {
			t.Fatalf("%+v, %v", p, err)
		}
	})
	refusals := []struct {
		name string
		req  contract.DeviceRequirement
		code contract.Code
		in   string
	}{
		{"android unmapped tablet", dev("android", archetype("tablet"), nil), contract.CodeUnsupportedHardware, "tablet"},
		{"ios unmapped foldable", dev("ios", archetype("foldable"), nil), contract.CodeUnsupportedHardware, "foldable"},
		{"android 14 only downloadable", dev("android", nil, &contract.OSRequirement{Kind: contract.OSExact, Version: "14"}), contract.CodeRuntimeMissing, "system-images;android-34;google_apis;x86_64"},
		{"ios 26.5 not installed", dev("ios", nil, &contract.OSRequirement{Kind: contract.OSExact, Version: "26.5"}), contract.CodeRuntimeMissing, "26.3.1"},
		{"bad requirement", contract.DeviceRequirement{SchemaVersion: 2, Platform: "ios"}, contract.CodeSessionConfigInvalid, "schemaVersion"},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Daemon.ResolveSession(ctx, c.req)
			ce := contract.AsError(err)
			if ce == nil || ce.Code != c.code || !strings.Contains(ce.Message+" "+ce.NextAction, c.in) {
				t.Fatalf("ResolveSession = %v, want %s mentioning %q", err, c.code, c.in)
			}
		})
	}
	// Resolving reserves and creates nothing.
	if calls := append(s.Driver.Calls(), adrv.Calls()...); len(calls) != 0 {
		t.Errorf("driver calls %v", calls)
	}
	if n := len(s.Daemon.Engine().Devices()); n != 0 {
		t.Errorf("%d devices", n)
	}
}

func TestResolveSessionWithoutSessionsOrDriver(t *testing.T) {
	ctx := context.Background()
	s, _ := startSessions(t, nil, false)
	_, err := s.Daemon.ResolveSession(ctx, contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios"})
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeSessionsNotConfigured {
		t.Fatalf("without a sessions section: %v", err)
	}

	s, _ = startSessions(t, sessionsConfig(), false)
	_, err = s.Daemon.ResolveSession(ctx, contract.DeviceRequirement{SchemaVersion: 1, Platform: "android"})
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeUnsupportedPlatform {
		t.Fatalf("without an Android driver: %v", err)
	}
	// The mapping is decided before the catalog: an unmapped archetype on
	// a platform with no driver is still UNSUPPORTED_HARDWARE.
	_, err = s.Daemon.ResolveSession(ctx, contract.DeviceRequirement{SchemaVersion: 1, Platform: "android",
		Hardware: &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: "tablet"}})
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeUnsupportedHardware {
		t.Fatalf("unmapped tablet without an Android driver: %v", err)
	}
}

// The exact simlock-model form (the catalog name a lease request takes)
// still works with no defaults and a model the catalog does not list: it
// goes to the lease as given, and the driver resolves it.
func TestResolveSessionSimlockModelPassesThrough(t *testing.T) {
	s := daemontest.Start(t, daemontest.Options{Config: func(c *config.Config) { c.Sessions = &config.Sessions{} }})
	p, err := s.Daemon.ResolveSession(context.Background(), contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios",
		Hardware: &contract.HardwareRequirement{Kind: contract.HardwareModel, Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}})
	if err != nil {
		t.Fatal(err)
	}
	if lr := daemon.SessionLeaseRequest(p); lr.Platform != "ios" || lr.Model != "Phone" || lr.OSVersion != "" || lr.Hardware != nil {
		t.Fatalf("profile %+v lease request %+v", p, lr)
	}
}

// A resolved Android profile's memoryMb reaches the lease's spec as its
// hardware profile, which is part of the spec key: a device made for it is
// never handed to a session that asked for other memory, nor the reverse.
func TestSessionMemoryConstrainsTheLeasedSpec(t *testing.T) {
	s, _ := startSessions(t, sessionsConfig(), true)
	ctx := context.Background()
	phone, err := s.Daemon.ResolveSession(ctx, contract.DeviceRequirement{SchemaVersion: 1, Platform: "android"})
	if err != nil {
		t.Fatal(err)
	}
	var l contract.Lease
	s.Admin(contract.LeaseRequest.Name, daemon.SessionLeaseRequest(phone), &l)
	dev, ok := s.Daemon.Engine().Device(l.DeviceID)
	if !ok {
		t.Fatalf("no device %s", l.DeviceID)
	}
	want := core.ProfileOf(nil, &contract.AndroidHardware{MemoryMB: 4096})
	if dev.Spec.Profile == "" || dev.Spec.Profile != want || dev.Spec.Model != "pixel_9" || dev.Spec.OSVersion != "16" {
		t.Fatalf("spec %+v, want profile %q", dev.Spec, want)
	}
	// Back to the pool, warm; a request without memoryMb gets another
	// device, the same profile gets this one again.
	s.Admin(contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, nil)
	s.Daemon.Engine().WaitIdle()
	other := phone
	other.MemoryMB = 0
	var l2 contract.Lease
	s.Admin(contract.LeaseRequest.Name, daemon.SessionLeaseRequest(other), &l2)
	if l2.DeviceID == l.DeviceID {
		t.Fatalf("a lease without memoryMb reused the 4096 MB device %s", l.DeviceID)
	}
	s.Admin(contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l2.LeaseID}, nil)
	s.Daemon.Engine().WaitIdle()
	var l3 contract.Lease
	s.Admin(contract.LeaseRequest.Name, daemon.SessionLeaseRequest(phone), &l3)
	if l3.DeviceID != l.DeviceID {
		t.Fatalf("the 4096 MB profile got %s, not its warm device %s", l3.DeviceID, l.DeviceID)
	}
}
