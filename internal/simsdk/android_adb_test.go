package simsdk

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestADBVersionFollowsCaptureAndSaysSimulated(t *testing.T) {
	a := newAndroid(t)
	out := a.ok("adb", "version")
	capture := strings.Split(readTestdata(t, "android/adb/version-platform-tools-36.0.0-linux.txt"), "\n")
	got := strings.Split(out, "\n")
	if len(got) != len(capture) || got[0] != capture[0] || !strings.HasPrefix(got[1], capture[1]) ||
		!strings.HasPrefix(got[2], "Installed as /") || !strings.HasPrefix(got[3], "Running on ") {
		t.Errorf("adb version:\n%s\ncapture:\n%s", out, strings.Join(capture, "\n"))
	}
	if !strings.Contains(out, "simulated") {
		t.Error(`adb version must say "simulated"`)
	}
	// version does not start a server.
	if r := a.adb("version"); r.stderr != "" {
		t.Errorf("version started a server: %q", r.stderr)
	}
}

func TestADBServerStartAndDeviceErrors(t *testing.T) {
	a := newAndroid(t)
	delete(a.env, envADBServerPort)
	r := a.adb("devices")
	// The capture pasted adb's stderr and stdout together, minus the
	// final blank line.
	want := readTestdata(t, "android/adb/devices-daemon-start-empty-2021.txt")
	if r.code != 0 || strings.TrimRight(r.stderr+r.stdout, "\n") != strings.TrimRight(want, "\n") || !strings.HasSuffix(r.stdout, "attached\n\n") {
		t.Errorf("first adb devices: %+v\nwant %q", r, want)
	}
	if r := a.adb("devices"); r.stderr != "" || r.stdout != "List of devices attached\n\n" {
		t.Errorf("second adb devices: %+v", r)
	}
	a.ok("adb", "kill-server")
	if r := a.adb("start-server"); !strings.Contains(r.stderr, "starting now at tcp:5037") {
		t.Errorf("start-server after kill-server: %+v", r)
	}
	// -P and ANDROID_ADB_SERVER_PORT pick another server.
	a.env[envADBServerPort] = "5137"
	if r := a.adb("devices"); !strings.Contains(r.stderr, "tcp:5137") {
		t.Errorf("env port: %+v", r)
	}
	if r := a.adb("-P", "5237", "devices"); !strings.Contains(r.stderr, "tcp:5237") {
		t.Errorf("-P port: %+v", r)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"-s", "emulator-5554", "shell", "true"}, "adb: device 'emulator-5554' not found\n"},
		{[]string{"shell", "true"}, "error: no devices/emulators found\n"},
		{[]string{"-s", "emulator-5700", "emu", "kill"}, "adb: device 'emulator-5700' not found\n"},
		{[]string{"frobnicate"}, "adb: unknown command frobnicate\n"},
	} {
		if r := a.adb(tc.args...); r.code != 1 || r.stderr != tc.stderr {
			t.Errorf("%v: exit %d stderr %q, want %q", tc.args, r.code, r.stderr, tc.stderr)
		}
	}
	a.env[envADBServerPort] = "nope"
	if r := a.adb("devices"); r.code != 1 || !strings.Contains(r.stderr, "ANDROID_ADB_SERVER_PORT") {
		t.Errorf("bad env port: %+v", r)
	}
}

// fakeRun publishes a run record as if an emulator were up, for testing
// the shell without a process: the test process itself holds the port
// lock and is the "emulator".
func fakeRun(t *testing.T, a *androidHarness, avdName string) *emuRun {
	t.Helper()
	a.createAVD(avdName, hostImage(36, "google_apis"), "pixel_6")
	av, _ := (&sdk{home: a.home, env: func(k string) string { return a.env[k] }}).loadAVD(avdName)
	s := &sdk{home: a.home, env: func(k string) string { return a.env[k] }, now: time.Now}
	dir := s.runDir(5800)
	l, ok, err := tryLock(procLockPath(dir))
	if err != nil || !ok {
		t.Fatal("port lock", err)
	}
	t.Cleanup(l.release)
	now := time.Now().UTC()
	r := &emuRun{AVD: avdName, AVDDir: av.Dir, ConsolePort: 5800, ADBServerPort: 5137, PID: os.Getpid(),
		DataDir: av.userdataDir(), BootAnim: true, API: 36, Tag: "google_apis", ABI: hostABI(), Density: 420,
		StartedAt: now, OnlineAt: &now, BootedAt: &now}
	if err := writeRun(dir, r); err != nil {
		t.Fatal(err)
	}
	// As a launched emulator does, it announces itself to the running
	// server.
	a.ok("adb", "start-server")
	if heard, err := s.announce(5137, r); err != nil || !heard {
		t.Fatal("announce", heard, err)
	}
	return r
}

