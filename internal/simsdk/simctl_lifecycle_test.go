package simsdk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCreatePrintsBareUDIDLikeTranscript(t *testing.T) {
	// The transcript's create answer is a bare uppercase UDID line.
	transcript := readTestdata(t, "xcode26.3-session-transcript.txt")
	if !strings.Contains(transcript, "\n03423413-ED3A-44FD-AD37-E9B456938AAA\n") || !udidLine.MatchString("03423413-ED3A-44FD-AD37-E9B456938AAA\n") {
		t.Fatal("transcript changed")
	}
	h := newHarness(t)
	r := h.simctl("create", "Probe iPhone", "iPhone 16 Pro", "com.apple.CoreSimulator.SimRuntime.iOS-26-3")
	if r.code != 0 || r.stderr != "" || !udidLine.MatchString(r.stdout) {
		t.Fatalf("create: %+v", r)
	}
	// Without a runtime, the newest one supporting the model is used.
	u := h.create("Default runtime", "iPhone Xs")
	if got := h.must("list", "devices"); !strings.Contains(got, "-- iOS 18.0 --\n    Default runtime ("+u+")") {
		t.Errorf("iPhone Xs should land on iOS 18.0 (26.3 dropped it):\n%s", got)
	}
}

func TestCreateUnsupportedCombinationMatchesCapture(t *testing.T) {
	h := newHarness(t, EnvIOSRuntimes, "iOS 18.4")
	r := h.simctl("create", "Storytale iOS Device",
		"com.apple.CoreSimulator.SimDeviceType.iPhone-6s-Plus", "com.apple.CoreSimulator.SimRuntime.iOS-18-4")
	want := readTestdata(t, "errors/create-unsupported-combination-code403-xcode16.3.txt")
	if r.stderr != want || r.stdout != "" {
		t.Errorf("stderr:\n%q\nwant:\n%q", r.stderr, want)
	}
	if r.code != 147 { // code 403 truncated to a byte, like 405 -> 149
		t.Errorf("exit %d, want 147", r.code)
	}
	// A model iOS 26 dropped, although its type's range is open-ended.
	h.env[EnvIOSRuntimes] = ""
	r = h.simctl("create", "Old", "iPhone Xs", "iOS 26.3")
	if r.code != 147 || !strings.HasPrefix(r.stderr, "Unable to create a device for device type: iPhone Xs (com.apple.CoreSimulator.SimDeviceType.iPhone-XS), runtime: iOS 26.3 (26.3.1 - 23D8133) - com.apple.CoreSimulator.SimRuntime.iOS-26-3\n") {
		t.Errorf("dropped model: %+v", r)
	}
}

func TestLookupErrors(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		args []string
		text string
	}{
		{[]string{"boot", "NOPE"}, "Invalid device or device pair: NOPE\n"}, // boot takes a watch pair too
		{[]string{"erase", "0BAD0000-0000-0000-0000-000000000000"}, "Invalid device: 0BAD0000-0000-0000-0000-000000000000\n"},
		{[]string{"create", "x", "iPhone 99"}, "Invalid device type: iPhone 99\n"},
		{[]string{"create", "x", "iPhone 15", "iOS 18.4"}, "Invalid runtime: iOS 18.4\n"}, // downloadable, not installed
	} {
		r := h.simctl(tc.args...)
		if r.code != 148 || r.stderr != tc.text || r.stdout != "" {
			t.Errorf("%v: exit %d stderr %q", tc.args, r.code, r.stderr)
		}
	}
	r := h.simctl("shutdown", "booted")
	if r.code != 149 || r.stderr != "No devices are booted.\n" {
		t.Errorf("shutdown booted: %+v", r)
	}
	if r := h.simctl("frobnicate"); r.code != 64 {
		t.Errorf("unknown subcommand: %+v", r)
	}
}

func TestStateErrorsMatchCaptures(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 17.5")

	r := h.simctl("shutdown", u)
	if want := readTestdata(t, "errors/shutdown-already-shutdown-code405.txt"); r.stderr != want || r.code != 149 {
		t.Errorf("shutdown of a shut-down device: exit %d\n%q\nwant\n%q", r.code, r.stderr, want)
	}

	if out := h.must("boot", u); out != "" {
		t.Errorf("boot printed %q", out)
	}
	r = h.simctl("boot", u)
	// The capture lost its final newline to the tool that recorded it.
	if want := readTestdata(t, "errors/boot-already-booted-code405-exit149.txt") + "\n"; r.stderr != want || r.code != 149 {
		t.Errorf("boot of a booted device: exit %d\n%q\nwant\n%q", r.code, r.stderr, want)
	}
	r = h.simctl("erase", u)
	want := "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\n" +
		"Unable to erase contents and settings in current state: Booted\n"
	if r.stderr != want || r.code != 149 {
		t.Errorf("erase of a booted device: exit %d %q", r.code, r.stderr)
	}
	// The transcript: bootstatus -b on a booted device prints two lines.
	out := h.must("bootstatus", u, "-b")
	if out != "Monitoring boot status for Phone ("+u+").\nDevice already booted, nothing to do.\n" {
		t.Errorf("bootstatus on a booted device: %q", out)
	}
	if !strings.Contains(readTestdata(t, "xcode26.3-session-transcript.txt"),
		"Monitoring boot status for Probe iPhone (03423413-ED3A-44FD-AD37-E9B456938AAA).\nDevice already booted, nothing to do.\n") {
		t.Fatal("transcript changed")
	}
}

