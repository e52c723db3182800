package simsdk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// Reclaims of the real Android driver over the simulated SDK: the emulator
// version in the baseline tag is read once for the binary (at the first
// boot's capture), not once per reclaim, and a reclaim after the load runs
// one getprop and no wait-for-device; the holder's file is still gone and
// the device still answers booted with its mark.
func TestAndroidReclaimStartsTwoProcesses(t *testing.T) {
	t.Parallel()
	a := newAndroid(t)
	root := filepath.Join(t.TempDir(), "root")
	logFile := filepath.Join(t.TempDir(), "commands.log")
	hp := testHostPorts(t, openTestHost(t, nil), "/homes/one", 1)
	hp.ConsoleBase = freeConsole(t, 27400, 27800)
	d := driverFor(t, a, root, hp, EnvCommandLog+"="+logFile)
	ctx := context.Background()
	dev, serial, port := bootOne(t, d)
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = port
	commands := func() []string {
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	count := func(cmds []string, part string) int {
		n := 0
		for _, c := range cmds {
			if strings.Contains(c, part) {
				n++
			}
		}
		return n
	}
	if n := count(commands(), "-version"); n != 1 {
		t.Fatalf("first boot read the emulator version %d times, want 1", n)
	}
	a.env[envAVDHome] = root
	for i := range 2 {
		a.ok("adb", "-s", serial, "shell", "echo dirt > /data/local/tmp/dirt")
		before := len(commands())
		if err := d.Reclaim(ctx, dev); err != nil {
			t.Fatalf("reclaim %d: %v", i, err)
		}
		ran := commands()[before:]
		if len(ran) != 2 || count(ran, "snapshot load") != 1 || count(ran, "getprop") != 1 {
			t.Errorf("reclaim %d ran %q, want the snapshot load and one getprop", i, ran)
		}
		if r := a.shell(serial, "cat /data/local/tmp/dirt"); r.code != 1 {
			t.Errorf("reclaim %d left the holder's file: %+v", i, r)
		}
	}
	if n := count(commands(), "-version"); n != 1 {
		t.Errorf("the emulator version was read %d times over two reclaims, want once in all", n)
	}
	obs, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 || obs[0].Run != core.RunRunning || obs[0].MarkOK == nil || !*obs[0].MarkOK {
		t.Errorf("after the reclaims: %+v", obs)
	}
	if err := d.Shutdown(ctx, dev); err != nil {
		t.Fatal(err)
	}
}
