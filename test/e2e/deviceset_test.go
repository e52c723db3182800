package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const defaultSetConfig = `{"drivers":{"ios":{"deviceSet":"default"}},"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3}}}`

// sdkTool runs a simulated SDK tool as a user would in the same shell:
// same simulated SDK home, so plain `xcrun simctl` is the default set.
func (w *world) sdkTool(dir, tool string, args ...string) result {
	w.t.Helper()
	c := exec.Command(filepath.Join(w.sdk, tool), args...)
	c.Env, c.Dir = w.env, dir
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("%s %v: %v", tool, args, err)
	}
	return result{o.String(), e.String(), code}
}

// In default device-set mode a leased simulator is one xcodebuild can
// use: `xcodebuild -showdestinations` lists the leased UDID and `xcodebuild
// test -destination id=<udid>` runs, while a device in an owned (private)
// set is not found, with the real error and exit 70. The device is claimed
// host-wide under its UDID like any simlock device.
func TestDefaultSetLeaseIsAnXcodebuildDestination(t *testing.T) {
	w := newWorld(t, defaultSetConfig)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach")
	udid := l.Device.UDID
	if udid == "" || l.Device.DeviceSet != filepath.Join(w.simHome, "devices") {
		t.Fatalf("lease device %+v, want a UDID in the default set %s", l.Device, filepath.Join(w.simHome, "devices"))
	}
	proj := t.TempDir()
	if err := os.Mkdir(filepath.Join(proj, "App.xcodeproj"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := w.sdkTool(proj, "xcodebuild", "-showdestinations", "-scheme", "App")
	if r.code != 0 || !strings.Contains(r.stdout, "{ platform:iOS Simulator, id:"+udid+", OS:") {
		t.Fatalf("showdestinations (exit %d) does not list the leased %s:\n%s%s", r.code, udid, r.stdout, r.stderr)
	}
	if r := w.sdkTool(proj, "xcodebuild", "test", "-scheme", "App", "-destination", "id="+udid); r.code != 0 || !strings.Contains(r.stdout, "** TEST SUCCEEDED **") {
		t.Fatalf("xcodebuild test on the leased device: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A simulator in an owned set, as simlock's default mode makes them.
	owned := filepath.Join(t.TempDir(), "owned-set")
	other := strings.TrimSpace(w.sdkTool(proj, "xcrun", "simctl", "--set", owned, "create", "Owned", "iPhone 16", "iOS 18.0").stdout)
	r = w.sdkTool(proj, "xcodebuild", "test", "-scheme", "App", "-destination", "id="+other)
	if r.code != 70 || !strings.HasPrefix(r.stderr, "xcodebuild: error: Unable to find a destination matching the provided destination specifier:\n\t\t{ id:"+other+" }\n") {
		t.Fatalf("owned-set device: exit %d\n%s", r.code, r.stderr)
	}

	// Claimed host-wide, under the UDID.
	eventually(t, "the default-set device's host claim", 10*time.Second, func() bool {
		var st struct {
			Claims []struct {
				DeviceKey string `json:"deviceKey"`
				OwnerHome string `json:"ownerHome"`
			} `json:"claims"`
		}
		w.json(&st, "device", "status", "--json")
		for _, c := range st.Claims {
			if c.DeviceKey == "ios:udid:"+strings.ToUpper(udid) && c.OwnerHome == w.home {
				return true
			}
		}
		return false
	})
	w.mustRun("release", l.LeaseID)
}

// A user's simulator in the default set, there before simlock and named
// like one of simlock's, survives doctor --fix --purge-orphans and nuke,
// booted, with its data; simlock's own device in the same set is purged.
func TestDefaultSetLeavesTheUsersSimulatorAlone(t *testing.T) {
	w := newWorld(t, defaultSetConfig)
	dir := t.TempDir()
	user := strings.TrimSpace(w.sdkTool(dir, "xcrun", "simctl", "create", "simlock-0badf00d", "iPhone 16", "iOS 18.0").stdout)
	if user == "" {
		t.Fatal("no user device created")
	}
	if r := w.sdkTool(dir, "xcrun", "simctl", "boot", user); r.code != 0 {
		t.Fatalf("boot the user's device: %s", r.stderr)
	}
	userData := filepath.Join(w.simHome, "devices", user, "data", "Documents", "notes.txt")
	if err := os.MkdirAll(filepath.Dir(userData), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(userData, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	var l lease
	w.json(&l, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach")
	var st status
	w.json(&st, "status", "--json")
	for _, d := range st.Devices {
		if strings.EqualFold(d.UDID, user) {
			t.Fatalf("simlock lists the user's device as its own: %+v", d)
		}
	}
	// exec is pinned to the leased UDID, and the unpinned passthrough
	// reaches only simlock's own devices: the user's simulator is refused
	// by UDID, as "booted" and as a name.
	mustRefuse(t, w.run("exec", l.LeaseID, "--", "simctl", "terminate", user, "com.example.app"), "exec at the user's UDID", user)
	mustRefuse(t, w.run("exec", l.LeaseID, "--", "simctl", "terminate", "booted", "com.example.app"), "exec at booted")
	mustRefuse(t, w.run("simctl", "terminate", user, "com.example.app"), "simlock simctl at the user's UDID")
	mustRefuse(t, w.run("simctl", "terminate", "simlock-0badf00d", "com.example.app"), "simlock simctl by name")
	if r := w.run("exec", l.LeaseID, "--", "simctl", "terminate", l.Device.UDID, "com.example.app"); strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("exec at the leased UDID refused: %s", r.stderr)
	}
	if r := w.run("simctl", "list", "devices"); r.code != 0 || !strings.Contains(r.stdout, l.Device.UDID) {
		t.Fatalf("simlock simctl list in default mode: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// An orphan of simlock's own: a device it created whose registry
	// record is gone is what --purge-orphans is for; the user's device is
	// not one, whatever its name.
	w.mustRun("release", l.LeaseID)
	var doc struct {
		Findings []struct{ Kind, Handle string }
	}
	w.json(&doc, "doctor", "--fix", "--purge-orphans", "--json")
	for _, f := range doc.Findings {
		if strings.EqualFold(f.Handle, user) {
			t.Fatalf("doctor reports the user's device: %+v", f)
		}
	}
	w.mustRun("nuke", "--yes")

	list := w.sdkTool(dir, "xcrun", "simctl", "list", "devices")
	if !strings.Contains(list.stdout, "simlock-0badf00d ("+user+") (Booted)") {
		t.Fatalf("the user's device did not survive booted:\n%s", list.stdout)
	}
	if strings.Contains(list.stdout, l.Device.UDID) {
		t.Fatalf("simlock's own device survived nuke:\n%s", list.stdout)
	}
	if b, err := os.ReadFile(userData); err != nil || string(b) != "mine" {
		t.Fatalf("the user's data: %q, %v", b, err)
	}
	w.sdkTool(dir, "xcrun", "simctl", "shutdown", user)
}
