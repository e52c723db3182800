package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resourceAnswer is the part of a resources.* answer these tests read.
type resourceAnswer struct {
	Success   bool
	Resources map[string]struct{ State, Reason string }
	Changed   []string
	Restore   json.RawMessage
}

func (w *world) resources(args ...string) (resourceAnswer, result) {
	w.t.Helper()
	r := w.run(append([]string{"resources"}, append(args, "--json")...)...)
	var a resourceAnswer
	if r.stdout != "" {
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
			w.t.Fatalf("resources %v printed %q: %v", args, r.stdout, err)
		}
	}
	return a, r
}

// Disabling animations and widgets on a leased simulated iPhone is proven
// by an independent observation: a later resources.get, and launchctl run
// by hand in the simulator (not through simlock), both see them off.
func TestIOSResourceGroupsAreDisabledAndObservedSo(t *testing.T) {
	w := newWorld(t, `{"resources":{"enabled":true}}`)
	w.mustRun("daemon", "start")
	l := w.leaseFor("tuner", "--platform", "ios", "--model", "iPhone 16")

	set, r := w.resources("set", l.LeaseID, "animations=disabled", "widgets=disabled")
	if r.code != 0 || !set.Success {
		t.Fatalf("resources set: exit %d success %v\n%s%s", r.code, set.Success, r.stdout, r.stderr)
	}
	got, r := w.resources("get", l.LeaseID)
	if r.code != 0 {
		t.Fatalf("resources get: exit %d %s", r.code, r.stderr)
	}
	for _, g := range []string{"animations", "widgets"} {
		if s := got.Resources[g].State; s != "disabled" {
			t.Fatalf("%s observed %q after the set, want disabled: %+v", g, s, got.Resources)
		}
	}
	// The simulator's own launchd agrees, read without simlock.
	var st struct{ Devices []device }
	w.json(&st, "list", "--json")
	set0 := ""
	for _, d := range st.Devices {
		if d.UDID == l.Device.UDID {
			set0 = d.DeviceSet
		}
	}
	out := w.xcrun("simctl", "--set", set0, "spawn", l.Device.UDID, "launchctl", "print-disabled", "system")
	if !strings.Contains(out, "=> disabled") && !strings.Contains(out, "=> true") {
		t.Fatalf("launchctl print-disabled shows no disabled job:\n%s", out)
	}
	// Released, the device is purged: the next lease of it starts clean.
	w.mustRun("release", l.LeaseID)
	l2 := w.leaseFor("tuner-2", "--platform", "ios", "--model", "iPhone 16")
	fresh, _ := w.resources("get", l2.LeaseID)
	if s := fresh.Resources["animations"].State; s != "enabled" {
		t.Fatalf("animations %q on the next lease after a purge, want enabled", s)
	}
}

// A lease asking for a resource profile that cannot be proven (the
// simulator's launchd acknowledges writes that do not stick) fails with
// RESOURCE_PROFILE_UNPROVEN, not retryable, and the device made for it is
// gone from simlock and from the simulated SDK.
func TestUnprovableLeaseProfileFailsAndLeavesNoDevice(t *testing.T) {
	w := newWorld(t, "")
	w.setEnv("SIMLOCK_SIMSDK_FAULTS", "launchctl-write-noop")
	w.mustRun("daemon", "start")
	refusal := w.refused("lease", "--platform", "ios", "--model", "iPhone 16", "--resources", "animations=disabled", "--detach", "--json").Error
	if refusal.Code != "RESOURCE_PROFILE_UNPROVEN" || refusal.Retryable || refusal.Details["resourceDrift"] == nil {
		t.Fatalf("refusal %+v", refusal)
	}
	eventually(t, "the device made for the request to be destroyed", 30e9, func() bool { return len(w.status().Devices) == 0 })
	if out := w.xcrun("simctl", "--set", filepath.Join(w.home, "devices", "ios"), "list", "devices"); strings.Contains(out, "simlock-") {
		t.Fatalf("the simulated SDK still has a simlock device:\n%s", out)
	}
}

// An Android restore receipt undoes exactly what a set changed, read back
// through adb by hand; it is refused after the device rebooted.
func TestAndroidRestoreReceiptRestoresExactly(t *testing.T) {
	w := newWorld(t, `{"resources":{"enabled":true}}`)
	w.mustRun("daemon", "start")
	l := w.leaseFor("droid", "--platform", "android", "--model", "pixel_6")
	scale := func() string {
		return strings.TrimSpace(w.mustRun("exec", l.LeaseID, "--requester", "droid", "--", "adb", "shell", "settings", "get", "global", "window_animation_scale"))
	}
	before := scale()
	set, r := w.resources("set", l.LeaseID, "animations=disabled")
	if r.code != 0 || !set.Success || len(set.Restore) == 0 {
		t.Fatalf("set: exit %d %+v %s", r.code, set, r.stderr)
	}
	if s := scale(); s != "0" && s != "0.0" {
		t.Fatalf("window_animation_scale %q after disabling animations", s)
	}
	receipt := filepath.Join(t.TempDir(), "receipt.json")
	if err := os.WriteFile(receipt, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, r := w.resources("set", l.LeaseID, "--restore", receipt); r.code != 0 {
		t.Fatalf("restore: exit %d %s", r.code, r.stderr)
	}
	if s := scale(); s != before {
		t.Fatalf("window_animation_scale %q after the restore, want %q as before", s, before)
	}
	// Released and purged (a snapshot restore), the same emulator is a new
	// incarnation: the old receipt no longer applies to it.
	w.mustRun("release", l.LeaseID)
	l2 := w.leaseFor("droid-2", "--platform", "android", "--model", "pixel_6")
	if l2.Device.ID != l.Device.ID {
		t.Fatalf("the second lease got device %s, want the purged %s", l2.Device.ID, l.Device.ID)
	}
	_, r = w.resources("set", l2.LeaseID, "--restore", receipt)
	if r.code == 0 || !strings.Contains(r.stderr, "RESTORE_RECEIPT_MISMATCH") {
		t.Fatalf("restore on the next incarnation: exit %d %s", r.code, r.stderr)
	}
}
