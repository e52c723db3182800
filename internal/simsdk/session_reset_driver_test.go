package simsdk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/testhost"
)

// resetEngine is a core engine over one real driver and a real store.
func resetEngine(t *testing.T, drv core.Driver) *core.Engine {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "simlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng := core.New(core.Config{DefaultTTL: time.Hour, MaxTTL: time.Hour}, core.Deps{
		Clock: ports.SystemClock{}, Store: db, Drivers: []core.Driver{drv},
		Strategy: core.FixedStrategy{L: core.Limits{MaxRunning: 2, MaxManaged: 2}}, Bus: events.New(100, time.Now),
		DiskFree: func() (uint64, error) { return 1 << 40, nil },
	})
	if err := eng.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	return eng
}

func resetOf(t *testing.T, eng *core.Engine, leaseID string) contract.SessionReset {
	t.Helper()
	_, done, ok := eng.Resets().ResetOf(leaseID)
	if !ok {
		t.Fatalf("no reset for %s", leaseID)
	}
	select {
	case <-done:
	case <-time.After(testhost.Scale(60 * time.Second)):
		t.Fatalf("the reset of %s did not settle", leaseID)
	}
	rec, _, _ := eng.Resets().ResetOf(leaseID)
	return rec
}

// iOS erase and reuse through the core and the real driver: the next
// session gets the same simulator, and a file the first one wrote into
// its data is gone.
func TestSessionEraseResetThroughTheCore(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	eng := resetEngine(t, r.d)
	ctx := context.Background()
	p := core.ReleasePolicy{Mode: contract.ResetErase}
	req := func(who string) core.Grant {
		g, err := eng.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: ios.Platform, Model: "iPhone 15", OSVersion: "18.0"},
			RequesterID: who, OwnerID: who, Release: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	first := req("s1")
	written := filepath.Join(r.root, first.Device.Handle, "data", "Documents", "s1.txt")
	if err := os.MkdirAll(filepath.Dir(written), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(written, []byte("first session"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := eng.Release(first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := resetOf(t, eng, first.Lease.ID)
	if rec.Outcome != contract.ResetOutcomeClean || rec.ReuseCount != 1 {
		t.Fatalf("reset %+v", rec)
	}
	for _, ph := range []string{"stop", "erase", "boot", "verify"} {
		if _, ok := rec.Phases[ph]; !ok {
			t.Errorf("phase %s missing: %v", ph, rec.Phases)
		}
	}
	second := req("s2")
	if second.Device.ID != first.Device.ID || second.Device.ReuseCount != 1 {
		t.Fatalf("second session got %s (reuse %d), want the erased %s", second.Device.ID, second.Device.ReuseCount, first.Device.ID)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Fatalf("the first session's file is visible to the second: %v", err)
	}
}

// Android keep-booted through the core and the real driver: a package
// installed and a setting changed in one session are gone in the next,
// which gets the same running emulator; at maxUses the device is retired
// and its AVD is gone from the root.
func TestSessionKeepBootedResetThroughTheCore(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	d, _, root := newResDriver(t, a, 31300, nil)
	eng := resetEngine(t, d)
	ctx := context.Background()
	p := core.ReleasePolicy{Mode: contract.ResetKeepBooted, MaxUses: 2}
	req := func(who string) core.Grant {
		g, err := eng.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15"},
			RequesterID: who, OwnerID: who, Release: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	first := req("s1")
	serial := first.Device.Attrs[core.AttrSerial]
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = first.Device.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"]
	a.env[envAVDHome] = root
	sh := func(cmd string) string { return a.ok("adb", "-s", serial, "shell", cmd) }
	apk := filepath.Join(t.TempDir(), "com.example.session.apk")
	if err := os.WriteFile(apk, []byte("not a real apk"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.ok("adb", "-s", serial, "install", apk)
	sh("settings put system screen_off_timeout 5000")
	if err := eng.Release(first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := resetOf(t, eng, first.Lease.ID); rec.Mode != contract.ResetKeepBooted || rec.Outcome != contract.ResetOutcomeClean {
		t.Fatalf("first reset %+v", rec)
	}
	second := req("s2")
	if second.Device.ID != first.Device.ID {
		t.Fatalf("second session got %s, want the cleaned %s", second.Device.ID, first.Device.ID)
	}
	if out := sh("pm list packages -3"); strings.Contains(out, "com.example.session") {
		t.Errorf("the first session's package is visible to the second: %q", out)
	}
	if got := strings.TrimSpace(sh("settings get system screen_off_timeout")); got != "60000" {
		t.Errorf("screen_off_timeout %q, want the baseline's 60000", got)
	}
	if err := eng.Release(second.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := resetOf(t, eng, second.Lease.ID)
	if rec.Outcome != contract.ResetOutcomeDestroyed || !strings.Contains(rec.FallbackReason, "maxUses 2") {
		t.Fatalf("second reset %+v, want the device retired", rec)
	}
	if _, err := os.Stat(filepath.Join(root, first.Device.Handle+".avd")); !os.IsNotExist(err) {
		t.Fatalf("the retired device's AVD is still in the root: %v", err)
	}
}
