package android

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/ports/fake"
)

// versionReads counts the `emulator -version` processes the driver ran.
func versionReads(h *harness) int {
	n := 0
	for _, c := range h.run.Calls {
		if c == "emulator -version" {
			n++
		}
	}
	return n
}

// fakeEmulatorOnPath puts an executable named emulator first on PATH, so
// the driver can fingerprint the binary the runner would start, and returns
// its path.
func fakeEmulatorOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "emulator")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return bin
}

func restoreStep(h *harness) {
	h.run.Expect(
		fake.Step{Match: adbOn("emulator-5700", "emu avd snapshot load simlock-baseline"), Stdout: "OK\r\n"},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
}

// The version in every baseline tag is read once per emulator binary, not
// once per reclaim; an update of the binary is still seen, and still
// invalidates the baseline.
func TestEmulatorVersionReadOncePerBinary(t *testing.T) {
	bin := fakeEmulatorOnPath(t)
	h := newHarness(t)
	emu := bootRunning(t, h) // the first boot's capture reads the version
	if n := versionReads(h); n != 1 {
		t.Fatalf("first boot read the version %d times, want 1", n)
	}
	old := h.state("simlock-a").Baseline.Tag
	for i := range 2 {
		restoreStep(h)
		if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
			t.Fatalf("reclaim %d: %v", i, err)
		}
		h.assertDone()
	}
	if n := versionReads(h); n != 1 {
		t.Errorf("after two restores the version was read %d times, want 1 (the binary did not change)", n)
	}

	// An update replaces the binary: the version is read again, and the
	// new one no longer matches the baseline, so the reclaim wipes.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n# 36.2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	h.run.Expect(fake.Step{Match: "emulator -version", Stdout: strings.ReplaceAll(emulatorVersion, "36.1.9.0", "36.2.1.0")})
	emu2 := wipeReboot(h, emu)
	if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	emu2.launched()
	h.assertDone()
	if n := versionReads(h); n != 2 {
		t.Errorf("after the update the version was read %d times in all, want 2", n)
	}
	st := h.state("simlock-a")
	if st.Baseline == nil || st.Baseline.Tag == old {
		t.Errorf("baseline not recaptured after the emulator update: %+v", st.Baseline)
	}
	if d := h.diagnostics(); len(d) == 0 || d[len(d)-1].Type != "snapshot.cold-boot" || !strings.Contains(d[len(d)-1].Message, "emulator version") {
		t.Errorf("diagnostics %+v, want a cold boot for the changed version", d)
	}
}

// A binary the driver cannot find to fingerprint is never trusted to be
// the same: every check runs the tool, as it did before the cache.
func TestEmulatorVersionUnresolvedReadsEveryTime(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	h := newHarness(t)
	bootRunning(t, h)
	for i := range 2 {
		restoreStep(h)
		if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
			t.Fatalf("reclaim %d: %v", i, err)
		}
		h.assertDone()
	}
	if n := versionReads(h); n != 3 {
		t.Errorf("version read %d times, want 3 (one per tag, nothing to fingerprint)", n)
	}
}

// After a snapshot load the first getprop is the readiness proof only
// when it answers with a finished boot; a device that is offline for a
// moment, or still booting, gets the full wait-for-device and poll.
func TestReclaimAfterLoadWaitsUnlessGetpropProvesReady(t *testing.T) {
	booting := string(fixture(t, "adb/getprop-full-emulator-api23-booting.txt"))
	for _, tc := range []struct {
		name  string
		first fake.Step
	}{
		{"offline", fake.Step{Match: adbOn("emulator-5700", "shell getprop"), ExitCode: 1, Stderr: "error: device offline\n"}},
		{"booting", fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: booting}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			bootRunning(t, h)
			h.run.Expect(
				fake.Step{Match: adbOn("emulator-5700", "emu avd snapshot load simlock-baseline"), Stdout: "OK\r\n"},
				tc.first,
			)
			// Scripted after the first answer: first-match order makes the
			// full wait's getprop the booted one.
			h.run.Expect(
				fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
				fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
			)
			if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
				t.Fatal(err)
			}
			h.assertDone()
		})
	}
}
