package e2e

import (
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/captures"
)

// `selftest --record` on the simulated SDK writes a manifest and one file
// per captured stream, and nothing in them names the machine: not the
// selftest's root, not this home, not the user, not the device's real UDID.
// The fresh recording is then set against every real capture contributed
// under testdata/captures: where both come from the same tool release, the
// simulator must print the same shape (keys, columns, refusal texts).
func TestSelftestRecordWritesScrubbedCapturesTheSimulatorMatches(t *testing.T) {
	w := newWorld(t, "")
	dir := filepath.Join(t.TempDir(), "rec")
	c := w.cmd("selftest", "--json", "--record", dir)
	var o, e strings.Builder
	c.Stdout, c.Stderr = &o, &e
	if err := c.Run(); err != nil {
		t.Fatalf("selftest --record: %v\nstdout %s\nstderr %s", err, o.String(), e.String())
	}
	var rep struct {
		Passed    bool
		Root      string
		Platforms []struct{ Platform, Device string }
		Recorded  *struct {
			Dir, Manifest string
			Captures      int
			Skipped       []string
		}
	}
	if err := json.Unmarshal([]byte(o.String()), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || rep.Recorded == nil || rep.Recorded.Manifest != filepath.Join(dir, captures.ManifestName) {
		t.Fatalf("report %s", o.String())
	}
	rec, err := captures.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := rec.Manifest
	if !m.Simulated || m.OS == "" || len(m.Captures) != rep.Recorded.Captures || len(m.Skipped) != 0 {
		t.Fatalf("manifest %+v", m)
	}
	probes := map[string]captures.Entry{}
	for _, e := range m.Captures {
		probes[e.Tool+" "+e.Probe] = e
	}
	for _, want := range []string{"simctl list-json", "simctl list-devices-text", "simctl launchctl-print-disabled", "simctl boot-already-booted",
		"xcodebuild version", "adb devices-l", "adb getprop", "adb device-not-found", "emulator list-avds", "emulator version", "avdmanager list-avd"} {
		if _, ok := probes[want]; !ok {
			t.Errorf("no capture of %s", want)
		}
	}
	if e := probes["adb shell-exit-code"]; e.ExitCode != 3 {
		t.Errorf("adb shell 'exit 3' recorded exit %d", e.ExitCode)
	}
	if e := probes["simctl boot-already-booted"]; !e.Refusal || e.ExitCode == 0 || e.Stderr == "" {
		t.Errorf("refusal %+v", e)
	}
	secrets := []string{rep.Root, w.home, filepath.Dir(w.home)}
	if h, err := os.UserHomeDir(); err == nil && len(h) > 1 {
		secrets = append(secrets, h)
	}
	if u, err := user.Current(); err == nil && len(u.Username) >= 3 {
		secrets = append(secrets, u.Username)
	}
	for _, p := range rep.Platforms {
		// The UDID simctl made up is the machine's; an AVD name is simlock's own.
		if p.Platform == "ios" && p.Device != "" {
			secrets = append(secrets, p.Device)
		}
	}
	var files int
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, _ := os.ReadFile(path)
		text := string(b)
		for _, s := range secrets {
			if strings.Contains(text, s) || strings.Contains(text, strings.ReplaceAll(s, "/", `\/`)) {
				t.Errorf("%s still holds %q", path, s)
			}
		}
		return nil
	})
	if files < len(m.Captures) {
		t.Errorf("%d files for %d captures", files, len(m.Captures))
	}

	// A second recording never mixes with the first.
	if r := w.run("selftest", "--json", "--platform", "ios", "--record", dir); r.code != 2 || !strings.Contains(r.stdout+r.stderr, "BAD_REQUEST") {
		t.Errorf("recording into a full directory: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}

	// The shape check against the field.
	all, err := captures.LoadAll("../../testdata/captures")
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, e := range m.Captures {
		index[e.Tool+" "+e.Probe] = i
	}
	compared, sameRelease := 0, 0
	older := map[string]int{} // differences from older releases, noted not failed
	for _, real := range all {
		if real.Manifest.Simulated {
			continue
		}
		for i, e := range real.Manifest.Captures {
			j, ok := index[e.Tool+" "+e.Probe]
			if !ok {
				continue
			}
			compared++
			ds := captures.Compare(e.Tool, e.Probe, captures.ShapeOf(rec, j), captures.ShapeOf(real, i))
			same := e.ToolVersion != "unknown" && e.ToolVersion == m.Captures[j].ToolVersion
			for _, d := range ds {
				if same {
					t.Errorf("%s %s: %s (%s, %s)", d.Tool, d.Probe, d.What, real.Dir, e.ToolVersion)
				} else {
					older[d.Tool+" "+d.Probe+": "+d.What]++
				}
			}
			if same {
				sameRelease++
			}
		}
	}
	if compared == 0 {
		t.Fatal("no capture under testdata/captures matched a probe")
	}
	t.Logf("compared %d captures with the simulator, %d of the same release; %d kinds of difference from older releases", compared, sameRelease, len(older))
	if testing.Verbose() {
		for d, n := range older {
			t.Logf("  older release (%d): %s", n, d)
		}
	}
}
