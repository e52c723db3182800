package android

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

// createStep scripts avdmanager create avd writing the AVD into the root.
func createStep(h *harness, name, pkg, profile string) fake.Step {
	return fake.Step{
		Match: "avdmanager create avd -n " + name + " -k " + pkg + " -d " + profile,
		Do: func(_ context.Context, c ports.Command) error {
			in, _ := io.ReadAll(c.Stdin)
			if string(in) != "no\n" {
				h.t.Errorf("hardware profile prompt answered %q", in)
			}
			h.addAVD(name, nil)
			return nil
		},
	}
}

func TestProvisionCommandAndPorts(t *testing.T) {
	h := newHarness(t)
	h.run.Always(fake.Step{Match: "adb -P 5137 version", Stdout: string(fixture(t, "adb/version-platform-tools-36.0.0-linux.txt"))})
	// An AVD adopted under a name without the prefix already holds 5702.
	h.addAVD("my_pixel", &avdState{ConsolePort: 5702})
	spec := core.Spec{Platform: Platform, ModelID: "pixel_6", OSVersion: "15", RuntimeID: "system-images;android-35;google_apis;x86_64"}
	h.run.Expect(
		createStep(h, "simlock-t0001", spec.RuntimeID, "pixel_6"),
		createStep(h, "simlock-t0002", spec.RuntimeID, "pixel_6"),
	)

	var ports []int
	for _, want := range []string{"simlock-t0001", "simlock-t0002"} {
		p, err := h.d.Provision(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if p.Handle != want || p.Simulated {
			t.Errorf("handle %q simulated %v", p.Handle, p.Simulated)
		}
		var pd provisionedData
		if err := json.Unmarshal(p.Data, &pd); err != nil {
			t.Fatal(err)
		}
		ports = append(ports, pd.ConsolePort)
		wantAttrs := map[string]string{
			core.AttrSerial:               serialFor(pd.ConsolePort),
			"env:ANDROID_ADB_SERVER_PORT": "5137",
			"env:ANDROID_AVD_HOME":        h.root,
			"env:ANDROID_SERIAL":          serialFor(pd.ConsolePort),
		}
		// The AVD's facts (facts_test.go) come on top of the reach attrs.
		reach := map[string]string{}
		for k, v := range p.Attrs {
			if !strings.HasPrefix(k, core.AttrFactPrefix) {
				reach[k] = v
			}
		}
		if !reflect.DeepEqual(reach, wantAttrs) {
			t.Errorf("attrs %v", p.Attrs)
		}
		if st := h.state(want); st.ConsolePort != pd.ConsolePort || !st.Pristine {
			t.Errorf("state %+v", st)
		}
	}
	if !reflect.DeepEqual(ports, []int{5700, 5704}) {
		t.Errorf("console ports %v, want [5700 5704] (5702 is taken)", ports)
	}
	h.assertDone()
}

func TestProvisionSkipsScannedPortsAndDetectsSimulatedSDK(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ConsolePortBase = 5552 })
	h.run.Always(fake.Step{Match: "adb -P 5137 version", Stdout: "Android Debug Bridge version 1.0.41\nVersion 36.0.0-simlock (simulated SDK)\n"})
	h.addAVD("simlock-old", &avdState{ConsolePort: 5552})
	spec := core.Spec{ModelID: "pixel_6", RuntimeID: "system-images;android-35;google_apis;x86_64"}
	h.run.Expect(createStep(h, "simlock-t0001", spec.RuntimeID, "pixel_6"))
	p, err := h.d.Provision(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Attrs[core.AttrSerial] != "emulator-5586" {
		t.Errorf("serial %q: ports 5554–5585 must be skipped", p.Attrs[core.AttrSerial])
	}
	if !p.Simulated {
		t.Error("simulated SDK not detected")
	}
}

