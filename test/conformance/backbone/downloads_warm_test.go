package backbone

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// downloadSpy stands in for xcodebuild: a runtime download
// (-downloadPlatform) is written to the file $SPY names before it runs,
// so an install that was started shows even if it then failed.
const downloadSpy = `case " $* " in *" -downloadPlatform "*) echo "$*" >> "$SPY" ;; esac
exec "$real" "$@"
`

// warmDownloadConfig warms one iPhone 16 on iOS 26.5 under the most
// permissive policy: with "always" any lease request needing a runtime
// may install it, so only the rule that warming and convergence are no
// requests keeps them from downloading.
const warmDownloadConfig = `{"downloads":{"policy":"always"},
"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3}},
"warmPool":{"targets":[{"platform":"ios","model":"iPhone 16","osVersion":"26.5","count":1}]}}`

// Download permission: a warm-pool target whose runtime is missing is
// skipped, and startup convergence over a committed device whose runtime
// has gone starts no install, even when downloads.policy is "always";
// a lease request for the same spec then installs it, which shows both
// that the runtime could be downloaded all along and that an install
// would have been seen.
func TestBackboneWarmingAndConvergenceNeverDownload(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/38.5")
	w := harness.NewWorld(t, warmDownloadConfig)
	spy := filepath.Join(w.Root, "downloads")
	w.Setenv("SPY", spy)
	standIn(t, w, "xcodebuild", downloadSpy)

	// First run: iOS 26.5 counts as installed, so the target resolves and
	// the pool commits a ready device of that spec.
	w.Setenv("SIMLOCK_SIMSDK_IOS_RUNTIMES", "iOS 17.5,iOS 18.0,iOS 26.3,iOS 26.5,visionOS 1.2")
	w.MustRun("daemon", "start")
	harness.Eventually(t, "the warm iOS 26.5 device", 60*time.Second, func() bool {
		return strings.Contains(w.MustRun("events", "--json"), `"device.warmed"`)
	})
	w.MustRun("daemon", "stop")

	// Second run: the simulated Xcode's own set, where iOS 26.5 is only
	// downloadable. Startup converges over the committed device, then
	// resolves the target, which no longer resolves without a download.
	w.Setenv("SIMLOCK_SIMSDK_IOS_RUNTIMES", "")
	if runtimes(t, w)["26.5"] {
		t.Fatal("iOS 26.5 is still installed for the second run; the test would prove nothing")
	}
	w.MustRun("daemon", "start")
	// Startup converges, then resolves the warm targets, then reports
	// ready: past that line every startup step that could download is done.
	harness.Eventually(t, "the second run's skip of the warm target, then its readiness", 60*time.Second, func() bool {
		skipped, ready := daemonLog(t, w, "26.5")
		return skipped && ready == 2
	})
	// The skipped target is not one the pool keeps.
	var st struct {
		WarmPool struct {
			Targets []struct{ OSVersion string }
		}
	}
	w.JSON(&st, "status", "--json")
	for _, tg := range st.WarmPool.Targets {
		if strings.HasPrefix(tg.OSVersion, "26.5") {
			t.Fatalf("status keeps the unresolvable target: %+v", st.WarmPool)
		}
	}
	if b, err := os.ReadFile(spy); err == nil || !os.IsNotExist(err) {
		t.Fatalf("warming or convergence started a download (%v):\n%s", err, b)
	}
	if n := installStarts(t, w); len(n) != 0 {
		t.Fatalf("warming or convergence started an install: %v", n)
	}
	if runtimes(t, w)["26.5"] {
		t.Fatal("iOS 26.5 got installed without any request asking for it")
	}

	// The control: a lease request for the same spec, with no
	// --allow-download (the policy grants it), installs the runtime.
	w.MustRun("lease", "--platform", "ios", "--model", "iPhone 16", "--os", "26.5", "--requester", "asks-for-26-5", "--detach", "--json")
	if b, err := os.ReadFile(spy); err != nil || strings.Count(string(b), "-downloadPlatform") != 1 {
		t.Fatalf("the lease request's download: %v\n%s", err, b)
	}
	if n := installStarts(t, w); len(n) != 1 || n[0] != "asks-for-26-5" {
		t.Fatalf("install starts, by requester: %v, want only the lease request's", n)
	}
	if !runtimes(t, w)["26.5"] {
		t.Fatal("the lease request did not install iOS 26.5")
	}
}

// runtimes is the set of iOS runtime versions the simulated Xcode has
// installed, as `xcrun simctl list runtimes -j` reports them to the world.
func runtimes(t *testing.T, w *harness.World) map[string]bool {
	t.Helper()
	c := exec.Command(filepath.Join(w.SDK, "xcrun"), "simctl", "list", "runtimes", "-j")
	c.Env = w.Env
	b, err := c.Output()
	if err != nil {
		t.Fatalf("simctl list runtimes: %v", err)
	}
	var l struct {
		Runtimes []struct {
			Name string `json:"name"`
		} `json:"runtimes"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("simctl list runtimes printed %q: %v", b, err)
	}
	out := map[string]bool{}
	for _, r := range l.Runtimes {
		if v, ok := strings.CutPrefix(r.Name, "iOS "); ok {
			out[v] = true
		}
	}
	return out
}

// daemonLog reads daemon.log for whether the daemon skipped the warm
// target on osVersion, and how many times a daemon reported ready.
func daemonLog(t *testing.T, w *harness.World, osVersion string) (skipped bool, ready int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.Home, "daemon.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct{ Msg, OS string }
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch {
		case e.Msg == "daemon ready":
			ready++
		case strings.HasPrefix(e.Msg, "warm pool target does not resolve") && e.OS == osVersion:
			skipped = true
		}
	}
	return skipped, ready
}

// installStarts lists, by requester, the component installs the events
// since the world began record as started, across both daemon runs.
func installStarts(t *testing.T, w *harness.World) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(w.MustRun("events", "--since", "1h", "--json")), "\n") {
		var e struct {
			Type        string `json:"type"`
			RequesterID string `json:"requesterId"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("events printed %q: %v", line, err)
		}
		if e.Type == "component.install-started" {
			out = append(out, e.RequesterID)
		}
	}
	return out
}
