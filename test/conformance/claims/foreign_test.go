package claims

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// Reference §10 (transient-exclusive) and acceptance criterion 9: a
// sessionless device mutation cannot touch a device another owner claims.
// Homes A and B share one device root. B once held the device U (so B's
// registry knows it); now A holds U under a lease. B's `nuke --yes`, which
// destroys every device B manages, is refused on U by A's claim (and says
// so), and B's `cleanup` leaves U to A too: U still runs, A's lease still
// renews and execs, and the claim is still A's.
func TestClaimsASessionlessMutationSparesAForeignClaim(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/10.4", "claims/18.9")
	shared, err := os.MkdirTemp("", "slr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	cfg := sharedRootConfig(filepath.Join(shared, "ios"))
	a := harness.NewWorld(t, cfg)
	b := harness.NewWorld(t, cfg)
	harness.ShareHost(a, b)

	// B makes U, leases it once, and lets go (its idle shutdown clears the claim).
	lb, key := leaseIOS(b, "b")
	b.MustRun("release", lb.LeaseID)
	harness.Eventually(t, "B to shut U down and let go of its claim", 30*time.Second, func() bool {
		_, held := claimOf(a, key)
		return !held
	})
	// A takes U by name.
	var la lease
	a.JSON(&la, "lease", "--platform", "ios", "--device", lb.Device.UDID, "--detach", "--ttl", "10m", "--requester", "a", "--timeout", "60s")
	if la.Device.UDID != lb.Device.UDID {
		t.Fatalf("A leased %s, not U %s", la.Device.UDID, lb.Device.UDID)
	}
	harness.Eventually(t, "A's claim of U to name its lease", 20*time.Second, func() bool {
		c, ok := claimOf(a, key)
		return ok && c.OwnerHome == a.Home && c.LeaseID == la.LeaseID
	})

	var nuke struct {
		DestroyedDevices []string
		Failed           map[string]string
	}
	b.JSON(&nuke, "nuke", "--yes", "--json")
	if len(nuke.DestroyedDevices) != 0 || len(nuke.Failed) != 1 {
		t.Fatalf("B's nuke: %+v", nuke)
	}
	for _, why := range nuke.Failed {
		if !strings.Contains(why, key) || !strings.Contains(why, a.Home) {
			t.Fatalf("B's nuke failed on U for another reason: %s", why)
		}
	}
	b.MustRun("cleanup", "--json")

	c, ok := claimOf(a, key)
	if !ok || c.OwnerHome != a.Home || c.LeaseID != la.LeaseID || c.Classification != "live-owner" {
		t.Fatalf("after B's nuke and cleanup U's claim reads %+v (held %v)", c, ok)
	}
	a.MustRun("lease", "renew", la.LeaseID)
	if list := a.MustRun("exec", la.LeaseID, "--", "simctl", "list", "devices"); !strings.Contains(list, la.Device.UDID+") (Booted)") {
		t.Fatalf("U no longer runs for A:\n%s", list)
	}
}
