package e2e

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/simsdk"
)

const realADB = "/usr/bin/adb"

// The Android paths with Debian's real adb in place of the simulated one,
// as server (the daemon's private server) and client (passthrough and
// exec): lease, exec, upload + install, screenshot, and the reclaim on
// release. The emulator and the other SDK tools stay simulated. Without
// the real adb the test skips, unless SIMLOCK_ADB_TESTS=require.
func TestAndroidLeaseWithTheRealADB(t *testing.T) {
	if _, err := os.Stat(realADB); err != nil {
		if os.Getenv("SIMLOCK_ADB_TESTS") == "require" {
			t.Fatalf("SIMLOCK_ADB_TESTS=require but %s is missing: %v", realADB, err)
		}
		t.Skipf("no real adb at %s", realADB)
	}
	w := newWorld(t, androidConfig)
	link := filepath.Join(w.sdk, "adb")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realADB, link); err != nil {
		t.Fatal(err)
	}
	// The real adb keeps its key, and the emulator its console token, in
	// the user's home: a private one.
	userHome := t.TempDir()
	w.env = append(w.env, "HOME="+userHome)

	var l lease
	w.json(&l, "lease", "--platform", "android", "--model", "pixel_6", "--detach")
	var dev struct {
		Device struct {
			Serial string
			Env    map[string]string
		}
	}
	w.json(&dev, "lease", "renew", l.LeaseID)
	serial, port := dev.Device.Serial, dev.Device.Env["ANDROID_ADB_SERVER_PORT"]
	if serial == "" || port == "" {
		t.Fatalf("grant lacks serial/env: %+v", dev)
	}
	t.Cleanup(func() {
		kill := exec.Command(realADB, "-P", port, "kill-server")
		kill.Env = w.env
		_ = kill.Run()
	})
	// The private server is a real adb server: a real client reaches the
	// device on it.
	direct := exec.Command(realADB, "-P", port, "devices", "-l")
	direct.Env = w.env
	if out, err := direct.Output(); err != nil || !strings.Contains(string(out), serial+" ") || !strings.Contains(string(out), " device product:") {
		t.Fatalf("real adb devices -l on the private server: %v\n%s", err, out)
	}

	// A user's own real adb server, with every discovery on (its
	// emulator scan included), never sees the leased emulator.
	userPort := freeTCPPort(t)
	userEnv := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	user := func(args ...string) ([]byte, error) {
		c := exec.Command(realADB, append([]string{"-P", userPort}, args...)...)
		c.Env = userEnv
		return c.CombinedOutput()
	}
	if out, err := user("start-server"); err != nil {
		t.Fatalf("the user's adb server: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = user("kill-server") })
	if out, err := user("devices"); err != nil || strings.Contains(string(out), serial) {
		t.Fatalf("the user's adb server lists simlock's emulator (%v):\n%s", err, out)
	}

	if out := w.mustRun("exec", l.LeaseID, "--", "adb", "shell", "getprop", "sys.boot_completed"); strings.TrimSpace(out) != "1" {
		t.Fatalf("exec getprop %q", out)
	}
	if r := w.run("exec", l.LeaseID, "--", "adb", "shell", "exit 5"); r.code != 5 {
		t.Errorf("exec of a failing shell command: exit %d, want the device's 5 (%s)", r.code, r.stderr)
	}

	apkBytes, err := simsdk.SampleAPK("com.example.realadb")
	if err != nil {
		t.Fatal(err)
	}
	apk := filepath.Join(t.TempDir(), "app.apk")
	if err := os.WriteFile(apk, apkBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := w.mustRun("exec", l.LeaseID, "--upload", apk, "--", "adb", "install", "{upload:app.apk}"); !strings.Contains(out, "Success") {
		t.Fatalf("upload + install: %s", out)
	}
	if out := w.mustRun("exec", l.LeaseID, "--", "adb", "shell", "pm", "list", "packages", "-3"); !strings.Contains(out, "package:com.example.realadb") {
		t.Fatalf("pm list packages after the install: %s", out)
	}
	// The screenshot as a holder takes it: the real adb, pointed at the
	// lease's private server by the grant's environment. (Through `simlock
	// exec` the bytes arrive as text, so a PNG does not survive it, with
	// either adb.)
	shot := exec.Command(realADB, "-s", serial, "exec-out", "screencap", "-p")
	shot.Env = append(append([]string(nil), w.env...), "ANDROID_ADB_SERVER_PORT="+port)
	png, err := shot.Output()
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot through the real adb: %d bytes, %v: %q", len(png), err, png[:min(len(png), 16)])
	}
	// And through exec, as a file on the device pulled to the host.
	pulled := filepath.Join(t.TempDir(), "shot.png")
	w.mustRun("exec", l.LeaseID, "--", "adb", "shell", "screencap", "-p", "/sdcard/shot.png")
	get := exec.Command(realADB, "-s", serial, "pull", "/sdcard/shot.png", pulled)
	get.Env = shot.Env
	if out, err := get.CombinedOutput(); err != nil {
		t.Fatalf("pull of the screenshot: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(pulled); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("pulled screenshot: %d bytes, %v", len(b), err)
	}

	// Release reclaims: the holder's file is gone and the device is ready
	// again, restored from its baseline snapshot.
	w.mustRun("exec", l.LeaseID, "--", "adb", "shell", "echo dirt > /data/local/tmp/dirt")
	w.mustRun("release", l.LeaseID)
	eventually(t, "the purge to settle", 30*time.Second, func() bool {
		st := w.status()
		return len(st.Devices) == 1 && st.Devices[0].State == "ready"
	})
	if w.countEvents("snapshot.restored", "") != 1 {
		t.Fatalf("no snapshot.restored event for the purge: %+v", w.events())
	}
	var next lease
	w.json(&next, "lease", "--platform", "android", "--model", "pixel_6", "--detach", "--no-wait", "--requester", "second")
	if r := w.run("exec", next.LeaseID, "--", "adb", "shell", "cat", "/data/local/tmp/dirt"); r.code == 0 {
		t.Fatalf("the reclaimed device still has the holder's file: %+v", r)
	}
	w.mustRun("release", next.LeaseID)
}

// freeTCPPort is a loopback port nothing listens on now.
func freeTCPPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
