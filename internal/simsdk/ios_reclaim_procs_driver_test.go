package simsdk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// A reclaim of the real iOS driver over the simulated SDK starts exactly
// shutdown, erase and bootstatus -b (which boots and waits in one
// process): no `simctl list` proves the shutdown, because the erase
// (which refuses any device not shut down) did. The device still comes
// back erased and booted.
func TestIOSReclaimListsNothing(t *testing.T) {
	h := newHarness(t)
	root := filepath.Join(t.TempDir(), "ios")
	logFile := filepath.Join(t.TempDir(), "commands.log")
	h.env[EnvCommandLog] = logFile
	d, dev := readyIPhone(t, h, root)
	ctx := context.Background()
	commands := func() []string {
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	dataDir := filepath.Join(root, dev.Handle, "data")
	for i := range 2 {
		// Something the erase must remove.
		stale := filepath.Join(dataDir, "stale-"+string(rune('a'+i)))
		if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := len(commands())
		if err := d.Reclaim(ctx, dev); err != nil {
			t.Fatalf("reclaim %d: %v", i, err)
		}
		var verbs []string
		for _, c := range commands()[before:] {
			f := strings.Fields(c)
			for j, w := range f {
				if w == "simctl" {
					rest := f[j+1:]
					if len(rest) > 1 && rest[0] == "--set" {
						rest = rest[2:]
					}
					verbs = append(verbs, rest[0])
					break
				}
			}
		}
		if got, want := strings.Join(verbs, " "), "shutdown erase bootstatus"; got != want {
			t.Errorf("reclaim %d ran %q, want %q (log %q)", i, got, want, commands()[before:])
		}
		if _, err := os.Stat(stale); !os.IsNotExist(err) {
			t.Errorf("reclaim %d: %s survived the erase (err %v)", i, stale, err)
		}
	}
	obs, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 || obs[0].Run != core.RunRunning {
		t.Errorf("after the reclaims: %+v, want the one device running", obs)
	}
}