func TestProvisionFailureReportsAVDManagerError(t *testing.T) {
	h := newHarness(t)
	h.run.Expect(fake.Step{Match: "avdmanager create avd *", ExitCode: 1,
		Stdout: string(fixture(t, "avdmanager/create-avd-invalid-tag-error-2025.txt"))})
	_, err := h.d.Provision(context.Background(), core.Spec{ModelID: "pixel_6", RuntimeID: "system-images;android-36;google_apis_ps16k;x86_64"})
	if err == nil || !strings.Contains(err.Error(), "Invalid --tag google_apis_ps16k") {
		t.Fatalf("err = %v", err)
	}
	if names, _ := h.d.members(); len(names) != 0 {
		t.Errorf("left AVDs behind: %v", names)
	}
}

func TestProvisionRefusesAVDOutsideRoot(t *testing.T) {
	h := newHarness(t)
	h.run.Expect(fake.Step{Match: "avdmanager create avd *"}) // succeeds, writes nothing into the root
	_, err := h.d.Provision(context.Background(), core.Spec{ModelID: "pixel_6", RuntimeID: "system-images;android-35;google_apis;x86_64"})
	if err == nil || !strings.Contains(err.Error(), "ANDROID_AVD_HOME") {
		t.Fatalf("err = %v", err)
	}
}

// firstBoot scripts a fresh AVD's first MakeReady: cold boot, two polls
// while booting, then mark, baseline save, validating restore.
func firstBoot(h *harness, emu *emulatorStep, name string, port int) {
	serial := serialFor(port)
	booting := string(fixture(h.t, "adb/getprop-full-emulator-api23-booting.txt"))
	h.run.Always(fake.Step{Match: "emulator -version", Stdout: emulatorVersion})
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: adbEmpty},
		emu.step("emulator -avd "+name+" -port "+itoa(port)+" -no-window -no-audio -no-boot-anim -no-snapshot-save -no-snapshot-load"),
		fake.Step{Match: adbOn(serial, "wait-for-device")},
		fake.Step{Match: adbOn(serial, "shell getprop"), Stdout: booting},
		fake.Step{Match: adbOn(serial, "shell getprop"), Stdout: booting},
		fake.Step{Match: adbOn(serial, "shell getprop"), Stdout: bootedNoAnim},
		fake.Step{Match: adbOn(serial, "shell echo 'dev-1' > /data/local/tmp/simlock-mark")},
		fake.Step{Match: adbOn(serial, "emu avd snapshot save simlock-baseline"), Stdout: "OK\r\n"},
		fake.Step{Match: adbOn(serial, "emu avd snapshot load simlock-baseline"), Stdout: "OK\r\n"},
		fake.Step{Match: adbOn(serial, "shell getprop"), Stdout: string(fixture(h.t, "adb/getprop-full-physical-motorola-android13.txt"))},
	)
}

func itoa(n int) string { return serialFor(n)[len("emulator-"):] }

