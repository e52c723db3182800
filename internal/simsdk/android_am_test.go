package simsdk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The app commands third-party clients send, in the order a client sends
// them: install, find the launcher activity, start, check it runs, stop.
// Each row is one command on the same device, so the rows also prove the
// per-device state (installed packages, running apps) that adb install,
// pm and am share.
func TestADBAppCommandsShareOneDeviceState(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "appy")
	const serial = "emulator-5800"
	apk := filepath.Join(t.TempDir(), "com.example.notes.apk")
	if err := os.WriteFile(apk, []byte("PK\x03\x04"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := a.ok("adb", "-s", serial, "install", "-r", "-g", apk); out != "Performing Streamed Install\nSuccess\n" {
		t.Fatalf("adb install: %q", out)
	}
	const launch = "am start -W -a android.intent.action.MAIN -c android.intent.category.DEFAULT -c android.intent.category.LAUNCHER -p com.example.notes"
	const started = "Starting: Intent { act=android.intent.action.MAIN cat=[android.intent.category.DEFAULT,android.intent.category.LAUNCHER] pkg=com.example.notes }\n"
	for _, tc := range []struct {
		cmd            string
		stdout, stderr string
		code           int
	}{
		{"pm path com.example.notes", "package:/data/app/com.example.notes/base.apk\n", "", 0},
		{"pm path com.example.absent", "", "", 1},
		{"pm list packages -3", "package:com.example.notes\n", "", 0},
		{"pm list packages -3 -f --show-versioncode notes", "package:/data/app/com.example.notes/base.apk=com.example.notes versionCode:1\n", "", 0},
		{"pm list packages -x", "", "Error: Unknown option: -x\n", 255},
		{"cmd package list packages -3", "package:com.example.notes\n", "", 0},
		{"cmd package query-activities --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER",
			"2 activities found:\n  Activity #0:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    com.android.settings/.Settings\n" +
				"  Activity #1:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    com.example.notes/.MainActivity\n", "", 0},
		{"cmd package resolve-activity --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER com.example.notes",
			"priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\ncom.example.notes/.MainActivity\n", "", 0},
		{"cmd package resolve-activity --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER com.example.absent", "No activity found\n", "", 0},
		{"cmd package has-feature android.software.leanback", "false\n", "", 1},
		{"cmd package has-feature android.hardware.touchscreen", "true\n", "", 0},
		{"pm list features | grep leanback", "", "", 1},
		{"pidof com.example.notes", "", "", 1},
		{launch, started + "Status: ok\nLaunchState: COLD\nActivity: com.example.notes/.MainActivity\nTotalTime: 250\nWaitTime: 260\nComplete\n", "", 0},
		{"pidof com.example.notes", "", "", 0}, // stdout checked below: a pid
		{launch, started + "Status: ok\nLaunchState: HOT\nActivity: com.example.notes/.MainActivity\nTotalTime: 250\nWaitTime: 260\nComplete\n", "", 0},
		{"am start-activity -n com.example.notes/com.example.notes.MainActivity", "Starting: Intent { cmp=com.example.notes/com.example.notes.MainActivity }\n", "", 0},
		{"am start -n com.example.notes/.Other", "Starting: Intent { cmp=com.example.notes/.Other }\n",
			"Error: Activity not started, unable to resolve Intent { cmp=com.example.notes/.Other }\n", 1},
		{"am start -p com.example.absent", "Starting: Intent { pkg=com.example.absent }\n",
			"Error: Activity not started, unable to resolve Intent { pkg=com.example.absent }\n", 1},
		{"am start --bogus", "", "Exception occurred while executing 'start':\njava.lang.IllegalArgumentException: Unknown option: --bogus\n", 255},
		{"am start -n nocomponent", "", "Exception occurred while executing 'start':\njava.lang.IllegalArgumentException: Bad component name: nocomponent\n", 255},
		{"am force-stop com.example.notes", "", "", 0},
		{"pidof com.example.notes", "", "", 1},
		{"am force-stop com.example.absent", "", "", 0},
		{"am broadcast -a com.android.systemui.demo -e command exit", "Broadcasting: Intent { act=com.android.systemui.demo }\nBroadcast completed: result=0\n", "", 0},
		{"am frob", "", "Unknown command: frob\n", 255},
		// pm install takes an APK already on the device.
		{"echo x > /data/local/tmp/com.example.two.apk && pm install -r -t /data/local/tmp/com.example.two.apk", "Success\n", "", 0},
		{"pm install /data/local/tmp/none.apk", "", "Error: Unable to open file: /data/local/tmp/none.apk\nConsider using a file under /data/local/tmp/\n", 1},
		{"pm install --frob /data/local/tmp/com.example.two.apk", "", "Error: Unknown option: --frob\n", 1},
		{"pm list packages -3", "package:com.example.notes\npackage:com.example.two\n", "", 0},
		{"am start -p com.example.two && pm uninstall com.example.two && pidof com.example.two", "Starting: Intent { pkg=com.example.two }\nSuccess\n", "", 1},
		{"pm uninstall com.example.two", "Failure [DELETE_FAILED_INTERNAL_ERROR]\n", "", 1},
	} {
		res := a.adb("-s", serial, "shell", tc.cmd)
		if tc.cmd == "pidof com.example.notes" && tc.code == 0 {
			if res.code != 0 || strings.TrimSpace(res.stdout) == "" {
				t.Errorf("pidof after am start: %+v", res)
			}
			continue
		}
		if res.code != tc.code || res.stdout != tc.stdout || res.stderr != tc.stderr {
			t.Errorf("shell %q:\n got exit %d stdout %q stderr %q\nwant exit %d stdout %q stderr %q",
				tc.cmd, res.code, res.stdout, res.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	// adb uninstall empties the same list.
	a.ok("adb", "-s", serial, "uninstall", "com.example.notes")
	if res := a.adb("-s", serial, "shell", "pm list packages -3"); res.stdout != "" {
		t.Errorf("after adb uninstall pm still lists %q", res.stdout)
	}
}

// input accepts the argument forms of the real command and refuses others.
func TestADBInputChecksArgumentForms(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "inputy")
	for _, tc := range []struct {
		cmd    string
		code   int
		stderr string
	}{
		{"input tap 10 20", 0, ""},
		{"input touchscreen tap 10.5 20", 0, ""},
		{"input -d 0 swipe 1 2 3 4", 0, ""},
		{"input swipe 1 2 3 4 300", 0, ""},
		{"input text hello%sworld", 0, ""},
		{"input keyevent KEYCODE_HOME", 0, ""},
		{"input keyevent --longpress 26", 0, ""},
		{"input keyevent BACK ENTER", 0, ""},
		{"input keycombination -t 100 KEYCODE_CTRL_LEFT KEYCODE_A", 0, ""},
		{"input motionevent DOWN 5 5", 0, ""},
		{"input press", 0, ""},
		{"input roll 1 -1", 0, ""},
		{"input tap 10", 255, "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Error: Invalid arguments for command: tap\n"},
		{"input tap x 20", 255, "Exception occurred while executing 'input':\njava.lang.NumberFormatException: For input string: \"x\"\n"},
		{"input swipe 1 2 3", 255, "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Error: Invalid arguments for command: swipe\n"},
		{"input keyevent", 255, "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Error: Invalid arguments for command: keyevent\n"},
		{"input keyevent home-key", 255, "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Unknown keycode: home-key\n"},
		{"input text", 255, "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Error: Invalid arguments for command: text\n"},
		{"input motionevent HOVER 1 2", 255, "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Error: Invalid arguments for command: motionevent\n"},
	} {
		res := a.adb("-s", "emulator-5800", "shell", tc.cmd)
		if res.code != tc.code || res.stderr != tc.stderr {
			t.Errorf("shell %q: exit %d stderr %q, want %d %q", tc.cmd, res.code, res.stderr, tc.code, tc.stderr)
		}
	}
	if res := a.adb("-s", "emulator-5800", "shell", "input frob"); res.code != 1 || !strings.HasPrefix(res.stderr, "Error: Unknown command: frob\nUsage: input ") {
		t.Errorf("input frob: %+v", res)
	}
}

// exec-out is the raw exec service: bytes untouched, stderr in the same
// stream, and adb's exit status 0 whatever the command's was.
func TestADBExecOutIsRawAndCarriesNoStatus(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "execy")
	a.ok("adb", "-s", "emulator-5800", "shell", "echo line > /data/local/tmp/f")
	if r := a.adb("-s", "emulator-5800", "exec-out", "cat", "/data/local/tmp/f"); r.code != 0 || r.stdout != "line\n" || r.stderr != "" {
		t.Errorf("exec-out cat: %+v", r)
	}
	if r := a.adb("-s", "emulator-5800", "exec-out", "cat /data/local/tmp/none; exit 3"); r.code != 0 ||
		r.stdout != "cat: /data/local/tmp/none: No such file or directory\n" || r.stderr != "" {
		t.Errorf("exec-out of a failing command: %+v", r)
	}
	if r := a.adb("-s", "emulator-5800", "exec-out", "getprop", "ro.build.characteristics"); r.stdout != "emulator\n" {
		t.Errorf("exec-out getprop: %+v", r)
	}
	if r := a.adb("-s", "emulator-5800", "shell", "-t", "--", "echo", "-n", "x"); r.code != 0 || r.stdout != "x" {
		t.Errorf("shell options then --: %+v", r)
	}
	if r := a.adb("-s", "emulator-5800", "exec-out"); r.code != 1 || !strings.HasPrefix(r.stderr, "adb: exec-out requires a command") {
		t.Errorf("bare exec-out: %+v", r)
	}
}
