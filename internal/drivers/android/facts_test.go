package android

import (
	"context"
	"reflect"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

// The facts of the captured AVD configs: profile, screen, image path and
// its API target, with basedOn the package the AVD was created from.
func TestFactsFromCapturedConfigINI(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[string]string
	}{
		{"avd/config.ini-android-studio-api34-x86_64-windows.ini", map[string]string{
			"fact:modelIdentifier": "S22", "fact:formFactor": "phone", "fact:display.widthPx": "1080",
			"fact:display.heightPx": "2340", "fact:display.density": "480",
			"fact:image.path": `system-images\android-34\google_apis\x86_64\`, "fact:image.target": "android-34",
			"fact:image.basedOn": "system-images;android-34;google_apis;x86_64"}},
		{"avd/config.ini-emulator-rewritten-api33-arm64-macos.ini", map[string]string{
			"fact:modelIdentifier": "pixel_6", "fact:formFactor": "phone", "fact:display.widthPx": "1080",
			"fact:display.heightPx": "2400", "fact:display.density": "420",
			"fact:image.path": "system-images/android-33/google_apis_playstore/arm64-v8a/", "fact:image.target": "android-33",
			"fact:image.basedOn": "system-images;android-34;google_apis;x86_64"}},
	} {
		got := iniFacts(parseINI(fixture(t, tc.file)), "system-images;android-34;google_apis;x86_64")
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.file, got, tc.want)
		}
	}
	// An empty config states only that the form factor is unknown.
	if got := iniFacts(iniFile{}, ""); !reflect.DeepEqual(got, map[string]string{"fact:formFactor": "unknown"}) {
		t.Errorf("empty config: %v", got)
	}
}

func TestFormFactorFromTheAVDProfile(t *testing.T) {
	for _, tc := range []struct {
		ini  iniFile
		want string
	}{
		{iniFile{"hw.device.name": "pixel_7"}, "phone"},
		{iniFile{"hw.device.name": "pixel_fold"}, "foldable"},
		{iniFile{"hw.device.name": "my_device", "hw.sensor.hinge": "yes"}, "foldable"},
		{iniFile{"hw.device.name": "pixel_tablet"}, "tablet"},
		{iniFile{"hw.device.name": "medium_tablet"}, "tablet"},
		{iniFile{"hw.device.name": "pixel_c"}, "tablet"},
		{iniFile{"hw.device.name": "tv_1080p", "tag.id": "android-tv"}, "unknown"},
		{iniFile{"hw.device.name": "wearos_small_round", "tag.id": "android-wear"}, "unknown"},
		{iniFile{"hw.device.name": "automotive_1024p_landscape", "tag.id": "android-automotive-playstore"}, "unknown"},
		{iniFile{}, "unknown"},
	} {
		if got := profileFormFactor(tc.ini); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.ini, got, tc.want)
		}
	}
}

// Provision states the new AVD's facts next to its reach attrs.
func TestProvisionStatesTheAVDsFacts(t *testing.T) {
	h := newHarness(t)
	h.run.Always(fake.Step{Match: "adb -P 5137 version", Stdout: string(fixture(t, "adb/version-platform-tools-36.0.0-linux.txt"))})
	spec := core.Spec{Platform: Platform, ModelID: "pixel_6", OSVersion: "15", RuntimeID: "system-images;android-35;google_apis;x86_64"}
	h.run.Expect(createStep(h, "simlock-t0001", spec.RuntimeID, "pixel_6"))
	p, err := h.d.Provision(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"fact:formFactor": "phone", "fact:image.basedOn": spec.RuntimeID, "fact:display.widthPx": "1080"} {
		if p.Attrs[k] != want {
			t.Errorf("%s = %q, want %q (attrs %v)", k, p.Attrs[k], want, p.Attrs)
		}
	}
}
