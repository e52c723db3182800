package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

// Read-only commands report that nothing runs instead of starting a daemon
// to answer them.
func TestReadOnlyCommandsNeverStartADaemon(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{{"status"}, {"list"}, {"events"}, {"lease", "list"}, {"lease", "get", "lse_1"},
		{"lease", "get", "req_1"}, {"config", "show"}, {"status", "--json"}} {
		r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, append([]string{"--home", home}, args...)...)
		if r.code != contract.ErrorTable[contract.CodeDaemonNotRunning].ExitCode {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "DAEMON_NOT_RUNNING") || !strings.Contains(r.stderr, "no daemon running") ||
			!strings.Contains(r.stderr, "simlock daemon start") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
		if strings.Contains(r.stderr, "starting one") {
			t.Errorf("%v tried to start a daemon: %q", args, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(home, "daemon.pid")); !os.IsNotExist(err) {
			t.Fatalf("%v started a daemon", args)
		}
	}
}

// `simlock version --json` names the version and the Go that built it,
// without a daemon.
func TestVersionJSON(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "version", "--json")
	var v buildVersion
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if v.Version != Version || v.GoVersion != runtime.Version() || v.Platform == "" {
		t.Fatalf("version %+v", v)
	}
	r = runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "version")
	if !strings.Contains(r.stdout, "commit") || !strings.Contains(r.stdout, runtime.Version()) {
		t.Fatalf("human version %q", r.stdout)
	}
}

// Typos are refused before any daemon is contacted, with the nearest
// valid name; usage errors exit 2 and print as JSON under --json.
func TestInputsAreCheckedBeforeTheDaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"SIMLOCK_HOME": home}
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"lease", "--platform", "iso"}, 10, []string{"UNSUPPORTED_PLATFORM", "did you mean --platform ios?"}},
		{[]string{"lease", "--platform", "andriod", "--detach"}, 10, []string{"did you mean --platform android?"}},
		{[]string{"catalog", "--platform", "windows"}, 10, []string{"UNSUPPORTED_PLATFORM", "--platform ios or --platform android"}},
		{[]string{"leas"}, 2, []string{"unknown command \"leas\"", "did you mean `simlock lease`?"}},
		{[]string{"daemon", "strat"}, 2, []string{"did you mean `simlock daemon start`?"}},
		{[]string{"lease", "lsit"}, 2, []string{"did you mean `simlock lease list`?"}},
		{[]string{"lease", "--bogus"}, 2, []string{"BAD_REQUEST: unknown flag: --bogus", "simlock lease --help"}},
		{[]string{"lease", "--platfrom", "ios"}, 2, []string{"unknown flag: --platfrom", "did you mean --platform?"}},
		{[]string{"lease", "--platfrom=ios"}, 2, []string{"did you mean --platform?"}},
		{[]string{"lease", "--dev", "dev_1"}, 2, []string{"did you mean --device or --device-spec?"}},
		{[]string{"daemon", "stop", "--claen"}, 2, []string{"did you mean --clean?"}},
		{[]string{"status", "--hmoe", "x"}, 2, []string{"did you mean --home?"}}, // an inherited flag
		{[]string{"lease", "renew"}, 2, []string{"BAD_REQUEST", "accepts 1 arg"}},
	}
	for _, c := range cases {
		r := runCLI(t, env, false, append([]string{"--home", home}, c.args...)...)
		if r.code != c.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", c.args, r.code, c.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, r.stderr, w)
			}
		}
		if _, err := os.Stat(filepath.Join(home, "daemon.pid")); !os.IsNotExist(err) {
			t.Fatalf("%v started a daemon", c.args)
		}
	}
	r := runCLI(t, env, false, "--home", home, "lease", "--bogus", "--json")
	var out struct{ Error contract.Error }
	if r.code != 2 || json.Unmarshal([]byte(r.stderr), &out) != nil || out.Error.Code != contract.CodeBadRequest {
		t.Fatalf("--json usage error: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestNearestNames(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{{"iso", "ios"}, {"IOS", "ios"}, {"andorid", "android"}, {"iphone 61", "iPhone 16"}, {"Pixel", "Pixel 8"}} {
		got := nearest(c.in, []string{"ios", "android", "iPhone 16", "iPhone 16 Pro", "Pixel 8"})
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("nearest(%q) = %q, want %q first", c.in, got, c.want)
		}
	}
	if got := nearest("windows", knownPlatforms); len(got) != 0 {
		t.Errorf("nearest(windows) = %q", got)
	}
}

