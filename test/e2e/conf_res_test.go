package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
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

// resSlowProbeConfig keeps the daemon's periodic work quiet and gives the
// list a budget long enough to wait through a lease.
const resSlowProbeConfig = `{"health":{"intervalMs":600000},"capacity":{"host":{"pollIntervalMs":600000}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000},
 "inventory":{"listBudgetMs":12000,"bootedBudgetMs":500}}`

// resProbeMs is the slow device probe: longer than either budget.
const resProbeMs = 15000

func (w *world) slowProbes(logPath string) int {
	n := 0
	for _, c := range w.commandLog(logPath) {
		if strings.Contains(c, "simctl") && strings.Contains(c, " list devices") {
			n++
		}
	}
	return n
}

func checkSuperseded(t *testing.T, what string, out listOut) {
	t.Helper()
	e := out.Enrichment
	if e == nil || e.Complete || e.Code != "superseded" || !e.Retryable || e.RetryAfterMs != 1000 {
		t.Fatalf("%s: enrichment %+v, want superseded with a 1000 ms retry hint", what, e)
	}
}

// Device resources, inventory invalidation: a provision invalidates the
// listing, and an obsolete read reports "superseded" with retry hints
// "rather than a timeout". A `simlock list` waiting on a slow device probe
// is overtaken by a device made meanwhile (a lease provisions one): it
// answers before its budget, superseded, never timeout.
func TestConfResListOvertakenWhileWaitingIsSuperseded(t *testing.T) {
	w := newWorld(t, resSlowProbeConfig)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=slow-probe="+strconv.Itoa(resProbeMs), "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")

	before := w.slowProbes(logPath)
	var stdout strings.Builder
	list := w.cmd("list", "--json")
	list.Stdout = &stdout
	start := time.Now()
	if err := list.Start(); err != nil {
		t.Fatal(err)
	}
	// The list's shared probe is under way before the device changes.
	eventually(t, "the list's device probe", 10*time.Second, func() bool { return w.slowProbes(logPath) > before })
	w.leaseFor("changer", "--platform", "ios")
	if err := list.Wait(); err != nil {
		t.Fatalf("list: %v", err)
	}
	took := time.Since(start)
	var out listOut
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
		t.Fatalf("list printed %q: %v", stdout.String(), err)
	}
	t.Logf("list answered in %s: %+v", took, out.Enrichment)
	checkSuperseded(t, "the overtaken list", out)
}

// Device resources, inventory invalidation, as above, for the caller told
// to come back: a listing answered "timeout" with its stage pending, whose
// shared read a device change then made obsolete, is retried as the hint
// says; the retry is told the read was superseded (and a fresh one runs),
// not handed another plain timeout.
func TestConfResRetryOfAnOvertakenListingIsSuperseded(t *testing.T) {
	w := newWorld(t, resSlowProbeConfig)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=slow-probe="+strconv.Itoa(resProbeMs), "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")

	var first listOut
	w.json(&first, "list", "--booted", "--json")
	if e := first.Enrichment; e == nil || e.Code != "timeout" || !contains(e.Pending, "ios.devices") {
		t.Fatalf("first list: %+v, want a timeout with ios.devices pending", e)
	}
	w.leaseFor("changer", "--platform", "ios")
	var retry listOut
	w.json(&retry, "list", "--booted", "--json")
	checkSuperseded(t, "the retry after the change", retry)
	if !contains(retry.Enrichment.Pending, "ios.devices") {
		t.Fatalf("retry: %+v, want ios.devices pending (a fresh read runs)", retry.Enrichment)
	}
}

