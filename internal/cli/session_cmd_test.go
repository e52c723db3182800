package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// Session commands and capabilities contact only a running daemon: a
// session prepared on a daemon a command line just started would have no
// keeper, and capabilities must describe the daemon that is there.
func TestSessionCommandsNeverStartADaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"SIMLOCK_HOME": home, ownerTokenEnv: "tok"}
	cfg := `{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"}}`
	for _, args := range [][]string{{"capabilities"}, {"capabilities", "--json"}, {"session", "prepare", "--config", cfg},
		{"session", "status", "r"}, {"session", "abandon", "r"}, {"session", "release", "s"}, {"session", "stats"},
		{"session", "info", "s"}, {"session", "hold", "s"}} {
		r := runCLI(t, env, false, append([]string{"--home", home}, args...)...)
		if r.code != contract.ErrorTable[contract.CodeDaemonNotRunning].ExitCode || !strings.Contains(r.stderr, "DAEMON_NOT_RUNNING") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(home, "daemon.pid")); !os.IsNotExist(err) {
			t.Fatalf("%v started a daemon", args)
		}
	}
}

func TestSessionPrepareChecksItsInputBeforeTheDaemon(t *testing.T) {
	home := t.TempDir()
	cfg := `{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"}}`
	r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "session", "prepare", "--config", cfg)
	if !strings.Contains(r.stderr, "SESSION_CONFIG_INVALID") || !strings.Contains(r.stderr, ownerTokenEnv) {
		t.Errorf("no owner token: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, map[string]string{"SIMLOCK_HOME": home, ownerTokenEnv: "t"}, false, "--home", home, "session", "prepare",
		"--config", `{"contractVersion":2,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"}}`)
	if !strings.Contains(r.stderr, "CONTRACT_UNSUPPORTED") {
		t.Errorf("contractVersion 2: exit %d, stderr %q", r.code, r.stderr)
	}
	path := filepath.Join(home, "s.json")
	if err := os.WriteFile(path, []byte(`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"},"bogus":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, map[string]string{"SIMLOCK_HOME": home, ownerTokenEnv: "t"}, false, "--home", home, "session", "prepare", "--config", path)
	if !strings.Contains(r.stderr, "SESSION_CONFIG_INVALID") || !strings.Contains(r.stderr, "bogus") {
		t.Errorf("a config file with an unknown field: exit %d, stderr %q", r.code, r.stderr)
	}
}
