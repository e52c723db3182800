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
	dir := Install(t, "agent-device-"+AgentDeviceVersion, "agent-device@"+AgentDeviceVersion)
	return filepath.Join(dir, "node_modules", ".bin", "agent-device")
}

// Tango's adb client library (ya-webadb), the pure-protocol client the
// adb tests drive: the core package and its Node.js server connector.
const (
	TangoADBVersion       = "2.6.4"
	TangoADBServerVersion = "2.5.2"
)

// TangoADB installs Tango's adb client library and returns the directory
// whose node_modules holds it (a script placed there imports it).
func TangoADB(t testing.TB) string {
	t.Helper()
	return Install(t, "tango-adb-"+TangoADBVersion, "@yume-chan/adb@"+TangoADBVersion, "@yume-chan/adb-server-node-tcp@"+TangoADBServerVersion)
}

// Install installs pkgs (name@version each) into a cache directory named
// name and returns it; an install that completed before is reused. Without
// npm the test is skipped, or fails when Required.
func Install(t testing.TB, name string, pkgs ...string) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if Required() {
			t.Fatal("npm is not installed and SIMLOCK_NPM_TESTS=require")
		}
		t.Skip("npm is not installed: skipping (set SIMLOCK_NPM_TESTS=require to make this a failure)")
	}
	root := t.TempDir()
	if c := os.Getenv("XDG_CACHE_HOME"); c != "" {
		root = filepath.Join(c, "simlock-thirdparty")
	}
	dir := filepath.Join(root, name)
	// The marker is written last, so a half-finished install is redone.
	marker := filepath.Join(dir, ".simlock-installed")
	if _, err := os.Stat(marker); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// --ignore-scripts: nothing from the packages runs at install time.
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save", "--ignore-scripts", "--loglevel=error"}, pkgs...)
	c := exec.Command(npm, args...)
	c.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(root, "npm-cache"), "npm_config_update_notifier=false")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("npm install %v: %v\n%s", pkgs, err, out)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed %v in %s", pkgs, time.Since(start).Round(time.Millisecond))
	return dir
}
