// Package harness runs the real simlock binary against the simulated SDK,
// the way a user would: each World is one isolated installation (a home, a
// simulated SDK on PATH, its simulated device state and a host registry),
// and commands run as real processes whose output a test reads. The e2e
// tests (test/e2e) and the conformance suites (test/conformance/...) share
// it, so a world means the same thing in both.
//
// A test package calls Main from its TestMain. The binary is built once,
// on first use, so a package whose tests need no daemon never builds it.
package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Build builds the simlock binary once per test process and returns its
// path. Later calls return the same binary (or the same error).
//
// SIMLOCK_TEST_BINARY names a binary to use instead: a drill run against an
// older build (docs/testing.md) shows what the drill finds there.
func Build() (string, error) {
	buildOnce.Do(func() {
		if b := os.Getenv("SIMLOCK_TEST_BINARY"); b != "" {
			if _, err := os.Stat(b); err != nil {
				buildErr = fmt.Errorf("SIMLOCK_TEST_BINARY: %w", err)
			}
			buildBin = b
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "simlock-harness-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "simlock")
		out, err := exec.Command("go", "build", "-o", buildBin, "github.com/simlock/simlock/cmd/simlock").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build simlock: %v\n%s", err, out)
		}
	})
	return buildBin, buildErr
}

// Bin is Build for a test: a failed build fails the test.
func Bin(t testing.TB) string {
	t.Helper()
	b, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Main runs a package's tests and then removes the binary Build made.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// World is one isolated simlock installation. Env is the environment every
// command of the world runs with; a test may append to it (os/exec uses
// the last of duplicate variables) before the command that needs it.
type World struct {
	T *testing.T
	// Root holds everything below; it is removed when the test ends.
	Root string
	// Home is SIMLOCK_HOME, SDK the directory of the simulated tools on
	// PATH, SimHome SIMLOCK_SIMSDK_HOME (the simulated devices' state) and
	// HostDir SIMLOCK_HOST_DIR (the host registry).
	Home, SDK, SimHome, HostDir string
	Env                         []string
}

// NewWorld makes a world with config (a config.json body, or "" for the
// defaults) and installs the simulated SDK into it. The simulated SDK runs
// at full speed (SIMLOCK_SIMSDK_SPEED=0). When the test ends the world's
// daemon is stopped, its simulated devices are reset and its files removed.
func NewWorld(t *testing.T, config string) *World {
	t.Helper()
	Bin(t)
	// Short paths: unix socket paths are limited to about 100 bytes.
	root, err := os.MkdirTemp("", "sl-")
	if err != nil {
		t.Fatal(err)
	}
	w := &World{T: t, Root: root, Home: filepath.Join(root, "h"), SDK: filepath.Join(root, "sdk"),
		SimHome: filepath.Join(root, "sim"), HostDir: filepath.Join(root, "hostreg")}
	if err := os.MkdirAll(w.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(w.Home, "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w.Env = append(os.Environ(), "PATH="+w.SDK+":"+os.Getenv("PATH"), "SIMLOCK_HOME="+w.Home, "SIMLOCK_HOST_DIR="+w.HostDir,
		"SIMLOCK_SIMSDK_HOME="+w.SimHome, "SIMLOCK_SIMSDK_SPEED=0", "SIMLOCK_ADMIN_TOKEN=", "SIMLOCK_PRINCIPAL=")
	w.MustRun("simsdk", "install", w.SDK)
	t.Cleanup(func() {
		w.Run("daemon", "stop")
		w.Run("simsdk", "reset")
		os.RemoveAll(root)
	})
	return w
}

// HostEnv is the environment that puts a home on the host of a world with
// this host registry and simulated SDK state.
func HostEnv(hostDir, simHome string) []string {
	return []string{"SIMLOCK_HOST_DIR=" + hostDir, "SIMLOCK_SIMSDK_HOME=" + simHome}
}

// ShareHost makes b a second home on a's machine: the same host registry
// and the same simulated SDK state (one default device set, one set of
// device processes), each home keeping its own private device sets. Call
// it before b's first command that starts a daemon.
func ShareHost(a, b *World) {
	b.Env = append(b.Env, HostEnv(a.HostDir, a.SimHome)...)
	b.HostDir, b.SimHome = a.HostDir, a.SimHome
}

// Setenv sets one variable for the world's later commands.
func (w *World) Setenv(key, value string) { w.Env = append(w.Env, key+"="+value) }

// Result is what one command did.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Command is simlock with args under env, not yet started.
func Command(env []string, args ...string) *exec.Cmd {
	b, err := Build()
	if err != nil {
		panic(err) // a World exists only after a build that worked
	}
	c := exec.Command(b, args...)
	c.Env = env
	return c
}

// Exec runs simlock with args under env and returns what it printed and
// its exit code; a command that cannot run at all fails the test.
func Exec(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	c := Command(env, args...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return Result{o.String(), e.String(), code}
}

// MustExec is Exec that fails the test on a non-zero exit.
func MustExec(t testing.TB, env []string, args ...string) string {
	t.Helper()
	r := Exec(t, env, args...)
	if r.Code != 0 {
		t.Fatalf("simlock %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// ExecJSON is MustExec that decodes the command's stdout into v.
func ExecJSON(t testing.TB, env []string, v any, args ...string) {
	t.Helper()
	out := MustExec(t, env, args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("simlock %s printed %q: %v", strings.Join(args, " "), out, err)
	}
}

// Cmd is the world's simlock with args, not yet started.
func (w *World) Cmd(args ...string) *exec.Cmd { return Command(w.Env, args...) }

// Run runs one command in the world.
func (w *World) Run(args ...string) Result {
	w.T.Helper()
	return Exec(w.T, w.Env, args...)
}

// MustRun runs one command and fails the test unless it exits 0.
func (w *World) MustRun(args ...string) string {
	w.T.Helper()
	return MustExec(w.T, w.Env, args...)
}

// JSON runs one command that must exit 0 and decodes its stdout into v.
func (w *World) JSON(v any, args ...string) {
	w.T.Helper()
	ExecJSON(w.T, w.Env, v, args...)
}

// Refusal is a --json error as a command prints it on stderr.
type Refusal struct {
	Error struct {
		Code         string         `json:"code"`
		Message      string         `json:"message"`
		Retryable    bool           `json:"retryable"`
		RetryAfterMs *int64         `json:"retryAfterMs"`
		NextAction   string         `json:"nextAction"`
		Details      map[string]any `json:"details"`
	} `json:"error"`
}

// Refused runs a command (which should carry --json) that must fail, and
// decodes the error it printed on its last line of stderr.
func (w *World) Refused(args ...string) (Refusal, Result) {
	w.T.Helper()
	r := w.Run(args...)
	var ref Refusal
	if r.Code == 0 {
		w.T.Fatalf("simlock %s succeeded, a refusal was expected:\n%s", strings.Join(args, " "), r.Stdout)
	}
	// Progress lines and notices may come first; the error is the last line.
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &ref); err != nil {
		w.T.Fatalf("simlock %s: exit %d, stderr %q is no JSON error: %v", strings.Join(args, " "), r.Code, r.Stderr, err)
	}
	return ref, r
}

// Eventually polls cond until it holds, failing the test after within,
// stretched by the machine's slowdown (testhost.Scale). These are real
// processes on a real clock, so there is no fake clock to advance: a
// generous bound and a short poll keep such tests quick and robust on a
// loaded machine.
func Eventually(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	within = testhost.Scale(within)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
