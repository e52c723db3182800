package simsdk

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAVDManagerListDeviceContainsTheCapturedExcerpt(t *testing.T) {
	a := newAndroid(t)
	out := a.ok("avdmanager", "list", "device")
	if !strings.HasPrefix(out, "Available devices definitions:\nid: 0 or \"") {
		t.Errorf("header: %q", out[:60])
	}
	excerpt := readTestdata(t, "android/avdmanager/list-device-excerpt-2025.txt")
	if !strings.Contains(out, excerpt) {
		t.Errorf("list device does not contain the captured excerpt (ids 22-27) verbatim")
	}
	for _, want := range []string{`id: 36 or "pixel_6"`, `"pixel_7"`, `"pixel_8"`, `"pixel_9"`, `"medium_phone"`, `"small_phone"`, `"pixel_tablet"`,
		"    Name: Television (1080p)\n    OEM : Google\n    Tag : android-tv\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.HasSuffix(out, "---------\n") {
		t.Error("separator after the last entry")
	}
	compact := a.ok("avdmanager", "list", "device", "-c")
	if !strings.Contains(compact, "\npixel_6\n") || strings.Contains(compact, "Name:") {
		t.Errorf("compact list: %q", compact)
	}
}

func TestAVDManagerCreateWritesTheAVDFiles(t *testing.T) {
	a := newAndroid(t)
	pkg := hostImage(35, "google_apis")
	r := a.runIn("no\n", "avdmanager", "create", "avd", "-n", "my_avd", "-k", pkg, "-d", "pixel_7")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("create: %+v", r)
	}
	// Progress lines as captured, then the prompt without a newline.
	if want := repoLoadingLines() + hardwarePrompt; r.stdout != want {
		t.Errorf("stdout %q\nwant %q", r.stdout, want)
	}
	ini, err := os.ReadFile(filepath.Join(a.avdHome, "my_avd.ini"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(a.avdHome, "my_avd.avd")
	if want := "avd.ini.encoding=UTF-8\npath=" + dir + "\npath.rel=avd/my_avd.avd\ntarget=android-35\n"; string(ini) != want {
		t.Errorf("my_avd.ini:\n%s\nwant\n%s", ini, want)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.ini"))
	if err != nil {
		t.Fatal(err)
	}
	// avdmanager writes key=value with the keys of the Android Studio
	// capture (all but sdcard.path: avdmanager makes no sdcard image).
	studio := parseINIFile([]byte(readTestdata(t, "android/avd/config.ini-android-studio-api34-x86_64-windows.ini")))
	got := parseINIFile(cfg)
	var wantKeys, gotKeys []string
	for k := range studio {
		if k != "sdcard.path" {
			wantKeys = append(wantKeys, k)
		}
	}
	for k := range got {
		gotKeys = append(gotKeys, k)
	}
	slices.Sort(wantKeys)
	slices.Sort(gotKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("config.ini keys\n%v\nwant\n%v", gotKeys, wantKeys)
	}
	if string(cfg) != string(got.format("=")) || strings.Contains(string(cfg), " = ") {
		t.Errorf("config.ini is not sorted key=value:\n%s", cfg)
	}
	for k, v := range map[string]string{"hw.device.name": "pixel_7", "hw.lcd.width": "1080", "hw.lcd.height": "2400",
		"hw.lcd.density": "420", "image.sysdir.1": "system-images/android-35/google_apis/" + hostABI() + "/",
		"tag.id": "google_apis", "tag.display": "Google APIs", "abi.type": hostABI(), "PlayStore.enabled": "false"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// The new AVD is listed by the emulator.
	if out := a.ok("emulator", "-list-avds"); out != "my_avd\n" {
		t.Errorf("-list-avds: %q", out)
	}
}

func TestAVDManagerInvalidTagMatchesCapture(t *testing.T) {
	a := newAndroid(t)
	// The 16 KB page-size preview of the capture, installed first.
	a.ok("sdkmanager", "--install", "system-images;android-36;google_apis_ps16k;x86_64")
	r := a.runIn("no\n", "avdmanager", "create", "avd", "--force", "-n", "test", "--abi", "google_apis_ps16k/x86_64",
		"--package", "system-images;android-36;google_apis_ps16k;x86_64", "--sdcard", "100M")
	want := readTestdata(t, "android/avdmanager/create-avd-invalid-tag-error-2025.txt")
	// Progress on stdout, the error on stderr; the capture is both, in order.
	if r.stdout+r.stderr != want || r.code != 1 {
		t.Errorf("exit %d\n%q\nwant\n%q", r.code, r.stdout+r.stderr, want)
	}
	if !strings.HasPrefix(r.stderr, "Error: ") {
		t.Errorf("error not on stderr: %+v", r)
	}
}

func TestAVDManagerPromptWithClosedStdinMatchesCapture(t *testing.T) {
	a := newAndroid(t)
	r := a.runIn("", "avdmanager", "create", "avd", "-n", "Android_7.1_API_25", "-k", hostImage(35, "google_apis"), "-c", "250M")
	capture := readTestdata(t, "android/avdmanager/create-avd-prompt-stdin-closed-exception-2018.txt")
	exception, prompt, _ := strings.Cut(capture, "Do you wish")
	if r.code != 1 || r.stderr != exception {
		t.Errorf("exit %d stderr\n%s\nwant\n%s", r.code, r.stderr, exception)
	}
	if want := "Do you wish" + strings.TrimSuffix(prompt, "\n"); !strings.HasSuffix(r.stdout, want) {
		t.Errorf("stdout %q does not end with the prompt %q", r.stdout, want)
	}
	if _, err := os.Stat(filepath.Join(a.avdHome, "Android_7.1_API_25.ini")); err == nil {
		t.Error("an AVD was created although the prompt failed")
	}
}

func TestAVDManagerErrors(t *testing.T) {
	a := newAndroid(t)
	pkg := hostImage(36, "google_apis")
	a.createAVD("dup", pkg, "pixel_6")
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"create", "avd", "-n", "dup", "-k", pkg, "-d", "pixel_6"},
			"Error: Android Virtual Device 'dup' already exists.\nUse --force if you want to replace it.\nnull\n"},
		{[]string{"create", "avd", "-n", "x", "-k", pkg, "-d", "nonexistent_device_xyz"},
			"Error: No device found matching --device nonexistent_device_xyz.\nnull\n"},
		{[]string{"create", "avd", "-n", "x", "-k", "system-images;android-34;google_apis;" + hostABI()},
			"Error: Package path is not valid. Valid system image paths are:\n" +
				hostImage(35, "google_apis") + "\n" + hostImage(35, "google_apis_playstore") + "\n" +
				hostImage(36, "google_apis") + "\n" + hostImage(36, "google_apis_playstore") + "\nnull\n"},
		{[]string{"create", "avd", "-k", pkg}, "Error: The parameter --name must be defined for action 'create avd'\nnull\n"},
		{[]string{"delete", "avd", "-n", "ghost"}, "Error: There is no Android Virtual Device named 'ghost'.\nnull\n"},
	} {
		r := a.runIn("no\n", "avdmanager", tc.args...)
		if r.code != 1 || r.stderr != tc.stderr {
			t.Errorf("%v: exit %d stderr\n%q\nwant\n%q", tc.args, r.code, r.stderr, tc.stderr)
		}
	}
	// --force replaces the AVD.
	if r := a.runIn("no\n", "avdmanager", "create", "avd", "-n", "dup", "-k", hostImage(35, "google_apis_playstore"), "-d", "pixel_8", "--force"); r.code != 0 {
		t.Fatalf("--force: %+v", r)
	}
	if cfg, _ := readINI(filepath.Join(a.avdHome, "dup.avd", "config.ini")); cfg["hw.device.name"] != "pixel_8" || cfg["PlayStore.enabled"] != "true" {
		t.Errorf("--force did not replace the AVD: %v", cfg)
	}
	// The create-fail fault.
	a.env[EnvFaults] = "create-fail@1"
	r := a.runIn("no\n", "avdmanager", "create", "avd", "-n", "failing", "-k", pkg)
	if r.code != 1 || !strings.Contains(r.stderr, "(simlock simulated fault create-fail)") {
		t.Errorf("create-fail: %+v", r)
	}
	a.createAVD("failing", pkg, "pixel_6") // only once
}

