package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// The catalogue needs no daemon: it answers from the contract and leaves
// the home without a socket or a daemon's files.
func TestResourcesGroupsNeedsNoDaemon(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "resources", "groups", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Groups []contract.ResourceGroup `json:"groups"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Groups) != len(contract.ResourceGroups()) || out.Groups[0].Name != "backgroundSync" {
		t.Fatalf("groups %+v", out.Groups)
	}
	if _, err := os.Stat(filepath.Join(home, "simlock.sock")); err == nil {
		t.Fatal("resources groups started a daemon")
	}
}

// Reading a lease's resources never starts a daemon; a malformed map is
// refused before anything is sent.
func TestResourcesCommandsCheckInputAndNeverLaunch(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"SIMLOCK_HOME": home}
	r := runCLI(t, env, false, "resources", "get", "lse_nothing", "--json")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, string(contract.CodeDaemonNotRunning)) {
		t.Fatalf("get without a daemon: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"resources", "set", "lse_x", "animations"},
		{"resources", "set", "lse_x", "com.apple.searchd=disabled"},
		{"resources", "set", "lse_x", "animations=off"},
		{"resources", "set", "lse_x", "animations=disabled", "animations=enabled"},
		{"resources", "set", "lse_x"},
		{"lease", "--resources", "googlePlayServices=disabled"},
		{"lease", "--hardware", "memoryMb=4096"},
		{"lease", "--platform", "android", "--hardware", "gpuMode=turbo"},
		{"lease", "--platform", "android", "--hardware", "ramMb=4096"},
	} {
		r := runCLI(t, env, false, append(args, "--json")...)
		if r.code == 0 || !strings.Contains(r.stderr+r.stdout, string(contract.CodeBadRequest)) {
			t.Errorf("%v: exit %d %s %s", args, r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "simlock.sock")); err == nil {
		t.Fatal("a refused command started a daemon")
	}
}

func TestParseHardware(t *testing.T) {
	hw, err := parseHardware("memoryMb=4096,cpuCores=2,gpuMode=swiftshader,cameraBack=emulated,audioInput=false")
	if err != nil {
		t.Fatal(err)
	}
	if hw.MemoryMB != 4096 || hw.CPUCores != 2 || hw.GPUMode != "swiftshader" || hw.CameraBack != "emulated" ||
		hw.AudioInput == nil || *hw.AudioInput || hw.AudioOutput != nil {
		t.Fatalf("%+v", hw)
	}
	if _, err := parseHardware("memoryMb=lots"); err == nil {
		t.Fatal("a non-number was accepted")
	}
}
