package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// A release build stamps the version, commit and time with -ldflags -X,
// exactly as docs/cli.md shows, and `simlock version --json` reports them,
// even where the go command embeds no VCS information (-buildvcs=false).
func TestReleaseBuildStampsVersion(t *testing.T) {
	const pkg = "github.com/simlock/simlock/internal/cli"
	exe := filepath.Join(t.TempDir(), "simlock")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags",
		"-X "+pkg+".Version=9.8.7 -X "+pkg+".stampCommit=0123abcd -X "+pkg+".stampTime=2026-12-06T08:00:00Z",
		"-o", exe, "github.com/simlock/simlock/cmd/simlock")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(exe, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	var v struct{ Version, Commit, CommitTime, CommitFrom, GoVersion string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if v.Version != "9.8.7" || v.Commit != "0123abcd" || v.CommitTime != "2026-12-06T08:00:00Z" || v.CommitFrom != "ldflags" || v.GoVersion == "" {
		t.Fatalf("version --json = %s", out)
	}
	flag, err := exec.Command(exe, "--version").Output()
	if err != nil || string(flag) != "simlock version 9.8.7\n" {
		t.Fatalf("--version = %q, %v", flag, err)
	}
}
