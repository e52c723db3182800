package simsdk

import (
	"strconv"
	"strings"
	"testing"
)

// The device-state commands answer in the platform's forms and are as
// strict as the real ones about their arguments.
func TestDeviceStateCommands(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	a.createAVD("state", hostImage(35, "google_apis"), "pixel_7")
	port := freeConsole(t, 29500, 29700)
	serial := emulatorSerial(port)
	a.ok("adb", "start-server")
	emu := a.startEmulator(emulatorArgs("state", strconv.Itoa(port), "-no-snapshot-load")...)
	a.ok("adb", "-s", serial, "wait-for-device")
	a.waitBooted(serial)

	sh := func(cmd string) result { return a.shell(serial, cmd) }
	expect := func(cmd string, code int, stdout, stderrPart string) {
		t.Helper()
		r := sh(cmd)
		if r.code != code || (stdout != "*" && r.stdout != stdout) || !strings.Contains(r.stderr, stderrPart) {
			t.Errorf("%s: exit %d stdout %q stderr %q; want exit %d stdout %q stderr ~%q", cmd, r.code, r.stdout, r.stderr, code, stdout, stderrPart)
		}
	}
	expect("settings get global animator_duration_scale", 0, "null\n", "")
	expect("settings put global animator_duration_scale 0.5", 0, "", "")
	expect("settings get global animator_duration_scale", 0, "0.5\n", "")
	expect("settings delete global animator_duration_scale", 0, "Deleted 1 rows\n", "")
	expect("settings delete global animator_duration_scale", 0, "Deleted 0 rows\n", "")
	expect("settings get bogus key", 255, "", "'namespace' is one of {system, secure, global}")
	expect("settings --user 10 get global adb_enabled", 255, "", "Invalid user: 10")
	expect("cmd role get-role-holders android.app.role.HOME", 0, "com.google.android.apps.nexuslauncher\n", "")
	expect("cmd activity get-current-user", 0, "0\n", "")
	expect("bmgr --user 0 enabled", 0, "Backup Manager currently enabled\n", "")
	expect("bmgr enable false", 0, "Backup Manager now disabled\n", "")
	expect("bmgr enable maybe", 1, "", "usage: bmgr")
	expect("pm disable-user --user 0 com.google.android.gm", 0, "Package com.google.android.gm new state: disabled-user\n", "")
	expect("pm list packages -d", 0, "package:com.google.android.gm\n", "")
	expect("dumpsys package com.google.android.gm | grep enabled=3", 0, "*", "")
	expect("pm enable com.google.android.gm", 0, "Package com.google.android.gm new state: enabled\n", "")
	expect("pm default-state com.google.android.gm", 0, "Package com.google.android.gm new state: default\n", "")
	expect("pm disable-user com.example.nothing", 255, "", "java.lang.IllegalArgumentException: Unknown package: com.example.nothing")
	expect("pm list packages --user 7", 1, "", "user 7 does not exist")
	if out := sh("pm list packages -e").stdout; !strings.Contains(out, "package:com.google.android.apps.maps\n") || !strings.Contains(out, "package:com.google.android.gm\n") {
		t.Errorf("enabled packages: %q", out)
	}
	boot := sh("cat /proc/sys/kernel/random/boot_id").stdout
	if len(strings.TrimSpace(boot)) != 36 {
		t.Errorf("boot id %q", boot)
	}

	a.env[EnvFaults] = "role-unavailable"
	expect("cmd role get-role-holders android.app.role.HOME", 20, "", "cmd: Can't find service: role")
	delete(a.env, EnvFaults)

	// A snapshot brings its boot id back; a cold boot gets a new one.
	a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "save", "snap")
	a.ok("adb", "-s", serial, "emu", "avd", "snapshot", "load", "snap")
	a.waitBooted(serial)
	if again := sh("cat /proc/sys/kernel/random/boot_id").stdout; again != boot {
		t.Errorf("snapshot load: boot id %q, want the snapshot's %q", again, boot)
	}
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)
	emu = a.startEmulator(emulatorArgs("state", strconv.Itoa(port), "-no-snapshot-load")...)
	a.ok("adb", "-s", serial, "wait-for-device")
	a.waitBooted(serial)
	if cold := sh("cat /proc/sys/kernel/random/boot_id").stdout; cold == boot {
		t.Errorf("a cold boot kept the boot id %q", cold)
	}
	// The settings survive the reboot: they live on the data partition.
	if out := sh("bmgr enabled").stdout; out != "Backup Manager currently disabled\n" {
		t.Errorf("bmgr after reboot: %q", out)
	}
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)
}
