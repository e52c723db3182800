package simsdk

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/loopback"
	"golang.org/x/sys/unix"
)

// driverFlags are the options the Android driver launches emulators with.
var driverFlags = []string{"-no-window", "-no-audio", "-no-boot-anim", "-no-snapshot-save"}

func emulatorArgs(avd string, port string, extra ...string) []string {
	return append(append([]string{"-avd", avd, "-port", port}, driverFlags...), extra...)
}

func TestEmulatorQueriesMatchCaptures(t *testing.T) {
	a := newAndroid(t)
	// The captured unknown-AVD text is for an emulator without
	// ANDROID_AVD_HOME, searching $HOME/.android/avd.
	delete(a.env, envAVDHome)
	r := a.run("emulator", "-avd", "tmp1")
	if want := readTestdata(t, "android/emulator/error-unknown-avd-name-2019.txt"); r.code != 1 || r.stdout != want {
		t.Errorf("unknown AVD: exit %d\n%q\nwant\n%q", r.code, r.stdout, want)
	}
	a.env[envAVDHome] = a.avdHome
	if r := a.run("emulator", "@nope"); !strings.Contains(r.stdout, "ANDROID_AVD_HOME is defined but there is no file nope.ini in $ANDROID_AVD_HOME\n") {
		t.Errorf("unknown AVD with ANDROID_AVD_HOME: %q", r.stdout)
	}

	// -list-avds: exactly the names, one a line (the captured layout), as
	// emulator 36.x prints them: no crash-data line before them.
	for _, n := range []string{"Android_TV_720p_API_28", "Pixel_2_API_30"} {
		a.createAVD(n, hostImage(35, "google_apis"), "pixel_2")
	}
	if out, want := a.ok("emulator", "-list-avds"), readTestdata(t, "android/emulator/list-avds-2021.txt"); out != want {
		t.Errorf("-list-avds %q, want exactly %q", out, want)
	}

	out := a.ok("emulator", "-version")
	if !regexp.MustCompile(`(?m)^Android emulator version 36\.1\.9\.0 \(build_id \d+\) \(CL:N/A\)$`).MatchString(out) {
		t.Errorf("-version:\n%s", out)
	}
	// -version still logs the crash-data line, in the captured shape.
	capturedInfo, _, _ := strings.Cut(readTestdata(t, "android/emulator/list-avds-with-info-crashdata-line-2024.txt"), "\n")
	shape := regexp.MustCompile(`(?m)^INFO    \| Storing crashdata in: /tmp/android-\S+/emu-crash-[0-9.]+\.db, detection is enabled for process: \d+$`)
	if !shape.MatchString(capturedInfo) || !shape.MatchString(out) {
		t.Errorf("-version's crash-data line does not have the captured shape %q:\n%s", capturedInfo, out)
	}
	if r := a.run("emulator"); r.code != 1 || !strings.Contains(r.stdout, "No AVD specified") {
		t.Errorf("no AVD: %+v", r)
	}
	if r := a.run("emulator", "-avd", "Pixel_2_API_30", "-bogus"); r.code != 1 || !strings.Contains(r.stdout, "unknown option: -bogus") {
		t.Errorf("bad option: %+v", r)
	}
	// An AVD whose image is gone does not start.
	a.ok("sdkmanager", "--uninstall", hostImage(35, "google_apis"))
	if r := a.run("emulator", "-avd", "Pixel_2_API_30"); r.code != 1 || !strings.HasPrefix(r.stdout, "PANIC: Broken AVD system path.") {
		t.Errorf("missing image: %+v", r)
	}
}

