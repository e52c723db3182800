package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
)

// A launch-config error ends `simlock mcp --slot-config` before the server
// starts: one JSON error on stderr, nothing on stdout (no MCP answer), the
// code's own exit code, and no daemon started in the home.
func TestMCPSlotConfigErrorExitsWithTheTypedCodeBeforeServing(t *testing.T) {
	home := t.TempDir()
	good := `{"contractVersion":1,"managedHostScope":"h","runnerNamespace":"n","runnerIncarnation":"i","localSlotCapacity":1,` +
		`"requests":[{"slotIndex":0,"role":"main","platform":"ios","requestedSpec":{"runtime":"18.0"}}]}`
	file := filepath.Join(t.TempDir(), "slot.json")
	if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		code contract.Code
	}{
		{"unsupported contract version inline", nil, []string{"--slot-config", `{"contractVersion":2}`}, contract.CodeContractUnsupported},
		{"flag with equals, unknown field", nil, []string{`--slot-config={"contractVersion":1,"x":1}`}, contract.CodeSlotConfigInvalid},
		{"env path that does not exist", map[string]string{"SIMLOCK_SLOT_CONFIG": filepath.Join(home, "nope.json")}, nil, contract.CodeSlotConfigInvalid},
		{"flag wins over a good env", map[string]string{"SIMLOCK_SLOT_CONFIG": file}, []string{"--slot-config", `{"contractVersion":"1"}`}, contract.CodeContractUnsupported},
		{"two slots", nil, []string{"--slot-config", strings.Replace(good, `"localSlotCapacity":1`, `"localSlotCapacity":2`, 1)}, contract.CodeSlotGroupUnsupported},
		{"with a session config", map[string]string{"SIMLOCK_SESSION_CONFIG": "{}"}, []string{"--slot-config", file}, contract.CodeSlotConfigInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.env, false, append([]string{"--home", home, "mcp"}, c.args...)...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			var e struct {
				Error contract.Error `json:"error"`
			}
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &e) != nil {
				t.Fatalf("stderr is not one JSON error: %q", r.stderr)
			}
			if e.Error.Code != c.code || r.code != contract.InfoFor(c.code).ExitCode || r.stdout != "" {
				t.Fatalf("got %s exit %d stdout %q, want %s exit %d", e.Error.Code, r.code, r.stdout, c.code, contract.InfoFor(c.code).ExitCode)
			}
			if _, err := os.Stat(config.PathsFor(home).Socket); err == nil {
				t.Fatal("a daemon socket appeared")
			}
		})
	}
}
