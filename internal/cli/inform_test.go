package cli

import (
	"os"
	"path/filepath"
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
