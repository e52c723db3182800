package thirdparty

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testnpm"
)

// realADB is Debian's (or any real) adb on PATH, never simlock's simulated
// one. Without it the test is skipped, or fails when CI asked for the real
// adb tests (SIMLOCK_ADB_TESTS=require).
func realADB(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("adb")
	if err == nil {
		out, _ := exec.Command(p, "version").Output()
		if bytes.Contains(out, []byte("simlock simulated SDK")) {
			err = os.ErrNotExist
		}
	}
	if err != nil {
		if os.Getenv("SIMLOCK_ADB_TESTS") == "require" {
			t.Fatal("no real adb on PATH and SIMLOCK_ADB_TESTS=require (Debian: apt-get install adb)")
		}
		t.Skip("no real adb on PATH: skipping (set SIMLOCK_ADB_TESTS=require to make this a failure)")
	}
	return p
}

// useRealADB puts the real adb in the world's SDK directory in place of the
// simulated one: the daemon's private server and every adb a lease holder
// runs are then the real program, and only the emulator is simulated.
func (w *world) useRealADB(adb string) {
	w.t.Helper()
	link := filepath.Join(w.root, "sdk", "adb")
	if err := os.Remove(link); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Symlink(adb, link); err != nil {
		w.t.Fatal(err)
	}
}

type androidGrant struct {
	LeaseID string `json:"leaseId"`
	Device  struct {
		Serial string            `json:"serial"`
		Env    map[string]string `json:"env"`
	} `json:"device"`
}

func (w *world) leaseAndroid() androidGrant {
	w.t.Helper()
	var g androidGrant
	if err := json.Unmarshal([]byte(w.simlock("lease", "--platform", "android", "--model", "pixel_6", "--detach")), &g); err != nil {
		w.t.Fatal(err)
	}
	if g.Device.Serial == "" || g.Device.Env["ANDROID_ADB_SERVER_PORT"] == "" {
		w.t.Fatalf("the grant names no serial or adb port: %+v", g)
	}
	return g
}

