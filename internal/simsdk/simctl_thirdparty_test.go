package simsdk

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestXcrunShowSDK(t *testing.T) {
	h := newHarness(t)
	sim := xcodeDeveloper + "/Platforms/iPhoneSimulator.platform"
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
		code           int
	}{
		{[]string{"--sdk", "iphonesimulator", "--show-sdk-version"}, xcodeVersion + "\n", "", 0},
		{[]string{"-sdk", "iphonesimulator", "--show-sdk-path"}, sim + "/Developer/SDKs/iPhoneSimulator" + xcodeVersion + ".sdk\n", "", 0},
		{[]string{"--sdk", "iphonesimulator" + xcodeVersion, "--show-sdk-platform-path"}, sim + "\n", "", 0},
		{[]string{"--show-sdk-path"}, xcodeDeveloper + "/Platforms/MacOSX.platform/Developer/SDKs/MacOSX" + xcodeVersion + ".sdk\n", "", 0},
		{[]string{"--sdk", "iphonesimulator17.0", "--show-sdk-version"}, "",
			"xcrun: error: SDK \"iphonesimulator17.0\" cannot be located\nxcrun: error: unable to lookup item 'SDKVersion' in SDK 'iphonesimulator17.0'\n", 1},
		{[]string{"--sdk", "android", "--show-sdk-path"}, "",
			"xcrun: error: SDK \"android\" cannot be located\nxcrun: error: unable to lookup item 'Path' in SDK 'android'\n", 1},
		{[]string{"--bogus"}, "", "xcrun: error: unrecognized option: --bogus\n", 1},
	} {
		r := h.run("xcrun", tc.args...)
		if r.code != tc.code || r.stdout != tc.stdout || r.stderr != tc.stderr {
			t.Errorf("xcrun %v: exit %d %q %q, want %d %q %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// The app commands keep per-device state that listapps, get_app_container,
// launch and terminate agree on; getenv and openurl answer on the booted
// device only.
func TestSimctlThirdPartyCommandsShareDeviceState(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 17.5")
	other := h.create("Other", "iPhone 15", "iOS 17.5")
	app := filepath.Join(t.TempDir(), "Notes.app")
	if err := os.MkdirAll(app, 0o700); err != nil {
		t.Fatal(err)
	}
	plist := `<?xml version="1.0"?><plist><dict><key>CFBundleIdentifier</key><string>com.example.notes</string></dict></plist>`
	if err := os.WriteFile(filepath.Join(app, "Info.plist"), []byte(plist), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.simctl("getenv", u, "HOME"); r.code != 149 || !strings.HasSuffix(r.stderr, "Unable to lookup in current state: Shutdown\n") {
		t.Errorf("getenv on a shut-down device: %+v", r)
	}
	h.must("boot", u)
	h.must("boot", other)
	if got := h.must("getenv", u, "SIMULATOR_UDID"); got != u+"\n" {
		t.Errorf("getenv SIMULATOR_UDID: %q", got)
	}
	if got := h.must("getenv", u, "SIMULATOR_RUNTIME_VERSION"); got != "17.5\n" {
		t.Errorf("getenv SIMULATOR_RUNTIME_VERSION: %q", got)
	}
	if r := h.simctl("getenv", u, "NO_SUCH_VAR"); r.code == 0 || r.stdout != "" {
		t.Errorf("getenv of an unset variable: %+v", r)
	}

	h.must("install", u, app)
	list := h.must("listapps", u)
	// The NSDictionary description layout: quoted ids, bare words bare.
	for _, want := range []string{
		"{\n    \"com.apple.Preferences\" =     {\n        ApplicationType = System;\n",
		"    \"com.example.notes\" =     {\n        ApplicationType = User;\n        Bundle = \"file://" + app + "/\";\n        CFBundleDisplayName = Notes;\n",
		"        CFBundleIdentifier = \"com.example.notes\";\n",
		"        GroupContainers =         {\n        };\n        SBAppTags =         (\n        );\n    };\n",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("listapps lacks %q:\n%s", want, list)
		}
	}
	if !strings.HasSuffix(list, "    };\n}\n") {
		t.Errorf("listapps does not end the dictionary:\n%s", list)
	}
	if strings.Contains(h.must("listapps", other), "com.example.notes") {
		t.Error("the app installed on one device is listed on another")
	}
	if got := h.must("get_app_container", u, "com.example.notes"); got != app+"\n" {
		t.Errorf("get_app_container app: %q", got)
	}
	data := strings.TrimSpace(h.must("get_app_container", u, "com.example.notes", "data"))
	if fi, err := os.Stat(data); err != nil || !fi.IsDir() || !regexp.MustCompile(`/Containers/Data/Application/[0-9A-F-]{36}$`).MatchString(data) {
		t.Errorf("data container %q (%v)", data, err)
	}
	if r := h.simctl("get_app_container", other, "com.example.notes"); r.code == 0 {
		t.Errorf("get_app_container on a device without the app: %+v", r)
	}

	// terminate needs a running app.
	if r := h.simctl("terminate", u, "com.example.notes"); r.code != 164 ||
		r.stderr != "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=164):\nfound nothing to terminate\n" {
		t.Errorf("terminate of an app that does not run: %+v", r)
	}
	h.must("launch", u, "com.example.notes")
	h.must("terminate", u, "com.example.notes")
	h.must("launch", u, "com.example.notes")
	h.must("shutdown", u)
	h.must("boot", u)
	if r := h.simctl("terminate", u, "com.example.notes"); r.code != 164 {
		t.Errorf("an app still runs after a reboot: %+v", r)
	}

	h.must("openurl", u, "https://example.com/a")
	h.must("openurl", u, "notes://item/7")
	urls, err := OpenedURLs(h.home, "", u)
	if err != nil || !slices.Equal(urls, []string{"https://example.com/a", "notes://item/7"}) {
		t.Errorf("opened URLs %v (%v)", urls, err)
	}
	if urls, _ := OpenedURLs(h.home, "", other); len(urls) != 0 {
		t.Errorf("the other device got %v", urls)
	}
	if r := h.simctl("openurl", u, "no scheme"); r.code == 0 {
		t.Errorf("openurl without a scheme: %+v", r)
	}

	if got := h.must("spawn", u, "sw_vers"); got != "ProductName:\t\tiOS\nProductVersion:\t\t17.5\nBuildVersion:\t\t21F79\n" {
		t.Errorf("spawn sw_vers: %q", got)
	}
	if r := h.simctl("spawn", u, "defaults", "read", "com.example.notes", "k"); r.code != 1 ||
		r.stderr != "\nThe domain/default pair of (com.example.notes, k) does not exist\n" {
		t.Errorf("spawn defaults read: %+v", r)
	}
	if r := h.simctl("spawn", u, "/usr/bin/frob"); r.code != 2 {
		t.Errorf("spawn of an unsimulated program: %+v", r)
	}
}

// Every subcommand refuses an option it does not take, with its usage
// (exit 64); options of the launched program are its own.
func TestSimctlRefusesUnknownOptions(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 17.5")
	for _, args := range [][]string{
		{"boot", u, "--bogus"},
		{"boot", u, "--arch"}, // --arch takes a value
		{"shutdown", "-x", u},
		{"create", "--name", "x", "iPhone 15"},
		{"erase", "--all"},
		{"delete", "-f", u},
		{"install", "--force", u, "/tmp/x.app"},
		{"uninstall", "-k", u, "com.example"},
		{"launch", "--nope", u, "com.example"},
		{"terminate", "-9", u, "com.example"},
		{"bootstatus", u, "-x"},
		{"getenv", "-x", u, "HOME"},
		{"openurl", "--new", u, "https://x"},
		{"listapps", "-j", u},
		{"get_app_container", "-a", u, "com.example"},
		{"spawn", "--bogus", u, "sw_vers"},
		{"list", "--bogus"},
	} {
		r := h.simctl(args...)
		if r.code != 64 || !strings.HasPrefix(r.stderr, "Usage: simctl "+args[0]) {
			t.Errorf("%v: exit %d stderr %q, want its usage and exit 64", args, r.code, r.stderr)
		}
	}
	h.must("boot", u, "--arch=arm64")
	// Arguments after the bundle id or the program belong to them.
	if r := h.simctl("launch", u, "com.apple.Preferences", "-AppleLanguages", "(en)"); r.code != 0 {
		t.Errorf("launch with app arguments: %+v", r)
	}
	if r := h.simctl("spawn", u, "log", "show", "--last", "1m"); r.code != 0 {
		t.Errorf("spawn with program options: %+v", r)
	}
}
