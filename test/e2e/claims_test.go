package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sharedRootConfig points the iOS driver at one device set that two homes
// share. An idle device is shut down after half a second, so the home
// that made it lets go of its claim soon after its lease ends.
func sharedRootConfig(root string) string {
	return fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "cleanup":{"intervalMs":200,"idleShutdownMs":500,"idleDestroyMs":6000000},
 "drivers":{"ios":{"root":%q}}}`, root)
}

// setEnv replaces (or adds) one variable of a world's environment.
func (w *world) setEnv(key, value string) {
	for i, kv := range w.env {
		if strings.HasPrefix(kv, key+"=") {
			w.env[i] = key + "=" + value
			return
		}
	}
	w.env = append(w.env, key+"="+value)
}

type inUse struct {
	Error struct {
		Code       string `json:"code"`
		Retryable  bool   `json:"retryable"`
		NextAction string `json:"nextAction"`
		Details    struct {
			Reason         string `json:"reason"`
			Classification string `json:"classification"`
			DeviceKey      string `json:"deviceKey"`
			Owner          struct {
				Home            string `json:"home"`
				LeaseID         string `json:"leaseId"`
				DaemonPID       int    `json:"daemonPid"`
				DaemonStartTime string `json:"daemonStartTime"`
			} `json:"owner"`
			Recovery struct {
				Command string `json:"command"`
			} `json:"recovery"`
		} `json:"details"`
	} `json:"error"`
}

// Two homes pointed at one device root, on one host registry. While home A
// holds a device, home B's lease of it is DEVICE_IN_USE, naming A, and B
// runs no platform command on the device (the simulated SDK's command log
// says so). Once A's lease ended and A shut the idle device down (which
// clears its claim), B takes the device into its own registry and leases it.
func TestTwoHomesOnOneRootNeverShareADevice(t *testing.T) {
	shared, err := os.MkdirTemp("", "slr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	cfg := sharedRootConfig(filepath.Join(shared, "ios"))
	a := newWorld(t, cfg)
	b := newWorld(t, cfg)
	// One host, one simulated SDK: B sees A's registry and A's devices.
	for _, kv := range a.env {
		for _, k := range []string{"SIMLOCK_HOST_DIR=", "SIMLOCK_SIMSDK_HOME="} {
			if strings.HasPrefix(kv, k) {
				b.setEnv(strings.TrimSuffix(k, "="), strings.TrimPrefix(kv, k))
			}
		}
	}
	logB := filepath.Join(shared, "b-commands.log")
	b.setEnv("SIMLOCK_SIMSDK_COMMAND_LOG", logB)
	b.mustRun("daemon", "start")

	var la lease
	a.json(&la, "lease", "--platform", "ios", "--detach", "--requester", "a")
	udid := la.Device.UDID
	if udid == "" {
		t.Fatalf("A's lease has no UDID: %+v", la)
	}
	pidA := a.status().Daemon.PID

	// B asks for A's device, until the refusal also names A's lease (A
	// writes its lease id onto the claim in the background).
	var refused inUse
	eventually(t, "DEVICE_IN_USE naming A's lease", 10*time.Second, func() bool {
		r := b.run("lease", "--platform", "ios", "--device", udid, "--no-wait", "--detach", "--requester", "b", "--json")
		if r.code == 0 {
			t.Fatalf("B leased a device A holds: %s", r.stdout)
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &refused); err != nil {
			t.Fatalf("B's refusal %q: %v", r.stderr, err)
		}
		return refused.Error.Details.Owner.LeaseID == la.LeaseID
	})
	e, det := refused.Error, refused.Error.Details
	if e.Code != "DEVICE_IN_USE" || e.Retryable || det.Reason != "device-claimed" || det.Classification != "live-owner" ||
		det.DeviceKey != "ios:udid:"+strings.ToUpper(udid) || det.Owner.Home != a.home || det.Owner.DaemonPID != pidA ||
		det.Owner.DaemonStartTime == "" || !strings.Contains(det.Recovery.Command, a.home) || e.NextAction != det.Recovery.Command {
		t.Fatalf("refusal %+v", refused)
	}
	raw, _ := os.ReadFile(logB)
	if !strings.Contains(string(raw), "simctl") {
		t.Fatalf("B's command log shows none of its own simctl calls; is it written? %q", raw)
	}
	if strings.Contains(strings.ToUpper(string(raw)), strings.ToUpper(udid)) {
		t.Fatalf("B ran a platform command on A's device:\n%s", raw)
	}

	// A's lease ends; its pool shuts the idle device down, which clears
	// the claim; then B takes the device in and leases it.
	a.mustRun("release", la.LeaseID)
	var lb lease
	eventually(t, "B to lease the device A let go", 30*time.Second, func() bool {
		r := b.run("lease", "--platform", "ios", "--device", udid, "--no-wait", "--detach", "--requester", "b", "--json")
		if r.code != 0 {
			return false
		}
		if err := json.Unmarshal([]byte(r.stdout), &lb); err != nil {
			t.Fatalf("B's lease %q: %v", r.stdout, err)
		}
		return true
	})
	if lb.Device.UDID != udid {
		t.Fatalf("B leased %s, want %s", lb.Device.UDID, udid)
	}
	// Now A is the one refused.
	r := a.run("lease", "--platform", "ios", "--device", la.Device.ID, "--no-wait", "--detach", "--requester", "a2", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, `"DEVICE_IN_USE"`) || !strings.Contains(r.stderr, b.home) {
		t.Fatalf("A leased a device B holds: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
}