func TestEraseResetsDevice(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 17.5")
	h.must("boot", u)
	h.must("shutdown", u)
	dataFile := filepath.Join(h.home, "devices", u, "data", "junk")
	if err := os.WriteFile(dataFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := h.must("erase", u); out != "" {
		t.Errorf("erase printed %q", out)
	}
	if _, err := os.Stat(dataFile); !os.IsNotExist(err) {
		t.Error("erase left data behind")
	}
	if js := h.must("list", "devices", "-j"); strings.Contains(js, "lastBootedAt") {
		t.Error("an erased device still reports lastBootedAt")
	}
	h.must("erase", "all")
}

func TestDeviceSetsAreIsolated(t *testing.T) {
	h := newHarness(t)
	setA := filepath.Join(t.TempDir(), "a", "nested") // created on demand
	setB := filepath.Join(t.TempDir(), "b")
	ua := strings.TrimSpace(h.must("--set", setA, "create", "In A", "iPhone 15", "iOS 18.0"))
	if _, err := os.Stat(filepath.Join(setA, ua, "device.json")); err != nil {
		t.Fatalf("device not stored in its set: %v", err)
	}
	if got := h.must("--set", setB, "list", "devices"); strings.Contains(got, ua) {
		t.Error("set B sees set A's device")
	}
	if got := h.must("list", "devices"); strings.Contains(got, ua) {
		t.Error("the default set sees set A's device")
	}
	if r := h.simctl("--set", setB, "boot", ua); r.code != 148 {
		t.Errorf("booting another set's device: %+v", r)
	}
	if got := h.must("--set="+setA, "list", "devices"); !strings.Contains(got, ua) {
		t.Error("--set=<dir> form not honoured")
	}
	// Runtimes are global.
	if h.must("--set", setB, "list", "runtimes") != h.must("list", "runtimes") {
		t.Error("runtimes differ between sets")
	}
}

func TestDeleteAndRename(t *testing.T) {
	h := newHarness(t)
	u1 := h.create("One", "iPhone 15", "iOS 17.5")
	u2 := h.create("Two", "iPhone 15", "iOS 17.5")
	h.must("rename", u1, "Uno")
	if got := h.must("list", "devices"); !strings.Contains(got, "Uno ("+u1+")") {
		t.Errorf("rename: %s", got)
	}
	h.must("delete", "Uno") // by unique name
	if got := h.must("list", "devices"); strings.Contains(got, u1) || !strings.Contains(got, u2) {
		t.Errorf("delete one: %s", got)
	}
	h.must("delete", "all")
	if got := h.must("list", "devices"); strings.Contains(got, u2) {
		t.Errorf("delete all: %s", got)
	}
}

func TestAppCommands(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 17.5")
	app := filepath.Join(t.TempDir(), "Demo.app")
	if err := os.MkdirAll(app, 0o700); err != nil {
		t.Fatal(err)
	}
	plist := `<?xml version="1.0"?><plist><dict><key>CFBundleIdentifier</key><string>com.example.demo</string></dict></plist>`
	if err := os.WriteFile(filepath.Join(app, "Info.plist"), []byte(plist), 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.simctl("install", u, app)
	if r.code != 149 || !strings.HasSuffix(r.stderr, "Unable to lookup in current state: Shutdown\n") {
		t.Errorf("install on a shut-down device: %+v", r)
	}
	h.must("boot", u)
	h.must("install", u, app)
	if out := h.must("launch", u, "com.example.demo"); !strings.HasPrefix(out, "com.example.demo: ") {
		t.Errorf("launch printed %q", out)
	}
	h.must("terminate", u, "com.example.demo")
	h.must("uninstall", u, "com.example.demo")
	if r := h.simctl("launch", u, "com.example.demo"); r.code == 0 {
		t.Error("launch of an uninstalled app succeeded")
	}
	h.env[EnvFaults] = "install-fail@1"
	if r := h.simctl("install", u, app); r.code != 1 || !strings.Contains(r.stderr, "(simlock simulated fault install-fail)") {
		t.Errorf("install-fail: %+v", r)
	}
	h.must("install", u, app)
}

func TestConcurrentCreatesAndCountedFaults(t *testing.T) {
	h := newHarness(t, EnvFaults, "erase-fail@2")
	const n = 8
	udids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := h.simctl("create", fmt.Sprintf("P%d", i), "iPhone 15", "iOS 18.0")
			if r.code != 0 {
				t.Errorf("create %d: %+v", i, r)
			}
			udids[i] = strings.TrimSpace(r.stdout)
		})
	}
	wg.Wait()
	list := h.must("list", "devices")
	for _, u := range udids {
		if strings.Count(list, u) != 1 {
			t.Errorf("device %q listed %d times", u, strings.Count(list, u))
		}
	}
	failed := make([]bool, n)
	for i, u := range udids {
		wg.Go(func() { failed[i] = h.simctl("erase", u).code != 0 })
	}
	wg.Wait()
	count := 0
	for _, f := range failed {
		if f {
			count++
		}
	}
	if count != 2 {
		t.Errorf("erase-fail@2 fired %d times across concurrent processes", count)
	}
}

