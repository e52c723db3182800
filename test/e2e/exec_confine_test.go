package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// Room for two devices of each platform, and an exec timeout far past
// anything these tests run, so only the lease can end a command.
const confineConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":4}},
 "exec":{"timeoutMs":300000}}`

type leaseDevice struct {
	LeaseID string `json:"leaseId"`
	Device  struct {
		ID     string `json:"id"`
		UDID   string `json:"udid"`
		Serial string `json:"serial"`
	} `json:"device"`
}

func (w *world) leaseFor(requester string, args ...string) leaseDevice {
	w.t.Helper()
	var l leaseDevice
	w.json(&l, append([]string{"lease", "--detach", "--requester", requester}, args...)...)
	if l.Device.Serial == "" && l.Device.UDID == "" {
		// The grant line may omit platform attributes; renew prints them.
		w.json(&l, "lease", "renew", l.LeaseID)
	}
	return l
}

func mustRefuse(t *testing.T, r result, what string, mention ...string) {
	t.Helper()
	if r.code == 0 || !strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("%s: exit %d, stderr %s", what, r.code, r.stderr)
	}
	for _, m := range mention {
		if !strings.Contains(r.stderr, m) {
			t.Errorf("%s: the refusal does not mention %q: %s", what, m, r.stderr)
		}
	}
}

func TestExecIsPinnedToTheLeasedDevice(t *testing.T) {
	w := newWorld(t, confineConfig)
	a := w.leaseFor("agent-a", "--platform", "android", "--model", "pixel_6")
	b := w.leaseFor("agent-b", "--platform", "android", "--model", "pixel_6")
	if a.Device.Serial == "" || b.Device.Serial == "" || a.Device.Serial == b.Device.Serial {
		t.Fatalf("serials %q %q", a.Device.Serial, b.Device.Serial)
	}
	// Agent A may not drive agent B's emulator by naming it.
	mustRefuse(t, w.run("exec", a.LeaseID, "--", "adb", "-s", b.Device.Serial, "shell", "id"),
		"adb -s <other serial>", b.Device.Serial, a.Device.Serial)
	mustRefuse(t, w.run("exec", a.LeaseID, "--", "adb", "-t", "1", "shell", "id"), "adb -t")
	mustRefuse(t, w.run("exec", a.LeaseID, "--", "adb", "-e", "shell", "id"), "adb -e")
	mustRefuse(t, w.run("exec", a.LeaseID, "--", "adb", "connect", "127.0.0.1:5555"), "adb connect")
	// Its own device works, with or without naming it.
	for _, args := range [][]string{{"adb", "shell", "id"}, {"adb", "-s", a.Device.Serial, "shell", "id"}} {
		if out := w.mustRun(append([]string{"exec", a.LeaseID, "--"}, args...)...); !strings.HasPrefix(out, "uid=2000(shell)") {
			t.Fatalf("%q: %q", args, out)
		}
	}
	// "get-serialno" proves which device a plain command lands on.
	if out := strings.TrimSpace(w.mustRun("exec", a.LeaseID, "--", "adb", "get-serialno")); out != a.Device.Serial {
		t.Fatalf("a plain adb ran on %q, not the leased %q", out, a.Device.Serial)
	}

	ia := w.leaseFor("agent-c", "--platform", "ios")
	ib := w.leaseFor("agent-d", "--platform", "ios")
	if ia.Device.UDID == "" || ib.Device.UDID == "" {
		t.Fatalf("udids %q %q", ia.Device.UDID, ib.Device.UDID)
	}
	mustRefuse(t, w.run("exec", ia.LeaseID, "--", "simctl", "launch", ib.Device.UDID, "com.example.app"),
		"simctl <other udid>", ib.Device.UDID, ia.Device.UDID)
	mustRefuse(t, w.run("exec", ia.LeaseID, "--", "simctl", "terminate", "booted", "com.example.app"), "simctl booted")
	mustRefuse(t, w.run("exec", ia.LeaseID, "--", "simctl", "install", "iPhone 16", "/tmp/App.app"), "simctl <device name>")
	// Naming its own UDID reaches the simulator (the app is not installed:
	// the tool's own failure, not a refusal).
	r := w.run("exec", ia.LeaseID, "--", "simctl", "terminate", ia.Device.UDID, "com.example.app")
	if strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("own udid refused: %s", r.stderr)
	}
	// The local passthrough has no lease to pin and keeps its reach.
	if r := w.run("adb", "-s", b.Device.Serial, "shell", "id"); r.code != 0 {
		t.Fatalf("local adb -s: %d %s", r.code, r.stderr)
	}
}

func TestReleasingTheLeaseEndsARunningExec(t *testing.T) {
	w := newWorld(t, confineConfig)
	l := w.leaseFor("agent-a", "--platform", "android", "--model", "pixel_6")
	c := w.cmd("exec", l.LeaseID, "--", "adb", "shell", "echo started; sleep 60")
	stdout, _ := c.StdoutPipe()
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// The command's first line proves it is running on the device.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("first line %q: %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	start := time.Now()
	w.mustRun("release", l.LeaseID)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !asExit(err, &ee) || ee.ExitCode() != 8 || !strings.Contains(stderr.String(), "LEASE_ENDED") {
			t.Fatalf("exec after release: %v, stderr %s", err, stderr.String())
		}
		t.Logf("the exec ended %s after the release", time.Since(start).Round(time.Millisecond))
	case <-time.After(testhost.Scale(20 * time.Second)):
		c.Process.Kill()
		t.Fatal("the exec outlived its lease")
	}
	eventually(t, "the device command to be gone", 10*time.Second, func() bool {
		ps, _ := exec.Command("pgrep", "-f", "echo started; sleep 60").Output()
		return strings.TrimSpace(string(ps)) == ""
	})
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// procStatus reads VmRSS and VmHWM (peak RSS) of pid, in KiB.
func procStatus(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// 200 MB of output streams through the daemon without the daemon holding
// it: its peak RSS barely moves.
func TestExecStreams200MBWithFlatDaemonMemory(t *testing.T) {
	w := newWorld(t, confineConfig)
	l := w.leaseFor("agent-a", "--platform", "android", "--model", "pixel_6")
	pid := w.status().Daemon.PID
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("daemon pid %d: %v", pid, err)
	}
	// Warm the exec path once so first-use allocations are not counted.
	w.mustRun("exec", l.LeaseID, "--", "adb", "shell", "yes | head -c 1048576 > /dev/null")
	rss0, hwm0 := procStatus(t, pid)
	const size = 200 << 20
	c := w.cmd("exec", l.LeaseID, "--", "adb", "shell", "yes | head -c "+strconv.Itoa(size))
	var out countingWriter
	c.Stdout = &out
	var stderr strings.Builder
	c.Stderr = &stderr
	start := time.Now()
	if err := c.Run(); err != nil {
		t.Fatalf("exec: %v\n%s", err, stderr.String())
	}
	took := time.Since(start)
	rss1, hwm1 := procStatus(t, pid)
	t.Logf("streamed %d bytes in %s (%.0f MB/s); daemon VmRSS %d -> %d KiB, VmHWM %d -> %d KiB (peak growth %d KiB)",
		out.n.Load(), took.Round(time.Millisecond), float64(out.n.Load())/1e6/took.Seconds(), rss0, rss1, hwm0, hwm1, hwm1-hwm0)
	if out.n.Load() != size {
		t.Fatalf("received %d bytes, want %d", out.n.Load(), size)
	}
	if growth := hwm1 - hwm0; growth > 100<<10 {
		t.Fatalf("daemon peak RSS grew by %d KiB streaming %d MiB", growth, size>>20)
	}
}
