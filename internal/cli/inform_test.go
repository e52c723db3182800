package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
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