func TestXcrunAndXcodebuild(t *testing.T) {
	h := newHarness(t)
	if r := h.run("xcrun", "--version"); r.code != 0 || !strings.Contains(r.stdout, "simulated") {
		t.Errorf("xcrun --version: %+v", r)
	}
	if r := h.run("xcrun", "--find", "simctl"); r.code != 0 || r.stdout != "/Applications/Xcode.app/Contents/Developer/usr/bin/simctl\n" {
		t.Errorf("xcrun --find simctl: %+v", r)
	}
	if r := h.run("xcrun", "-sdk", "iphonesimulator", "simctl", "list", "runtimes"); r.code != 0 {
		t.Errorf("xcrun -sdk X simctl: %+v", r)
	}
	if r := h.run("xcrun", "nosuchtool"); r.code != 72 {
		t.Errorf("unknown tool: %+v", r)
	}
	if r := h.run("xcodebuild", "-version"); r.stdout != "Xcode 26.3\nBuild version 17C529\n" {
		t.Errorf("xcodebuild -version: %+v", r)
	}
	// The Android tools answer through the same entry point.
	if r := h.run("adb", "devices"); r.code != 0 || r.stdout != "List of devices attached\n\n" {
		t.Errorf("adb: %+v", r)
	}
}

func TestDownloadPlatform(t *testing.T) {
	h := newHarness(t, EnvFaults, "install-fail@1")
	r := h.run("xcodebuild", "-downloadPlatform", "iOS", "-buildVersion", "18.4")
	if r.code != 70 || !strings.Contains(r.stderr, "install-fail") {
		t.Fatalf("first download should fail: %+v", r)
	}
	if strings.Contains(h.must("list", "runtimes"), "iOS-18-4") {
		t.Fatal("a failed download installed the runtime")
	}
	r = h.run("xcodebuild", "-downloadPlatform", "iOS", "-buildVersion", "18.4")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Finding content...\n") ||
		!strings.HasSuffix(r.stdout, "Downloading iOS 18.4 Simulator (22E238): Done.\n") {
		t.Fatalf("download: %+v", r)
	}
	if !strings.Contains(h.must("list", "runtimes"), "iOS 18.4 (18.4 - 22E238) - com.apple.CoreSimulator.SimRuntime.iOS-18-4\n") {
		t.Error("18.4 not listed after download")
	}
	h.create("On 18.4", "iPhone 15", "iOS 18.4")
	// Without -buildVersion: Xcode's own runtime is there, so the newest
	// other downloadable one.
	if r := h.run("xcodebuild", "-downloadPlatform", "iOS"); r.code != 0 || !strings.Contains(r.stdout, "iOS 26.5 Simulator (23F77): Done.") {
		t.Errorf("plain download: %+v", r)
	}
	if r := h.run("xcodebuild", "-downloadPlatform", "iOS", "-buildVersion", "99.0"); r.code != 70 {
		t.Errorf("unknown build: %+v", r)
	}
	// A fresh Xcode without runtimes fetches its own platform first.
	h2 := newHarness(t, EnvIOSRuntimes, "none")
	if r := h2.run("xcodebuild", "-downloadPlatform", "iOS"); r.code != 0 || !strings.Contains(r.stdout, "iOS 26.3 Simulator (23D8133): Done.") {
		t.Errorf("fresh download: %+v", r)
	}
}

func TestBadEnvironmentIsLoud(t *testing.T) {
	h := newHarness(t, EnvFaults, "boot-explode")
	if r := h.simctl("list"); r.code != 2 || !strings.Contains(r.stderr, "unknown fault") {
		t.Errorf("unknown fault: %+v", r)
	}
	h.env[EnvFaults] = ""
	h.env[EnvSpeed] = "fast"
	if r := h.simctl("list"); r.code != 2 || !strings.Contains(r.stderr, "SIMLOCK_SIMSDK_SPEED") {
		t.Errorf("bad speed: %+v", r)
	}
}
