package simsdk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/drivers/android"
)

// A keep-booted baseline outlives the driver that captured it (ADR 0056).
// A second driver on the same root and host ports stands for the daemon
// after a restart: the emulator the first one launched keeps running, and
// the second finds it through adb. It reads the baseline back instead of
// capturing the device's state as it is now, cleans a package installed
// after the restart, and lists nothing but the AVD (doctor sees no
// orphan). A relaunched emulator refuses the old file even when a crash
// left it behind, and a wipe and a destroy remove the file.
func TestAndroidKeepBootedBaselineSurvivesADriverRestart(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	var opts android.Options
	d, run, root := newResDriver(t, a, 30500, func(o *android.Options) { opts = *o })
	restart := func() *android.Driver {
		t.Helper()
		next, err := android.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = next.Close(context.Background()) })
		return next
	}
	ctx := context.Background()
	dev, serial, port := bootOne(t, d)
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = port
	a.env[envAVDHome] = root
	sh := func(cmd string) string { return a.ok("adb", "-s", serial, "shell", cmd) }
	install := func(pkg string) {
		f := filepath.Join(t.TempDir(), pkg+".apk")
		if err := os.WriteFile(f, []byte("not a real apk"), 0o644); err != nil {
			t.Fatal(err)
		}
		a.ok("adb", "-s", serial, "install", f)
	}
	file := filepath.Join(root, dev.Handle+".keepbooted.json")
	exists := func() bool {
		_, err := os.Stat(file)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	captures := func() int { return len(run.commands("adb")) - len(nonCapture(run.commands("adb"))) }

	install("com.example.fixture")
	if err := d.CaptureBaseline(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if !exists() {
		t.Fatal("the captured baseline was not written beside the AVD")
	}
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baseline file: %d bytes", len(saved))

	// The restart. The session on the warm device installs a package;
	// the grant's capture must keep the earlier baseline, not adopt it.
	after := restart()
	install("com.example.after_restart")
	before := captures()
	if err := after.CaptureBaseline(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if n := captures() - before; n != 0 {
		t.Fatalf("the restarted driver captured the device again (%d capture commands) instead of reading its baseline back", n)
	}
	if _, err := after.CleanToBaseline(ctx, dev); err != nil {
		t.Fatalf("clean after the restart: %v", err)
	}
	if out := sh("pm list packages -3"); out != "package:com.example.fixture\n" {
		t.Fatalf("third-party packages after the cleaning: %q", out)
	}
	obs, err := after.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 || obs[0].Handle != dev.Handle {
		t.Fatalf("the root lists %+v, want only %s (a baseline file is no device)", obs, dev.Handle)
	}

	// The emulator is relaunched: its boot drops the file, and a copy a
	// crash might have left is refused by the next driver and discarded.
	// The first driver still supervises the emulator (and would hold its
	// ports once it exits), so it is the one that relaunches it and does
	// the rest of the device's work.
	if err := d.Shutdown(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("the baseline file outlived a relaunch of its emulator")
	}
	if err := os.WriteFile(file, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	third := restart()
	if _, err := third.CleanToBaseline(ctx, dev); err == nil || !strings.Contains(err.Error(), "no keep-booted baseline") {
		t.Fatalf("cleaning a relaunched emulator by the old baseline: %v", err)
	}
	if exists() {
		t.Fatal("a baseline bound to an earlier launch was kept")
	}

	// -wipe-data and destroy remove it.
	if err := d.CaptureBaseline(ctx, dev); err != nil || !exists() {
		t.Fatalf("capture on the relaunched emulator: %v (written %v)", err, exists())
	}
	if err := d.WipeData(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("the baseline file outlived -wipe-data")
	}
	if err := d.CaptureBaseline(ctx, dev); err != nil || !exists() {
		t.Fatalf("capture after the wipe: %v (written %v)", err, exists())
	}
	if err := d.Destroy(ctx, dev); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), dev.Handle) {
			t.Errorf("%s is left in the root after the destroy", e.Name())
		}
	}
}

// nonCapture drops the commands only a baseline capture runs (listing the
// users and digesting the accounts).
func nonCapture(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, "pm list users") && !strings.Contains(l, "dumpsys account") {
			out = append(out, l)
		}
	}
	return out
}
