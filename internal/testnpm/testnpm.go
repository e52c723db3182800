// Package testnpm installs the npm tools the test suite runs against the
// simulated SDK (agent-device), once per machine, so the recipes test and
// the third-party test share one install.
package testnpm

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// AgentDeviceVersion is the agent-device release the tests pin.
const AgentDeviceVersion = "0.21.5"

// Required reports whether CI asked for the npm tests (SIMLOCK_NPM_TESTS=require):
// then a missing npm fails instead of skipping.
func Required() bool { return os.Getenv("SIMLOCK_NPM_TESTS") == "require" }

// AgentDevice installs agent-device from the npm registry into a cache
// directory ($XDG_CACHE_HOME/simlock-thirdparty, else a temp dir for this
// test) and returns its executable. A cached install is reused. Without npm
// the test is skipped, or fails when Required.
func AgentDevice(t testing.TB) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if Required() {
			t.Fatal("npm is not installed and SIMLOCK_NPM_TESTS=require")
		}
		t.Skip("npm is not installed: skipping the agent-device test (set SIMLOCK_NPM_TESTS=require to make this a failure)")
	}
	root := t.TempDir()
	if c := os.Getenv("XDG_CACHE_HOME"); c != "" {
		root = filepath.Join(c, "simlock-thirdparty")
	}
	dir := filepath.Join(root, "agent-device-"+AgentDeviceVersion)
	exe := filepath.Join(dir, "node_modules", ".bin", "agent-device")
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// --ignore-scripts: nothing from the package runs at install time.
	c := exec.Command(npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save",
		"--ignore-scripts", "--loglevel=error", "agent-device@"+AgentDeviceVersion)
	c.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(root, "npm-cache"), "npm_config_update_notifier=false")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("npm install agent-device@%s: %v\n%s", AgentDeviceVersion, err, out)
	}
	t.Logf("installed agent-device@%s in %s", AgentDeviceVersion, time.Since(start).Round(time.Millisecond))
	return exe
}
