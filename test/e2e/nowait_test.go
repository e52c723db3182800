package e2e

import (
	"strings"
	"testing"
	"time"
)

// Two running slots, one of them the most iOS may use.
const noWaitConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":6,
 "platforms":{"ios":{"maxRunning":1}}}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

// `simlock lease --no-wait` refused at capacity changes nothing: iOS is at
// its own limit, which no eviction eases, so the warm Android emulator is
// not shut down for a request that is refused anyway (it used to be).
func TestNoWaitRefusedAtCapacityChangesNothing(t *testing.T) {
	w := newWorld(t, noWaitConfig)
	var droid lease
	w.json(&droid, "lease", "--platform", "android", "--model", "pixel_6", "--detach", "--requester", "droid")
	w.mustRun("release", droid.LeaseID)
	deviceState := func(id string) string {
		for _, d := range w.status().Devices {
			if d.ID == id {
				return d.State
			}
		}
		return "gone"
	}
	eventually(t, "the emulator to be warm again", 20*time.Second, func() bool { return deviceState(droid.Device.ID) == "ready" })
	var phone lease
	w.json(&phone, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "phone")

	r := w.run("lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--requester", "nw", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, `"code":"NO_CAPACITY"`) {
		t.Fatalf("no-wait at capacity: exit %d stderr %s", r.code, r.stderr)
	}
	// An eviction would have been started in the refusing decision and run
	// in the background; give it the time it takes at speed 0 many times over.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, e := range w.events() {
			if e.Type == "device.evicted" || (e.Type == "device.state-changed" && e.DeviceID == droid.Device.ID && e.Data["to"] == "shutdown") {
				t.Fatalf("a refused request changed the pool: %+v", e)
			}
		}
		if st := deviceState(droid.Device.ID); st != "ready" {
			t.Fatalf("warm emulator is %s after a refusal, want ready", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