// The life of an emulator as the driver sees it: a foreground process that
// is the device, visible only to its adb server, booting, answering
// getprop, console and shell, and gone once `adb emu kill` ended it.
func TestEmulatorEndToEnd(t *testing.T) {
	t.Parallel()
	// Booted at 3 s, restore 370 ms. -delay-adb keeps the device offline
	// for the whole boot: the offline checks below must run inside that
	// window, and 3 s leaves a loaded machine's stall room (at speed 0.05
	// adbd answered after 0.5 s, which one stall of the test could miss).
	a := newAndroid(t, EnvSpeed, "0.1")
	a.createAVD("Pixel_9", hostImage(36, "google_apis"), "pixel_9")
	a.ok("adb", "start-server")
	const serial = "emulator-25700"
	emu := a.startEmulator(emulatorArgs("Pixel_9", "25700", "-no-snapshot-load", "-delay-adb")...)

	a.waitFor("the emulator to register", func() bool { return a.deviceState(serial) != "" })
	if st := a.deviceState(serial); st != "offline" {
		t.Errorf("state while booting %q, want offline", st)
	}
	if r := a.shell(serial, "true"); r.code != 1 || r.stderr != "error: device offline\n" {
		t.Errorf("shell on an offline device: %+v", r)
	}
	// Only the server the emulator announced itself to lists it.
	if st := a.deviceState(serial, "-P", "5037"); st != "" {
		t.Errorf("the default adb server lists the emulator (%s)", st)
	}
	a.ok("adb", "-s", serial, "wait-for-device")
	if st := a.deviceState(serial); st != "device" {
		t.Errorf("state after wait-for-device %q", st)
	}
	a.waitBooted(serial)
	props := parseGetpropDump([]byte(a.ok("adb", "-s", serial, "shell", "getprop")))
	if props["sys.boot_completed"] != "1" || props["ro.build.version.sdk"] != "36" || props["ro.boot.qemu.avd_name"] != "Pixel_9" {
		t.Errorf("getprop after boot: boot_completed %q sdk %q avd %q", props["sys.boot_completed"], props["ro.build.version.sdk"], props["ro.boot.qemu.avd_name"])
	}
	if _, ok := props["init.svc.bootanim"]; ok {
		t.Error("-no-boot-anim: init.svc.bootanim should stay unset")
	}

	// The console answers in CR LF, as captured.
	if out := a.ok("adb", "-s", serial, "emu", "avd", "name"); out != readTestdata(t, "android/emulator/adb-emu-avd-name-Pixel_9.bin") {
		t.Errorf("emu avd name: %q", out)
	}
	p := onlyProc(t, a.home)
	if p.Platform != "android" || p.ID != serial || p.Name != "Pixel_9" || p.PID != emu.cmd.Process.Pid {
		t.Errorf("PS: %+v (emulator pid %d)", p, emu.cmd.Process.Pid)
	}

	// Snapshots hold the data partition: load brings the mark back.
	const mark = "/data/local/tmp/simlock-mark"
	a.ok("adb", "-s", serial, "shell", "echo 'dev-1' > "+mark)
	if out := a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "save", "simlock-baseline"); out != "OK\r\n" {
		t.Errorf("snapshot save: %q", out)
	}
	a.ok("adb", "-s", serial, "shell", "echo dirty > "+mark+"; echo x > /data/local/tmp/extra")
	start := time.Now()
	if out := a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "load", "simlock-baseline"); out != "OK\r\n" {
		t.Errorf("snapshot load: %q", out)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("snapshot load took %v, want the scaled 3.7 s (370 ms)", d)
	}
	if out := a.ok("adb", "-s", serial, "shell", "cat", mark); out != "dev-1\n" {
		t.Errorf("mark after load: %q", out)
	}
	if r := a.shell(serial, "cat /data/local/tmp/extra"); r.code != 1 {
		t.Errorf("a file written after the snapshot survived its load: %+v", r)
	}
	if out := a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "list"); !strings.Contains(out, "simlock-baseline") || !strings.HasSuffix(out, "\r\nOK\r\n") {
		t.Errorf("snapshot list: %q", out)
	}
	if out := a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "load", "nope"); !strings.HasPrefix(out, "KO: ") {
		t.Errorf("load of a missing snapshot: %q", out)
	}

	// emu kill ends the process; only then is the device gone.
	if out := a.ok("adb", "-s", serial, "emu", "kill"); out != "OK: killing emulator, bye bye\r\n" {
		t.Errorf("emu kill: %q", out)
	}
	if code := emu.wait(waitLimit); code != 0 {
		t.Errorf("emulator exit %d after emu kill", code)
	}
	if st := a.deviceState(serial); st != "" {
		t.Errorf("adb still lists the emulator after it exited (%s)", st)
	}
	noProcs(t, a.home)
	if !strings.Contains(emu.out.String(), "INFO    | Boot completed in ") {
		t.Errorf("emulator output:\n%s", emu.out.String())
	}
}

