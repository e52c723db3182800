package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// describeConfig keeps the daemon's own periodic work (health, cleanup,
// the host's external-device count) from listing devices during the test,
// so the simulated SDK's command log shows only what the inventory reads
// start; the list budget is short and the slow probe well beyond it.
const describeConfig = `{"health":{"intervalMs":600000},"capacity":{"host":{"pollIntervalMs":600000}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000},
 "inventory":{"listBudgetMs":500}}`

// slowProbeMs is far past the list's 5 s bound below, so a list that
// waited for the probe cannot pass however loaded the machine.
const slowProbeMs = 10000

type listOut struct {
	Devices []struct {
		ID         string          `json:"id"`
		FormFactor string          `json:"formFactor"`
		RuntimeID  *string         `json:"runtimeId"`
		Display    json.RawMessage `json:"display"`
		Runtime    struct {
			Lifecycle string  `json:"lifecycle"`
			Readiness *string `json:"readiness"`
			Lease     *string `json:"lease"`
		} `json:"runtime"`
	} `json:"devices"`
	Enrichment *struct {
		Complete     bool     `json:"complete"`
		Pending      []string `json:"pending"`
		Retryable    bool     `json:"retryable"`
		RetryAfterMs int64    `json:"retryAfterMs"`
		Code         string   `json:"code"`
	} `json:"enrichment"`
}

func (w *world) commandLog(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		w.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// `simlock list --json` under a slow device probe answers within its
// budget with what the registry knows and an incomplete enrichment; the
// probe goes on in the background, and a call after it finished is
// complete and starts no new SDK process.
func TestListAnswersWithinBudgetUnderASlowProbe(t *testing.T) {
	w := newWorld(t, describeConfig)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=slow-probe="+strconv.Itoa(slowProbeMs), "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")

	start := time.Now()
	var first listOut
	w.json(&first, "list", "--json")
	took := time.Since(start)
	t.Logf("list under a %d ms probe answered in %s (budget 500 ms)", slowProbeMs, took)
	// No wall-clock bound here: a loaded machine may take seconds to start
	// the CLI. That list answered at its budget, not after the probe, is
	// the incomplete enrichment with a timeout code below: a list that
	// waited for the probe would be complete.
	e := first.Enrichment
	if e == nil || e.Complete || !e.Retryable || e.RetryAfterMs != 1000 || e.Code != "timeout" || !contains(e.Pending, "ios.devices") {
		t.Fatalf("enrichment %+v, want incomplete with ios.devices pending and a 1000 ms retry hint", e)
	}
	if len(first.Devices) != 1 || first.Devices[0].ID != l.Device.ID || first.Devices[0].Runtime.Readiness != nil ||
		first.Devices[0].Runtime.Lifecycle != "leased" || first.Devices[0].FormFactor != "phone" || first.Devices[0].RuntimeID == nil {
		t.Fatalf("devices %+v: want the leased phone with its facts and readiness still null", first.Devices)
	}
	before := w.commandLog(logPath)

	// Retry as the hint says until the shared probe has finished: every
	// call joins it, none starts another.
	var done listOut
	eventually(t, "a complete list", slowProbeMs*time.Millisecond+20*time.Second, func() bool {
		done = listOut{}
		w.json(&done, "list", "--json")
		return done.Enrichment != nil && done.Enrichment.Complete
	})
	if r := done.Devices[0].Runtime.Readiness; r == nil || *r != "running" {
		t.Fatalf("readiness after the probe: %v, want running", r)
	}
	var again listOut
	w.json(&again, "list", "--json")
	if again.Enrichment == nil || !again.Enrichment.Complete {
		t.Fatalf("second call after the probe: %+v", again.Enrichment)
	}
	after := w.commandLog(logPath)
	if len(after) != len(before) {
		t.Fatalf("the retries started SDK processes:\n%s", strings.Join(after[len(before):], "\n"))
	}
	probes := 0
	for _, c := range after {
		if strings.Contains(c, "simctl") && strings.Contains(c, " list devices") {
			probes++
		}
	}
	t.Logf("device probes in the whole run: %d", probes)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Over the real drivers and the simulated SDK, every view carries the
// description: every key present, facts the SDK states filled in (the
// Android fold profile's hinge makes it foldable, its screen and image
// come from the AVD), and what nobody states null.
func TestDescriptionOverTheRealDriversStatesEveryKey(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":2}}}`)
	var li, la lease
	w.json(&li, "lease", "--platform", "ios", "--detach", "--requester", "ios-job")
	w.json(&la, "lease", "--platform", "android", "--model", "pixel_fold", "--detach", "--requester", "android-job")
	var out struct {
		Devices    []map[string]any `json:"devices"`
		Enrichment map[string]any   `json:"enrichment"`
	}
	w.json(&out, "list", "--json")
	if out.Enrichment["complete"] != true {
		t.Fatalf("enrichment %v", out.Enrichment)
	}
	keys := []string{"id", "platform", "model", "modelIdentifier", "osVersion", "runtimeId", "formFactor", "display", "image", "runtime"}
	byPlatform := map[string]map[string]any{}
	for _, d := range out.Devices {
		for _, k := range keys {
			if _, ok := d[k]; !ok {
				t.Errorf("%v: key %q missing", d["platform"], k)
			}
		}
		rt, _ := d["runtime"].(map[string]any)
		for _, k := range []string{"lifecycle", "readiness", "lease", "locked", "orientation"} {
			if _, ok := rt[k]; !ok {
				t.Errorf("%v: runtime.%s missing", d["platform"], k)
			}
		}
		byPlatform[d["platform"].(string)] = d
	}
	ios, android := byPlatform["ios"], byPlatform["android"]
	if ios == nil || android == nil {
		t.Fatalf("devices %v", out.Devices)
	}
	if ios["formFactor"] != "phone" || ios["display"] != nil || ios["image"] != nil || ios["modelIdentifier"] == nil || ios["runtimeId"] == nil {
		t.Errorf("ios description %v", ios)
	}
	if rt := ios["runtime"].(map[string]any); rt["lease"] != li.LeaseID || rt["readiness"] != "running" || rt["locked"] != nil || rt["orientation"] != nil {
		t.Errorf("ios runtime %v", rt)
	}
	disp, _ := android["display"].(map[string]any)
	img, _ := android["image"].(map[string]any)
	if android["formFactor"] != "foldable" || android["modelIdentifier"] != "pixel_fold" || disp["widthPx"] == nil || disp["density"] == nil || disp["scale"] != nil {
		t.Errorf("android description %v", android)
	}
	if img["path"] == nil || img["basedOn"] != android["runtimeId"] || !strings.HasPrefix(fmt.Sprint(img["target"]), "android-") {
		t.Errorf("android image %v", img)
	}
	// The grant carries the same description.
	var grant struct {
		Device map[string]any `json:"device"`
	}
	w.json(&grant, "lease", "renew", la.LeaseID)
	if grant.Device["formFactor"] != "foldable" || grant.Device["image"] == nil {
		t.Errorf("grant's device %v", grant.Device)
	}
}
