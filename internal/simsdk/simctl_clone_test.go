package simsdk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bootSpan is how long the device's current (or last started) boot was
// modelled to take, read from its record.
func (h *harness) bootSpan(set, udid string) time.Duration {
	h.t.Helper()
	d, err := deviceSet{dir: set}.load(udid)
	if err != nil {
		h.t.Fatal(err)
	}
	if d.BootStartedAt == nil || d.BootReadyAt == nil {
		h.t.Fatalf("%s has no boot in its record", udid)
	}
	return d.BootReadyAt.Sub(*d.BootStartedAt)
}

// A clone copies the device's data and with it its first-boot data: a
// clone of a device that booted once boots at the reboot figure, a
// created or erased device at the first-boot figure. The clone lands in
// the destination set and the source stays where it was.
func TestCloneCopiesStateAndBootsFast(t *testing.T) {
	h := newHarness(t, EnvSpeed, "0.01")
	set := filepath.Join(h.home, "devices")
	golden := h.create("Golden", "iPhone 15", "iOS 17.5")
	h.must("boot", golden)
	if got, want := h.bootSpan(set, golden), scale(iosFirstBootTime, 0.01); got != want {
		t.Errorf("first boot after create modelled at %v, want %v", got, want)
	}
	h.waitState(golden, "Booted")
	app := filepath.Join(t.TempDir(), "Kept.app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	h.must("install", golden, app)

	// A source that is not shut down is refused as simctl refuses it.
	r := h.simctl("clone", golden, "Copy")
	if r.code != 149 || !strings.Contains(r.stderr, "Unable to clone device in current state: Booted") {
		t.Fatalf("clone of a booted device: %+v", r)
	}
	h.must("shutdown", golden)
	h.waitState(golden, "Shutdown")

	dest := filepath.Join(t.TempDir(), "pool")
	out := h.must("clone", golden, "Copy", dest)
	if !udidLine.MatchString(out) {
		t.Fatalf("clone printed %q, want a bare UDID line", out)
	}
	clone := strings.TrimSpace(out)
	if got := h.must("--set", dest, "list", "devices"); !strings.Contains(got, "Copy ("+clone+") (Shutdown)") {
		t.Errorf("clone not in the destination set:\n%s", got)
	}
	if got := h.must("list", "devices"); strings.Contains(got, clone) || !strings.Contains(got, golden) {
		t.Errorf("source set should hold the golden only:\n%s", got)
	}
	cd, err := deviceSet{dir: dest}.load(clone)
	if err != nil {
		t.Fatal(err)
	}
	if len(cd.Apps) != 1 || cd.Apps[0].BundleID != "simulated.Kept" || cd.LastBootedAt == nil {
		t.Errorf("clone lost the source's data: %+v", cd)
	}
	h.must("--set", dest, "boot", clone)
	if got, want := h.bootSpan(dest, clone), scale(iosRebootTime, 0.01); got != want {
		t.Errorf("clone of a booted-once device boots in %v, want %v", got, want)
	}

	// Erase forgets the first-boot data; the next boot is a first boot.
	h.must("erase", golden)
	h.must("boot", golden)
	if got, want := h.bootSpan(set, golden), scale(iosFirstBootTime, 0.01); got != want {
		t.Errorf("boot after erase modelled at %v, want %v", got, want)
	}
}

func TestCloneUsageAndLookup(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{{"clone"}, {"clone", "x"}, {"clone", "a", "b", "c", "d"}} {
		r := h.simctl(args...)
		if r.code != 64 || r.stderr != "Usage: simctl clone <device> <new name> [<destination device set path>]\n" {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if r := h.simctl("clone", "--force", "a", "b"); r.code != 64 {
		t.Errorf("unknown option accepted: %+v", r)
	}
	if r := h.simctl("clone", "NOPE", "b"); r.code != 148 || r.stderr != "Invalid device: NOPE\n" {
		t.Errorf("unknown source: %+v", r)
	}
}
