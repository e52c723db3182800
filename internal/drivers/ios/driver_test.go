package ios

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

// harness wires a Driver to a scripted runner, a manual clock and a real
// filesystem under t.TempDir().
type harness struct {
	t      *testing.T
	d      *Driver
	runner *fake.Runner
	clock  *fake.Clock
	root   string

	mu    sync.Mutex
	diags []core.Diagnostic
}

func newHarness(t *testing.T, mutate ...func(*Options)) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		runner: fake.NewRunner(),
		clock:  fake.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)),
		root:   filepath.Join(t.TempDir(), "ios-devices"),
	}
	opts := Options{
		Root:   h.root,
		Runner: h.runner,
		FS:     ports.OSFilesystem{},
		Clock:  h.clock,
		OnDiagnostic: func(d core.Diagnostic) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.diags = append(h.diags, d)
		},
	}
	for _, m := range mutate {
		m(&opts)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	t.Cleanup(func() {
		if len(h.runner.Unexpected) > 0 {
			t.Errorf("unexpected commands: %q", h.runner.Unexpected)
		}
	})
	return h
}

// sim is the command line prefix every simctl call must carry.
func (h *harness) sim(rest string) string { return "xcrun simctl --set " + h.root + " " + rest }

func (h *harness) expect(steps ...fake.Step) { h.runner.Expect(steps...) }

func (h *harness) diagTypes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, d := range h.diags {
		out = append(out, d.Type)
	}
	return out
}

func (h *harness) assertDone() {
	h.t.Helper()
	if r := h.runner.Remaining(); len(r) > 0 {
		h.t.Fatalf("scripted commands not run: %q", r)
	}
}

// drive runs f while advancing the fake clock by step whenever the driver
// is parked on a poll timer (a deadline timer plus the poll timer), so polls
// proceed without any real sleeping.
func (h *harness) drive(step time.Duration, parked int, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if h.clock.Pending() >= parked {
			h.clock.Advance(step)
		}
		runtime.Gosched()
	}
}

const (
	xcode16JSON    = "list-json-xcode16.0.json"
	bootedUDID     = "BA519339-BEC4-4E69-B98B-BE2EFDA190F0" // Booted in the Xcode 16 capture
	transcriptUDID = "03423413-ED3A-44FD-AD37-E9B456938AAA"
)

func ref(udid string) core.DeviceRef {
	return core.DeviceRef{ID: "dev-1", Handle: udid}
}

// withState rewrites the one Booted device of the Xcode 16 capture into
// another state, to model states no JSON capture shows.
func withState(t *testing.T, state DeviceState) string {
	t.Helper()
	s := string(readFixture(t, xcode16JSON))
	out := strings.Replace(s, `"state" : "Booted"`, fmt.Sprintf(`"state" : %q`, string(state)), 1)
	if out == s {
		t.Fatal("capture has no Booted device")
	}
	return out
}

func TestEveryCommandIsScopedToTheRoot(t *testing.T) {
	h := newHarness(t)
	h.runner.Always(fake.Step{Match: h.sim("list -j"), Stdout: string(readFixture(t, xcode16JSON))})
	h.runner.Always(fake.Step{Match: h.sim("list devices -j"), Stdout: string(readFixture(t, xcode16JSON))})
	ctx := context.Background()
	if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.Catalog(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.ListManaged(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range h.runner.Calls {
		if !strings.HasPrefix(c, "xcrun simctl --set "+h.root+" ") {
			t.Errorf("unscoped command %q", c)
		}
	}
}

func TestResolveSpecDriver(t *testing.T) {
	ctx := context.Background()
	t.Run("default", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: string(readFixture(t, xcode16JSON))})
		s, err := h.d.ResolveSpec(ctx, core.SpecRequest{})
		if err != nil {
			t.Fatal(err)
		}
		want := core.Spec{Platform: "ios", Model: "iPhone 16", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPhone-16",
			OSVersion: "18.0", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-18-0"}
		if s.Platform != want.Platform || s.Model != want.Model || s.ModelID != want.ModelID || s.OSVersion != want.OSVersion || s.RuntimeID != want.RuntimeID {
			t.Fatalf("got %+v", s)
		}
		h.assertDone()
	})
	t.Run("wrong platform", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{Platform: "android"})
		specErr(t, err, core.ErrUnsupportedPlatform)
	})
	t.Run("out of range fails before any download", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: string(readFixture(t, xcode16JSON))})
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 16", OSVersion: "17.5", AllowDownload: true})
		se := specErr(t, err, core.ErrOSOutOfRange)
		if se.Details["min"] != "18.0" || !strings.Contains(se.Error(), "18.0") {
			t.Fatalf("%v %v", se, se.Details)
		}
		if len(h.diagTypes()) != 0 {
			t.Fatalf("diagnostics %v", h.diagTypes())
		}
		h.assertDone()
	})
	t.Run("missing without permission", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: string(readFixture(t, xcode16JSON))})
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 15", OSVersion: "17.0"})
		specErr(t, err, core.ErrRuntimeMissing)
		if len(h.diagTypes()) != 0 {
			t.Fatalf("diagnostics %v", h.diagTypes())
		}
		h.assertDone()
	})
}

