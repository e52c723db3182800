package claims

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Reference §5 (`device status`, with and without selectors), §9 item 1,
// §14 item 1 and acceptance criterion 3: a third home, which never started
// a daemon, reads another home's claim (owner home, pid and start
// identity, lease, classification, the exact recovery command), narrowed by
// each selector; it starts no daemon and the host registry's files are
// unchanged. The registry is user-private and holds no credential of the
// owner (§4 item 6).
func TestClaimsAThirdHomeInspectsWithoutADaemon(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/5.1", "claims/5.2", "claims/6.2", "claims/7.1", "claims/7.2",
		"claims/9.1", "claims/10.2", "claims/14.1", "claims/14.2", "claims/18.3", "claims/18.13", "claims/4.6")
	a := harness.NewWorld(t, quietConfig)
	l, key := leaseIOS(a, "a")
	pid := daemonPID(a)
	c := harness.NewWorld(t, "")
	harness.ShareHost(a, c)

	before := registryFiles(t, a.HostDir)
	all := claims(c)
	if len(all) != 1 {
		t.Fatalf("device status from a third home: %+v", all)
	}
	got := all[0]
	if got.DeviceKey != key || got.Platform != "ios" || got.OwnerHome != a.Home || got.OwnerPID != pid || got.OwnerStartTime == "" ||
		got.Kind != "lease" || got.LeaseID != l.LeaseID || got.State != "claimed" || got.Classification != "live-owner" {
		t.Fatalf("the claim as a third home reads it: %+v", got)
	}
	if want := "simlock --home " + a.Home + " device release " + key; got.RecoveryCommand != want {
		t.Fatalf("recovery command %q, want %q", got.RecoveryCommand, want)
	}
	// Each selector narrows to the device or away from it.
	for _, sel := range [][]string{{key}, {"--udid", strings.ToLower(l.Device.UDID)}, {"--platform", "ios"}, {"--home", a.Home}} {
		if cs := claims(c, sel...); len(cs) != 1 || cs[0].DeviceKey != key {
			t.Errorf("device status %v: %+v", sel, cs)
		}
	}
	for _, sel := range [][]string{{"--platform", "android"}, {"--home", c.Home}, {"--avd", "no-such-avd"}} {
		if cs := claims(c, sel...); len(cs) != 0 {
			t.Errorf("device status %v lists %+v", sel, cs)
		}
	}
	human := c.MustRun("device", "status", key)
	for _, want := range []string{key, a.Home, l.LeaseID, "live-owner", got.RecoveryCommand} {
		if !strings.Contains(human, want) {
			t.Errorf("device status for people lacks %q:\n%s", want, human)
		}
	}
	if d := sameFiles(before, registryFiles(t, a.HostDir)); d != "" {
		t.Errorf("inspection changed the host registry: %s", d)
	}
	for _, f := range []string{"simlock.sock", "daemon.json", "simlock.db"} {
		if _, err := os.Stat(filepath.Join(c.Home, f)); err == nil {
			t.Errorf("inspection left %s in the third home: it started a daemon", f)
		}
	}

	// User-private, and no credential in any record.
	if fi, err := os.Stat(a.HostDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the host registry directory: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(a.HostDir, "host.db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("host.db: %v %v", fi.Mode(), err)
	}
	tok, err := os.ReadFile(filepath.Join(a.Home, "admin.token"))
	if err != nil || len(strings.TrimSpace(string(tok))) < 16 {
		t.Fatalf("the owner's admin.token: %q %v", tok, err)
	}
	secret := strings.TrimSpace(string(tok))
	filepath.WalkDir(a.HostDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), secret) {
				t.Errorf("%s holds the owner's admin credential", path)
			}
		}
		return nil
	})
	if out := c.MustRun("device", "status", "--json"); strings.Contains(out, secret) {
		t.Error("device status prints the owner's admin credential")
	}
}

// Reference §9 items 2 and 3: a list of known daemons proves nothing about
// who owns a device. With every home record of the host registry gone
// (the records `host repair` finds homes by), the live owner is still
// live-owner, `--stale` from another home still refuses it, and its lease
// still renews.
func TestClaimsAMissingHomeRecordIsNoProofOfAbsence(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/9.2", "claims/9.3")
	a := harness.NewWorld(t, quietConfig)
	l, key := leaseIOS(a, "a")
	c := harness.NewWorld(t, "")
	harness.ShareHost(a, c)
	recs, _ := filepath.Glob(filepath.Join(a.HostDir, "homes", "*"))
	if len(recs) == 0 {
		t.Fatalf("no home records under %s", a.HostDir)
	}
	for _, r := range recs {
		if err := os.Remove(r); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := claimOf(c, key); !ok || got.Classification != "live-owner" {
		t.Fatalf("with no home records the claim reads %+v (held %v)", got, ok)
	}
	ref, _ := c.Refused("device", "release", "--stale", key, "--json")
	if ref.Error.Code != "DEVICE_IN_USE" || ref.Error.Retryable {
		t.Fatalf("--stale against a live owner with no home record: %+v", ref.Error)
	}
	a.MustRun("lease", "renew", l.LeaseID)
	if got, ok := claimOf(c, key); !ok || got.LeaseID != l.LeaseID || got.Classification != "live-owner" {
		t.Fatalf("after the refused --stale the claim reads %+v (held %v)", got, ok)
	}
}