func TestMakeReadyFirstBootCapturesBaseline(t *testing.T) {
	h := newHarness(t)
	h.addAVD("simlock-a", &avdState{ConsolePort: 5700, Pristine: true})
	emu := newEmulator()
	firstBoot(h, emu, "simlock-a", 5700)
	dev := devRef("simlock-a", 5700)

	if err := h.drive(func() error { return h.d.MakeReady(context.Background(), dev) }); err != nil {
		t.Fatal(err)
	}
	c := emu.launched()
	h.assertDone()
	if got := h.clk.Now().Sub(testStart); got != 2*testPoll {
		t.Errorf("clock moved %s, want two polls", got)
	}
	for _, want := range []string{"ANDROID_AVD_HOME=" + h.root, "ANDROID_ADB_SERVER_PORT=5137"} {
		if !strings.Contains(strings.Join(c.Env, " "), want) {
			t.Errorf("emulator env %q lacks %s", c.Env, want)
		}
	}
	st := h.state("simlock-a")
	if st.Baseline == nil || !strings.HasPrefix(st.Baseline.Tag, "sha256:") || st.Baseline.Snapshot != "simlock-baseline" {
		t.Errorf("baseline %+v", st.Baseline)
	}
	if st.MarkID != "dev-1" || st.Pristine || !st.Running {
		t.Errorf("state %+v", st)
	}

	// Idempotent: a running, booted device is only re-checked.
	h.run.Expect(
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
	if err := h.drive(func() error { return h.d.MakeReady(context.Background(), dev) }); err != nil {
		t.Fatal(err)
	}
	h.assertDone()
}

// bootRunning brings simlock-a up with a valid baseline and returns its
// emulator, for tests that start from a ready device.
func bootRunning(t *testing.T, h *harness) *emulatorStep {
	t.Helper()
	h.addAVD("simlock-a", &avdState{ConsolePort: 5700, Pristine: true})
	emu := newEmulator()
	firstBoot(h, emu, "simlock-a", 5700)
	if err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	emu.launched()
	h.assertDone()
	return emu
}

func TestShutdownProvesExit(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	h.run.Expect(emu.killStep("emulator-5700"))
	if err := h.drive(func() error { return h.d.Shutdown(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	if p := h.d.proc("simlock-a"); p.alive() {
		t.Error("Shutdown returned while the emulator process was still running")
	}
	if h.state("simlock-a").Running {
		t.Error("orderly stop not recorded")
	}
	select {
	case <-emu.cancelled:
		t.Error("emulator was signalled although emu kill worked")
	default:
	}
}

func TestShutdownEscalatesAfterGrace(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	// The console accepts the kill, but the process does not exit.
	h.run.Expect(fake.Step{Match: adbOn("emulator-5700", "emu kill"), Stdout: "OK: killing emulator, bye bye\r\n"})
	err := h.drive(func() error { return h.d.Shutdown(context.Background(), devRef("simlock-a", 5700)) }, defaultShutdownGrace)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-emu.cancelled:
	default:
		t.Error("emulator that ignored emu kill was not signalled")
	}
	if h.d.proc("simlock-a").alive() || h.state("simlock-a").Running {
		t.Error("exit not proven or not recorded")
	}
}

func TestShutdownWithoutProofFails(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	h.run.Expect(fake.Step{Match: adbOn("emulator-5700", "emu kill")}) // accepted, ignored
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.d.Shutdown(ctx, devRef("simlock-a", 5700)) }()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case d := <-h.clk.armed:
			if d == defaultShutdownGrace {
				cancel() // the caller gives up before the grace ends
			}
		}
	}
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a cancellation: exit was never proven", err)
	}
	if !h.d.proc("simlock-a").alive() {
		t.Error("emulator should still be running")
	}
	select {
	case <-emu.cancelled:
		t.Error("emulator signalled before its grace ended")
	default:
	}
}