type fakeGuard struct {
	mu       sync.Mutex
	free     uint64
	reserved uint64
	released int
	paths    []string
}

func (g *fakeGuard) Reserve(path string, n uint64) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reserved+n > g.free {
		return nil, fmt.Errorf("need %d bytes, %d available: %w", n, g.free-g.reserved, core.ErrInsufficientDisk)
	}
	g.reserved += n
	g.paths = append(g.paths, path)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.reserved -= n
		g.released++
	}, nil
}

func TestResolveSpecDownload(t *testing.T) {
	ctx := context.Background()
	req := core.SpecRequest{Model: "iPhone 15", OSVersion: "17.0", AllowDownload: true, RequesterID: "agent-7"}
	xc16 := string(readFixture(t, xcode16JSON))
	// The Xcode 15 capture has the iOS 17.0 runtime the Xcode 16 one lacks:
	// it stands for the listing after the install.
	xc15 := string(readFixture(t, "list-json-xcode15.0.json"))
	// xcodebuild takes a build: "17.0" asks for the newest known 17.0.x build.
	download := "xcodebuild -downloadPlatform iOS -buildVersion 21A342"

	t.Run("installs, verifies, reports once", func(t *testing.T) {
		g := &fakeGuard{free: 20 << 30}
		h := newHarness(t, func(o *Options) { o.DiskGuard = g })
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: download, Stdout: "Downloading iOS 17.0 Simulator...\nDone.\n"},
			fake.Step{Match: h.sim("list -j"), Stdout: xc15},
		)
		s, err := h.d.ResolveSpec(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if s.OSVersion != "17.0" || s.RuntimeID != "com.apple.CoreSimulator.SimRuntime.iOS-17-0" || s.Model != "iPhone 15" {
			t.Fatalf("spec %+v", s)
		}
		if got := strings.Join(h.diagTypes(), ","); got != DiagInstallStarted+","+DiagInstalled {
			t.Fatalf("diagnostics %s", got)
		}
		for _, d := range h.diags {
			if d.RequesterID != "agent-7" {
				t.Errorf("%s without requester: %+v", d.Type, d)
			}
		}
		if h.diags[1].Data["build"] != "21A328" {
			t.Errorf("installed data %v", h.diags[1].Data)
		}
		if g.released != 1 || g.reserved != 0 || g.paths[0] != h.root {
			t.Fatalf("reservation not released: %+v", g)
		}
		h.assertDone()
	})
	t.Run("installer claims success but runtime absent", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: download},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
		)
		_, err := h.d.ResolveSpec(ctx, req)
		specErr(t, err, core.ErrRuntimeMissing)
		if got := strings.Join(h.diagTypes(), ","); got != DiagInstallStarted+","+DiagInstallFailed {
			t.Fatalf("diagnostics %s", got)
		}
		h.assertDone()
	})
	t.Run("installer fails", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: download, ExitCode: 70, Stderr: "xcodebuild: error: Failed fetching catalog for assetType (com.apple.MobileAsset.iOSSimulatorRuntime)\n"},
		)
		_, err := h.d.ResolveSpec(ctx, req)
		specErr(t, err, core.ErrRuntimeMissing)
		if !strings.Contains(err.Error(), "Failed fetching catalog") {
			t.Fatalf("error hides the cause: %v", err)
		}
		if got := strings.Join(h.diagTypes(), ","); got != DiagInstallStarted+","+DiagInstallFailed {
			t.Fatalf("diagnostics %s", got)
		}
		h.assertDone()
	})
	t.Run("installed meanwhile by another request", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("list -j"), Stdout: xc15},
		)
		if _, err := h.d.ResolveSpec(ctx, req); err != nil {
			t.Fatal(err)
		}
		if len(h.diagTypes()) != 0 {
			t.Fatalf("diagnostics %v", h.diagTypes())
		}
		h.assertDone()
	})
	t.Run("not enough disk: no install, no diagnostics", func(t *testing.T) {
		g := &fakeGuard{free: 5 << 30}
		h := newHarness(t, func(o *Options) { o.DiskGuard = g })
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
		)
		_, err := h.d.ResolveSpec(ctx, req)
		if !errors.Is(err, core.ErrInsufficientDisk) {
			t.Fatalf("error %v", err)
		}
		if len(h.diagTypes()) != 0 {
			t.Fatalf("diagnostics %v", h.diagTypes())
		}
		h.assertDone()
	})
	t.Run("default OS downloads the latest", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: `{"devicetypes": [], "runtimes": [], "devices": {}, "pairs": {}}`},
		)
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{AllowDownload: true})
		// With no device types at all there is no model to serve.
		specErr(t, err, core.ErrUnknownModel)

		h2 := newHarness(t)
		noRuntimes := strings.Replace(xc16, `"runtimes" : [`, `"runtimes_" : [`, 1)
		h2.expect(
			fake.Step{Match: h2.sim("list -j"), Stdout: noRuntimes},
			fake.Step{Match: h2.sim("list -j"), Stdout: noRuntimes},
			fake.Step{Match: "xcodebuild -downloadPlatform iOS"},
			fake.Step{Match: h2.sim("list -j"), Stdout: xc16},
		)
		s, err := h2.d.ResolveSpec(ctx, core.SpecRequest{AllowDownload: true})
		if err != nil || s.Model != "iPhone 16" || s.OSVersion != "18.0" {
			t.Fatalf("got %+v, %v", s, err)
		}
		h2.assertDone()
	})
}

