package simsdk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// The tests have no simlock binary to run device processes with, so the
// test binary plays that part: started with SIMSDK_TEST_DEVICE=1 it runs
// DeviceProcessMain instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("SIMSDK_TEST_DEVICE") == "1" {
		os.Exit(DeviceProcessMain(context.Background(), os.Args[1:]))
	}
	// A tool run through a link (below) starts device processes as the
	// simlock binary would: itself with DeviceCommand first.
	if len(os.Args) > 1 && os.Args[1] == DeviceCommand {
		os.Exit(DeviceProcessMain(context.Background(), os.Args[2:]))
	}
	// Run through a link named like a tool (see toolLinks), the test binary
	// is that simulated tool: the Android tests run emulators and drive
	// the real Android driver with real processes this way.
	if tool := filepath.Base(os.Args[0]); slices.Contains(Tools, tool) {
		os.Exit(Main(context.Background(), tool, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	// A race-enabled binary lingers a second at exit by default, and a
	// device is only seen dead once its process is gone.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	testLauncher = &launcher{path: exe, env: []string{"SIMSDK_TEST_DEVICE=1", "GORACE=" + gorace}}
	testGORACE = gorace
	dir, err := os.MkdirTemp("", "simsdk-tools-")
	if err != nil {
		panic(err)
	}
	for _, t := range Tools {
		if err := os.Symlink(exe, filepath.Join(dir, t)); err != nil {
			panic(err)
		}
	}
	toolLinks = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// toolLinks is a directory of links named after the tools, pointing at the
// test binary; testGORACE is the GORACE setting for processes started from
// it.
var toolLinks, testGORACE string

// harness runs tools in-process against a private SDK home.
type harness struct {
	t    *testing.T
	home string
	env  map[string]string
}

func newHarness(t *testing.T, env ...string) *harness {
	t.Helper()
	home := t.TempDir()
	h := &harness{t: t, home: home, env: map[string]string{EnvHome: home, EnvSpeed: "0"}}
	for i := 0; i+1 < len(env); i += 2 {
		h.env[env[i]] = env[i+1]
	}
	t.Cleanup(func() {
		if err := Reset(home); err != nil {
			t.Errorf("Reset: %v", err)
		}
	})
	return h
}

type result struct {
	stdout, stderr string
	code           int
}

func (h *harness) runCtx(ctx context.Context, tool string, args ...string) result {
	var out, errb bytes.Buffer
	code := Main(ctx, tool, args, nil, &out, &errb, func(k string) string { return h.env[k] })
	return result{out.String(), errb.String(), code}
}

func (h *harness) run(tool string, args ...string) result {
	return h.runCtx(context.Background(), tool, args...)
}

func (h *harness) simctl(args ...string) result {
	return h.run("xcrun", append([]string{"simctl"}, args...)...)
}

// must runs simctl and fails the test unless it exits 0.
func (h *harness) must(args ...string) string {
	h.t.Helper()
	r := h.simctl(args...)
	if r.code != 0 {
		h.t.Fatalf("simctl %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

var udidLine = regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}\n$`)

func (h *harness) create(args ...string) string {
	h.t.Helper()
	out := h.must(append([]string{"create"}, args...)...)
	if !udidLine.MatchString(out) {
		h.t.Fatalf("create printed %q, want a bare UDID line", out)
	}
	return strings.TrimSpace(out)
}

// state is the device's state as `simctl list devices` shows it.
func (h *harness) state(udid string, setArgs ...string) string {
	h.t.Helper()
	out := h.must(append(setArgs, "list", "devices")...)
	m := regexp.MustCompile(`\(` + udid + `\) \(([A-Za-z ]+)\)`).FindStringSubmatch(out)
	if m == nil {
		h.t.Fatalf("device %s not in list:\n%s", udid, out)
	}
	return m[1]
}

// waitState polls until the device reaches want.
func (h *harness) waitState(udid, want string) {
	h.t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for {
		got := h.state(udid)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("device %s: state %q, want %q", udid, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
