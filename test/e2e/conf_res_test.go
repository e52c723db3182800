package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// Conformance with the device-resources reference (issue 23, "Device
// resources"): each test names the statement it proves.

// resQuiet keeps the daemon's periodic work (health, cleanup, the host's
// external-device count) from running SDK commands during a test, so the
// simulated SDK's command log shows only what the call under test ran.
const resQuiet = `{"resources":{"enabled":true},"health":{"intervalMs":600000},"capacity":{"host":{"pollIntervalMs":600000}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

// "Reconciling workload profiles": Android targets are rejected before any
// command runs. `simlock resources reconcile` on an emulator's lease
// (resources enabled, --repair asked) is refused as UNSUPPORTED_PLATFORM,
// not retryable, and the simulated SDK logs no command against the device.
func TestConfResReconcileOnAndroidIsRejectedBeforeAnyCommand(t *testing.T) {
	w := newWorld(t, resQuiet)
	logPath := w.simHome + "-cmds.log"
	w.setEnv("SIMLOCK_SIMSDK_COMMAND_LOG", logPath)
	w.mustRun("daemon", "start")
	l := w.leaseFor("reconciler", "--platform", "android", "--model", "pixel_6")
	if l.Device.Serial == "" {
		t.Fatalf("lease %+v has no serial", l)
	}
	before := len(w.commandLog(logPath))

	r := w.run("resources", "reconcile", l.LeaseID, "animations=disabled", "--repair", "--json")
	if r.code == 0 {
		t.Fatalf("reconcile on an Android lease was accepted:\n%s", r.stdout)
	}
	var refusal struct {
		Error struct {
			Code       string         `json:"code"`
			Retryable  bool           `json:"retryable"`
			NextAction string         `json:"nextAction"`
			Details    map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(lastLine(r.stderr)), &refusal); err != nil {
		t.Fatalf("stderr is not a JSON refusal: %v\n%s", err, r.stderr)
	}
	if e := refusal.Error; e.Code != "UNSUPPORTED_PLATFORM" || e.Retryable || e.Details["operation"] != "resources.reconcile" ||
		!strings.Contains(e.NextAction, "resources get") {
		t.Fatalf("refusal %+v", e)
	}
	for _, c := range w.commandLog(logPath)[before:] {
		if strings.Contains(c, l.Device.Serial) {
			t.Fatalf("the refused reconcile ran a command on the device: %s", c)
		}
	}
	// resources.get still reaches the emulator.
	if got, r := w.resources("get", l.LeaseID); r.code != 0 || got.Resources["animations"].State == "" {
		t.Fatalf("resources get after the refusal: exit %d %+v %s", r.code, got.Resources, r.stderr)
	}
}