func TestProvision(t *testing.T) {
	ctx := context.Background()
	spec := core.Spec{Platform: "ios", Model: "iPhone 16", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPhone-16",
		OSVersion: "18.0", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-18-0"}
	create := transcript(t)[`xcrun simctl create "Probe iPhone" "iPhone 16 Pro" "com.apple.CoreSimulator.SimRuntime.iOS-26-3"`]
	for _, tc := range []struct {
		version   string
		simulated bool
	}{
		{"xcrun version 72.\n", false},
		{"xcrun version 72 (simlock simulated SDK)\n", true},
	} {
		t.Run(fmt.Sprint(tc.simulated), func(t *testing.T) {
			h := newHarness(t)
			h.expect(
				fake.Step{Match: h.sim("create simlock-*"), Stdout: create},
				fake.Step{Match: "xcrun --version", Stdout: tc.version},
				fake.Step{Match: h.sim("create simlock-*"), Stdout: create},
			)
			p, err := h.d.Provision(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if p.Handle != transcriptUDID || p.Attrs[core.AttrUDID] != transcriptUDID || p.Attrs[core.AttrDeviceSet] != h.root ||
				!strings.HasPrefix(p.Name, "simlock-") || p.Simulated != tc.simulated {
				t.Fatalf("provisioned %+v", p)
			}
			args := strings.Fields(h.runner.Calls[0])
			if len(args) != 8 || args[5] != p.Name || args[6] != spec.ModelID || args[7] != spec.RuntimeID {
				t.Fatalf("create call %q", h.runner.Calls[0])
			}
			// The SDK probe runs once per driver.
			p2, err := h.d.Provision(ctx, spec)
			if err != nil || p2.Simulated != tc.simulated {
				t.Fatalf("second provision %+v %v", p2, err)
			}
			h.assertDone()
		})
	}
	t.Run("create error", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("create simlock-*"), ExitCode: 148,
			Stderr: string(readFixture(t, "errors/create-unsupported-combination-code403-xcode16.3.txt"))})
		_, err := h.d.Provision(ctx, spec)
		var se *SimError
		if !errors.As(err, &se) || se.Code != 403 || !strings.Contains(err.Error(), "Unable to create a device") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestMakeReady(t *testing.T) {
	ctx := context.Background()
	bootstatus := transcript(t)["xcrun simctl bootstatus "+transcriptUDID+" -b"]
	// bootstatus -b boots the device itself; when that boot is refused
	// because another caller booted it first, one more bootstatus -b waits
	// for it (or reports it booted) instead of failing.
	for _, file := range []string{
		"errors/boot-already-booted-code164-xcode10.txt",
		"errors/boot-already-booted-code405-exit149.txt",
		"errors/boot-already-booted-code405-xcode16-rules_apple.txt",
	} {
		t.Run("already booted "+file, func(t *testing.T) {
			h := newHarness(t)
			h.expect(
				fake.Step{Match: h.sim("bootstatus " + transcriptUDID + " -b"), ExitCode: 149, Stderr: string(readFixture(t, file))},
				fake.Step{Match: h.sim("bootstatus " + transcriptUDID + " -b"), Stdout: bootstatus},
			)
			if err := h.d.MakeReady(ctx, ref(transcriptUDID)); err != nil {
				t.Fatal(err)
			}
			h.assertDone()
		})
	}
	t.Run("booted device is one process", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("bootstatus " + transcriptUDID + " -b"), Stdout: bootstatus})
		if err := h.d.MakeReady(ctx, ref(transcriptUDID)); err != nil {
			t.Fatal(err)
		}
		h.assertDone()
		if len(h.runner.Calls) != 1 {
			t.Fatalf("calls %q, want the one bootstatus -b", h.runner.Calls)
		}
	})
	t.Run("fresh boot is one process", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("bootstatus " + transcriptUDID + " -b"), Stdout: string(readFixture(t, "bootstatus-data-migration-excerpt-2021.txt"))},
		)
		if err := h.d.MakeReady(ctx, ref(transcriptUDID)); err != nil {
			t.Fatal(err)
		}
		h.assertDone()
		if len(h.runner.Calls) != 1 {
			t.Fatalf("calls %q, want the one bootstatus -b", h.runner.Calls)
		}
	})
	t.Run("boot failure surfaces the simctl error", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("bootstatus " + transcriptUDID + " -b"), ExitCode: 60,
			Stderr: string(readFixture(t, "errors/boot-launchd-failed-posix60-xcode14.txt"))})
		err := h.d.MakeReady(ctx, ref(transcriptUDID))
		var se *SimError
		if !errors.As(err, &se) || se.Domain != "NSPOSIXErrorDomain" || se.Underlying == nil || se.Underlying.Code != 4 {
			t.Fatalf("error %v", err)
		}
		var ee *ports.ExitError
		if !errors.As(err, &ee) || ee.Result.ExitCode != 60 {
			t.Fatalf("exit error lost: %v", err)
		}
		// A real failure is not retried.
		h.assertDone()
		if len(h.runner.Calls) != 1 {
			t.Fatalf("calls %q, want no retry of a failed boot", h.runner.Calls)
		}
	})
	t.Run("bootstatus hang hits the boot timeout", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("bootstatus " + transcriptUDID + " -b"), Do: func(ctx context.Context, _ ports.Command) error {
				<-ctx.Done()
				return ctx.Err()
			}},
		)
		err := h.drive(180*time.Second, 1, func() error { return h.d.MakeReady(ctx, ref(transcriptUDID)) })
		var te *TimeoutError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &te) || te.After != 180*time.Second {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("non-UDID handle is refused", func(t *testing.T) {
		h := newHarness(t)
		err := h.d.MakeReady(ctx, core.DeviceRef{ID: "x", Handle: "iPhone 16"})
		if !errors.Is(err, core.ErrDeviceNotFound) || len(h.runner.Calls) != 0 {
			t.Fatalf("error %v, calls %q", err, h.runner.Calls)
		}
	})
}