// Every command, group and leaf, shows an Example: section in its help,
// and the examples table names no command that does not exist.
func TestEveryCommandHasAnExample(t *testing.T) {
	a := &app{env: OSEnv()}
	root := a.rootCmd()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		seen[c.CommandPath()] = true
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example: add one to commandExamples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for path := range commandExamples() {
		if !seen[path] {
			t.Errorf("commandExamples names %q, which is not a command", path)
		}
	}
}

// `simlock worker ...` against a worker says to aim at the gateway, not to
// upgrade anything.
func TestWorkerCommandOnAWorkerPointsAtTheGateway(t *testing.T) {
	err := notAGateway(contract.Errorf(contract.CodeUnknownOperation, "unknown operation worker.list"))
	ce := contract.AsError(err)
	if ce == nil || !strings.Contains(ce.Message, "not a gateway") || !strings.Contains(ce.NextAction, "--url") {
		t.Fatalf("got %+v", ce)
	}
	other := contract.Errorf(contract.CodeUnauthenticated, "x")
	if notAGateway(other) != error(other) {
		t.Fatal("other errors must pass through unchanged")
	}
}

// The terminal line shows the queue position and wait while queued (no
// bar: queue time is not boot progress), then the phase against its ETA.
func TestProgressText(t *testing.T) {
	q := progressText(contract.Progress{Phase: "queued", QueuePosition: 2}, 3*time.Second, 3*time.Second)
	if !strings.Contains(q, "queued at position 2, waiting 3.0s") || strings.Contains(q, "[") {
		t.Fatalf("queued: %q", q)
	}
	b := progressText(contract.Progress{Phase: "booting", DeviceID: "dev_1", EtaMs: 4000}, time.Second, 10*time.Second)
	for _, w := range []string{"[=====               ]", "booting 1.0s", "about 3.0s left", "dev_1", "10.0s elapsed"} {
		if !strings.Contains(b, w) {
			t.Fatalf("booting %q lacks %q", b, w)
		}
	}
	late := progressText(contract.Progress{Phase: "booting", EtaMs: 1000}, 2*time.Second, 2*time.Second)
	if !strings.Contains(late, "longer than the usual 1.0s") || !strings.Contains(late, strings.Repeat("=", 20)) {
		t.Fatalf("late: %q", late)
	}
}

// Off a terminal, a lease's progress leaves stderr clean unless --json
// asked for machine output.
func TestProgressOffATerminal(t *testing.T) {
	var errb strings.Builder
	a := &app{env: Env{Stderr: &errb, StderrTerminal: func() bool { return false }}}
	pl := a.newProgressLine()
	pl.update(contract.Progress{Phase: "booting", EtaMs: 1000})
	pl.stop()
	if errb.Len() != 0 {
		t.Fatalf("stderr %q", errb.String())
	}
	a.jsonOut = true
	pl = a.newProgressLine()
	pl.update(contract.Progress{Phase: "booting", EtaMs: 1000})
	pl.stop()
	if !strings.Contains(errb.String(), `{"progress":{"phase":"booting","etaMs":1000}}`) {
		t.Fatalf("--json stderr %q", errb.String())
	}
}

// Without a daemon, completion offers what it knows offline and starts
// nothing.
func TestCompletionOffline(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"SIMLOCK_HOME": home}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "lease", "--platform", ""}, []string{"ios", "android"}},
		{[]string{"__complete", "catalog", "--platform", ""}, []string{"ios", "android"}},
		{[]string{"__complete", "cleanup", "--rule", ""}, []string{"idle-shutdown", "idle-destroy"}},
		{[]string{"__complete", "lease", "renew", ""}, nil},
	} {
		r := runCLI(t, env, false, append([]string{"--home", home}, c.args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d %q", c.args, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w+"\n") {
				t.Errorf("%v: %q lacks %q", c.args, r.stdout, w)
			}
		}
		if _, err := os.Stat(filepath.Join(home, "daemon.pid")); !os.IsNotExist(err) {
			t.Fatalf("%v started a daemon", c.args)
		}
	}
}
