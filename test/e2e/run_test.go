package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// simlock run leases, hands the child the device in its environment and
// arguments, exits with the child's code, and leaves no lease behind.
func TestRunGivesTheCommandTheDeviceAndItsExitCode(t *testing.T) {
	w := newWorld(t, oneRunning)
	r := w.run("run", "--platform", "ios", "--model", "iPhone 16", "--",
		"sh", "-c", `echo $SIMLOCK_UDID; echo "arg={udid} set=$SIMLOCK_DEVICE_SET lease=$SIMLOCK_LEASE_ID"; exit 7`, "{udid}")
	if r.code != 7 {
		t.Fatalf("exit %d, want the child's 7\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout %q", r.stdout)
	}
	udid := lines[0]
	st := w.status()
	if len(st.Devices) != 1 || st.Devices[0].UDID != udid || udid == "" {
		t.Fatalf("the child printed %q; devices %+v", udid, st.Devices)
	}
	// {udid} in the script is replaced like any argument; the environment
	// names the same device set and the lease.
	if !strings.Contains(lines[1], "arg="+udid+" set="+st.Devices[0].DeviceSet+" lease=lse_") {
		t.Fatalf("second line %q", lines[1])
	}
	if len(st.Leases) != 0 {
		t.Fatalf("the lease outlived simlock run: %+v", st.Leases)
	}
	if !strings.Contains(r.stderr, "released") {
		t.Errorf("stderr does not say the lease was released: %s", r.stderr)
	}

	// Placeholders in the arguments are replaced.
	r = w.run("run", "--platform", "ios", "--", "echo", "udid={udid}", "lease={leaseId}")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "udid="+udid+" lease=lse_") {
		t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
	// A placeholder the platform has no value for is refused before leasing.
	r = w.run("run", "--platform", "ios", "--", "echo", "{serial}")
	if r.code == 0 || !strings.Contains(r.stderr, "BAD_REQUEST") {
		t.Fatalf("{serial} on iOS: exit %d stderr %s", r.code, r.stderr)
	}
	if r := w.run("run", "--platform", "ios", "--", "/nonexistent/tool"); r.code != 127 {
		t.Fatalf("missing command: exit %d, want 127; stderr %s", r.code, r.stderr)
	}
	if st := w.status(); len(st.Leases) != 0 {
		t.Fatalf("leases left: %+v", st.Leases)
	}
}

// A SIGTERM to simlock run reaches the child, which decides how to end;
// the lease is released once it has, and run reports the child's end.
func TestRunForwardsSIGTERMAndReleases(t *testing.T) {
	w := newWorld(t, oneRunning)
	mark := filepath.Join(t.TempDir(), "got-term")
	script := `trap 'echo term > ` + mark + `; exit 3' TERM; echo started; while :; do sleep 0.05; done`
	c := w.cmd("run", "--platform", "ios", "--ttl", "30s", "--", "sh", "-c", script)
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("child said %q: %v", line, err)
	}
	if len(w.status().Leases) != 1 {
		t.Fatal("the lease is not held while the command runs")
	}
	c.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(testhost.Scale(30 * time.Second)):
		c.Process.Kill()
		t.Fatal("simlock run did not end after SIGTERM")
	}
	if code := c.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d, want the child's 3", code)
	}
	if b, err := os.ReadFile(mark); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Fatalf("the child never saw SIGTERM: %q %v", b, err)
	}
	if st := w.status(); len(st.Leases) != 0 {
		t.Fatalf("lease survived: %+v", st.Leases)
	}
}

// On Android the environment alone lets a plain adb reach the leased
// emulator through simlock's private adb server.
func TestRunGivesAndroidCommandsTheSerialAndAdbPort(t *testing.T) {
	w := newWorld(t, confineConfig)
	r := w.run("run", "--platform", "android", "--model", "pixel_6", "--",
		"sh", "-c", `echo "$ANDROID_SERIAL $ANDROID_ADB_SERVER_PORT"; adb shell getprop sys.boot_completed; echo {serial}`)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout %q", r.stdout)
	}
	serial, port, ok := strings.Cut(lines[0], " ")
	if !ok || !strings.HasPrefix(serial, "emulator-") || port == "" || port == "5037" {
		t.Fatalf("environment %q", lines[0])
	}
	if lines[1] != "1" || lines[2] != serial {
		t.Fatalf("adb answered %q, {serial} became %q (serial %s)", lines[1], lines[2], serial)
	}
}

// A lease that ends under the command (released by someone else) stops
// the command: it gets SIGTERM, and run exits as the command did.
func TestRunStopsTheCommandWhenTheLeaseIsLost(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.mustRun("daemon", "start")
	c := w.cmd("run", "--platform", "ios", "--ttl", "30s", "--", "sh", "-c",
		`trap 'exit 5' TERM; echo started; while :; do sleep 0.05; done`)
	// The admin secret is in the home, so the release below is an admin's.
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("child said %q: %v", line, err)
	}
	st := w.status()
	if len(st.Leases) != 1 {
		t.Fatalf("leases %+v", st.Leases)
	}
	w.mustRun("release", st.Leases[0].LeaseID)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(testhost.Scale(30 * time.Second)):
		c.Process.Kill()
		t.Fatal("the command kept running after its lease ended")
	}
	if code := c.ProcessState.ExitCode(); code != 5 {
		t.Fatalf("exit %d, want the child's 5; stderr %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "was lost") {
		t.Errorf("stderr does not say the lease was lost: %s", stderr.String())
	}
}
