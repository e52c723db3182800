package resources

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// quiet keeps the daemon's periodic work (health, cleanup, the host's
// external-device count) from running SDK commands during a test, so the
// simulated SDK's command log shows only what the call under test ran.
const quiet = `{"health":{"intervalMs":600000},"capacity":{"host":{"pollIntervalMs":600000}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

// enabled is quiet with resources.set and reconcile allowed on every lease.
const enabled = `{"resources":{"enabled":true},"health":{"intervalMs":600000},"capacity":{"host":{"pollIntervalMs":600000}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

type lease struct {
	LeaseID string `json:"leaseId"`
	Device  struct {
		ID, UDID, Serial string
	} `json:"device"`
}

func leaseFor(w *harness.World, requester string, args ...string) lease {
	w.T.Helper()
	var l lease
	w.JSON(&l, append([]string{"lease", "--detach", "--ttl", "10m", "--requester", requester}, args...)...)
	return l
}

type observation struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

type drift struct {
	MissingRequested []string `json:"missingRequested"`
	OwnedExtra       []string `json:"ownedExtra"`
	Unsupported      []string `json:"unsupported"`
	CommandFailure   []string `json:"commandFailure"`
}

// answer is a resources.* result as `simlock resources ... --json` prints it.
type answer struct {
	DeviceID     string                 `json:"deviceId"`
	Platform     string                 `json:"platform"`
	Requested    map[string]string      `json:"requested"`
	Resources    map[string]observation `json:"resources"`
	Observed     map[string]observation `json:"observed"`
	Services     []json.RawMessage      `json:"services"`
	Changed      []string               `json:"changed"`
	Verification string                 `json:"verification"`
	Success      bool                   `json:"success"`
	Drift        *drift                 `json:"drift"`
	FinalDrift   *drift                 `json:"finalDrift"`
	Restore      json.RawMessage        `json:"restore"`
}

// resources runs `simlock resources ARGS --json` and decodes what it printed
// on stdout (a result is printed even when the command exits 1).
func resources(w *harness.World, args ...string) (answer, harness.Result) {
	w.T.Helper()
	r := w.Run(append([]string{"resources"}, append(args, "--json")...)...)
	var a answer
	if r.Stdout != "" {
		if err := json.Unmarshal([]byte(r.Stdout), &a); err != nil {
			w.T.Fatalf("resources %v printed %q: %v", args, r.Stdout, err)
		}
	}
	return a, r
}

// groupsOf is the catalogue `simlock resources groups --json` prints, by
// platform.
func groupsOf(w *harness.World) map[string][]string {
	w.T.Helper()
	var out struct {
		Groups []struct {
			Name      string   `json:"name"`
			Platforms []string `json:"platforms"`
		} `json:"groups"`
	}
	w.JSON(&out, "resources", "groups", "--json")
	by := map[string][]string{}
	for _, g := range out.Groups {
		for _, p := range g.Platforms {
			by[p] = append(by[p], g.Name)
		}
	}
	return by
}

func commandLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// launchctlWrites are the launchctl commands among lines that change
// something (an override or a job).
func launchctlWrites(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, "launchctl") {
			continue
		}
		for _, verb := range []string{" disable ", " enable ", " bootout ", " bootstrap "} {
			if strings.Contains(l, verb) {
				out = append(out, l)
			}
		}
	}
	return out
}

var states = []string{"enabled", "disabled", "unsupported", "unknown"}

// checkSnapshot holds a read-only snapshot to the reporting rules: every
// group of the platform's catalogue is a key, each with one of the four
// states, an unsupported one saying why, and no restore receipt.
func checkSnapshot(t *testing.T, got answer, platform string, catalogue []string) {
	t.Helper()
	if got.Platform != platform {
		t.Errorf("platform %q, want %q", got.Platform, platform)
	}
	for _, g := range catalogue {
		o, ok := got.Resources[g]
		if !ok {
			t.Errorf("%s snapshot lacks the core key %s: %v", platform, g, got.Resources)
			continue
		}
		if !slices.Contains(states, o.State) {
			t.Errorf("%s: state %q is none of %v", g, o.State, states)
		}
		if o.State == "unsupported" && o.Reason == "" {
			t.Errorf("%s is unsupported with no reason", g)
		}
	}
	for g := range got.Resources {
		if !slices.Contains(catalogue, g) {
			t.Errorf("%s snapshot has %q, a key of no %s group", platform, g, platform)
		}
	}
	if len(got.Restore) > 0 && string(got.Restore) != "null" {
		t.Errorf("a read-only snapshot carries a restore receipt: %s", got.Restore)
	}
}

