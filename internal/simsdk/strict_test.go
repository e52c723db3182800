package simsdk

import (
	"strings"
	"testing"
)

// The simulated tools refuse what the real ones refuse: unknown options
// and malformed arguments fail, with the real text and status where a
// capture has them (the capture named in the row; TestStateErrorsMatchCaptures
// and TestLookupErrors hold simctl's state and lookup captures) and with
// the tool's own usage or error form otherwise ("modelled"). A row that
// passed before the simulation was tightened would have exited 0.
func TestToolsRefuseWhatTheRealOnesRefuse(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "stricty")
	a.createAVD("Pixel_2_API_30", hostImage(35, "google_apis"), "pixel_2")
	h := &harness{t: t, home: a.home, env: a.env}
	u := h.create("Phone", "iPhone 15", "iOS 17.5")
	delete(a.env, envAVDHome)
	unknownAVD := readTestdata(t, "android/emulator/error-unknown-avd-name-2019.txt")
	a.env[envAVDHome] = a.avdHome

	for _, tc := range []struct {
		source string // the capture the text comes from, or "modelled"
		tool   string
		args   []string
		code   int
		// stdout/stderr are the exact texts, or a prefix when prefix is set.
		stdout, stderr string
		prefix         bool
		noAVDHome      bool // run without ANDROID_AVD_HOME, as in the capture
	}{
		{source: "brief (issue 14)", tool: "xcrun", args: []string{"simctl", "boot", "NOPE"}, code: 148, stderr: "Invalid device or device pair: NOPE\n"},
		{source: "modelled", tool: "xcrun", args: []string{"simctl", "boot", u, "--bogus"}, code: 64, stderr: "Usage: simctl boot <device>", prefix: true},
		{source: "modelled", tool: "xcrun", args: []string{"simctl", "list", "--bogus"}, code: 64, stderr: "Usage: simctl list ", prefix: true},
		{source: "modelled", tool: "xcrun", args: []string{"simctl", "install", "--force", u, "/x.app"}, code: 64, stderr: "Usage: simctl install <device> <path>\n"},
		{source: "modelled", tool: "xcrun", args: []string{"simctl", "frobnicate"}, code: 64, stderr: "Unknown subcommand 'frobnicate'", prefix: true},
		{source: "modelled", tool: "xcrun", args: []string{"--bogus", "simctl", "list"}, code: 1, stderr: "xcrun: error: unrecognized option: --bogus\n"},
		{source: "modelled", tool: "xcodebuild", args: []string{"-bogus"}, code: 64, stderr: "xcodebuild: error: invalid option '-bogus'", prefix: true},
		{source: "emulator/error-unknown-avd-name-2019.txt", tool: "emulator", args: []string{"-avd", "tmp1"}, code: 1, stdout: unknownAVD,
			noAVDHome: true},
		{source: "emulator/list-avds-2021.txt (names only, as 36.x)", tool: "emulator", args: []string{"-list-avds"}, code: 0, stdout: "Pixel_2_API_30\nstricty\n"},
		{source: "modelled", tool: "emulator", args: []string{"-avd", "Pixel_2_API_30", "-bogus"}, code: 1, stdout: "ERROR   | unknown option: -bogus\nplease use -help for a list of valid options\n"},
		{source: "modelled", tool: "emulator", args: []string{"Pixel_2_API_30"}, code: 1, stdout: "ERROR   | invalid command-line parameter: Pixel_2_API_30.", prefix: true},
		{source: "modelled", tool: "avdmanager", args: []string{"list", "avd", "-x"}, code: 1, stderr: "Error: Flag '-x' is not valid for this action.\nnull\n"},
		{source: "modelled", tool: "avdmanager", args: []string{"frob", "avd"}, code: 1, stderr: "Error: Unknown verb/object combination", prefix: true},
		{source: "modelled", tool: "sdkmanager", args: []string{"--bogus"}, code: 1, stderr: "Error: Unknown argument --bogus\n", prefix: true},
		{source: "modelled", tool: "adb", args: []string{"--bogus", "devices"}, code: 1, stderr: "adb: unknown option --bogus\n"},
		{source: "modelled", tool: "adb", args: []string{"devices", "-x"}, code: 1, stderr: "adb: devices: unknown option -x\n"},
		{source: "modelled", tool: "adb", args: []string{"-s", "emulator-5800", "install", "--bogus", "/x.apk"}, code: 1, stderr: "adb: failed to install: Error: Unknown option: --bogus\n"},
		{source: "modelled", tool: "adb", args: []string{"-s", "emulator-5800", "shell", "-Z", "true"}, code: 1, stderr: "adb: unsupported shell option -Z\n"},
		{source: "modelled", tool: "adb", args: []string{"-s", "emulator-5800", "shell", "input", "tap", "1"}, code: 255,
			stderr: "Exception occurred while executing 'input':\njava.lang.IllegalArgumentException: Error: Invalid arguments for command: tap\n"},
		{source: "modelled", tool: "adb", args: []string{"-s", "emulator-5800", "shell", "am", "start", "--bogus"}, code: 255,
			stderr: "Exception occurred while executing 'start':\njava.lang.IllegalArgumentException: Unknown option: --bogus\n"},
		{source: "modelled", tool: "adb", args: []string{"-s", "emulator-5800", "shell", "pm", "list", "packages", "-x"}, code: 255, stderr: "Error: Unknown option: -x\n"},
	} {
		if tc.noAVDHome {
			delete(a.env, envAVDHome)
		}
		r := a.run(tc.tool, tc.args...)
		a.env[envAVDHome] = a.avdHome
		same := func(got, want string) bool {
			if tc.prefix {
				return strings.HasPrefix(got, want)
			}
			return got == want
		}
		if r.code != tc.code || !same(r.stdout, tc.stdout) || !same(r.stderr, tc.stderr) {
			t.Errorf("%s %v (%s):\n got exit %d stdout %q stderr %q\nwant exit %d stdout %q stderr %q",
				tc.tool, tc.args, tc.source, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
