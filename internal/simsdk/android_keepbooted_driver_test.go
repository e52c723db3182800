package simsdk

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostPathOf finds where the simulated emulator keeps a device file: it
// writes a marker through the device's shell and looks for it under root.
func hostPathOf(t *testing.T, a *androidHarness, serial, root, devDir string) string {
	t.Helper()
	a.ok("adb", "-s", serial, "shell", "mkdir -p "+devDir+" && echo marker > "+devDir+"/.where")
	var found string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == ".where" {
			found = filepath.Dir(p)
		}
		return nil
	})
	if found == "" {
		t.Fatalf("cannot find %s under %s", devDir, root)
	}
	a.ok("adb", "-s", serial, "shell", "rm "+devDir+"/.where")
	return found
}

// Keep-booted cleaning against the simulated SDK: what a session
// installed, granted, changed and wrote is undone, the baseline's own
// package, permission and file are untouched, a symbolic link leading out
// of the root is removed without following it, the device stays booted
// and healthy, and a new incarnation has no baseline to clean by.
func TestAndroidKeepBootedCleansASessionBackToTheBaseline(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	d, run, root := newResDriver(t, a, 30300, nil)
	ctx := context.Background()
	dev, serial, port := bootOne(t, d)
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = port
	a.env[envAVDHome] = root
	sh := func(cmd string) string { return a.ok("adb", "-s", serial, "shell", cmd) }
	apk := func(pkg string) string {
		f := filepath.Join(t.TempDir(), pkg+".apk")
		if err := os.WriteFile(f, []byte("not a real apk"), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}

	// What the device has before the session: the baseline.
	a.ok("adb", "-s", serial, "install", apk("com.example.fixture"))
	sh("pm grant com.example.fixture android.permission.CAMERA")
	sh("mkdir -p /sdcard/Download && echo kept > /sdcard/Download/fixture.txt")
	download := hostPathOf(t, a, serial, root, "/sdcard/Download")
	if err := d.CaptureBaseline(ctx, dev); err != nil {
		t.Fatal(err)
	}

	// The session.
	a.ok("adb", "-s", serial, "install", apk("com.example.session"))
	sh("pm grant com.example.fixture android.permission.RECORD_AUDIO")
	sh("settings put global window_animation_scale 0.5")
	sh("settings put secure simlock_session_added 1")
	sh("wm size 720x1280 && wm density 320")
	sh("setprop persist.sys.locale fr-FR")
	sh("echo session > /sdcard/Download/new.txt && mkdir -p /sdcard/DCIM/Camera && echo jpg > /sdcard/DCIM/Camera/p.jpg")
	sh("echo changed > /sdcard/Download/fixture.txt")
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("not the device's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(download, "escape")); err != nil {
		t.Fatal(err)
	}
	if out := sh("pm list packages -3"); !strings.Contains(out, "com.example.session") {
		t.Fatalf("the session's package is not installed: %q", out)
	}

	phases, err := d.CleanToBaseline(ctx, dev)
	if err != nil {
		t.Fatalf("clean: %v (commands %v)", err, run.commands("adb"))
	}
	for _, ph := range []string{"uninstall", "grants", "settings", "display", "locale", "files", "clipboard"} {
		if _, ok := phases[ph]; !ok {
			t.Errorf("phase %s missing: %v", ph, phases)
		}
	}
	if err := d.CheckHealth(ctx, dev); err != nil {
		t.Fatalf("health after the cleaning: %v", err)
	}
	if out := sh("pm list packages -3"); out != "package:com.example.fixture\n" {
		t.Errorf("third-party packages after the cleaning: %q", out)
	}
	grants := sh("dumpsys package com.example.fixture")
	if !strings.Contains(grants, "android.permission.CAMERA: granted=true") || strings.Contains(grants, "RECORD_AUDIO") {
		t.Errorf("the fixture's permissions after the cleaning:\n%s", grants)
	}
	if got := strings.TrimSpace(sh("settings get global window_animation_scale")); got != "1.0" {
		t.Errorf("window_animation_scale %q, want the baseline's 1.0", got)
	}
	if got := strings.TrimSpace(sh("settings get secure simlock_session_added")); got != "1" {
		t.Errorf("a key the baseline lacked was deleted without proof the session added it: %q", got)
	}
	if out := sh("wm size; wm density"); strings.Contains(out, "Override") {
		t.Errorf("display overrides remain: %q", out)
	}
	if got := strings.TrimSpace(sh("getprop persist.sys.locale")); got != "" {
		t.Errorf("locale %q, want the baseline's (unset)", got)
	}
	if out := sh("find /sdcard/Download /sdcard/DCIM -type f"); out != "/sdcard/Download/fixture.txt\n" {
		t.Errorf("files after the cleaning: %q", out)
	}
	if got := strings.TrimSpace(sh("cat /sdcard/Download/fixture.txt")); got != "changed" {
		t.Errorf("a baseline file was touched: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(download, "escape")); !os.IsNotExist(err) {
		t.Errorf("the added link is still there: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not the device's" {
		t.Fatalf("the cleaning followed a link out of the root: %q %v", b, err)
	}
	if cmds := strings.Join(run.commands("adb"), "\n"); strings.Contains(cmds, "victim") || strings.Contains(cmds, "fixture.txt") && strings.Contains(cmds, "rm -f /sdcard/Download/fixture.txt") {
		t.Errorf("the cleaning addressed a baseline file or the link's target:\n%s", cmds)
	}

	// A second session on the same incarnation is cleaned the same way.
	a.ok("adb", "-s", serial, "install", apk("com.example.second"))
	if _, err := d.CleanToBaseline(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if out := sh("pm list packages -3"); out != "package:com.example.fixture\n" {
		t.Errorf("third-party packages after the second cleaning: %q", out)
	}

	// A snapshot restore begins a new incarnation: the old baseline does
	// not apply to it.
	if err := d.RestoreSnapshot(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CleanToBaseline(ctx, dev); err == nil || !strings.Contains(err.Error(), "no keep-booted baseline") {
		t.Fatalf("cleaning a new incarnation by the old baseline: %v", err)
	}
}