// An iOS simulator's `resources get` is a complete read-only snapshot keyed
// by logical group: every iOS group of the catalogue is present whatever
// the runtime ships, with one of the four states (backgroundSync and
// icloudSync unsupported, with a reason), the platform named "ios", and no
// launchctl write in the simulated SDK's command log. A device listing
// carries no resource snapshot.
func TestConfResIOSSnapshotIsCompleteReadOnlyAndNotInListings(t *testing.T) {
	harness.Proves(t, "resources/1.20", "resources/3.1", "resources/3.2", "resources/4.1", "resources/4.4", "resources/5.8", "resources/5.19")
	t.Parallel()
	w := harness.NewWorld(t, quiet)
	logPath := w.SimHome + "-cmds.log"
	w.Setenv("SIMLOCK_SIMSDK_COMMAND_LOG", logPath)
	w.MustRun("daemon", "start")
	l := leaseFor(w, "observer", "--platform", "ios", "--model", "iPhone 16")
	before := len(commandLog(t, logPath))

	got, r := resources(w, "get", l.LeaseID)
	if r.Code != 0 {
		t.Fatalf("resources get: exit %d %s", r.Code, r.Stderr)
	}
	checkSnapshot(t, got, "ios", groupsOf(w)["ios"])
	for _, g := range []string{"backgroundSync", "icloudSync"} {
		if got.Resources[g].State != "unsupported" {
			t.Errorf("%s is %+v on iOS, want unsupported", g, got.Resources[g])
		}
	}
	if got.Resources["animations"].State != "enabled" {
		t.Errorf("animations %+v on a fresh simulator, want enabled (nothing is off by default)", got.Resources["animations"])
	}
	if len(got.Changed) != 0 {
		t.Errorf("a read reports changes: %v", got.Changed)
	}
	if w := launchctlWrites(commandLog(t, logPath)[before:]); len(w) != 0 {
		t.Errorf("resources get wrote: %q", w)
	}

	var list struct {
		Devices []map[string]any `json:"devices"`
	}
	w.JSON(&list, "list", "--json")
	if len(list.Devices) == 0 {
		t.Fatal("list shows no device")
	}
	for _, d := range list.Devices {
		if _, ok := d["resources"]; ok {
			t.Errorf("a listed device carries a resource snapshot: %v", d["resources"])
		}
	}
}

// An Android emulator's `resources get` is the same kind of snapshot: every
// Android group of the catalogue present (the common ones the emulator has
// no control for unsupported with a reason), the platform named "android",
// and no restore receipt, since nothing was written.
func TestConfResAndroidSnapshotIsCompleteAndReadOnly(t *testing.T) {
	harness.Proves(t, "resources/1.20", "resources/3.1", "resources/3.2", "resources/4.1")
	t.Parallel()
	w := harness.NewWorld(t, quiet)
	w.MustRun("daemon", "start")
	l := leaseFor(w, "observer", "--platform", "android", "--model", "pixel_6")
	got, r := resources(w, "get", l.LeaseID)
	if r.Code != 0 {
		t.Fatalf("resources get: exit %d %s", r.Code, r.Stderr)
	}
	checkSnapshot(t, got, "android", groupsOf(w)["android"])
	for _, g := range []string{"wallpaperRendering", "widgets", "liveActivities"} {
		if got.Resources[g].State != "unsupported" {
			t.Errorf("%s is %+v on Android, want unsupported", g, got.Resources[g])
		}
	}
}

// The catalogue splits the groups by platform: the six common ones on both,
// googlePlayServices on Android only, icloudSync and photoAnalysis on iOS
// only.
func TestConfResCatalogueSplitsTheGroupsByPlatform(t *testing.T) {
	harness.Proves(t, "resources/2.1")
	t.Parallel()
	w := harness.NewWorld(t, "")
	by := groupsOf(w)
	for _, g := range []string{"backgroundSync", "searchIndexing", "animations", "wallpaperRendering", "widgets", "liveActivities"} {
		if !slices.Contains(by["ios"], g) || !slices.Contains(by["android"], g) {
			t.Errorf("common group %s: ios %v android %v", g, by["ios"], by["android"])
		}
	}
	if !slices.Contains(by["android"], "googlePlayServices") || slices.Contains(by["ios"], "googlePlayServices") {
		t.Errorf("googlePlayServices should be Android's only: %v", by)
	}
	for _, g := range []string{"icloudSync", "photoAnalysis"} {
		if !slices.Contains(by["ios"], g) || slices.Contains(by["android"], g) {
			t.Errorf("%s should be iOS's only: %v", g, by)
		}
	}
}

