package claims

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Reference §8 rows "releasing + live owner" and "releasing + dead owner",
// and acceptance criteria 7 and 14: while the owner's teardown hangs, the
// claim reads releasing and `--stale` from another home refuses it; once
// the owner is dead the same claim is orphaned, and `--stale` shuts the
// device down on the platform and clears it.
func TestClaimsAnInterruptedTeardownIsStaleRecoverable(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/8.3", "claims/8.4", "claims/18.7", "claims/18.14", "claims/5.4")
	a := harness.NewWorld(t, quietConfig)
	a.Setenv("SIMLOCK_SIMSDK_FAULTS", "shutdown-hang")
	_, key := leaseIOS(a, "a")
	pid := daemonPID(a)
	b := harness.NewWorld(t, "")
	harness.ShareHost(a, b)

	ref, _ := a.Refused("device", "release", "--wait", "3s", key, "--json")
	if ref.Error.Code != "DEVICE_IN_USE" || !ref.Error.Retryable || ref.Error.Details["classification"] != "releasing" {
		t.Fatalf("a release whose teardown hangs: %+v", ref.Error)
	}
	ref, _ = b.Refused("device", "release", "--stale", key, "--json")
	if ref.Error.Code != "DEVICE_IN_USE" || ref.Error.Retryable {
		t.Fatalf("--stale against a live owner's teardown: %+v", ref.Error)
	}
	if c, ok := claimOf(b, key); !ok || c.State != "releasing" || c.Classification != "releasing" {
		t.Fatalf("a live owner's hanging teardown reads %+v (held %v)", c, ok)
	}

	kill(t, pid)
	c, ok := claimOf(b, key)
	if !ok || c.State != "releasing" || c.Classification != "orphaned" || !strings.Contains(c.RecoveryCommand, "--stale") {
		t.Fatalf("the teardown of a dead owner reads %+v (held %v)", c, ok)
	}
	var out struct {
		Released []struct {
			DeviceKey, Via          string
			DeviceShutDown, Cleared bool
		}
	}
	if err := json.Unmarshal([]byte(b.MustRun("device", "release", "--stale", key, "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Released) != 1 || out.Released[0].Via != "stale" || !out.Released[0].DeviceShutDown || !out.Released[0].Cleared {
		t.Fatalf("--stale of an interrupted teardown: %+v", out)
	}
	if c, ok := claimOf(b, key); ok {
		t.Fatalf("the claim outlived --stale: %+v", c)
	}
}