func TestShutdown(t *testing.T) {
	ctx := context.Background()
	t.Run("verifies through the listing", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("shutdown " + bootedUDID)},
			fake.Step{Match: h.sim("list devices -j"), Stdout: string(readFixture(t, xcode16JSON))},
			fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShuttingDown)},
			fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShutdown)},
		)
		err := h.drive(time.Second, 2, func() error { return h.d.Shutdown(ctx, ref(bootedUDID)) })
		if err != nil {
			t.Fatal(err)
		}
		h.assertDone()
	})
	t.Run("already shut down", func(t *testing.T) {
		for _, file := range []string{"errors/shutdown-already-shutdown-code405.txt", "errors/shutdown-already-shutdown-code159-xcode7.txt"} {
			h := newHarness(t)
			h.expect(
				fake.Step{Match: h.sim("shutdown " + bootedUDID), ExitCode: 149, Stderr: string(readFixture(t, file))},
				fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShutdown)},
			)
			if err := h.d.Shutdown(ctx, ref(bootedUDID)); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			h.assertDone()
		}
	})
	t.Run("creating device is an error", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("shutdown " + bootedUDID), ExitCode: 163,
			Stderr: string(readFixture(t, "errors/shutdown-creating-code163.txt"))})
		err := h.d.Shutdown(ctx, ref(bootedUDID))
		if st, ok := stateOf(err); !ok || st != StateCreating {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("never stops", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("shutdown " + bootedUDID)})
		h.runner.Always(fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShuttingDown)})
		err := h.drive(time.Second, 2, func() error { return h.d.Shutdown(ctx, ref(bootedUDID)) })
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Shutting Down") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("vanished device", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("shutdown " + transcriptUDID)},
			fake.Step{Match: h.sim("list devices -j"), Stdout: string(readFixture(t, xcode16JSON))},
		)
		if err := h.d.Shutdown(ctx, ref(transcriptUDID)); !errors.Is(err, core.ErrDeviceNotFound) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestReclaim(t *testing.T) {
	h := newHarness(t)
	// No listing between shutdown and erase: the erase's success is the
	// proof of the shutdown (TestEraseWaitsForShutdownWhenRefused), and a
	// list here would be an unexpected command.
	h.expect(
		fake.Step{Match: h.sim("shutdown " + bootedUDID)},
		fake.Step{Match: h.sim("erase " + bootedUDID)},
		fake.Step{Match: h.sim("bootstatus " + bootedUDID + " -b")},
	)
	if err := h.d.Reclaim(context.Background(), ref(bootedUDID)); err != nil {
		t.Fatal(err)
	}
	h.assertDone()
	want := []string{"shutdown", "erase", "bootstatus"}
	if len(h.runner.Calls) != len(want) {
		t.Fatalf("calls %q, want the verbs %v", h.runner.Calls, want)
	}
	for i, c := range h.runner.Calls {
		if verb := strings.Fields(c)[4]; verb != want[i] {
			t.Fatalf("call %d = %q, want %s", i, c, want[i])
		}
	}
}

