package android

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

func TestParseRAMSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"2048": 2048, " 1536 ": 1536, "2048M": 2048, "2048MB": 2048, "2G": 2048, "4gb": 4096,
		"": 0, "lots": 0, "-1": 0, "0": 0, "99999999999": 0,
	} {
		if got := parseRAMSize(in); got != want {
			t.Errorf("parseRAMSize(%q) = %d, want %d", in, got, want)
		}
	}
}

// A new AVD is charged its own hw.ramSize (the recorded Android Studio
// config asks for 2048 MiB) plus the emulator's overhead, not the platform
// figure.
func TestProvisionReportsTheAVDsOwnFootprint(t *testing.T) {
	h := newHarness(t)
	h.run.Always(fake.Step{Match: "adb -P 5137 version", Stdout: string(fixture(t, "adb/version-platform-tools-36.0.0-linux.txt"))})
	spec := core.Spec{Platform: Platform, ModelID: "pixel_6", OSVersion: "15", RuntimeID: "system-images;android-35;google_apis;x86_64"}
	h.run.Expect(createStep(h, "simlock-t0001", spec.RuntimeID, "pixel_6"))
	p, err := h.d.Provision(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(2048<<20 + emulatorOverhead); p.RAMBytes != want {
		t.Errorf("footprint %d, want %d (hw.ramSize 2048 MiB + overhead)", p.RAMBytes, want)
	}
	if p.RAMBytes == h.d.RAMPerDevice() {
		t.Error("the platform figure was reported instead of the AVD's own")
	}
}