// Device resources: live state "is grouped under runtime", and the legacy
// aliases were removed. On every surface that carries a device (the grant,
// status, list), a leased device has runtime.lifecycle and runtime.lease
// and no top-level state or leaseId; an idle one has lease null.
func TestConfResDeviceLiveStateOnlyUnderRuntime(t *testing.T) {
	w := newWorld(t, "")
	var grant struct {
		LeaseID string         `json:"leaseId"`
		Device  map[string]any `json:"device"`
	}
	w.json(&grant, "lease", "--platform", "ios", "--detach", "--requester", "aliases")
	check := func(where string, d map[string]any, lifecycle string, lease any) {
		t.Helper()
		for _, alias := range []string{"state", "leaseId"} {
			if v, ok := d[alias]; ok {
				t.Errorf("%s: top-level %s = %v duplicates the runtime", where, alias, v)
			}
		}
		rt, _ := d["runtime"].(map[string]any)
		if rt == nil || rt["lifecycle"] != lifecycle || rt["lease"] != lease {
			t.Errorf("%s: runtime %v, want lifecycle %s and lease %v", where, rt, lifecycle, lease)
		}
		if _, ok := rt["lease"]; !ok {
			t.Errorf("%s: runtime.lease is missing", where)
		}
	}
	check("the grant", grant.Device, "leased", grant.LeaseID)
	var views struct {
		Devices []map[string]any `json:"devices"`
	}
	w.json(&views, "status", "--json")
	if len(views.Devices) != 1 {
		t.Fatalf("status devices %v", views.Devices)
	}
	check("status", views.Devices[0], "leased", grant.LeaseID)
	views.Devices = nil
	w.json(&views, "list", "--json")
	check("list", views.Devices[0], "leased", grant.LeaseID)

	w.mustRun("release", grant.LeaseID)
	eventually(t, "the released device to be ready", 30*time.Second, func() bool {
		views.Devices = nil
		w.json(&views, "list", "--json")
		rt, _ := views.Devices[0]["runtime"].(map[string]any)
		return rt["lifecycle"] == "ready"
	})
	check("list after the release", views.Devices[0], "ready", nil)
}

// Device resources, the MCP write tool: an answer that does not prove the
// requested state is a tool error (RESOURCE_PROFILE_UNPROVEN), as the CLI
// exits 1, and it still carries the whole evidence under details.result,
// where the after-write snapshot, which saw the group still enabled, lists
// it as a contradiction (conformance: resources/5.21, 5.24).
func TestConfResMCPUnprovenSetIsAToolErrorWithItsEvidence(t *testing.T) {
	w := newWorld(t, `{"resources":{"enabled":true},"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=launchctl-write-noop")
	w.mustRun("daemon", "start")
	a := w.mcpWith(t, "--enable-tool", "set_device_resources")
	text, isErr := a.call("lease_simulator", map[string]any{"platform": "ios", "model": "iPhone 16"}, nil)
	if isErr {
		t.Fatal(text)
	}
	id := leaseIDIn(t, text)
	text, isErr = a.call("set_device_resources", map[string]any{"leaseId": id, "resources": map[string]any{"animations": "disabled"}}, nil)
	var out struct {
		Error struct {
			Code    string `json:"code"`
			Details struct {
				Unproven []string `json:"unproven"`
				Result   struct {
					Success        bool     `json:"success"`
					Changed        []string `json:"changed"`
					Contradictions []string `json:"observationContradictions"`
					Requested      map[string]string
					Resources      map[string]struct {
						State string `json:"state"`
					} `json:"resources"`
				} `json:"result"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil || !isErr {
		t.Fatalf("an unproven set answered isError=%v: %s", isErr, text)
	}
	e := out.Error
	if e.Code != "RESOURCE_PROFILE_UNPROVEN" || len(e.Details.Unproven) != 1 || e.Details.Unproven[0] != "animations" ||
		e.Details.Result.Success || e.Details.Result.Resources["animations"].State != "unknown" ||
		len(e.Details.Result.Changed) != 1 || e.Details.Result.Requested["animations"] != "disabled" ||
		len(e.Details.Result.Contradictions) != 1 || e.Details.Result.Contradictions[0] != "animations" {
		t.Fatalf("the tool error does not carry the evidence: %s", text)
	}
	// A write the device proves is an ordinary answer.
	w2 := newWorld(t, `{"resources":{"enabled":true},"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
	w2.mustRun("daemon", "start")
	b := w2.mcpWith(t, "--enable-tool", "set_device_resources")
	text, isErr = b.call("lease_simulator", map[string]any{"platform": "ios", "model": "iPhone 16"}, nil)
	if isErr {
		t.Fatal(text)
	}
	if text, isErr = b.call("set_device_resources", map[string]any{"leaseId": leaseIDIn(t, text), "resources": map[string]any{"animations": "disabled"}}, nil); isErr {
		t.Fatalf("a proven set is a tool error: %s", text)
	}
}
