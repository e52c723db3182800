package simsdk

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// androidHarness runs the Android tools in-process, and emulators as real
// processes (the test binary through a link named "emulator"), against a
// private SDK home and AVD home.
type androidHarness struct {
	*harness
	avdHome string
}

func newAndroid(t *testing.T, env ...string) *androidHarness {
	t.Helper()
	h := newHarness(t, env...)
	a := &androidHarness{harness: h, avdHome: filepath.Join(t.TempDir(), "avd")}
	if _, ok := h.env[envAVDHome]; !ok {
		h.env[envAVDHome] = a.avdHome
	}
	if _, ok := h.env[envADBServerPort]; !ok {
		h.env[envADBServerPort] = "5137"
	}
	h.env["USER"] = "tester"
	// The user's home: the emulator keeps its console auth token there,
	// which a test must not write into the real one.
	if _, ok := h.env["HOME"]; !ok {
		h.env["HOME"] = t.TempDir()
	}
	return a
}

// runIn runs a tool in-process with stdin.
func (a *androidHarness) runIn(stdin string, tool string, args ...string) result {
	var out, errb bytes.Buffer
	code := Main(context.Background(), tool, args, strings.NewReader(stdin), &out, &errb, func(k string) string { return a.env[k] })
	return result{out.String(), errb.String(), code}
}

// ok runs a tool in-process and fails the test unless it exits 0.
func (a *androidHarness) ok(tool string, args ...string) string {
	a.t.Helper()
	r := a.run(tool, args...)
	if r.code != 0 {
		a.t.Fatalf("%s %v: exit %d\nstdout: %s\nstderr: %s", tool, args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func (a *androidHarness) adb(args ...string) result { return a.run("adb", args...) }

// createAVD makes an AVD with avdmanager, answering its prompt.
func (a *androidHarness) createAVD(name, pkg, profile string) {
	a.t.Helper()
	r := a.runIn("no\n", "avdmanager", "create", "avd", "-n", name, "-k", pkg, "-d", profile)
	if r.code != 0 {
		a.t.Fatalf("create avd %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
	}
}

// hostImage is a preinstalled system image for this host.
func hostImage(api int, tag string) string {
	return "system-images;android-" + strconv.Itoa(api) + ";" + tag + ";" + hostABI()
}

// childEnv is the environment of a tool process started by a test.
func (a *androidHarness) childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SIMLOCK_SIMSDK_") || strings.HasPrefix(k, "ANDROID_") || k == "GORACE" {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range a.env {
		env = append(env, k+"="+v)
	}
	return append(env, "GORACE="+testGORACE)
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// emuProc is an emulator process a test started.
type emuProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  syncBuffer
	done chan struct{}
	code int
}

// startEmulator runs `emulator ARGS` as a real process, in the foreground
// as the driver runs it; the test's cleanup kills it if it still runs.
func (a *androidHarness) startEmulator(args ...string) *emuProc {
	a.t.Helper()
	// An emulator announces itself only to a server that is running when
	// it starts, so the harness's server is started first, as the driver
	// does.
	if r := a.adb("start-server"); r.code != 0 {
		a.t.Fatalf("adb start-server: %+v", r)
	}
	p := &emuProc{t: a.t, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(toolLinks, "emulator"), args...)
	p.cmd.Env = a.childEnv()
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	a.t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitLimit bounds waits that only run out when something is wrong; it is
// generous because a loaded CI machine can stall a race-enabled process
// for seconds.
const waitLimit = 30 * time.Second

// wait waits for the process to exit and returns its exit status (-1 when
// a signal ended it).
func (p *emuProc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("emulator still running after %v; output:\n%s", timeout, p.out.String())
	}
	return 0
}

func (p *emuProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *emuProc) signal(sig unix.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// deviceState is the serial's state in `adb devices` of the harness's
// server ("" when not listed).
func (a *androidHarness) deviceState(serial string, adbArgs ...string) string {
	a.t.Helper()
	r := a.adb(append(adbArgs, "devices")...)
	if r.code != 0 {
		a.t.Fatalf("adb devices: %+v", r)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(serial) + `\t(\S+)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		return ""
	}
	return m[1]
}

// waitFor polls cond until it holds.
func (a *androidHarness) waitFor(what string, cond func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			a.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitState waits until adb lists serial in state want ("" = not listed).
func (a *androidHarness) waitState(serial, want string) {
	a.t.Helper()
	a.waitFor(serial+" to be "+want, func() bool { return a.deviceState(serial) == want })
}

// waitBooted waits until getprop says the boot completed.
func (a *androidHarness) waitBooted(serial string) {
	a.t.Helper()
	a.waitFor(serial+" to boot", func() bool {
		r := a.adb("-s", serial, "shell", "getprop", "sys.boot_completed")
		return r.code == 0 && r.stdout == "1\n"
	})
}

func (a *androidHarness) shell(serial, cmd string) result {
	return a.adb("-s", serial, "shell", cmd)
}
