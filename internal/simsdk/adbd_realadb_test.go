package simsdk

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/loopback"
)

// The real adb (Debian's, at /usr/bin/adb) against the simulated emulator:
// the server started as the Android driver starts it, with every kind of
// discovery off, so it learns of the emulator only from the emulator's own
// announcement, and the client run as users and tools run it.

const realADBPath = "/usr/bin/adb"

// realADBEnv is the driver's server environment (drivers/android
// serverScopeEnv): no emulator scan, no USB, no mDNS.
var realADBEnv = []string{"ADB_EMU=0", "ADB_USB=0", "ADB_MDNS=0", "ADB_MDNS_AUTO_CONNECT=", "ADB_LOCAL_TRANSPORT_MAX_PORT=5554"}

// realADB is a private real adb server for one test.
type realADB struct {
	t    *testing.T
	port string
	home string // the adb's HOME: its keys and the console auth token
}

func needRealADB(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(realADBPath); err != nil {
		if os.Getenv("SIMLOCK_ADB_TESTS") == "require" {
			t.Fatalf("SIMLOCK_ADB_TESTS=require but %s is missing: %v", realADBPath, err)
		}
		t.Skipf("no real adb at %s", realADBPath)
	}
}

// freePort is a port in [from, to] that can be bound now.
func freePort(t *testing.T, from, to int) int {
	t.Helper()
	for p := from; p <= to; p++ {
		if loopback.Free(p, 1) {
			return p
		}
	}
	t.Skipf("no free port in %d–%d", from, to)
	return 0
}

// startRealADB starts the real server on a free port and points the
// harness (and the emulators it starts) at it.
func startRealADB(t *testing.T, a *androidHarness) *realADB {
	t.Helper()
	needRealADB(t)
	r := &realADB{t: t, port: strconv.Itoa(freePort(t, 15037, 15237)), home: t.TempDir()}
	a.env[envADBServerPort] = r.port
	a.env["HOME"] = r.home
	if res := r.run("start-server"); res.code != 0 {
		t.Fatalf("real adb start-server: %+v", res)
	}
	t.Cleanup(func() { r.run("kill-server") })
	return r
}

func (r *realADB) cmd(args ...string) *exec.Cmd {
	c := exec.Command(realADBPath, append([]string{"-P", r.port}, args...)...)
	c.Env = append(os.Environ(), "HOME="+r.home)
	c.Env = append(c.Env, realADBEnv...)
	return c
}

