package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const androidConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "exec":{"timeoutMs":1500}}`

func TestAndroidLeaseScopedAdbBaselineAndWarmReuse(t *testing.T) {
	w := newWorld(t, androidConfig)
	var l lease
	w.json(&l, "lease", "--platform", "android", "--model", "pixel_6", "--detach")
	var dev struct {
		Device struct {
			Serial string
			Env    map[string]string
		}
	}
	w.json(&dev, "lease", "renew", l.LeaseID)
	serial := dev.Device.Serial
	if serial == "" || dev.Device.Env["ANDROID_ADB_SERVER_PORT"] == "" {
		t.Fatalf("grant lacks serial/env: %+v", dev)
	}
	if out := w.mustRun("adb", "-s", serial, "shell", "getprop", "sys.boot_completed"); strings.TrimSpace(out) != "1" {
		t.Fatalf("boot_completed %q", out)
	}
	// Invisible to a plain adb on the default server.
	plain := exec.Command(filepath.Join(w.sdk, "adb"), "devices")
	plain.Env = w.env
	outb, _ := plain.CombinedOutput()
	if out := string(outb); strings.Contains(out, serial) {
		t.Fatalf("a plain adb devices lists simlock's emulator:\n%s", out)
	}
	r := w.run("adb", "kill-server")
	if r.code == 0 || !strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("kill-server: %d %s", r.code, r.stderr)
	}
	r = w.run("exec", l.LeaseID, "--", "adb", "shell")
	if r.code == 0 || !strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("bare adb shell through exec: %d %s", r.code, r.stderr)
	}
	if out := w.mustRun("exec", l.LeaseID, "--", "adb", "shell", "getprop", "sys.boot_completed"); strings.TrimSpace(out) != "1" {
		t.Fatalf("exec getprop %q", out)
	}
	r = w.run("exec", l.LeaseID, "--", "adb", "shell", "sleep", "30")
	if !strings.Contains(r.stderr, "EXEC_TIMEOUT") {
		t.Fatalf("exec past the timeout: %d %s", r.code, r.stderr)
	}
	if ps, _ := exec.Command("pgrep", "-f", "shell sleep 30").Output(); strings.TrimSpace(string(ps)) != "" {
		t.Fatalf("the timed-out command left processes behind: %s", ps)
	}

	// Release restores the baseline snapshot; the next lease is a warm hit.
	w.mustRun("release", l.LeaseID)
	eventually(t, "the purge to settle", 30*time.Second, func() bool {
		st := w.status()
		return len(st.Devices) == 1 && st.Devices[0].State == "ready"
	})
	if w.countEvents("snapshot.restored", "") != 1 {
		t.Fatalf("no snapshot.restored event for the purge: %+v", w.events())
	}
	var next lease
	w.json(&next, "lease", "--platform", "android", "--model", "pixel_6", "--detach", "--no-wait", "--requester", "second")
	if next.Device.ID != l.Device.ID {
		t.Fatal("the second lease did not reuse the warm device")
	}
	if n := w.countEvents("device.booted", l.Device.ID); n != 0 {
		t.Fatalf("the warm grant booted the device (%d boots)", n)
	}
}
