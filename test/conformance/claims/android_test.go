package claims

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// Acceptance criterion 1 for Android, and §15: two homes sharing one AVD
// root cannot hold the same emulator. While A holds it, B's lease of it by
// AVD name is DEVICE_IN_USE, not retryable, naming A and the device's
// canonical key (`android:avd:<name>:<root>`, never the emulator's
// transport serial), with the command that releases it through A.
func TestClaimsTwoHomesNeverShareAnEmulator(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/18.1", "claims/15.1", "claims/6.3")
	shared, err := os.MkdirTemp("", "sla-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	root := filepath.Join(shared, "android")
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "drivers":{"android":{"root":%q}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`, root)
	a := harness.NewWorld(t, cfg)
	b := harness.NewWorld(t, cfg)
	harness.ShareHost(a, b)

	var la lease
	a.JSON(&la, "lease", "--platform", "android", "--detach", "--ttl", "10m", "--requester", "a")
	var dev struct {
		Device struct{ Name, Serial string } `json:"device"`
	}
	a.JSON(&dev, "lease", "get", la.LeaseID, "--json")
	avd := dev.Device.Name
	if !strings.HasPrefix(avd, "simlock-") {
		t.Fatalf("A's emulator: %+v", dev.Device)
	}
	key := "android:avd:" + avd + ":" + root
	harness.Eventually(t, "A's claim of "+key+" to name its lease", 20*time.Second, func() bool {
		c, ok := claimOf(a, key)
		return ok && c.LeaseID == la.LeaseID
	})
	if cs := claims(b, "--avd", avd); len(cs) != 1 || cs[0].DeviceKey != key || cs[0].OwnerHome != a.Home {
		t.Fatalf("device status --avd %s from B: %+v", avd, cs)
	}

	ref, _ := b.Refused("lease", "--platform", "android", "--device", avd, "--no-wait", "--detach", "--requester", "b", "--json")
	e, det := ref.Error, ref.Error.Details
	owner, _ := det["owner"].(map[string]any)
	recovery, _ := det["recovery"].(map[string]any)
	if e.Code != "DEVICE_IN_USE" || e.Retryable || det["reason"] == nil || det["classification"] != "live-owner" || det["deviceKey"] != key ||
		owner["home"] != a.Home || owner["leaseId"] != la.LeaseID || owner["daemonPid"] == nil || owner["daemonStartTime"] == "" {
		t.Fatalf("B's lease of A's emulator: %+v", e)
	}
	cmd, _ := recovery["command"].(string)
	if !strings.Contains(cmd, "--home "+a.Home) || !strings.Contains(cmd, key) || dev.Device.Serial == "" || strings.Contains(cmd, dev.Device.Serial) {
		t.Fatalf("the recovery command %q", cmd)
	}
	a.MustRun("lease", "renew", la.LeaseID)
}
