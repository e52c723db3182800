package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/simlock/simlock/internal/hostreg"
)

// A test binary started with SIMLOCK_CLI_TEST_FAKE_DAEMON=HOME plays a
// daemon that holds HOME's lock and has written daemon.json, and, with
// SIMLOCK_CLI_TEST_IGNORE_TERM=1, does not end on SIGTERM.
func init() {
	home := os.Getenv("SIMLOCK_CLI_TEST_FAKE_DAEMON")
	if home == "" {
		return
	}
	if os.Getenv("SIMLOCK_CLI_TEST_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	f, err := os.OpenFile(filepath.Join(home, "daemon.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil || unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		os.Exit(3)
	}
	self, err := hostreg.Self(home)
	if err != nil || hostreg.WriteHomeRecord(filepath.Join(home, hostreg.DaemonRecordFile),
		hostreg.HomeRecord{Home: home, PID: self.PID, Start: self.Start}) != nil {
		os.Exit(4)
	}
	os.WriteFile(filepath.Join(home, "daemon.pid"), []byte(strings.TrimSpace(jsonString(self.PID))), 0o600)
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Hour)
	os.Exit(0)
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

// fakeDaemon starts the fake daemon on home and waits until it holds the
// lock; it is killed at the test's end whatever happened.
func fakeDaemon(t *testing.T, home string, ignoreTerm bool) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "SIMLOCK_CLI_TEST_FAKE_DAEMON="+home)
	if ignoreTerm {
		c.Env = append(c.Env, "SIMLOCK_CLI_TEST_IGNORE_TERM=1")
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("fake daemon: %q %v", line, err)
	}
	return c
}

func alive(pid int) bool {
	start, ok, err := hostreg.SystemProber{}.ProcessStart(context.Background(), pid)
	return err == nil && ok && start != ""
}

// A daemon that does not end on SIGTERM gets SIGKILL once --grace is up:
// the stop reports it, exits 0, and the lock is free.
func TestStopEscalatesToSIGKILL(t *testing.T) {
	home := shortHome(t)
	c := fakeDaemon(t, home, true)
	r := runCLI(t, map[string]string{"SIMLOCK_HOST_DIR": t.TempDir()}, false,
		"--home", home, "daemon", "stop", "--timeout", "1s", "--grace", "1s", "--json")
	var so stopResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &so) != nil || so.Signal != "SIGKILL" || so.PID != c.Process.Pid || !so.Stopped {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	c.Wait()
	if homeLocked(filepath.Join(home, "daemon.lock")) {
		t.Fatal("the lock is held after SIGKILL")
	}
}

// A pid that is not the recorded process is never signalled: daemon.json
// naming the lock holder's pid with another start identity (the pid was
// reused), or naming a live process that does not hold the lock.
func TestStopNeverSignalsAnUnprovenPID(t *testing.T) {
	home := shortHome(t)
	c := fakeDaemon(t, home, false) // SIGTERM would end it
	rec := filepath.Join(home, hostreg.DaemonRecordFile)
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	otherStart, _, err := hostreg.SystemProber{}.ProcessStart(context.Background(), other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]hostreg.HomeRecord{
		"reused pid":     {Home: home, PID: c.Process.Pid, Start: "linux:another-boot:1"},
		"not the lock's": {Home: home, PID: other.Process.Pid, Start: otherStart},
		"another home's": {Home: home + "-x", PID: c.Process.Pid, Start: "whatever"},
	} {
		if err := hostreg.WriteHomeRecord(rec, r); err != nil {
			t.Fatal(err)
		}
		res := runCLI(t, map[string]string{"SIMLOCK_HOST_DIR": t.TempDir()}, false,
			"--home", home, "daemon", "stop", "--timeout", "1s", "--grace", "1s")
		if res.code == 0 || !strings.Contains(res.stderr, "no signal was sent") {
			t.Fatalf("%s: exit %d stdout %q stderr %q", name, res.code, res.stdout, res.stderr)
		}
		if !alive(c.Process.Pid) || !alive(other.Process.Pid) {
			t.Fatalf("%s: a process was signalled", name)
		}
	}
}