// run runs the real adb client to completion.
func (r *realADB) run(args ...string) result {
	c := r.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("adb %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// bootReal starts an emulator announcing itself to the real server and
// waits until the server lists it as a device.
func bootReal(t *testing.T, a *androidHarness, r *realADB, avd string) (serial string, p *emuProc) {
	t.Helper()
	a.createAVD(avd, hostImage(36, "google_apis"), "pixel_6")
	port := freeConsole(t, 16000, 16998)
	p = a.startEmulator(emulatorArgs(avd, strconv.Itoa(port))...)
	serial = emulatorSerial(port)
	a.waitFor(serial+" in the real adb's devices", func() bool {
		if p.exited() {
			t.Fatalf("emulator exited: %s", p.out.String())
		}
		return strings.Contains(r.run("devices").stdout, serial+"\tdevice\n")
	})
	return serial, p
}

func TestRealADBDevicesShellAndExitCode(t *testing.T) {
	a := newAndroid(t)
	r := startRealADB(t, a)
	serial, _ := bootReal(t, a, r, "real1")

	product, device := productNames(hostABI())
	long := r.run("devices", "-l").stdout
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(serial) + ` +device product:(\S+) model:(\S+) device:(\S+) transport_id:\d+$`).FindStringSubmatch(long)
	if row == nil || row[1] != product || row[3] != device {
		t.Fatalf("devices -l:\n%s", long)
	}
	t.Logf("real adb devices -l:\n%s", long)
	model := a.shell(serial, "getprop ro.product.model").stdout // the simulated binary's answer
	if got := r.run("-s", serial, "shell", "getprop", "ro.product.model"); got.code != 0 || got.stdout != model {
		t.Errorf("real adb getprop ro.product.model: %+v, simulated adb says %q", got, model)
	}
	if row[2] != strings.TrimSpace(model) {
		t.Errorf("devices -l model:%s, getprop says %q", row[2], model)
	}
	// The shell protocol carries the exit status and keeps stderr apart.
	got := r.run("-s", serial, "shell", "echo out; echo err >&2; cat /nope; exit 7")
	if got.code != 7 || got.stdout != "out\n" || !strings.Contains(got.stderr, "cat: /nope: No such file or directory") {
		t.Errorf("shell exit status: %+v", got)
	}
	// Stdin reaches the command.
	c := r.cmd("-s", serial, "shell", "grep", "b")
	c.Stdin = strings.NewReader("a\nb\nc\n")
	if out, err := c.Output(); err != nil || string(out) != "b\n" {
		t.Errorf("shell with stdin: %q, %v", out, err)
	}
	if got := r.run("-s", serial, "get-state"); got.stdout != "device\n" {
		t.Errorf("get-state: %+v", got)
	}
}

func TestRealADBPushPullInstallScreencap(t *testing.T) {
	a := newAndroid(t)
	r := startRealADB(t, a)
	serial, _ := bootReal(t, a, r, "real2")
	dir := t.TempDir()

	// push and pull: byte-identical, over several DATA chunks.
	content := make([]byte, 300_000)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := r.run("-s", serial, "push", src, "/sdcard/Download/blob.bin"); got.code != 0 || !strings.Contains(got.stdout, "1 file pushed") {
		t.Fatalf("push: %+v", got)
	}
	back := filepath.Join(dir, "back.bin")
	if got := r.run("-s", serial, "pull", "/sdcard/Download/blob.bin", back); got.code != 0 || !strings.Contains(got.stdout, "1 file pulled") {
		t.Fatalf("pull: %+v", got)
	}
	if b, err := os.ReadFile(back); err != nil || !bytes.Equal(b, content) {
		t.Errorf("pulled %d bytes (%v), pushed %d: not identical", len(b), err, len(content))
	}
	// The simulated binary sees the pushed file: one data partition.
	if got := a.shell(serial, "ls /sdcard/Download"); got.stdout != "blob.bin\n" {
		t.Errorf("simulated adb ls after a real push: %+v", got)
	}
	// Missing remote file: the real client's own refusal.
	if got := r.run("-s", serial, "pull", "/sdcard/none", dir); got.code == 0 {
		t.Errorf("pull of a missing file succeeded: %+v", got)
	}

	// install: the streamed path (exec:cmd package install -S).
	apk := filepath.Join(dir, "app-debug.apk")
	if err := os.WriteFile(apk, binaryManifest(t, "com.example.realadb"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := r.run("-s", serial, "install", apk); got.code != 0 || !strings.Contains(got.stdout, "Success") {
		t.Fatalf("install: %+v", got)
	}
	if got := a.shell(serial, "pm list packages -3"); got.stdout != "package:com.example.realadb\n" {
		t.Errorf("packages after a real install: %+v", got)
	}

	// exec-out screencap -p: the PNG, untouched, as the simulated adb
	// passes it.
	png, err := r.cmd("-s", serial, "exec-out", "screencap", "-p").Output()
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("exec-out screencap -p: %d bytes, %v", len(png), err)
	}
	if sim := a.adb("-s", serial, "exec-out", "screencap", "-p"); sim.stdout != string(png) {
		t.Errorf("real exec-out screencap returned %d bytes, the simulated adb %d", len(png), len(sim.stdout))
	}
}

// The emulator going away takes the device off the real server's list.
func TestRealADBDeviceLeavesWhenTheEmulatorExits(t *testing.T) {
	a := newAndroid(t)
	r := startRealADB(t, a)
	serial, p := bootReal(t, a, r, "real3")
	// The simulated adb, which sends the kill, lists the emulator from its
	// own records; on a loaded machine they can trail the real server's view.
	a.waitFor(serial+" in the simulated adb's devices", func() bool {
		return strings.Contains(a.adb("devices").stdout, serial+"\tdevice")
	})
	a.ok("adb", "-s", serial, "emu", "kill")
	p.wait(waitLimit)
	a.waitFor(serial+" to leave the real adb's list", func() bool {
		return !strings.Contains(r.run("devices").stdout, serial)
	})
}

// The simulated adb binary says what the real adb says, command for
// command, against the same emulator: texts, exit statuses, and which
// stream each line goes to. Transfer rates and times are the only parts
// left out. The differences that remain are listed in docs/testing.md
// ("Real adb against the simulated one") and are not compared here.
func TestRealADBAgreesWithTheSimulatedOne(t *testing.T) {
	a := newAndroid(t)
	r := startRealADB(t, a)
	serial, _ := bootReal(t, a, r, "real4")
	dir := t.TempDir()
	local := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(local, []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	timing := regexp.MustCompile(`\d+\.\d MB/s \((\d+) bytes in \d+\.\d{3}s\)`)
	norm := func(s string) string { return timing.ReplaceAllString(s, "R MB/s ($1 bytes in T)") }
	on := func(args ...string) []string { return append([]string{"-s", serial}, args...) }
	for _, c := range [][]string{
		{"devices"}, {"devices", "-l"}, on("get-serialno"), on("get-state"),
		on("shell", "nosuchcmd"), on("shell", "exit 300"), on("shell", "id"),
		on("exec-out", "echo hi; exit 3"),
		on("push", local, "/sdcard/h"), on("pull", "/sdcard/h", filepath.Join(dir, "back")),
		on("pull", "/sdcard/none", dir), on("push", filepath.Join(dir, "missing"), "/sdcard/"),
		on("push", local, "/system/x"), on("install", filepath.Join(dir, "nope.apk")),
		on("uninstall", "com.nope"), on("root"), on("wait-for-device"), on("unroot"),
		on("emu", "avd", "name"), on("emu", "ping"), on("emu", "frobnicate"),
		{"bogus"},
	} {
		real, sim := r.run(c...), a.adb(c...)
		real.stdout, real.stderr, sim.stdout, sim.stderr = norm(real.stdout), norm(real.stderr), norm(sim.stdout), norm(sim.stderr)
		if real != sim {
			t.Errorf("adb %s:\nreal      %+v\nsimulated %+v", strings.Join(c, " "), real, sim)
		}
	}
}

// The console on its TCP port: the captured greeting, auth with the token
// the emulator created in $HOME, then commands; and the real adb's `emu`
// (which reads the token itself) stops the emulator.
func TestRealADBEmuKillThroughTheConsole(t *testing.T) {
	a := newAndroid(t)
	r := startRealADB(t, a)
	serial, p := bootReal(t, a, r, "real5")
	port := strings.TrimPrefix(serial, "emulator-")

	c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitLimit)) // a hang guard
	br := bufio.NewReader(c)
	readReply := func() string {
		t.Helper()
		var b strings.Builder
		for {
			l, err := br.ReadString('\n')
			b.WriteString(l)
			if err != nil {
				t.Fatalf("console: %v after %q", err, b.String())
			}
			if l == "OK\r\n" || strings.HasPrefix(l, "KO:") {
				return b.String()
			}
		}
	}
	captured, err := os.ReadFile("../drivers/android/testdata/emulator/console-banner-auth-required-2024.bin")
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(r.home, consoleTokenFile)
	want := strings.ReplaceAll(string(captured), "/home/pcxlk/.emulator_console_auth_token", tokenPath)
	if got := readReply(); got != want {
		t.Errorf("greeting\n%q\nwant the captured\n%q", got, want)
	}
	fmt.Fprint(c, "avd name\r\n")
	if got := readReply(); !strings.HasPrefix(got, "KO:") {
		t.Errorf("a command before auth answered %q", got)
	}
	token, err := os.ReadFile(tokenPath)
	if err != nil || len(token) == 0 {
		t.Fatalf("token file: %q %v", token, err)
	}
	fmt.Fprintf(c, "auth %s\r\n", token)
	if got := readReply(); got != "Android Console: type 'help' for a list of commands\r\nOK\r\n" {
		t.Errorf("auth answered %q", got)
	}
	fmt.Fprint(c, "avd name\r\n")
	if got := readReply(); got != "real5\r\nOK\r\n" {
		t.Errorf("avd name answered %q", got)
	}
	c.Close()

	if got := r.run("-s", serial, "emu", "kill"); got.code != 0 {
		t.Fatalf("real adb emu kill: %+v", got)
	}
	if code := p.wait(waitLimit); code != 0 {
		t.Errorf("emulator exit %d after emu kill\n%s", code, p.out.String())
	}
	a.waitFor(serial+" to leave the real adb's list", func() bool {
		return !strings.Contains(r.run("devices").stdout, serial)
	})
}
