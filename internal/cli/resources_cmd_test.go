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

// The catalogue the CLI prints is the contract's, in its order, new groups
// included: the human table has one row per group, and each platform's new
// groups are listed on that platform only.
func TestResourcesGroupsListsEveryCatalogueGroupInOrder(t *testing.T) {
	env := map[string]string{"SIMLOCK_HOME": t.TempDir()}
	r := runCLI(t, env, false, "resources", "groups", "--json")
	var out struct {
		Groups []contract.ResourceGroup `json:"groups"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	want := contract.ResourceGroups()
	if len(out.Groups) != len(want) {
		t.Fatalf("%d groups, want %d", len(out.Groups), len(want))
	}
	by := map[string][]string{}
	for i, g := range out.Groups {
		if g.Name != want[i].Name {
			t.Fatalf("group %d is %s, want %s", i, g.Name, want[i].Name)
		}
		by[g.Name] = g.Platforms
	}
	for g, platform := range map[string]string{"walletServices": "ios", "screenTime": "ios", "continuity": "ios",
		"healthConnect": "android", "adServices": "android", "googleServicesFramework": "android"} {
		if len(by[g]) != 1 || by[g][0] != platform {
			t.Errorf("%s on %v, want %s only", g, by[g], platform)
		}
	}
	human := runCLI(t, env, false, "resources", "groups")
	lines := strings.Split(strings.TrimSpace(human.stdout), "\n")
	if human.code != 0 || len(lines) != len(want)+1 || !strings.HasPrefix(lines[len(lines)-1], "googleServicesFramework ") {
		t.Fatalf("human table: exit %d, %d lines, last %q", human.code, len(lines), lines[len(lines)-1])
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
		{"lease", "--platform", "ios", "--resources", "healthConnect=disabled"},
		{"lease", "--platform", "android", "--resources", "walletServices=disabled"},
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
