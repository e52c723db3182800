package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runAs runs the simlock binary installed under another name (argv[0] and
// the file are both name), with w's environment.
func (w *world) runAs(path string, args ...string) result {
	c := exec.Command(path, args...)
	c.Env = w.env
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("run %s %v: %v", path, args, err)
	}
	return result{o.String(), e.String(), code}
}

// lockFree reports whether nobody holds the home's daemon lock.
func lockFree(t *testing.T, home string) bool {
	f, err := os.OpenFile(filepath.Join(home, "daemon.lock"), os.O_RDWR, 0)
	if err != nil {
		return true
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true
}

// TestStopAHungDaemonBuiltUnderAnotherName: simlock built as `sl` starts a
// daemon; the daemon is SIGSTOPped (hung); `sl daemon stop` proves the pid
// by its recorded start identity and the home lock, not by the name, and
// stops it within its deadline: exit 0, the process gone, the lock free.
func TestStopAHungDaemonBuiltUnderAnotherName(t *testing.T) {
	w := newWorld(t, oneRunning)
	sl := filepath.Join(t.TempDir(), "sl")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sl, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := w.runAs(sl, "daemon", "start"); r.code != 0 {
		t.Fatalf("sl daemon start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pid := w.status().Daemon.PID
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if len(cmdline) > 0 && strings.Contains(filepath.Base(strings.Split(string(cmdline), "\x00")[0]), "simlock") {
		t.Fatalf("the daemon runs as %q, not as sl", cmdline)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

	const deadline = "3s" // --timeout and --grace: the stop's own deadline is their sum plus SIGKILL's 5s
	start := time.Now()
	r := w.runAs(sl, "daemon", "stop", "--timeout", deadline, "--grace", deadline, "--json")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("sl daemon stop: exit %d after %s\nstdout: %s\nstderr: %s", r.code, took, r.stdout, r.stderr)
	}
	var so stopOut
	if err := json.Unmarshal([]byte(r.stdout), &so); err != nil {
		t.Fatalf("stop printed %q: %v", r.stdout, err)
	}
	if !so.Stopped || so.Mode != "forced" {
		t.Fatalf("stop result %s", r.stdout)
	}
	// Its deadline: the graceful wait (the hung daemon's hello times out
	// first), SIGTERM's grace and SIGKILL's wait, with slack for a loaded
	// machine.
	if took > 30*time.Second {
		t.Fatalf("sl daemon stop took %s", took)
	}
	eventually(t, "the daemon process to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if !lockFree(t, w.home) {
		t.Fatal("the home lock is still held after the stop")
	}
	t.Logf("sl daemon stop of a SIGSTOPped daemon: %s, %s", took, strings.TrimSpace(r.stdout))
}
