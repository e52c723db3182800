package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type selftestOut struct {
	Passed    bool
	Root      string
	Platforms []struct {
		Platform  string
		Passed    bool
		Simulated bool
		Steps     []struct {
			Name, Result string
			DurationMs   int64
			Error        *struct{ Code string }
		}
	}
}

func (w *world) selftest(env []string, args ...string) (selftestOut, result) {
	w.t.Helper()
	c := w.cmd(append([]string{"selftest", "--json"}, args...)...)
	c.Env = append(c.Env, env...)
	var o, e strings.Builder
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	r := result{o.String(), e.String(), 0}
	if err != nil {
		r.code = c.ProcessState.ExitCode()
	}
	var rep selftestOut
	if jerr := json.Unmarshal([]byte(r.stdout), &rep); jerr != nil {
		w.t.Fatalf("selftest printed %q (exit %d, stderr %s): %v", r.stdout, r.code, r.stderr, jerr)
	}
	return rep, r
}

// On the simulated SDK every step of both platforms passes, in a root of
// the selftest's own that is gone afterwards, and no daemon is involved.
func TestSelftestPassesOnTheSimulatedSDK(t *testing.T) {
	w := newWorld(t, "")
	rep, r := w.selftest(nil)
	if r.code != 0 || !rep.Passed {
		t.Fatalf("exit %d, report %+v\nstderr: %s", r.code, rep, r.stderr)
	}
	want := []string{"resolve", "create", "boot", "readiness", "exec", "reclaim", "shutdown", "destroy"}
	if len(rep.Platforms) != 2 {
		t.Fatalf("platforms %+v", rep.Platforms)
	}
	for _, p := range rep.Platforms {
		if !p.Passed || !p.Simulated || len(p.Steps) != len(want) {
			t.Fatalf("%s: %+v", p.Platform, p)
		}
		for i, s := range p.Steps {
			if s.Name != want[i] || s.Result != "passed" || s.DurationMs < 0 {
				t.Errorf("%s step %d: %+v, want %s passed", p.Platform, i, s, want[i])
			}
		}
	}
	if _, err := os.Stat(rep.Root); !os.IsNotExist(err) {
		t.Errorf("the selftest root %s is still there: %v", rep.Root, err)
	}
	if rep.Root == "" || strings.HasPrefix(rep.Root, w.home) {
		t.Errorf("root %q is not a directory of the selftest's own", rep.Root)
	}
	if out := w.mustRun("simsdk", "ps"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("devices still running after the selftest:\n%s", out)
	}
	if r := w.run("daemon", "status"); r.code == 0 {
		t.Errorf("selftest started a daemon: %s", r.stdout)
	}
}

// A step that fails fails the selftest: later steps are skipped, the exit
// code is 1, and the device is still cleaned up.
func TestSelftestReportsAFailingStep(t *testing.T) {
	w := newWorld(t, "")
	rep, r := w.selftest([]string{"SIMLOCK_SIMSDK_FAULTS=boot-fail"}, "--platform", "ios")
	if r.code != 1 || rep.Passed || len(rep.Platforms) != 1 {
		t.Fatalf("exit %d, report %+v", r.code, rep)
	}
	got := map[string]string{}
	for _, s := range rep.Platforms[0].Steps {
		got[s.Name] = s.Result
		if s.Result == "failed" && (s.Error == nil || s.Error.Code == "") {
			t.Errorf("failed step %s has no error code", s.Name)
		}
	}
	if got["create"] != "passed" || got["boot"] != "failed" || got["exec"] != "skipped" || got["destroy"] != "skipped" {
		t.Fatalf("steps %v", got)
	}
	if out := w.mustRun("simsdk", "ps"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("a device outlived the failed selftest:\n%s", out)
	}
}
