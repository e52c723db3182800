package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// healConfig: one running device, a fast health monitor and quarantine.
const healConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "health":{"intervalMs":200,"stableObservations":2,"maxRecoveryAttempts":2},
 "warmPool":{"quarantine":{"retries":2,"backoffMs":300,"multiplier":1,"capMs":300}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

type event struct {
	Seq      uint64
	Type     string
	DeviceID string
	LeaseID  string
	Reason   string
	Data     map[string]any
}

func (w *world) events() []event {
	out := w.mustRun("events", "--json")
	var evs []event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			w.t.Fatalf("event line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func (w *world) countEvents(typ, id string) int {
	n := 0
	for _, e := range w.events() {
		if e.Type == typ && (id == "" || e.DeviceID == id || e.LeaseID == id) {
			n++
		}
	}
	return n
}

// devicePID finds the simulated device process for udid.
func (w *world) devicePID(udid string) int {
	var procs []struct {
		ID  string `json:"id"`
		PID int    `json:"pid"`
	}
	w.json(&procs, "simsdk", "ps", "--json")
	for _, p := range procs {
		if p.ID == udid {
			return p.PID
		}
	}
	return 0
}

func (w *world) crash(udid string) {
	w.t.Helper()
	var pid int
	eventually(w.t, "the device process to be up", 20*time.Second, func() bool { pid = w.devicePID(udid); return pid != 0 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		w.t.Fatal(err)
	}
}

func TestKilledDeviceIsRecoveredThenLost(t *testing.T) {
	w := newWorld(t, healConfig)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach", "--ttl", "10m")
	for i := 1; i <= 2; i++ {
		w.crash(l.Device.UDID)
		eventually(t, "crash detection and recovery", 20*time.Second, func() bool {
			return w.countEvents("device.recovered", l.Device.ID) == i
		})
		if w.countEvents("device.crash-detected", l.Device.ID) != i {
			t.Fatal("recovered without a crash-detected fact first")
		}
		// Same lease, same device, and it still renews.
		w.mustRun("lease", "renew", l.LeaseID)
	}
	// maxRecoveryAttempts (2) + 1 crashes: the lease ends as device-lost.
	w.crash(l.Device.UDID)
	eventually(t, "the lease to end as device-lost", 20*time.Second, func() bool {
		for _, e := range w.events() {
			if e.Type == "lease.released" && e.LeaseID == l.LeaseID {
				return e.Reason == "device-lost"
			}
		}
		return false
	})
	r := w.run("lease", "renew", l.LeaseID, "--json")
	if !strings.Contains(r.stderr, "UNKNOWN_LEASE") {
		t.Fatalf("renew after device-lost: %s", r.stderr)
	}
}

func TestEraseFailureQuarantinesThenRecovers(t *testing.T) {
	w := newWorld(t, healConfig)
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=erase-fail@1")
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	w.mustRun("release", l.LeaseID)
	eventually(t, "quarantine and recovery", 30*time.Second, func() bool {
		return w.countEvents("device.quarantine-recovered", l.Device.ID) == 1
	})
	for _, typ := range []string{"device.purge-failed", "device.quarantined"} {
		if w.countEvents(typ, l.Device.ID) != 1 {
			t.Errorf("want one %s", typ)
		}
	}
	if st := w.status(); st.Devices[0].State != "ready" {
		t.Fatalf("after recovery %s", st.Devices[0].State)
	}
}

func TestPersistentEraseFailureDestroysAfterRetries(t *testing.T) {
	w := newWorld(t, healConfig)
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=erase-fail")
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	w.mustRun("release", l.LeaseID)
	eventually(t, "the quarantined device to be abandoned", 30*time.Second, func() bool {
		return w.countEvents("device.quarantine-abandoned", l.Device.ID) == 1
	})
	if st := w.status(); len(st.Devices) != 0 {
		t.Fatalf("abandoned device still registered: %+v", st.Devices)
	}
	out, _ := exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "--set", l.Device.DeviceSet, "list", "devices").Output()
	if strings.Contains(string(out), l.Device.UDID) {
		t.Fatal("abandoned device still in the root: destroyed means deleted, not shut down")
	}
}

func TestReleaseReturnsWhileThePurgeRuns(t *testing.T) {
	w := newWorld(t, healConfig)
	// Realistic-ish timings: boot 30s x 0.1 = 3s, so the purge (shutdown,
	// erase, boot) is still running when release has returned.
	w.env = append(w.env, "SIMLOCK_SIMSDK_SPEED=0.1")
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	waiter := w.cmd("lease", "--platform", "ios", "--detach", "--timeout", "60s", "--requester", "waiter")
	var out strings.Builder
	waiter.Stdout = &out
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the waiter to queue", 10*time.Second, func() bool { return w.status().QueueDepth == 1 })
	w.mustRun("release", l.LeaseID)
	st := w.status()
	if len(st.Devices) != 1 || st.Devices[0].State != "reclaiming" {
		t.Fatalf("right after release the device is %+v; release must not wait for the purge", st.Devices)
	}
	if err := waiter.Wait(); err != nil {
		t.Fatal(err)
	}
	var got lease
	json.Unmarshal([]byte(out.String()), &got)
	if got.Device.ID != l.Device.ID {
		t.Fatalf("waiter got %q", got.Device.ID)
	}
}

func TestDaemonKilledMidPurgeRecoversTheDevice(t *testing.T) {
	w := newWorld(t, healConfig)
	w.env = append(w.env, "SIMLOCK_SIMSDK_SPEED=0.1")
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	pid := w.status().Daemon.PID
	w.mustRun("release", l.LeaseID)
	syscall.Kill(pid, syscall.SIGKILL)
	eventually(t, "the daemon to die", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	w.mustRun("daemon", "start")
	eventually(t, "the interrupted purge to be recovered", 30*time.Second, func() bool {
		st := w.status()
		return len(st.Devices) == 1 && st.Devices[0].State == "ready"
	})
	var doc struct {
		Healthy  bool
		Findings []map[string]any
	}
	w.json(&doc, "doctor", "--json")
	if !doc.Healthy {
		t.Fatalf("doctor after recovery: %+v", doc.Findings)
	}
}

func TestNukeLeavesNothingInTheRoot(t *testing.T) {
	w := newWorld(t, oneRunning)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	var rep struct {
		ReleasedLeases   []string
		DestroyedDevices []string
	}
	w.json(&rep, "nuke", "--yes", "--json")
	if len(rep.ReleasedLeases) != 1 || len(rep.DestroyedDevices) != 1 {
		t.Fatalf("%+v", rep)
	}
	out, _ := exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "--set", l.Device.DeviceSet, "list", "devices", "-j").Output()
	if strings.Contains(string(out), `"udid"`) {
		t.Fatalf("root not empty after nuke:\n%s", out)
	}
}