// simctl erase refuses a device that is not shut down and names its state;
// only then does the driver read the device set until it says Shutdown, and
// erase again. An erase refused for any other reason is not retried.
func TestEraseWaitsForShutdownWhenRefused(t *testing.T) {
	ctx := context.Background()
	refused := "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\n" +
		"Unable to erase contents and settings in current state: Shutting Down\n"
	t.Run("still shutting down", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("shutdown " + bootedUDID)},
			fake.Step{Match: h.sim("erase " + bootedUDID), ExitCode: 149, Stderr: refused},
			fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShuttingDown)},
			fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShutdown)},
			fake.Step{Match: h.sim("erase " + bootedUDID)},
		)
		if err := h.drive(time.Second, 2, func() error { return h.d.Erase(ctx, ref(bootedUDID)) }); err != nil {
			t.Fatal(err)
		}
		h.assertDone()
	})
	t.Run("never stops", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("shutdown " + bootedUDID)},
			fake.Step{Match: h.sim("erase " + bootedUDID), ExitCode: 149, Stderr: refused})
		h.runner.Always(fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShuttingDown)})
		err := h.drive(time.Second, 2, func() error { return h.d.Erase(ctx, ref(bootedUDID)) })
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Shutting Down") {
			t.Fatalf("error %v", err)
		}
		for _, c := range h.runner.Calls {
			if strings.Contains(c, " erase ") && c != h.runner.Calls[1] {
				t.Errorf("erased again without a Shutdown state: %q", h.runner.Calls)
			}
		}
	})
	t.Run("other failure", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("shutdown " + bootedUDID)},
			fake.Step{Match: h.sim("erase " + bootedUDID), ExitCode: 16,
				Stderr: "An error was encountered processing the command (domain=NSPOSIXErrorDomain, code=16):\nUnable to erase contents and settings: Resource busy\n"})
		if err := h.d.Erase(ctx, ref(bootedUDID)); err == nil || !strings.Contains(err.Error(), "Resource busy") {
			t.Fatalf("error %v", err)
		}
		h.assertDone()
		if len(h.runner.Calls) != 2 {
			t.Errorf("calls %q, want shutdown and one erase", h.runner.Calls)
		}
	})
}