func TestADBShellCommands(t *testing.T) {
	a := newAndroid(t)
	r := fakeRun(t, a, "shelly")
	const s = "emulator-5800"
	a.ok("adb", "start-server")
	for _, tc := range []struct {
		cmd            string
		stdout, stderr string
		code           int
	}{
		{"echo 'dev-1' > /data/local/tmp/simlock-mark", "", "", 0},
		{"cat /data/local/tmp/simlock-mark", "dev-1\n", "", 0},
		{"echo \"two words\" >> /data/local/tmp/simlock-mark; cat /data/local/tmp/simlock-mark", "dev-1\ntwo words\n", "", 0},
		{"cat /data/local/tmp/nothing", "", "cat: /data/local/tmp/nothing: No such file or directory\n", 1},
		{"cat /data/local/tmp/nothing 2>/dev/null || echo missing", "missing\n", "", 0},
		{"true && echo yes; false && echo no", "yes\n", "", 1},
		{"echo hi > /system/x", "", "/system/bin/sh: can't create /system/x: Read-only file system\n", 1},
		{"frob", "", "/system/bin/sh: frob: inaccessible or not found\n", 127},
		{"getprop ro.build.version.sdk", "36\n", "", 0},
		{"getprop | grep boot_completed", "[sys.boot_completed]: [1]\n", "", 0},
		{"getprop no.such.key", "\n", "", 0},
		{"setprop debug.x 7 && getprop debug.x", "7\n", "", 0},
		{"echo a > /sdcard/f && cat /storage/emulated/0/f && ls /sdcard", "a\nf\n", "", 0},
		{"rm /data/local/tmp/simlock-mark && ls /data/local/tmp", "", "", 0},
		{"sh -c 'exit 3'", "", "", 3},
		{"pm list packages -3", "", "", 0},
		{"whoami", "shell\n", "", 0},
		{"yes | head -n 3", "y\ny\ny\n", "", 0},
		{"yes ab c | head -c 7", "ab c\nab", "", 0},
		{"yes | head -2 | cat", "y\ny\n", "", 0},
		{"getprop | grep boot_completed | head -n 1", "[sys.boot_completed]: [1]\n", "", 0},
		{"echo one; exit 3 | cat; echo two", "one\ntwo\n", "", 0},
		{"head -c 3 /data/local/tmp/nothing", "", "head: /data/local/tmp/nothing: No such file or directory\n", 1},
		{"head -c x", "", "head: -c: not integer: x\n", 1},
		{"echo abcdef > /data/local/tmp/h && head -c 3 /data/local/tmp/h", "abc", "", 0},
	} {
		res := a.adb("-s", s, "shell", tc.cmd)
		if res.stdout != tc.stdout || res.stderr != tc.stderr || res.code != tc.code {
			t.Errorf("%q: exit %d stdout %q stderr %q; want %d %q %q", tc.cmd, res.code, res.stdout, res.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	// A pipeline streams: yes never ends, head stops it after 4 MiB.
	if res := a.adb("-s", s, "shell", "yes | head -c 4194304"); len(res.stdout) != 4<<20 || res.code != 0 || res.stdout[:4] != "y\ny\n" {
		t.Errorf("yes | head -c: exit %d, %d bytes, stderr %q", res.code, len(res.stdout), res.stderr)
	}
	// Arguments are joined with spaces, as adb does.
	if res := a.adb("-s", s, "shell", "echo", "a", "b"); res.stdout != "a b\n" {
		t.Errorf("joined args: %+v", res)
	}
	// Without a command the shell reads commands from stdin.
	if res := a.runIn("echo one\nexit 4\necho never\n", "adb", "-s", s, "shell"); res.stdout != "one\n" || res.code != 4 {
		t.Errorf("stdin shell: %+v", res)
	}

	// Light install/uninstall: packages live on the data partition.
	apk := filepath.Join(t.TempDir(), "com.example.app.apk")
	if err := os.WriteFile(apk, []byte("PK"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := a.ok("adb", "-s", s, "install", "-r", apk); out != "Performing Streamed Install\nSuccess\n" {
		t.Errorf("install: %q", out)
	}
	if out := a.ok("adb", "-s", s, "shell", "pm list packages -3"); out != "package:com.example.app\n" {
		t.Errorf("pm list: %q", out)
	}
	if out := a.ok("adb", "-s", s, "uninstall", "com.example.app"); out != "Success\n" {
		t.Errorf("uninstall: %q", out)
	}
	if res := a.adb("-s", s, "uninstall", "com.example.app"); res.code != 1 || res.stdout != "Failure [DELETE_FAILED_INTERNAL_ERROR]\n" {
		t.Errorf("uninstall again: %+v", res)
	}
	if res := a.adb("-s", s, "install", "/no/such.apk"); res.code != 1 || res.stderr != "adb: failed to stat /no/such.apk: No such file or directory\n" {
		t.Errorf("install missing: %+v", res)
	}
	a.env[EnvFaults] = "install-fail@1"
	if res := a.adb("-s", s, "install", apk); res.code != 1 ||
		!strings.HasPrefix(res.stderr, "adb: failed to install "+apk+": Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE") ||
		!strings.Contains(res.stderr, "(simlock simulated fault install-fail)") {
		t.Errorf("install-fail: %+v", res)
	}
	// push and pull.
	a.ok("adb", "-s", s, "push", apk, "/data/local/tmp/")
	if out := a.ok("adb", "-s", s, "shell", "cat /data/local/tmp/com.example.app.apk"); out != "PK" {
		t.Errorf("pushed file: %q", out)
	}
	_ = r
}

func TestADBDevicesLongFormat(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "longy")
	out := a.ok("adb", "devices", "-l")
	product, device := productNames(hostABI())
	// The -l layout of the captures: serial padded to 22 columns, then
	// the state and key:value words, transport_id last.
	capture := strings.Split(readTestdata(t, "android/adb/devices-l-physical-transport-id-2024.txt"), "\n")
	if len(capture[1]) < 23 || capture[1][22] != ' ' || capture[1][23:29] != "device" {
		t.Fatal("capture layout changed")
	}
	want := "List of devices attached\nemulator-5800          device product:" + product + " model:" + product + " device:" + device + " transport_id:1\n\n"
	if out != want {
		t.Errorf("devices -l:\n%q\nwant\n%q", out, want)
	}
	if out := a.ok("adb", "devices"); out != "List of devices attached\nemulator-5800\tdevice\n\n" {
		t.Errorf("devices: %q", out)
	}
	if out := a.ok("adb", "-P", "5037", "devices"); out != "List of devices attached\n\n" {
		t.Errorf("an emulator that announced itself to 5137 is listed by 5037: %q", out)
	}
	if out := a.ok("adb", "get-serialno"); out != "emulator-5800\n" {
		t.Errorf("get-serialno: %q", out)
	}
}

func TestGetpropFollowsTheCapturedDump(t *testing.T) {
	capture := parseGetpropDump([]byte(string(getpropBase)))
	start := time.Now()
	booted := start.Add(time.Minute)
	r := &emuRun{AVD: "Pixel_9", API: 35, Tag: "google_apis_playstore", ABI: "x86_64", BootAnim: true, StartedAt: start, OnlineAt: &start, BootedAt: &booted}

	booting := deviceProps(r, start)
	out := booting.format()
	if !regexp.MustCompile(`^(\[[^\]]+\]: \[[^\]\n]*\]\n)+$`).MatchString(out) {
		t.Errorf("getprop output is not [key]: [value] lines:\n%s", out)
	}
	// Mid-boot, as the capture: the animation runs, no boot_completed.
	if booting["init.svc.bootanim"] != "running" || booting["service.bootanim.exit"] != "0" || booting["sys.boot_completed"] != "" {
		t.Errorf("booting: %q %q %q", booting["init.svc.bootanim"], booting["service.bootanim.exit"], booting["sys.boot_completed"])
	}
	kept := 0
	for k, v := range capture {
		got, ok := booting[k]
		if !ok {
			t.Errorf("captured key %s missing", k)
		}
		if got == v {
			kept++
		}
	}
	if kept < len(capture)*3/4 {
		t.Errorf("only %d of %d captured values kept", kept, len(capture))
	}
	if booting["ro.build.version.sdk"] != "35" || booting["ro.build.version.release"] != "15" || booting["ro.product.cpu.abi"] != "x86_64" ||
		booting["ro.build.type"] != "user" || booting["ro.debuggable"] != "0" {
		t.Errorf("image identity not applied: %v", booting)
	}

	done := deviceProps(r, booted)
	if done["sys.boot_completed"] != "1" || done["dev.bootcomplete"] != "1" || done["init.svc.bootanim"] != "stopped" {
		t.Errorf("booted: %q %q %q", done["sys.boot_completed"], done["dev.bootcomplete"], done["init.svc.bootanim"])
	}
	r.BootAnim = false
	if p := deviceProps(r, booted); p["init.svc.bootanim"] != "" || p["debug.sf.nobootanimation"] != "1" {
		t.Error("-no-boot-anim should leave init.svc.bootanim unset")
	}
}
