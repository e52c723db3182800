package e2e

// Device claims (agent-device device ownership), issue 23: the deviations
// of the claims slice, each proved on the real binary and the simulated SDK.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/testhost"
)

// Reference, "Ownership states": `releasing + live owner` is "teardown in
// progress", to be refused "or retry after a bounded delay". A claim whose
// teardown hangs (the simulated SDK's shutdown never returns) reads
// releasing in `device status` once its release began, and `device
// release --wait 5s` gives up when its wait ends, answering a retryable
// DEVICE_IN_USE classified releasing, rather than running on.
func TestConfClaimsAHangingTeardownReadsReleasingAndTheWaitIsHonoured(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.setEnv("SIMLOCK_SIMSDK_FAULTS", "shutdown-hang")
	l, key, _ := w.leaseIOS()
	if l.LeaseID == "" {
		t.Fatal("no lease")
	}

	start := time.Now()
	r := w.run("device", "release", "--wait", "5s", string(key), "--json")
	took := time.Since(start)
	t.Logf("device release --wait 5s answered in %s: exit %d\n%s%s", took.Round(time.Millisecond), r.code, r.stdout, r.stderr)
	// The wait, plus the dial and one registry read: far below the daemon's
	// own two-minute settle bound.
	if took > testhost.Scale(25*time.Second) {
		t.Fatalf("device release --wait 5s ran for %s", took)
	}
	var refused inUse
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &refused); err != nil {
		t.Fatalf("the refusal %q: %v", r.stderr, err)
	}
	if r.code == 0 || refused.Error.Code != "DEVICE_IN_USE" || !refused.Error.Retryable ||
		refused.Error.Details.Classification != "releasing" || refused.Error.Details.DeviceKey != string(key) {
		t.Fatalf("a release whose teardown hangs answered %+v", refused)
	}
	st, held := w.claimOf(key)
	if !held || st.Class != hostreg.ClassReleasing {
		t.Fatalf("the claim of a hanging teardown: %+v (held %v)", st, held)
	}
	var status struct {
		Claims []claimView `json:"claims"`
	}
	w.json(&status, "device", "status", string(key), "--json")
	if len(status.Claims) != 1 || status.Claims[0].Classification != "releasing" || status.Claims[0].State != "releasing" {
		t.Fatalf("device status during a hanging teardown: %+v", status)
	}
	// The teardown hangs for good: end the daemon outright, so the world's
	// cleanup does not wait out its stop.
	ownKill(t, w.status().Daemon.PID)
}

// claimView is one claim of `device status --json`.
type claimView struct {
	DeviceKey      string `json:"deviceKey"`
	State          string `json:"state"`
	Classification string `json:"classification"`
}

// Reference, "Error contract": DEVICE_IN_USE carries "classification":
// "live-owner" for a live owner, the word `device status` prints for the
// same claim: one classification vocabulary on every surface.
func TestConfClaimsDeviceInUseAndDeviceStatusShareOneVocabulary(t *testing.T) {
	shared, err := os.MkdirTemp("", "slr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	cfg := sharedRootConfig(filepath.Join(shared, "ios"))
	a := newWorld(t, cfg)
	b := newWorld(t, cfg)
	for _, kv := range a.env {
		for _, k := range []string{"SIMLOCK_HOST_DIR=", "SIMLOCK_SIMSDK_HOME="} {
			if strings.HasPrefix(kv, k) {
				b.setEnv(strings.TrimSuffix(k, "="), strings.TrimPrefix(kv, k))
			}
		}
	}
	b.mustRun("daemon", "start")
	var la lease
	a.json(&la, "lease", "--platform", "ios", "--detach", "--requester", "a")

	r := b.run("lease", "--platform", "ios", "--device", la.Device.UDID, "--no-wait", "--detach", "--requester", "b", "--json")
	var refused inUse
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &refused); err != nil || r.code == 0 {
		t.Fatalf("B's lease of A's device: exit %d %q: %v", r.code, r.stderr, err)
	}
	var status struct {
		Claims []claimView `json:"claims"`
	}
	b.json(&status, "device", "status", refused.Error.Details.DeviceKey, "--json")
	if len(status.Claims) != 1 {
		t.Fatalf("device status %s: %+v", refused.Error.Details.DeviceKey, status)
	}
	if refused.Error.Code != "DEVICE_IN_USE" || refused.Error.Details.Classification != "live-owner" ||
		refused.Error.Details.Classification != status.Claims[0].Classification {
		t.Fatalf("DEVICE_IN_USE says %q, device status says %q", refused.Error.Details.Classification, status.Claims[0].Classification)
	}
	if strings.Contains(refused.Error.Details.Recovery.Command, "--stale") {
		t.Fatalf("a live owner's recovery is %q", refused.Error.Details.Recovery.Command)
	}
}