func TestEmulatorKilledHardIsGoneFromADB(t *testing.T) {
	t.Parallel()
	a := newAndroid(t)
	a.createAVD("hard", hostImage(35, "google_apis"), "pixel_7")
	const serial = "emulator-25702"
	emu := a.startEmulator(emulatorArgs("hard", "25702")...)
	a.waitState(serial, "device")

	// The AVD is locked by its emulator, and so is the console port.
	if r := a.run("emulator", emulatorArgs("hard", "45704")...); r.code != 1 || !strings.Contains(r.stdout, "Running multiple emulators with the same AVD") {
		t.Errorf("second instance: %+v", r)
	}
	a.createAVD("other", hostImage(35, "google_apis"), "pixel_7")
	if r := a.run("emulator", emulatorArgs("other", "25702")...); r.code != 1 || !strings.Contains(r.stdout, "too many emulator instances") {
		t.Errorf("busy port: %+v", r)
	}
	if r := a.runIn("", "avdmanager", "delete", "avd", "-n", "hard"); r.code != 1 {
		t.Errorf("deleting a running AVD: %+v", r)
	}

	emu.signal(unix.SIGKILL)
	emu.wait(waitLimit)
	if st := a.deviceState(serial); st != "" {
		t.Errorf("adb lists a killed emulator (%s)", st)
	}
	noProcs(t, a.home)
	// It starts again on the same port.
	again := a.startEmulator(emulatorArgs("hard", "25702")...)
	a.waitState(serial, "device")
	again.signal(unix.SIGTERM)
	if code := again.wait(waitLimit); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	a.waitState(serial, "")

	// Reset ends running emulators too.
	third := a.startEmulator(emulatorArgs("hard", "25702")...)
	a.waitState(serial, "device")
	if err := Reset(a.home); err != nil {
		t.Fatal(err)
	}
	third.wait(waitLimit)
}

func TestEmulatorInTheScanRangeIsSeenByEveryServer(t *testing.T) {
	t.Parallel()
	// -delay-adb keeps it offline for the whole (scaled: 3 s) boot.
	a := newAndroid(t, EnvSpeed, "0.1")
	a.createAVD("scanned", hostImage(35, "google_apis"), "pixel_6")
	// The capture names 5554, which an emulator of another test package
	// (or of the machine's user) may hold: ports are really bound.
	if ls, ok := loopback.Hold(5554, 2); !ok {
		t.Skip("console port 5554 or 5555 is in use on this machine")
	} else {
		loopback.Close(ls)
	}
	emu := a.startEmulator(emulatorArgs("scanned", "5554", "-delay-adb")...)
	a.waitState("emulator-5554", "offline")
	// Announced to 5137, but 5554 is among the ports every server probes,
	// so the default server lists it too, exactly as captured (plus the
	// final blank line the paste lost).
	r := a.adb("-P", "5037", "devices")
	if want := readTestdata(t, "android/adb/devices-offline-platform-tools-36.txt") + "\n"; r.stdout != want {
		t.Errorf("default server: %q, want %q", r.stdout, want)
	}
	emu.signal(unix.SIGINT)
	if code := emu.wait(waitLimit); code != 0 {
		t.Errorf("exit %d on SIGINT", code)
	}
}

