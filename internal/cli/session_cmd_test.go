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

// A bad --session-config (or SIMLOCK_SESSION_CONFIG) ends `simlock mcp`
// before it serves: one JSON error, the typed exit code; the flag wins.
func TestMCPSessionConfigIsCheckedBeforeServing(t *testing.T) {
	home := t.TempDir()
	bad := `{"contractVersion":1,"requestId":"","device":{"schemaVersion":1,"platform":"ios"}}`
	for _, c := range []struct {
		env  map[string]string
		args []string
		code contract.Code
	}{
		{map[string]string{"SIMLOCK_HOME": home}, []string{"mcp", "--session-config", bad}, contract.CodeSessionConfigInvalid},
		{map[string]string{"SIMLOCK_HOME": home, "SIMLOCK_SESSION_CONFIG": `{"contractVersion":3}`}, []string{"mcp"}, contract.CodeContractUnsupported},
		{map[string]string{"SIMLOCK_HOME": home, "SIMLOCK_SESSION_CONFIG": `{"contractVersion":3}`}, []string{"mcp", "--session-config", bad}, contract.CodeSessionConfigInvalid},
	} {
		r := runCLI(t, c.env, false, append([]string{"--home", home}, c.args...)...)
		if r.code != contract.ErrorTable[c.code].ExitCode || !strings.Contains(r.stderr, `"code":"`+string(c.code)+`"`) {
			t.Errorf("%v %v: exit %d, stderr %q, want %s", c.env, c.args, r.code, r.stderr, c.code)
		}
	}
}
