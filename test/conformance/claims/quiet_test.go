package claims

import (
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// Reference §7 item 7, §10 (require-owner), §4 item 5 and acceptance
// criterion 10: once a lease's claim is written, the commands bound to the
// lease (renew, exec, lease get and list, status) leave every file of the
// host registry unchanged. Ending the lease is a lifecycle transition: the
// device stays warm, and its claim becomes a transient one naming the
// command it is held for (§7 item 6), still apart from any lease (§4 item
// 1, §6 item 1).
func TestClaimsSessionBoundCommandsLeaveTheRegistryAlone(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/7.7", "claims/10.3", "claims/4.5", "claims/18.10", "claims/7.6", "claims/4.1", "claims/6.1")
	w := harness.NewWorld(t, quietConfig)
	l, key := leaseIOS(w, "a")
	// The registry settles once the background writer put the lease id on
	// the claim: two looks a moment apart agree.
	var before map[string]string
	harness.Eventually(t, "the host registry to settle", 20*time.Second, func() bool {
		a := registryFiles(t, w.HostDir)
		time.Sleep(300 * time.Millisecond)
		before = registryFiles(t, w.HostDir)
		return sameFiles(a, before) == ""
	})
	for i := 0; i < 3; i++ {
		w.MustRun("lease", "renew", l.LeaseID)
		w.MustRun("exec", l.LeaseID, "--", "simctl", "list", "devices")
		w.MustRun("lease", "get", l.LeaseID, "--json")
		w.MustRun("lease", "list", "--json")
		w.MustRun("status", "--json")
	}
	if d := sameFiles(before, registryFiles(t, w.HostDir)); d != "" {
		t.Fatalf("lease-bound commands wrote to the host registry: %s", d)
	}

	w.MustRun("release", l.LeaseID)
	harness.Eventually(t, "the warm device's claim to outlive its lease", 20*time.Second, func() bool {
		c, ok := claimOf(w, key)
		return ok && c.LeaseID == "" && c.Kind == "transient"
	})
	c, _ := claimOf(w, key)
	if c.Command == "" || c.Classification != "live-owner" || c.OwnerHome != w.Home {
		t.Fatalf("the warm device's claim: %+v", c)
	}
	t.Logf("a warm device is held as %s/%s", c.Kind, c.Command)
}