// Snapshot flags and disk handling: quickboot save on an orderly exit,
// -snapshot NAME, -wipe-data, -read-only, and config.ini normalisation.
func TestEmulatorSnapshotsWipeAndReadOnly(t *testing.T) {
	t.Parallel()
	a := newAndroid(t)
	a.createAVD("disk", hostImage(36, "google_apis_playstore"), "pixel_8")
	const serial, mark = "emulator-45710", "/data/local/tmp/simlock-mark"
	cfgPath := filepath.Join(a.avdHome, "disk.avd", "config.ini")

	// Without snapshot flags the emulator saves its quickboot state when
	// told to exit.
	emu := a.startEmulator("-avd", "disk", "-port", "45710", "-no-window")
	a.waitBooted(serial)
	a.ok("adb", "-s", serial, "shell", "echo kept > "+mark)
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)
	if _, ok := readSnapshot(filepath.Join(a.avdHome, "disk.avd"), quickbootSnapshot); !ok {
		t.Fatal("no quickboot snapshot after an orderly exit")
	}
	// The first boot rewrote config.ini in the emulator's style.
	cfg, _ := os.ReadFile(cfgPath)
	rewritten := readTestdata(t, "android/avd/config.ini-emulator-rewritten-api33-arm64-macos.ini")
	for _, line := range []string{"fastboot.chosenSnapshotFile = \n", "disk.dataPartition.size = 6442450944\n", "hw.initialOrientation = Portrait\n"} {
		if !strings.Contains(string(rewritten), line) || !strings.Contains(string(cfg), line) {
			t.Errorf("config.ini after boot lacks %q (as in the capture):\n%s", line, cfg)
		}
	}

	// A read-only instance boots the same disk but keeps nothing.
	ro := a.startEmulator("-avd", "disk", "-port", "45712", "-read-only", "-no-window")
	a.waitBooted("emulator-45712")
	if out := a.ok("adb", "-s", "emulator-45712", "shell", "cat", mark); out != "kept\n" {
		t.Errorf("read-only instance sees %q", out)
	}
	a.ok("adb", "-s", "emulator-45712", "shell", "echo scribble > "+mark)
	if out := a.ok("adb", "-s", "emulator-45712", "emu", "avd", "snapshot", "save", "x"); !strings.HasPrefix(out, "KO: ") {
		t.Errorf("read-only snapshot save: %q", out)
	}
	a.ok("adb", "-s", "emulator-45712", "emu", "kill")
	ro.wait(waitLimit)

	// A quickboot restore.
	emu = a.startEmulator("-avd", "disk", "-port", "45710", "-no-window", "-no-snapshot-save")
	a.waitBooted(serial)
	if out := a.ok("adb", "-s", serial, "shell", "cat", mark); out != "kept\n" {
		t.Errorf("after quickboot: %q", out)
	}
	if !strings.Contains(emu.out.String(), "Loading snapshot 'default_boot'") {
		t.Errorf("no quickboot load:\n%s", emu.out.String())
	}
	a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "save", "named")
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)

	// -wipe-data erases the data partition (and the quickboot state).
	emu = a.startEmulator(append(emulatorArgs("disk", "45710"), "-wipe-data", "-no-snapshot-load")...)
	a.waitBooted(serial)
	if r := a.shell(serial, "cat "+mark); r.code != 1 || !strings.Contains(r.stderr, "No such file or directory") {
		t.Errorf("mark survived -wipe-data: %+v", r)
	}
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)

	// -snapshot NAME boots from a named snapshot.
	emu = a.startEmulator(emulatorArgs("disk", "45710", "-snapshot", "named")...)
	a.waitBooted(serial)
	if out := a.ok("adb", "-s", serial, "shell", "cat", mark); out != "kept\n" {
		t.Errorf("after -snapshot named: %q", out)
	}
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)
}

func TestAndroidFaults(t *testing.T) {
	t.Parallel()
	a := newAndroid(t)
	a.createAVD("faulty", hostImage(35, "google_apis"), "pixel_6")
	const serial = "emulator-45720"

	// boot-fail: the emulator never comes online and exits with an error.
	a.env[EnvFaults] = "boot-fail@1"
	emu := a.startEmulator(emulatorArgs("faulty", "45720")...)
	if code := emu.wait(waitLimit); code != 1 || !strings.Contains(emu.out.String(), "(simlock simulated fault boot-fail)") {
		t.Errorf("boot-fail: exit %d\n%s", code, emu.out.String())
	}

	// boot-hang: adbd answers but the boot never completes.
	a.env[EnvFaults] = "boot-hang@1"
	emu = a.startEmulator(emulatorArgs("faulty", "45720")...)
	a.waitState(serial, "device")
	time.Sleep(50 * time.Millisecond)
	if out := a.ok("adb", "-s", serial, "shell", "getprop", "sys.boot_completed"); out != "\n" {
		t.Errorf("boot-hang: sys.boot_completed %q", out)
	}
	// snapshot-fail: the console refuses, adb still exits 0.
	a.env[EnvFaults] = "snapshot-fail@1"
	if out := a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "save", "s"); out != "KO: Failed to save snapshot 's' (simlock simulated fault snapshot-fail)\r\n" {
		t.Errorf("snapshot-fail: %q", out)
	}
	// shutdown-hang: emu kill is answered and ignored; a signal still works.
	a.env[EnvFaults] = "shutdown-hang@1"
	if out := a.ok("adb", "-s", serial, "emu", "kill"); out != "OK: killing emulator, bye bye\r\n" {
		t.Errorf("emu kill: %q", out)
	}
	time.Sleep(150 * time.Millisecond)
	if emu.exited() {
		t.Error("shutdown-hang: the emulator exited on emu kill")
	}
	emu.signal(unix.SIGTERM)
	emu.wait(waitLimit)

	// crash-after: the process dies on its own, MS after it started. 3 s
	// leaves a loaded machine room to see the device online first (at
	// 300 ms one stall could let the crash come before the check).
	a.env[EnvFaults] = "crash-after=3000@1"
	start := time.Now()
	emu = a.startEmulator(emulatorArgs("faulty", "45720")...)
	a.waitState(serial, "device")
	if code := emu.wait(waitLimit); code != 134 || time.Since(start) < 3000*time.Millisecond {
		t.Errorf("crash-after: exit %d after %v", code, time.Since(start))
	}
	a.waitState(serial, "")
	noProcs(t, a.home)
}