func TestDestroy(t *testing.T) {
	ctx := context.Background()
	t.Run("shuts down then deletes", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("shutdown " + bootedUDID)},
			fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, StateShutdown)},
			fake.Step{Match: h.sim("delete " + bootedUDID)},
		)
		if err := h.d.Destroy(ctx, ref(bootedUDID)); err != nil {
			t.Fatal(err)
		}
		h.assertDone()
	})
	t.Run("already gone", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("shutdown " + transcriptUDID), ExitCode: 148, Stderr: "Invalid device: " + transcriptUDID + "\n"})
		if err := h.d.Destroy(ctx, ref(transcriptUDID)); err != nil {
			t.Fatal(err)
		}
		h.assertDone()
	})
	t.Run("stuck creating still deletes", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("shutdown " + bootedUDID), ExitCode: 163, Stderr: string(readFixture(t, "errors/shutdown-creating-code163.txt"))},
			fake.Step{Match: h.sim("delete " + bootedUDID)},
		)
		if err := h.d.Destroy(ctx, ref(bootedUDID)); err != nil {
			t.Fatal(err)
		}
		h.assertDone()
	})
}

func TestListManaged(t *testing.T) {
	h := newHarness(t)
	h.expect(fake.Step{Match: h.sim("list devices -j"), Stdout: string(readFixture(t, "list-json-xcode14.2-reformatted.json"))})
	obs, err := h.d.ListManaged(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runs := map[core.RunState]int{}
	byHandle := map[string]core.Observed{}
	for _, o := range obs {
		runs[o.Run]++
		byHandle[o.Handle] = o
	}
	if len(obs) != 33 || runs[core.RunRunning] != 3 || runs[core.RunTransitioning] != 2 || runs[core.RunStopped] != 28 {
		t.Fatalf("classification %v over %d devices", runs, len(obs))
	}
	if o := byHandle["F9BAD943-8A5E-482F-AB93-938E71BD28C6"]; o.Run != core.RunTransitioning || o.Name != "iPhone 14" || o.MarkOK != nil {
		t.Fatalf("creating device %+v", o)
	}

	for state, want := range map[DeviceState]core.RunState{
		StateShuttingDown: core.RunTransitioning,
		StateBooting:      core.RunTransitioning,
		"Some Future":     core.RunTransitioning,
		StateShutdown:     core.RunStopped,
	} {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list devices -j"), Stdout: withState(t, state)})
		obs, err := h.d.ListManaged(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range obs {
			if o.Handle == bootedUDID && o.Run != want {
				t.Errorf("%q -> %q, want %q", state, o.Run, want)
			}
		}
	}
}

func TestEstimate(t *testing.T) {
	h := newHarness(t)
	for op, want := range map[core.DriverOp]time.Duration{
		core.OpProvision: time.Second, core.OpBoot: 30 * time.Second, core.OpReclaim: 31 * time.Second,
		core.OpShutdown: 2 * time.Second, core.OpDestroy: time.Second,
	} {
		if got := h.d.Estimate(op); got != want {
			t.Errorf("%s: %v", op, got)
		}
	}
	if h.d.Platform() != "ios" {
		t.Fatal(h.d.Platform())
	}
}