// A profile asked for at lease time is recorded like any other write: with
// the standalone tuning off, a lease asked with two groups off gets them
// verified, and a report-only reconcile naming one of them sees the other
// as an owned extra (no write issued, success false); releasing owned
// extras turns it back on and succeeds.
func TestConfResLeaseProfileWritesAreOwnedAndReconciled(t *testing.T) {
	harness.Proves(t, "resources/5.3", "resources/6.4", "resources/6.5", "resources/6.9")
	t.Parallel()
	w := harness.NewWorld(t, quiet)
	logPath := w.SimHome + "-cmds.log"
	w.Setenv("SIMLOCK_SIMSDK_COMMAND_LOG", logPath)
	w.MustRun("daemon", "start")
	var grant struct {
		LeaseID   string `json:"leaseId"`
		Resources *answer
	}
	w.JSON(&grant, "lease", "--platform", "ios", "--model", "iPhone 16", "--resources", "animations=disabled,widgets=disabled",
		"--detach", "--ttl", "10m", "--requester", "profiled")
	if grant.Resources == nil || !grant.Resources.Success || grant.Resources.Resources["widgets"].State != "disabled" {
		t.Fatalf("the grant's resources %+v", grant.Resources)
	}

	before := len(commandLog(t, logPath))
	rec, r := resources(w, "reconcile", grant.LeaseID, "animations=disabled")
	if rec.Drift == nil || !slices.Equal(rec.Drift.OwnedExtra, []string{"widgets"}) || len(rec.Drift.MissingRequested) != 0 || rec.Success || r.Code == 0 {
		t.Fatalf("report-only reconcile: exit %d %+v drift %+v\n%s", r.Code, rec, rec.Drift, r.Stderr)
	}
	if w := launchctlWrites(commandLog(t, logPath)[before:]); len(w) != 0 {
		t.Fatalf("a report-only reconcile wrote %q", w)
	}

	rec, r = resources(w, "reconcile", grant.LeaseID, "animations=disabled", "--release-owned-extras")
	if r.Code != 0 || !rec.Success || rec.Resources["animations"].State != "disabled" {
		t.Fatalf("reconcile --release-owned-extras: exit %d %+v final %+v\n%s", r.Code, rec, rec.FinalDrift, r.Stderr)
	}
	got, _ := resources(w, "get", grant.LeaseID)
	if got.Resources["widgets"].State != "enabled" {
		t.Fatalf("widgets %+v after releasing the owned extra", got.Resources["widgets"])
	}
	// A second reconcile finds no drift and runs no write.
	before = len(commandLog(t, logPath))
	harness.Eventually(t, "a clean reconcile", 10*time.Second, func() bool {
		rec, r = resources(w, "reconcile", grant.LeaseID, "animations=disabled", "--repair")
		return r.Code == 0 && rec.Success
	})
	if w := launchctlWrites(commandLog(t, logPath)[before:]); len(w) != 0 {
		t.Fatalf("a reconcile with no drift wrote %q", w)
	}
}

// A set whose write launchd acknowledges but does not keep is not reported
// as done: the CLI prints the full evidence (the group unknown, its write
// listed under changed, verification current_boot) and exits 1.
func TestConfResAnUnprovenSetFailsWithItsEvidence(t *testing.T) {
	harness.Proves(t, "resources/5.22", "resources/5.23")
	t.Parallel()
	w := harness.NewWorld(t, enabled)
	w.Setenv("SIMLOCK_SIMSDK_FAULTS", "launchctl-write-noop")
	w.MustRun("daemon", "start")
	l := leaseFor(w, "tuner", "--platform", "ios", "--model", "iPhone 16")
	got, r := resources(w, "set", l.LeaseID, "animations=disabled")
	if r.Code != 1 {
		t.Fatalf("an unproven set exited %d, want 1:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if got.Success || got.Resources["animations"].State != "unknown" || !slices.Equal(got.Changed, []string{"animations"}) ||
		got.Verification != "current_boot" || len(got.Services) == 0 || got.Requested["animations"] != "disabled" {
		t.Fatalf("evidence %+v", got)
	}
}
