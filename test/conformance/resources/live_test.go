package resources

import (
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// listedRuntime is a device's runtime as `simlock list --json` prints it;
// the pointers tell a null from a value.
type listedRuntime struct {
	Readiness   *string `json:"readiness"`
	Locked      *bool   `json:"locked"`
	Orientation *string `json:"orientation"`
}

type listed struct {
	Devices []struct {
		ID       string        `json:"id"`
		Platform string        `json:"platform"`
		Runtime  listedRuntime `json:"runtime"`
	} `json:"devices"`
	Enrichment struct {
		Complete bool     `json:"complete"`
		Pending  []string `json:"pending"`
	} `json:"enrichment"`
}

// runtimeOf lists the devices (args: extra list flags) and returns the
// leased device's runtime and the listing's enrichment.
func runtimeOf(w *harness.World, id string, args ...string) (listedRuntime, listed) {
	w.T.Helper()
	var out listed
	w.JSON(&out, append([]string{"list", "--json"}, args...)...)
	for _, d := range out.Devices {
		if d.ID == id {
			return d.Runtime, out
		}
	}
	w.T.Fatalf("list shows no device %s: %+v", id, out)
	return listedRuntime{}, out
}

func isTrue(b *bool) bool         { return b != nil && *b }
func isFalse(b *bool) bool        { return b != nil && !*b }
func is(s *string, v string) bool { return s != nil && *s == v }

// On an Android lease the listing's runtime.locked is the lock screen and
// runtime.orientation the screen's shape after its current rotation, both
// read from the window manager: a fresh emulator is unlocked and portrait;
// turned with user_rotation and put to sleep (which shows the keyguard)
// through `simlock exec`, the listing follows within its sharing window.
func TestConfResAndroidLockAndOrientationComeFromTheWindowManager(t *testing.T) {
	harness.Proves(t, "resources/1.6", "resources/1.7")
	t.Parallel()
	w := harness.NewWorld(t, quiet)
	w.MustRun("daemon", "start")
	l := leaseFor(w, "screen", "--platform", "android", "--model", "pixel_6")

	// The booted view's budget (8 s) keeps a loaded machine's slow adb
	// from leaving the first read pending.
	rt, out := runtimeOf(w, l.Device.ID, "--booted")
	if !out.Enrichment.Complete || !is(rt.Readiness, "running") || !isFalse(rt.Locked) || !is(rt.Orientation, "portrait") {
		t.Fatalf("fresh emulator: runtime %+v enrichment %+v, want running, locked false, portrait", rt, out.Enrichment)
	}

	w.MustRun("exec", l.LeaseID, "--", "adb", "shell", "settings", "put", "system", "user_rotation", "1")
	w.MustRun("exec", l.LeaseID, "--", "adb", "shell", "input", "keyevent", "KEYCODE_SLEEP")
	harness.Eventually(t, "the listing to see the turned, locked screen", 20*time.Second, func() bool {
		rt, _ = runtimeOf(w, l.Device.ID, "--booted")
		return isTrue(rt.Locked) && is(rt.Orientation, "landscape")
	})

	// Waking keeps the keyguard; the menu key dismisses it.
	w.MustRun("exec", l.LeaseID, "--", "adb", "shell", "input", "keyevent", "KEYCODE_WAKEUP", "KEYCODE_MENU")
	harness.Eventually(t, "the listing to see the keyguard dismissed", 20*time.Second, func() bool {
		rt, _ = runtimeOf(w, l.Device.ID, "--booted")
		return isFalse(rt.Locked) && is(rt.Orientation, "landscape")
	})
}

// The window-manager probe is bounded: with a dump that takes 30 s, the
// booted listing (8 s budget) still finishes complete, the device running,
// its lock and orientation null rather than guessed, and the listing
// itself does not fail.
func TestConfResASlowWindowProbeLeavesTheFactsNull(t *testing.T) {
	harness.Proves(t, "resources/1.7")
	t.Parallel()
	w := harness.NewWorld(t, quiet)
	w.Setenv("SIMLOCK_SIMSDK_FAULTS", "window-dump-slow=30000")
	w.MustRun("daemon", "start")
	l := leaseFor(w, "slow-screen", "--platform", "android", "--model", "pixel_6")

	rt, out := runtimeOf(w, l.Device.ID, "--booted")
	if !out.Enrichment.Complete || len(out.Enrichment.Pending) != 0 {
		t.Fatalf("enrichment %+v: the probe was not bounded within the booted budget", out.Enrichment)
	}
	if !is(rt.Readiness, "running") || rt.Locked != nil || rt.Orientation != nil {
		t.Fatalf("runtime %+v, want running with locked and orientation null", rt)
	}
}
