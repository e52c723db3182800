package resources

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// The iOS groups the reference adds to the first ones are real switches on
// a leased simulator: `resources groups` lists them for iOS, and
// `resources set` turning walletServices and familyServices off is proven
// by a later `resources get` (both disabled, screenTime, a neighbour, still
// enabled), with the launchctl writes naming the Wallet and Family jobs;
// turning them on again reads back enabled.
func TestConfResIOSServiceGroupsOfTheFullListAreControlled(t *testing.T) {
	harness.Proves(t, "resources/5.9")
	t.Parallel()
	w := harness.NewWorld(t, enabled)
	logPath := w.SimHome + "-cmds.log"
	w.Setenv("SIMLOCK_SIMSDK_COMMAND_LOG", logPath)
	w.MustRun("daemon", "start")
	ios := groupsOf(w)["ios"]
	for _, g := range []string{"familyServices", "screenTime", "appStoreServices", "mailServices", "calendarServices",
		"safariSync", "messagingMaintenance", "watchConnectivity", "carPlay", "walletServices", "businessServices"} {
		if !slices.Contains(ios, g) {
			t.Errorf("resources groups lists no iOS %s: %v", g, ios)
		}
	}
	l := leaseFor(w, "tuner", "--platform", "ios", "--model", "iPhone 16")
	before := len(commandLog(t, logPath))
	set, r := resources(w, "set", l.LeaseID, "walletServices=disabled", "familyServices=disabled")
	if r.Code != 0 || !set.Success || !slices.Equal(set.Changed, []string{"familyServices", "walletServices"}) {
		t.Fatalf("set: exit %d %+v\n%s", r.Code, set, r.Stderr)
	}
	writes := strings.Join(launchctlWrites(commandLog(t, logPath)[before:]), "\n")
	for _, label := range []string{"com.apple.passd", "com.apple.familycircled"} {
		if !strings.Contains(writes, "disable system/"+label) || !strings.Contains(writes, "bootout system/"+label) {
			t.Errorf("no disable and bootout of %s in:\n%s", label, writes)
		}
	}
	got, r := resources(w, "get", l.LeaseID)
	if r.Code != 0 {
		t.Fatalf("get: exit %d %s", r.Code, r.Stderr)
	}
	checkSnapshot(t, got, "ios", ios)
	if got.Resources["walletServices"].State != "disabled" || got.Resources["familyServices"].State != "disabled" ||
		got.Resources["screenTime"].State != "enabled" {
		t.Fatalf("read back: wallet %+v family %+v screenTime %+v", got.Resources["walletServices"], got.Resources["familyServices"], got.Resources["screenTime"])
	}
	if on, r := resources(w, "set", l.LeaseID, "walletServices=enabled", "familyServices=enabled"); r.Code != 0 || !on.Success {
		t.Fatalf("set back on: exit %d %+v\n%s", r.Code, on, r.Stderr)
	}
	if got, _ := resources(w, "get", l.LeaseID); got.Resources["walletServices"].State != "enabled" || got.Resources["familyServices"].State != "enabled" {
		t.Fatalf("read back after on: %+v %+v", got.Resources["walletServices"], got.Resources["familyServices"])
	}
}

// The Android controls the reference adds are real switches on a leased
// emulator: `resources groups` lists them for Android, and `resources set`
// turning digitalWellbeing and googleServicesFramework off is proven by a
// later `resources get` (both disabled, while googlePlayServices, now its
// own group, stays enabled), with a restore receipt that turns them back.
func TestConfResAndroidControlsOfTheFullListAreControlled(t *testing.T) {
	harness.Proves(t, "resources/8.5")
	t.Parallel()
	w := harness.NewWorld(t, enabled)
	w.MustRun("daemon", "start")
	android := groupsOf(w)["android"]
	for _, g := range []string{"contactsApp", "videoApp", "assistantApp", "digitalWellbeing", "accessibilityApps", "textToSpeech",
		"wallpaperApps", "healthConnect", "adServices", "onDevicePersonalization", "storeApp", "dialerApp", "messagesApp",
		"googlePlayServices", "googleServicesFramework"} {
		if !slices.Contains(android, g) {
			t.Errorf("resources groups lists no Android %s: %v", g, android)
		}
	}
	l := leaseFor(w, "tuner", "--platform", "android", "--model", "pixel_6")
	set, r := resources(w, "set", l.LeaseID, "digitalWellbeing=disabled", "googleServicesFramework=disabled")
	if r.Code != 0 || !set.Success || !slices.Equal(set.Changed, []string{"digitalWellbeing", "googleServicesFramework"}) ||
		len(set.Restore) == 0 || string(set.Restore) == "null" {
		t.Fatalf("set: exit %d %+v\n%s", r.Code, set, r.Stderr)
	}
	got, r := resources(w, "get", l.LeaseID)
	if r.Code != 0 {
		t.Fatalf("get: exit %d %s", r.Code, r.Stderr)
	}
	checkSnapshot(t, got, "android", android)
	if got.Resources["digitalWellbeing"].State != "disabled" || got.Resources["googleServicesFramework"].State != "disabled" ||
		got.Resources["googlePlayServices"].State != "enabled" {
		t.Fatalf("read back: wellbeing %+v gsf %+v gms %+v", got.Resources["digitalWellbeing"],
			got.Resources["googleServicesFramework"], got.Resources["googlePlayServices"])
	}
	receipt := filepath.Join(t.TempDir(), "receipt.json")
	if err := os.WriteFile(receipt, set.Restore, 0o600); err != nil {
		t.Fatal(err)
	}
	if back, r := resources(w, "set", l.LeaseID, "--restore", receipt); r.Code != 0 || !back.Success {
		t.Fatalf("restore: exit %d %+v\n%s", r.Code, back, r.Stderr)
	}
	if got, _ := resources(w, "get", l.LeaseID); got.Resources["digitalWellbeing"].State != "enabled" || got.Resources["googleServicesFramework"].State != "enabled" {
		t.Fatalf("after the restore: %+v %+v", got.Resources["digitalWellbeing"], got.Resources["googleServicesFramework"])
	}
}