func TestAVDManagerListAVDMatchesCapture(t *testing.T) {
	a := newAndroid(t)
	for _, p := range []string{"system-images;android-34;google_apis_playstore;x86_64",
		"system-images;android-35;google_apis_playstore;x86_64", "system-images;android-36;google_apis_playstore;x86_64"} {
		a.ok("sdkmanager", "--install", p)
	}
	a.createAVD("emulator", "system-images;android-34;google_apis_playstore;x86_64", "pixel_4")
	a.createAVD("emulator-35", "system-images;android-35;google_apis_playstore;x86_64", "pixel_4")
	a.createAVD("emulator-36", "system-images;android-36;google_apis_playstore;x86_64", "pixel_6a")
	out := a.ok("avdmanager", "list", "avd")
	out = strings.ReplaceAll(out, a.avdHome, "/home/builder/.config/.android/avd")
	if want := readTestdata(t, "android/avdmanager/list-avd-api34-35-36-linux-2026.txt"); out != want {
		t.Errorf("list avd:\n%s\nwant\n%s", out, want)
	}
	if out := a.ok("avdmanager", "list", "avd", "-c"); out != "emulator\nemulator-35\nemulator-36\n" {
		t.Errorf("compact: %q", out)
	}
}

func TestAVDManagerDeleteAndBrokenAVDs(t *testing.T) {
	a := newAndroid(t)
	a.createAVD("keep", hostImage(35, "google_apis"), "pixel_6")
	a.createAVD("gone", hostImage(36, "google_apis"), "pixel_6")
	if out := a.ok("avdmanager", "list", "avd"); !strings.HasPrefix(out, "Available Android Virtual Devices:\n    Name: gone\n") ||
		!strings.Contains(out, "---------\n    Name: keep\n") {
		t.Errorf("list avd:\n%s", out)
	}
	out := a.ok("avdmanager", "delete", "avd", "-n", "gone")
	want := "Deleting file " + filepath.Join(a.avdHome, "gone.ini") + "\nDeleting folder " + filepath.Join(a.avdHome, "gone.avd") + "\n\nAVD 'gone' deleted.\n"
	if out != want {
		t.Errorf("delete:\n%q\nwant\n%q", out, want)
	}
	// An AVD whose system image is uninstalled cannot be loaded.
	a.ok("sdkmanager", "--uninstall", hostImage(35, "google_apis"))
	out = a.ok("avdmanager", "list", "avd")
	want = "Available Android Virtual Devices:\n\nThe following Android Virtual Devices could not be loaded:\n" +
		"    Name: keep\n    Path: " + filepath.Join(a.avdHome, "keep.avd") + "\n   Error: Missing system image for Google APIs " + hostABI() + " keep.\n"
	if out != want {
		t.Errorf("broken list:\n%s\nwant\n%s", out, want)
	}
	if out := a.ok("emulator", "-list-avds"); out != "keep\n" {
		t.Errorf("-list-avds lists every .ini: %q", out)
	}
}