// Tango's adb client (a pure-protocol library: it speaks the adb server's
// wire protocol itself and runs no adb binary) drives a leased simulated
// emulator through the home's private server, which is Debian's adb: it
// lists exactly the leased device, runs a command under shell protocol v2
// with its exit code and stderr apart, and pushes and pulls a file byte for
// byte.
func TestTangoADBClientDrivesALeasedEmulatorThroughTheRealServer(t *testing.T) {
	adb := realADB(t)
	lib := testnpm.TangoADB(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("npm is here but node is not")
	}
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1}}}`)
	w.useRealADB(adb)
	g := w.leaseAndroid()
	port := g.Device.Env["ANDROID_ADB_SERVER_PORT"]
	t.Cleanup(func() { _ = exec.Command(adb, "-P", port, "kill-server").Run() })

	script, err := os.ReadFile("testdata/tango_probe.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves imports from the script's directory up, so the script
	// runs from inside the library's install.
	probe := filepath.Join(lib, "simlock-probe-"+filepath.Base(w.root)+".mjs")
	if err := os.WriteFile(probe, script, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(probe) })
	blob := make([]byte, 300_000)
	rand.Read(blob)
	local := filepath.Join(w.root, "blob.bin")
	if err := os.WriteFile(local, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.run(node, nil, probe, port, g.Device.Serial, local, "/sdcard/Download/simlock-blob.bin")
	if r.code != 0 {
		t.Fatalf("the client failed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var got struct {
		Devices       []struct{ Serial, State, Model string }
		ShellProtocol bool
		Shell         struct {
			Stdout, Stderr string
			ExitCode       int
		}
		Stat           struct{ Size int }
		Pushed, Pulled string
		PulledBytes    int
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(got.Devices) != 1 || got.Devices[0].Serial != g.Device.Serial || got.Devices[0].State != "device" || got.Devices[0].Model == "" {
		t.Errorf("devices %+v, want exactly the leased %s online", got.Devices, g.Device.Serial)
	}
	model := strings.TrimSpace(w.simlock("exec", g.LeaseID, "--", "adb", "shell", "getprop", "ro.product.model"))
	if !got.ShellProtocol || got.Shell.ExitCode != 7 || strings.TrimSpace(got.Shell.Stdout) != model ||
		!strings.Contains(got.Shell.Stderr, "simlock-no-such-dir") || strings.Contains(got.Shell.Stdout, "simlock-no-such-dir") {
		t.Errorf("shell v2: %+v (model %q)", got.Shell, model)
	}
	if got.Pushed == "" || got.Pushed != got.Pulled || got.PulledBytes != len(blob) || got.Stat.Size != len(blob) {
		t.Errorf("push/pull: pushed %s, pulled %s (%d bytes, stat %d), want %d bytes back", got.Pushed, got.Pulled, got.PulledBytes, got.Stat.Size, len(blob))
	}
}

// Two homes on one host registry, each with its own real adb server, and a
// user's own adb server on the default port 5037: each home's server lists
// only that home's emulator, and the user's lists neither.
func TestRealADBServersOfTwoHomesAndTheUsersNeverSeeEachOthersEmulators(t *testing.T) {
	adb := realADB(t)
	host := t.TempDir()
	// The host allows both homes a running device at once.
	cfg := `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1},"host":{"maxRunning":4}}}`
	a, b := newWorldOnHost(t, cfg, host), newWorldOnHost(t, cfg, host)
	a.useRealADB(adb)
	b.useRealADB(adb)
	ga, gb := a.leaseAndroid(), b.leaseAndroid()
	pa, pb := ga.Device.Env["ANDROID_ADB_SERVER_PORT"], gb.Device.Env["ANDROID_ADB_SERVER_PORT"]
	if pa == pb || ga.Device.Serial == gb.Device.Serial {
		t.Fatalf("two homes share an adb port or serial: %s %s, %s %s", pa, ga.Device.Serial, pb, gb.Device.Serial)
	}
	t.Cleanup(func() {
		_ = exec.Command(adb, "-P", pa, "kill-server").Run()
		_ = exec.Command(adb, "-P", pb, "kill-server").Run()
	})
	// The user's server: started here on 5037 unless one already runs
	// there, in which case that one is the user's and is only read.
	if ln, err := net.Listen("tcp", "127.0.0.1:5037"); err == nil {
		ln.Close()
		// The server adb forks keeps no pipe of ours: its output goes nowhere.
		if err := exec.Command(adb, "-P", "5037", "start-server").Run(); err != nil {
			t.Fatalf("start the user's adb server: %v", err)
		}
		t.Cleanup(func() { _ = exec.Command(adb, "-P", "5037", "kill-server").Run() })
	}
	list := func(port string) string {
		t.Helper()
		c := exec.Command(adb, "-P", port, "devices")
		// Were a server gone, adb would fork a new one holding our pipe:
		// stop waiting for output once adb itself has exited.
		c.WaitDelay = 5 * time.Second
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("adb -P %s devices: %v\n%s", port, err, out)
		}
		return string(out)
	}
	for _, c := range []struct {
		port      string
		see, miss []string
	}{
		{pa, []string{ga.Device.Serial}, []string{gb.Device.Serial}},
		{pb, []string{gb.Device.Serial}, []string{ga.Device.Serial}},
		{"5037", nil, []string{ga.Device.Serial, gb.Device.Serial}},
	} {
		out := list(c.port)
		for _, s := range c.see {
			if !strings.Contains(out, s+"\tdevice") {
				t.Errorf("the server on %s does not list %s online:\n%s", c.port, s, out)
			}
		}
		for _, s := range c.miss {
			if strings.Contains(out, s) {
				t.Errorf("the server on %s lists %s, another home's emulator:\n%s", c.port, s, out)
			}
		}
	}
}
