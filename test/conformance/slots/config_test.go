package slots

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Launch configuration and version negotiation, through the slot proxy
// itself: a bad configuration ends `simlock mcp --slot-config` before any
// MCP answer and before any daemon is started, with one typed JSON error
// on stderr and that code's exit status. The schema is strict (an unknown
// key, at the top or in the spec, is refused), contractVersion is judged
// before any other field, an out-of-range idle window is refused rather
// than clamped, v1 takes one slot, and an executionOwnerPid that names no
// running process is refused at startup. The environment variable, a
// file path, serves as well as the flag.
func TestSlotsABadLaunchConfigEndsTheProxyBeforeAnyDaemonWork(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "slots/4.1", "slots/4.2", "slots/4.3", "slots/4.4", "slots/4.5", "slots/4.6", "slots/4.9", "slots/6.2", "slots/11.6", "slots/14.1")
	w := harness.NewWorld(t, "")
	dead := deadPID(t)
	two := launch("r", "i", "", map[string]any{"requests": []any{
		map[string]any{"slotIndex": 0, "role": "main", "platform": "ios", "requestedSpec": map[string]any{"runtime": iosRuntime}},
		map[string]any{"slotIndex": 1, "role": "main", "platform": "ios", "requestedSpec": map[string]any{"runtime": iosRuntime}}}})
	envFile := filepath.Join(w.Root, "slot.json")
	if err := os.WriteFile(envFile, []byte(`{"contractVersion":3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  string
		args []string
		code string
		exit int
	}{
		{"an unknown top-level key", "", []string{"--slot-config", launch("r", "i", "", map[string]any{"operationId": "x"})}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"a name in the spec", "", []string{"--slot-config=" + strings.Replace(launch("r", "i", "", nil), `"runtime"`, `"name":"mine","runtime"`, 1)}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"a missing managedHostScope", "", []string{"--slot-config", launch("r", "i", "", map[string]any{"managedHostScope": nil})}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"a namespace over 256 characters", "", []string{"--slot-config", launch(strings.Repeat("n", 257), "i", "", nil)}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"a version from the future, in another shape", "", []string{"--slot-config", `{"contractVersion":2,"requests":"many","future":true}`}, "CONTRACT_UNSUPPORTED", 4},
		{"an idle window under two minutes", "", []string{"--slot-config", launch("r", "i", "", map[string]any{"idleTimeoutMs": 60000})}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"an idle window over an hour", "", []string{"--slot-config", launch("r", "i", "", map[string]any{"idleTimeoutMs": 3600001})}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"two slots of capacity", "", []string{"--slot-config", launch("r", "i", "", map[string]any{"localSlotCapacity": 2})}, "MANAGED_SLOT_GROUP_UNSUPPORTED", 10},
		{"two requests", "", []string{"--slot-config", two}, "MANAGED_SLOT_GROUP_UNSUPPORTED", 10},
		{"a dead executionOwnerPid", "", []string{"--slot-config", launch("r", "i", "", map[string]any{"executionOwnerPid": dead})}, "MANAGED_SLOT_CONFIG_INVALID", 2},
		{"the environment's file", envFile, nil, "CONTRACT_UNSUPPORTED", 4},
	} {
		env := w.Env
		if c.env != "" {
			env = append(append([]string{}, w.Env...), "SIMLOCK_SLOT_CONFIG="+c.env)
		}
		r := harness.Exec(t, env, append([]string{"mcp"}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		var e harness.Refusal
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil {
			t.Errorf("%s: stderr %q is no JSON error", c.name, r.Stderr)
			continue
		}
		if e.Error.Code != c.code || e.Error.Retryable || r.Code != c.exit || r.Stdout != "" {
			t.Errorf("%s: %s (retryable %v) exit %d, stdout %q; want %s exit %d and no MCP answer", c.name, e.Error.Code, e.Error.Retryable, r.Code, r.Stdout, c.code, c.exit)
		}
	}
	if _, err := os.Stat(filepath.Join(w.Home, "simlock.sock")); err == nil {
		t.Fatal("a refused launch configuration started a daemon")
	}
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}
