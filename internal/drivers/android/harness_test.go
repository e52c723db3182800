package android

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

var testStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const testPoll = time.Second

// stepClock is a fake clock that also reports every timer the driver arms,
// so a test can advance time exactly when the driver waits on it, and only
// by the durations the test chooses.
type stepClock struct {
	*fake.Clock
	armed chan time.Duration
}

func newStepClock() *stepClock {
	return &stepClock{Clock: fake.NewClock(testStart), armed: make(chan time.Duration, 4096)}
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) ports.Timer {
	t := c.Clock.AfterFunc(d, f)
	c.armed <- d
	return t
}

// envRunner checks that every command the driver runs carries the root's
// scoping before handing it to the scripted runner.
type envRunner struct {
	t     *testing.T
	root  string
	inner *fake.Runner
}

func (r *envRunner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	for _, want := range []string{"ANDROID_AVD_HOME=" + r.root, "ANDROID_ADB_SERVER_PORT=5137"} {
		if !slices.Contains(c.Env, want) {
			r.t.Errorf("%s: env %q lacks %s", fake.CommandLine(c), c.Env, want)
		}
	}
	if c.Name == "adb" && (len(c.Args) < 2 || c.Args[0] != "-P" || c.Args[1] != "5137") {
		r.t.Errorf("%s: adb without -P 5137", fake.CommandLine(c))
	}
	return r.inner.Run(ctx, c)
}

type harness struct {
	t    *testing.T
	d    *Driver
	run  *fake.Runner
	clk  *stepClock
	root string

	mu    sync.Mutex
	diags []core.Diagnostic
}

func newHarness(t *testing.T, tweak ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, run: fake.NewRunner(), clk: newStepClock(), root: filepath.Join(t.TempDir(), "avd")}
	ids := 0
	opts := Options{
		Root:   h.root,
		Runner: &envRunner{t: t, root: h.root, inner: h.run},
		FS:     ports.OSFilesystem{},
		Clock:  h.clk,
		OnDiagnostic: func(d core.Diagnostic) {
			h.mu.Lock()
			h.diags = append(h.diags, d)
			h.mu.Unlock()
		},
		GOARCH:       "amd64",
		PollInterval: testPoll,
		// The scripted launches below expect -no-audio.
		NoAudio: true,
		NewID: func() string {
			ids++
			return "t" + strings.Repeat("0", 3) + string(rune('0'+ids))
		},
	}
	for _, f := range tweak {
		f(&opts)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		if u := h.run.Unexpected; len(u) > 0 {
			t.Errorf("unexpected commands: %q", u)
		}
	})
	return h
}

func (h *harness) diagnostics() []core.Diagnostic {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]core.Diagnostic(nil), h.diags...)
}

// drive runs fn while advancing the clock whenever the driver waits on a
// timer of the poll interval or one of extra; other timers (boot deadlines)
// never fire unless the test lists them.
func (h *harness) drive(fn func() error, extra ...time.Duration) error {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			return err
		case d := <-h.clk.armed:
			if d == testPoll || slices.Contains(extra, d) {
				h.clk.Advance(d)
			}
		}
	}
}

// addAVD creates the files avdmanager writes for an AVD inside the root,
// and optionally simlock's state for it.
func (h *harness) addAVD(name string, st *avdState) {
	h.t.Helper()
	dir := filepath.Join(h.root, name+".avd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	ini := "avd.ini.encoding=UTF-8\npath=" + dir + "\npath.rel=avd/" + name + ".avd\ntarget=android-35\n"
	if err := os.WriteFile(filepath.Join(h.root, name+".ini"), []byte(ini), 0o600); err != nil {
		h.t.Fatal(err)
	}
	cfg := fixture(h.t, "avd/config.ini-android-studio-api34-x86_64-windows.ini")
	if err := os.WriteFile(filepath.Join(dir, "config.ini"), cfg, 0o600); err != nil {
		h.t.Fatal(err)
	}
	if st != nil {
		h.writeState(name, *st)
	}
}

func (h *harness) writeState(name string, st avdState) {
	h.t.Helper()
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(h.root, name+".simlock.json"), b, 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) state(name string) avdState {
	h.t.Helper()
	st, err := h.d.loadState(name)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) assertDone() {
	h.t.Helper()
	if r := h.run.Remaining(); len(r) > 0 {
		h.t.Errorf("scripted commands never ran: %q", r)
	}
}

// emulatorStep scripts a supervised emulator: it runs until the test closes
// exit (a clean exit, as after `emu kill`) or the driver cancels it.
type emulatorStep struct {
	exit      chan struct{}
	cancelled chan struct{}
	started   chan struct{}
	cmd       ports.Command // valid once started is closed
}

func newEmulator() *emulatorStep {
	return &emulatorStep{exit: make(chan struct{}), cancelled: make(chan struct{}), started: make(chan struct{})}
}

// launched waits until the driver's supervisor goroutine has started the
// emulator; readiness can be observed before that goroutine is scheduled.
func (e *emulatorStep) launched() ports.Command {
	<-e.started
	return e.cmd
}

func (e *emulatorStep) step(match string) fake.Step {
	return fake.Step{Match: match, Do: func(ctx context.Context, c ports.Command) error {
		e.cmd = c
		close(e.started)
		select {
		case <-e.exit:
			return nil
		case <-ctx.Done():
			close(e.cancelled)
			return ctx.Err()
		}
	}}
}

// killStep is `adb emu kill` making the emulator exit.
func (e *emulatorStep) killStep(serial string) fake.Step {
	return fake.Step{Match: "adb -P 5137 -s " + serial + " emu kill", Stdout: "OK: killing emulator, bye bye\r\n",
		Do: func(context.Context, ports.Command) error { close(e.exit); return nil }}
}

const (
	adbEmpty        = "List of devices attached\n\n"
	emulatorVersion = "INFO    | Android emulator version 36.1.9.0 (build_id 13823996) (CL:N/A)\n" +
		"INFO    | Storing crashdata in: /tmp/android-u/emu-crash-36.1.9.db, detection is enabled for process: 4242\n" +
		"Android emulator version 36.1.9.0 (build_id 13823996) (CL:N/A)\n"
	// bootedNoAnim is what a -no-boot-anim emulator reports once booted:
	// init.svc.bootanim is never set.
	bootedNoAnim = "[dev.bootcomplete]: [1]\n[sys.boot_completed]: [1]\n[ro.build.version.sdk]: [35]\n"
)

func adbOn(serial, rest string) string { return "adb -P 5137 -s " + serial + " " + rest }

func devRef(name string, port int) core.DeviceRef {
	data, _ := json.Marshal(provisionedData{ConsolePort: port})
	return core.DeviceRef{ID: "dev-1", Handle: name, Name: name, Data: data,
		Spec: core.Spec{Platform: Platform, ModelID: "pixel_6", OSVersion: "15", RuntimeID: "system-images;android-35;google_apis;x86_64"}}
}