func TestMakeReadyAfterOrderlyStopRestoresBaseline(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	h.run.Expect(emu.killStep("emulator-5700"))
	if err := h.drive(func() error { return h.d.Shutdown(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	// The supervised process is known to have exited, so adb is not asked.
	emu2 := newEmulator()
	h.run.Expect(
		emu2.step("emulator -avd simlock-a -port 5700 -no-window -no-audio -no-boot-anim -no-snapshot-save -snapshot simlock-baseline"),
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
	if err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	emu2.launched()
	h.assertDone()
}

func TestMakeReadyAfterCrashBootsCurrentDisk(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	close(emu.exit) // the emulator dies on its own
	<-h.d.proc("simlock-a").done
	if !h.state("simlock-a").Running {
		t.Fatal("a crash must leave the run unfinished")
	}
	// The holder's data is on the disk: no baseline restore, no new capture.
	// The supervised process is known to have exited, so adb is not asked.
	emu2 := newEmulator()
	h.run.Expect(
		emu2.step("emulator -avd simlock-a -port 5700 -no-window -no-audio -no-boot-anim -no-snapshot-save -no-snapshot-load"),
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
	if err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	emu2.launched()
	h.assertDone()
}

func TestEmulatorFromEarlierDaemon(t *testing.T) {
	h := newHarness(t)
	h.addAVD("simlock-a", &avdState{ConsolePort: 5700, Running: true, MarkID: "dev-1"})
	listed := "List of devices attached\nemulator-5700\tdevice\n\n"
	// MakeReady adopts the running emulator instead of launching a second.
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: listed},
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
	if err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	h.assertDone()
	// Shutdown can only watch adb lose it; it still must see that happen.
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: listed},
		fake.Step{Match: adbOn("emulator-5700", "emu kill"), Stdout: "OK: killing emulator, bye bye\r\n"},
		fake.Step{Match: "adb -P 5137 devices", Stdout: "List of devices attached\nemulator-5700\toffline\n\n"},
		fake.Step{Match: "adb -P 5137 devices", Stdout: adbEmpty},
	)
	if err := h.drive(func() error { return h.d.Shutdown(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	h.assertDone()
	if h.state("simlock-a").Running {
		t.Error("stop not recorded")
	}
}

func TestMakeReadyUnknownAVD(t *testing.T) {
	h := newHarness(t)
	h.addAVD("simlock-a", &avdState{ConsolePort: 5700})
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: adbEmpty},
		fake.Step{Match: "emulator -avd simlock-a *", ExitCode: 1,
			Stdout: string(fixture(t, "emulator/error-unknown-avd-name-2019.txt"))},
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device"), Do: func(ctx context.Context, _ ports.Command) error {
			<-ctx.Done() // adb waits for a device that will never come
			return ctx.Err()
		}},
	)
	err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) })
	if !errors.Is(err, core.ErrDeviceNotFound) {
		t.Fatalf("err = %v, want ErrDeviceNotFound", err)
	}
}

func TestMakeReadyTimesOut(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootTimeout = 5 * time.Second })
	h.addAVD("simlock-a", &avdState{ConsolePort: 5700})
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: adbEmpty},
		newEmulator().step("emulator -avd simlock-a *"),
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
	)
	h.run.Always(fake.Step{Match: adbOn("emulator-5700", "shell getprop"),
		Stdout: string(fixture(t, "adb/getprop-full-emulator-api23-booting.txt"))})
	err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) })
	if err == nil || !strings.Contains(err.Error(), `init.svc.bootanim="running"`) {
		t.Fatalf("err = %v", err)
	}
	if got := h.clk.Now().Sub(testStart); got != 5*time.Second {
		t.Errorf("gave up after %s", got)
	}
}

func TestMakeReadyRejectsForeignHandle(t *testing.T) {
	h := newHarness(t)
	for _, handle := range []string{"ghost", "../outside", ""} {
		if err := h.d.MakeReady(context.Background(), core.DeviceRef{Handle: handle}); !errors.Is(err, core.ErrDeviceNotFound) {
			t.Errorf("%q: err = %v", handle, err)
		}
	}
}

