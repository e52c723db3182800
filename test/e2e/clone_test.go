package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const cloneConfig = `{"drivers":{"ios":{"clone":{"enabled":true}}},"capacity":{"strategy":"fixed","fixed":{"maxRunning":3,"maxManaged":5}}}`

// cloneSpeed scales the simulated SDK's modelled timings: create + first
// boot 30.4 s becomes ~6 s, clone + boot 2 s becomes 0.4 s, so the
// driver's own overhead (a few tool processes) stays small beside them.
const cloneSpeed = "0.2"

type timedLease struct {
	lease
	Timing struct {
		Path        string `json:"path"`
		ProvisionMs *int64 `json:"provisionMs"`
		BootMs      *int64 `json:"bootMs"`
	} `json:"timing"`
}

// made is how long the lease's device took to be made and booted, as the
// daemon measured the driver calls.
func (l timedLease) made(t *testing.T) time.Duration {
	t.Helper()
	if l.Timing.Path != "provision" || l.Timing.ProvisionMs == nil || l.Timing.BootMs == nil {
		t.Fatalf("lease %s was not provisioned: %+v", l.LeaseID, l.Timing)
	}
	return time.Duration(*l.Timing.ProvisionMs+*l.Timing.BootMs) * time.Millisecond
}

// With clone provisioning on, the real binary and the real iOS driver make
// the first device by create (there is no golden yet) and build the golden
// meanwhile; the next device is a clone of it, and clone + boot takes at
// most a fifth of create + boot on the modelled timings. The simulated
// SDK's command log shows the clone, and no create in the root, for it.
// The release of the cloned device resets it by a clone too (the first
// reset of a spec measures the clone kind): same device id, new UDID.
func TestCloneProvisioningBeatsCreatePlusBoot(t *testing.T) {
	w := newWorld(t, cloneConfig)
	log := filepath.Join(t.TempDir(), "commands.log")
	w.setEnv("SIMLOCK_SIMSDK_SPEED", cloneSpeed)
	w.setEnv("SIMLOCK_SIMSDK_COMMAND_LOG", log)
	w.mustRun("daemon", "start")
	root := filepath.Join(w.home, "devices", "ios")

	var first timedLease
	w.json(&first, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "one", "--json")
	created := first.made(t)
	eventually(t, "the golden to be built", 60*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(root, ".golden.json"))
		return err == nil && strings.Contains(string(b), `"ready": true`)
	})
	before := commandLines(t, log)

	var second timedLease
	w.json(&second, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "two", "--json")
	cloned := second.made(t)
	ran := commandLines(t, log)[len(before):]
	if !hasCommand(ran, "simctl --set "+filepath.Join(root, ".golden")+" clone ") || hasCommand(ran, "simctl --set "+root+" create ") {
		t.Fatalf("second device not made by clone:\n%s", strings.Join(ran, "\n"))
	}
	t.Logf("create + boot %v, clone + boot %v (%.1fx), speed %s", created, cloned, float64(created)/float64(cloned), cloneSpeed)
	if cloned*5 > created {
		t.Fatalf("clone + boot %v is more than a fifth of create + boot %v", cloned, created)
	}

	// The reset after release: a clone replaces the device.
	before = commandLines(t, log)
	w.mustRun("release", second.LeaseID)
	eventually(t, "the cloned device to be reset", 30*time.Second, func() bool {
		for _, d := range w.status().Devices {
			if d.ID == second.Device.ID {
				return d.State == "ready"
			}
		}
		return false
	})
	var st struct {
		Devices []device `json:"devices"`
	}
	w.json(&st, "status", "--json")
	for _, d := range st.Devices {
		if d.ID == second.Device.ID && (d.UDID == second.Device.UDID || d.UDID == "") {
			t.Errorf("reset kept UDID %s; a clone reset replaces the device", d.UDID)
		}
	}
	ran = commandLines(t, log)[len(before):]
	if !hasCommand(ran, " clone ") || !hasCommand(ran, " delete "+second.Device.UDID) || hasCommand(ran, " erase ") {
		t.Errorf("reset by clone should clone, delete the old device and not erase:\n%s", strings.Join(ran, "\n"))
	}
}

func commandLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func hasCommand(lines []string, part string) bool {
	for _, l := range lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}
