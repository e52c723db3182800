package simsdk

import (
	"strconv"
	"strings"
	"testing"
)

// The commands keep-booted cleaning sends answer in the platform's forms,
// are strict about their arguments, and keep their state per emulator
// until something undoes it.
func TestKeepBootedDeviceCommands(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	a.createAVD("kb", hostImage(35, "google_apis"), "pixel_7")
	port := freeConsole(t, 30800, 31200)
	serial := emulatorSerial(port)
	a.ok("adb", "start-server")
	emu := a.startEmulator(emulatorArgs("kb", strconv.Itoa(port), "-no-snapshot-load")...)
	a.ok("adb", "-s", serial, "wait-for-device")
	a.waitBooted(serial)

	expect := func(cmd string, code int, stdout, stderrPart string) {
		t.Helper()
		r := a.shell(serial, cmd)
		if r.code != code || (stdout != "*" && r.stdout != stdout) || !strings.Contains(r.stderr, stderrPart) {
			t.Errorf("%s: exit %d stdout %q stderr %q; want exit %d stdout %q stderr ~%q", cmd, r.code, r.stdout, r.stderr, code, stdout, stderrPart)
		}
	}
	expect("pm list users", 0, "Users:\n\tUserInfo{0:Owner:c13} running\n", "")
	expect("pm list users --all", 1, "", "unknown option")
	expect("pm grant com.google.android.gm android.permission.CAMERA", 0, "", "")
	expect("dumpsys package com.google.android.gm | grep granted", 0, "        android.permission.CAMERA: granted=true, flags=[ USER_SET ]\n", "")
	expect("pm revoke --user 0 com.google.android.gm android.permission.CAMERA", 0, "", "")
	expect("dumpsys package com.google.android.gm | grep granted", 1, "", "")
	expect("pm grant com.example.nothing android.permission.CAMERA", 255, "", "Exception occurred while executing 'grant':\njava.lang.IllegalArgumentException: Unknown package: com.example.nothing")
	expect("pm grant com.google.android.gm android.permission.INTERNET", 255, "", "is not a changeable permission type")
	expect("pm grant com.google.android.gm android.permission.BOGUS", 255, "", "Unknown permission: android.permission.BOGUS")
	expect("pm revoke com.google.android.gm", 1, "", "usage: pm revoke")
	expect("pm grant --user 10 com.google.android.gm android.permission.CAMERA", 255, "", "Unknown user 10")
	expect("wm size", 0, "Physical size: 1080x2400\n", "")
	expect("wm size 720x1280", 0, "", "")
	expect("wm size", 0, "Physical size: 1080x2400\nOverride size: 720x1280\n", "")
	expect("wm size big", 1, "", "Error: bad size big")
	expect("wm size reset", 0, "", "")
	expect("wm density 320 && wm density", 0, "Physical density: 420\nOverride density: 320\n", "")
	expect("wm density x", 1, "", "bad number x")
	expect("wm overscan 0,0,0,0", 1, "", "not simulated")
	expect("mkdir -p /sdcard/Download/a && touch /sdcard/Download/a/f.txt && find /sdcard/Download -type f", 0, "/sdcard/Download/a/f.txt\n", "")
	expect("find /sdcard/Download -type d", 0, "/sdcard/Download\n/sdcard/Download/a\n", "")
	expect("find /sdcard/Nowhere -type f", 1, "", "find: /sdcard/Nowhere: No such file or directory")
	expect("find /sdcard/Download -name x", 1, "", "Unknown option '-name'")
	expect("find /sdcard/Download -type q", 1, "", "bad -type")
	expect("cmd clipboard clear-primary-clip", 20, "", "cmd: Can't find service: clipboard")
	expect("dumpsys account", 0, "*", "")
	expect("setprop persist.sys.locale fr-FR && getprop persist.sys.locale", 0, "fr-FR\n", "")
	expect("setprop persist.sys.locale ''", 0, "", "")
	// The override is state of the emulator's data partition: it survives a
	// reboot, as the real one does.
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)
	emu = a.startEmulator(emulatorArgs("kb", strconv.Itoa(port), "-no-snapshot-load")...)
	a.ok("adb", "-s", serial, "wait-for-device")
	a.waitBooted(serial)
	expect("wm density", 0, "Physical density: 420\nOverride density: 320\n", "")
	a.ok("adb", "-s", serial, "emu", "kill")
	emu.wait(waitLimit)
}