func TestReclaimRestoresBaseline(t *testing.T) {
	h := newHarness(t)
	bootRunning(t, h)
	h.run.Expect(
		fake.Step{Match: adbOn("emulator-5700", "emu avd snapshot load simlock-baseline"), Stdout: "OK\r\n"},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
	if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	h.assertDone()
	if ds := h.diagnostics(); len(ds) != 1 || ds[0].Type != "snapshot.restored" {
		t.Errorf("want exactly one snapshot.restored, got %v", ds)
	}
}

// wipeReboot scripts the reclaim fallback after the running emulator emu is
// killed: -wipe-data boot, new mark, new baseline.
func wipeReboot(h *harness, emu *emulatorStep) *emulatorStep {
	h.t.Helper()
	emu2 := newEmulator()
	h.run.Expect(
		emu.killStep("emulator-5700"),
		emu2.step("emulator -avd simlock-a -port 5700 -no-window -no-audio -no-boot-anim -no-snapshot-save -wipe-data -no-snapshot-load"),
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device")},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
		fake.Step{Match: adbOn("emulator-5700", "shell echo 'dev-1' > /data/local/tmp/simlock-mark")},
		fake.Step{Match: adbOn("emulator-5700", "emu avd snapshot save simlock-baseline"), Stdout: "OK\r\n"},
		fake.Step{Match: adbOn("emulator-5700", "emu avd snapshot load simlock-baseline"), Stdout: "OK\r\n"},
		fake.Step{Match: adbOn("emulator-5700", "shell getprop"), Stdout: bootedNoAnim},
	)
	return emu2
}

func TestReclaimWipesWhenBaselineInvalid(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	old := h.state("simlock-a").Baseline.Tag
	// The emulator normalizes config.ini differently after an update: the
	// snapshot no longer matches.
	cfg := filepath.Join(h.root, "simlock-a.avd", "config.ini")
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append(b, "hw.ramSize=4096\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	emu2 := wipeReboot(h, emu)
	if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	emu2.launched()
	h.assertDone()
	st := h.state("simlock-a")
	if st.Baseline == nil || st.Baseline.Tag == old {
		t.Errorf("baseline not recaptured: %+v", st.Baseline)
	}
	if d := h.diagnostics(); len(d) != 1 || d[0].Type != "snapshot.cold-boot" {
		t.Errorf("diagnostics %+v", d)
	}
}

func TestReclaimWipesWhenRestoreFails(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	h.run.Expect(fake.Step{Match: adbOn("emulator-5700", "emu avd snapshot load simlock-baseline"),
		Stdout: "KO: could not load snapshot\r\n"})
	emu2 := wipeReboot(h, emu)
	if err := h.drive(func() error { return h.d.Reclaim(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	emu2.launched()
	h.assertDone()
	if d := h.diagnostics(); len(d) != 1 || !strings.Contains(d[0].Message, "could not load snapshot") {
		t.Errorf("diagnostics %+v", d)
	}
}

func TestDestroy(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)
	h.run.Expect(
		emu.killStep("emulator-5700"),
		fake.Step{Match: "avdmanager delete avd -n simlock-a", Do: func(context.Context, ports.Command) error {
			os.RemoveAll(filepath.Join(h.root, "simlock-a.avd"))
			os.Remove(filepath.Join(h.root, "simlock-a.ini"))
			return nil
		}},
	)
	if err := h.drive(func() error { return h.d.Destroy(context.Background(), devRef("simlock-a", 5700)) }); err != nil {
		t.Fatal(err)
	}
	h.assertDone()
	if names, _ := h.d.members(); len(names) != 0 {
		t.Errorf("members after destroy: %v", names)
	}
	if _, err := os.Stat(filepath.Join(h.root, "simlock-a.simlock.json")); !os.IsNotExist(err) {
		t.Errorf("state file left: %v", err)
	}
	// Destroying it again is a no-op.
	if err := h.d.Destroy(context.Background(), devRef("simlock-a", 5700)); err != nil {
		t.Errorf("second destroy: %v", err)
	}
}

// An emulator's output is kept as a bounded tail: megabytes of chatter
// before it dies leave only its last words, which still explain the exit.
func TestEmulatorOutputIsABoundedTail(t *testing.T) {
	h := newHarness(t)
	h.addAVD("simlock-a", &avdState{ConsolePort: 5700})
	chatter := strings.Repeat("emulator: INFO: chatter\n", 1<<16) // 1.5 MiB
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: adbEmpty},
		fake.Step{Match: "emulator -avd simlock-a *", ExitCode: 1, Stdout: chatter,
			Stderr: "FATAL | the last words\n"},
		fake.Step{Match: adbOn("emulator-5700", "wait-for-device"), Do: func(ctx context.Context, _ ports.Command) error {
			<-ctx.Done()
			return ctx.Err()
		}},
	)
	err := h.drive(func() error { return h.d.MakeReady(context.Background(), devRef("simlock-a", 5700)) })
	if err == nil || !strings.Contains(err.Error(), "the last words") {
		t.Fatalf("err = %v", err)
	}
	p := h.d.proc("simlock-a")
	if p == nil {
		t.Fatal("no supervised emulator")
	}
	if n := len(p.output.Bytes()); n > emulatorTailBytes {
		t.Fatalf("kept %d bytes of emulator output, cap %d", n, emulatorTailBytes)
	}
}
