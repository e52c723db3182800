package daemon

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/hostreg"
)

func startAndroid(t *testing.T) (*fixture, *client.Client) {
	t.Helper()
	home, err := os.MkdirTemp("", "sld-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: 1, MaxManaged: 2}
	drv := fakedrv.New("android")
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Version: "test", Drivers: []core.Driver{drv}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, d: d, home: home, drv: drv}
	t.Cleanup(func() {
		d.Stop()
		os.RemoveAll(home)
	})
	return f, f.dial("admin", f.adminToken())
}

func (f *fixture) onlyDevice() (core.DeviceRecord, hostreg.Key) {
	f.t.Helper()
	devs := f.d.engine.Devices()
	if len(devs) != 1 {
		f.t.Fatalf("devices: %+v", devs)
	}
	k, err := f.d.claims.DeviceKey(devs[0].Platform, devs[0].Handle, devs[0].Attrs)
	if err != nil {
		f.t.Fatal(err)
	}
	return devs[0], k
}

func shutdowns(calls []string) int {
	n := 0
	for _, c := range calls {
		if c == "shutdown" || len(c) > 8 && c[:9] == "shutdown " {
			n++
		}
	}
	return n
}

// device.release finds the device by its host key, releases the lease
// holding it through the ordinary release, lets the reclaim settle and
// shuts the device down through the op executor; asked again, it reports
// the device already stopped; an unknown key is UNKNOWN_DEVICE.
func TestDeviceReleaseEndsTheLeaseThenShutsDown(t *testing.T) {
	ctx := context.Background()
	f, admin := startAndroid(t)
	l, err := admin.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, key := f.onlyDevice()
	out, err := client.Do(ctx, admin, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: string(key)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != "shut-down" || out.LeaseID != l.LeaseID || out.DeviceID != dev.ID {
		t.Fatalf("device.release: %+v (lease %s)", out, l.LeaseID)
	}
	if _, ok := f.d.engine.Lease(l.LeaseID); ok {
		t.Fatal("the lease survived device.release")
	}
	if r, _ := f.d.engine.Device(dev.ID); r.State != core.StateShutdown {
		t.Fatalf("device is %s", r.State)
	}
	if n := shutdowns(f.drv.Calls()); n != 1 {
		t.Fatalf("%d shutdowns in %v", n, f.drv.Calls())
	}
	out, err = client.Do(ctx, admin, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: string(key)})
	if err != nil || out.Action != "already-stopped" {
		t.Fatalf("again: %+v %v", out, err)
	}
	other, _ := hostreg.AndroidAVDKey("/elsewhere", "android-1")
	if _, err := client.Do(ctx, admin, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: string(other)}); !client.IsCode(err, contract.CodeUnknownDevice) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := client.Do(ctx, admin, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: "android:emulator-5554"}); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("transport name as key: %v", err)
	}
	// It is an admin operation: an agent session is refused.
	if _, err := client.Do(ctx, f.dial("agent", ""), contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: string(key)}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("agent: %v", err)
	}
}

// daemon.stop with clean releases every lease and shuts every running
// device down before answering, and says which.
func TestDaemonStopCleanShutsEveryDeviceDownFirst(t *testing.T) {
	ctx := context.Background()
	f, admin := startAndroid(t)
	l, err := admin.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := f.onlyDevice()
	out, err := client.Do(ctx, admin, contract.DaemonStop, contract.DaemonStopIn{Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Stopping || out.Clean == nil || !slices.Equal(out.Clean.ReleasedLeases, []string{l.LeaseID}) ||
		!slices.Equal(out.Clean.ShutDown, []string{dev.ID}) || len(out.Clean.Failed) != 0 {
		t.Fatalf("clean stop: %+v %+v", out, out.Clean)
	}
	if n := shutdowns(f.drv.Calls()); n != 1 {
		t.Fatalf("%d shutdowns in %v", n, f.drv.Calls())
	}
	<-f.d.Done()
}
