package simsdk

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
)

// The Android driver, unchanged, with Debian's real adb as its adb (the
// private server it starts and every client command) and the simulated
// emulator and SDK tools: provision, boot, a holder's write through the
// real adb, reclaim, shutdown (the real adb's `emu kill`, through the
// console and its auth token), destroy.
func TestRealADBUnderTheAndroidDriver(t *testing.T) {
	needRealADB(t)
	a := newAndroid(t)
	root := filepath.Join(t.TempDir(), "root")
	var env []string
	for _, kv := range a.childEnv() {
		if !strings.HasPrefix(kv, "ANDROID_") {
			env = append(env, kv)
		}
	}
	link := func(tool string) string { return filepath.Join(toolLinks, tool) }
	hp := testHostPorts(t, openTestHost(t, nil), "/homes/real", 1)
	hp.ConsoleBase = freeConsole(t, 27500, 27900)
	var logs syncBuffer
	d, err := android.New(android.Options{
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		Root:          root,
		Ports:         hp,
		Runner:        envRunner{env: env},
		Tools:         android.Tools{ADB: realADBPath, Emulator: link("emulator"), AVDManager: link("avdmanager"), SDKManager: link("sdkmanager")},
		PollInterval:  20 * time.Millisecond,
		ShutdownGrace: 10 * time.Second,
		BootTimeout:   30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		_ = d.Close(ctx)
		if t.Failed() || testing.Verbose() {
			t.Logf("driver log:\n%s", logs.String())
		}
	})
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	dev := core.DeviceRef{ID: "dev-1", Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
	serial := p.Attrs[core.AttrSerial]
	// The driver's private server is a real one: the real client sees the
	// device there.
	r := &realADB{t: t, port: p.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"], home: a.env["HOME"]}
	if r.port == "" {
		t.Fatalf("no adb server port in the device's attributes: %v", p.Attrs)
	}
	// The driver leaves its private server running, as a daemon does
	// between devices; the test stops it.
	t.Cleanup(func() { r.run("kill-server") })
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if got := r.run("-s", serial, "shell", "echo dirt > /data/local/tmp/dirt && getprop sys.boot_completed"); got.code != 0 || got.stdout != "1\n" {
		t.Fatalf("real adb shell on the driver's server: %+v", got)
	}
	if err := d.Reclaim(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if got := r.run("-s", serial, "shell", "cat /data/local/tmp/dirt"); got.code != 1 {
		t.Errorf("reclaim left the holder's file: %+v", got)
	}
	if err := d.Shutdown(ctx, dev); err != nil {
		t.Fatal(err)
	}
	noProcs(t, a.home)
	if err := d.Destroy(ctx, dev); err != nil {
		t.Fatal(err)
	}
}
