package simsdk

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/simlock/simlock/internal/testhost"
)

// onlyProc returns the single running device process, failing otherwise.
func onlyProc(t *testing.T, home string) Proc {
	t.Helper()
	ps, err := PS(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 {
		t.Fatalf("want 1 device process, got %+v", ps)
	}
	return ps[0]
}

func noProcs(t *testing.T, home string) {
	t.Helper()
	ps, err := PS(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 0 {
		t.Fatalf("want no device processes, got %+v", ps)
	}
}

func processGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBootedDeviceIsAProcessAndKillingItCrashesTheDevice(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	noProcs(t, h.home)
	h.must("boot", u)
	h.waitState(u, "Booted")
	p := onlyProc(t, h.home)
	if p.Platform != "ios" || p.ID != u || p.Name != "Phone" || p.PID <= 0 {
		t.Fatalf("proc %+v", p)
	}
	if err := unix.Kill(p.PID, 0); err != nil {
		t.Fatalf("device process %d not running: %v", p.PID, err)
	}
	if err := unix.Kill(p.PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.waitState(u, "Shutdown")
	noProcs(t, h.home)
	// A crashed device is simply shut down: it boots again.
	h.must("boot", u)
	h.waitState(u, "Booted")
	if p2 := onlyProc(t, h.home); p2.PID == p.PID {
		t.Error("reboot reused the dead process")
	}
}

func TestShutdownStopsTheProcess(t *testing.T) {
	h := newHarness(t)
	u := h.create("A", "iPhone 15", "iOS 18.0")
	v := h.create("B", "iPhone 15", "iOS 18.0")
	h.must("boot", u)
	h.must("boot", v)
	pid := 0
	for _, p := range must(PS(h.home)) {
		if p.ID == u {
			pid = p.PID
		}
	}
	// Let the process get as far as handling signals, so the shutdown is
	// the orderly kind (a SIGTERM before that simply ends it).
	logPath := filepath.Join(h.home, "devices", u, "logs", "device.log")
	waitFor(t, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "device process started")
	})
	if out := h.must("shutdown", u); out != "" {
		t.Errorf("shutdown printed %q", out)
	}
	if got := h.state(u); got != "Shutdown" {
		t.Errorf("after shutdown: %s", got)
	}
	processGone(t, pid)
	log, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(log), "shutting down") {
		t.Errorf("device log does not show an orderly shutdown: %q %v", log, err)
	}
	h.must("shutdown", "all")
	h.waitState(v, "Shutdown")
	noProcs(t, h.home)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestBootTakesTimeAndBootstatusWaits(t *testing.T) {
	h := newHarness(t, EnvSpeed, "0.03") // a 0.9 s boot
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	start := time.Now()
	h.must("boot", u)
	if got := h.state(u); got != "Booting" {
		t.Fatalf("right after boot: %s", got)
	}
	out := h.must("bootstatus", u, "-b")
	if elapsed := time.Since(start); elapsed < 700*time.Millisecond {
		t.Errorf("bootstatus returned after %v, before the boot could finish", elapsed)
	}
	if !strings.HasPrefix(out, "Monitoring boot status for Phone ("+u+").\n[") ||
		!strings.Contains(out, "isTerminal=NO, Elapsed=00:0") || !strings.Contains(out, "\n\tWaiting on ") {
		t.Errorf("bootstatus output:\n%s", out)
	}
	if got := h.state(u); got != "Booted" {
		t.Errorf("after bootstatus: %s", got)
	}
}

func TestBootstatusBootsAShutdownDevice(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	out := h.must("bootstatus", u, "-b")
	if !strings.HasPrefix(out, "Monitoring boot status for Phone ("+u+").\n") {
		t.Errorf("bootstatus -b: %q", out)
	}
	if got := h.state(u); got != "Booted" {
		t.Errorf("state %s", got)
	}
}

// bootstatus -b on a shut-down device is the whole boot in one process:
// it returns only once the boot time of the speed model has passed, having
// printed progress, and leaves the device Booted.
func TestBootstatusDashBBootsAndWaitsForTheBoot(t *testing.T) {
	h := newHarness(t, EnvSpeed, "0.03") // a 0.9 s first boot
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	start := time.Now()
	out := h.must("bootstatus", u, "-b")
	if elapsed := time.Since(start); elapsed < 800*time.Millisecond {
		t.Errorf("bootstatus -b returned after %v, before a 0.9 s boot could finish", elapsed)
	}
	if !strings.HasPrefix(out, "Monitoring boot status for Phone ("+u+").\n[") || !strings.Contains(out, "\n\tWaiting on ") {
		t.Errorf("bootstatus -b output:\n%s", out)
	}
	if got := h.state(u); got != "Booted" {
		t.Errorf("after bootstatus -b: %s", got)
	}
}

// Without -b, bootstatus does not boot a shut-down device: it waits for
// someone else to, and returns once they have.
func TestBootstatusWithoutBWaitsForAShutdownDevice(t *testing.T) {
	h := newHarness(t, EnvSpeed, "0.03")
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	r := h.runCtx(ctx, "xcrun", "simctl", "bootstatus", u)
	cancel()
	if r.code == 0 {
		t.Errorf("bootstatus without -b returned for a shut-down device: %+v", r)
	}
	if got := h.state(u); got != "Shutdown" {
		t.Errorf("bootstatus without -b booted the device: %s", got)
	}
	done := make(chan result, 1)
	go func() { done <- h.simctl("bootstatus", u) }()
	h.must("boot", u)
	if r := <-done; r.code != 0 {
		t.Errorf("bootstatus after someone booted the device: %+v", r)
	}
	if got := h.state(u); got != "Booted" {
		t.Errorf("after the boot: %s", got)
	}
}

func TestCrashAfterFault(t *testing.T) {
	h := newHarness(t, EnvFaults, "crash-after=200@1")
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	h.must("boot", u)
	if got := h.state(u); got != "Booted" {
		t.Fatalf("state %s", got)
	}
	h.waitState(u, "Shutdown")
	log, _ := os.ReadFile(filepath.Join(h.home, "devices", u, "logs", "device.log"))
	if !strings.Contains(string(log), "simulated crash") {
		t.Errorf("device log: %s", log)
	}
	// The count is used up: the next boot stays up.
	h.must("boot", u)
	time.Sleep(400 * time.Millisecond)
	if got := h.state(u); got != "Booted" {
		t.Errorf("second boot: %s", got)
	}
}

func TestBootstatusFailsWhenTheDeviceDies(t *testing.T) {
	h := newHarness(t, EnvSpeed, "0.5", EnvFaults, "crash-after=300") // a 15 s boot
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	r := h.simctl("bootstatus", u, "-b")
	want := "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\n" +
		"Unable to lookup in current state: Shutdown\n"
	if r.code != 149 || r.stderr != want {
		t.Errorf("bootstatus on a crashing device: exit %d %q", r.code, r.stderr)
	}
	// Same shape as the captured lookup error (there: Shutting Down).
	capture := readTestdata(t, "errors/lookup-shutting-down-code405.txt")
	if strings.Replace(capture, "Shutting Down", "Shutdown", 1) != want {
		t.Errorf("error shape differs from the capture %q", capture)
	}
}

func TestBootFailFault(t *testing.T) {
	h := newHarness(t, EnvFaults, "boot-fail@1")
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	r := h.simctl("boot", u)
	if r.code != 60 || !strings.HasPrefix(r.stderr, "An error was encountered processing the command (domain=NSPOSIXErrorDomain, code=60):\nUnable to boot the Simulator.\nlaunchd failed to respond.\n") ||
		!strings.Contains(r.stderr, "\n\tFailed to start launchd_sim") {
		t.Errorf("boot-fail: %+v", r)
	}
	if got := h.state(u); got != "Shutdown" {
		t.Errorf("after a failed boot: %s", got)
	}
	noProcs(t, h.home)
	h.must("boot", u)
	h.waitState(u, "Booted")
}

func TestBootHangFault(t *testing.T) {
	h := newHarness(t, EnvFaults, "boot-hang")
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	h.must("boot", u)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	r := h.runCtx(ctx, "xcrun", "simctl", "bootstatus", u)
	if r.code == 0 || !strings.Contains(r.stdout, "Waiting on Data Migration") {
		t.Errorf("bootstatus on a hung boot: %+v", r)
	}
	if got := h.state(u); got != "Booting" {
		t.Errorf("hung device: %s", got)
	}
	h.must("shutdown", u)
	noProcs(t, h.home)
}

func TestShutdownHangFault(t *testing.T) {
	h := newHarness(t, EnvFaults, "shutdown-hang@1")
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	h.must("boot", u)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if r := h.runCtx(ctx, "xcrun", "simctl", "shutdown", u); r.code == 0 {
		t.Errorf("hung shutdown returned 0: %+v", r)
	}
	if got := h.state(u); got != "Shutting Down" {
		t.Errorf("during a hung shutdown: %s", got)
	}
	if r := h.simctl("erase", u); r.code != 149 || !strings.HasSuffix(r.stderr, "current state: Shutting Down\n") {
		t.Errorf("erase while shutting down: %+v", r)
	}
	h.must("shutdown", u) // a second shutdown finishes the job
	if got := h.state(u); got != "Shutdown" {
		t.Errorf("after the second shutdown: %s", got)
	}
}

func TestCreateFailFault(t *testing.T) {
	h := newHarness(t, EnvFaults, "create-fail@1")
	r := h.simctl("create", "Phone", "iPhone 15", "iOS 18.0")
	if r.code != 28 || r.stdout != "" || !strings.Contains(r.stderr, "create-fail") {
		t.Errorf("create-fail: %+v", r)
	}
	h.create("Phone", "iPhone 15", "iOS 18.0")
}

func TestDeleteStopsARunningDevice(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	h.must("boot", u)
	pid := onlyProc(t, h.home).PID
	h.must("delete", u)
	processGone(t, pid)
	noProcs(t, h.home)
}

func TestResetKillsAllDeviceProcesses(t *testing.T) {
	h := newHarness(t)
	set := t.TempDir()
	u := h.create("Default set", "iPhone 15", "iOS 18.0")
	v := strings.TrimSpace(h.must("--set", set, "create", "Other set", "iPhone 15", "iOS 18.0"))
	h.must("boot", u)
	h.must("--set", set, "boot", v)
	ps := must(PS(h.home))
	if len(ps) != 2 {
		t.Fatalf("PS: %+v", ps)
	}
	if err := Reset(h.home); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		processGone(t, p.PID)
	}
	noProcs(t, h.home)
	if _, err := os.Stat(h.home); !os.IsNotExist(err) {
		t.Error("Reset left the home behind")
	}
	if got := h.state(v, "--set", set); got != "Shutdown" {
		t.Errorf("device in another set after Reset: %s", got)
	}
}

func TestDeviceProcessExitsWhenItsDirectoryIsRemoved(t *testing.T) {
	h := newHarness(t)
	set := t.TempDir()
	u := strings.TrimSpace(h.must("--set", set, "create", "Phone", "iPhone 15", "iOS 18.0"))
	h.must("--set", set, "boot", u)
	pid := onlyProc(t, h.home).PID
	if err := os.RemoveAll(set); err != nil {
		t.Fatal(err)
	}
	processGone(t, pid)
}

func TestInstallLinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	if err := Install(dir); err != nil { // idempotent
		t.Fatal(err)
	}
	self := must(selfExecutable())
	for _, tool := range Tools {
		target, err := os.Readlink(filepath.Join(dir, tool))
		if err != nil || target != self {
			t.Errorf("%s -> %q (%v), want %q", tool, target, err, self)
		}
	}
	blocker := filepath.Join(t.TempDir(), "bin2")
	if err := os.MkdirAll(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blocker, "adb"), []byte("real adb"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Install(blocker); err == nil || !strings.Contains(err.Error(), "not a symlink") {
		t.Errorf("Install over a real file: %v", err)
	}
}

func TestParseFaults(t *testing.T) {
	fs, err := parseFaults(" boot-fail, crash-after=5000@2 ,erase-fail@1,")
	if err != nil {
		t.Fatal(err)
	}
	want := []fault{
		{Name: "boot-fail", Key: "boot-fail"},
		{Name: "crash-after", Value: "5000", Count: 2, Key: "crash-after=5000@2"},
		{Name: "erase-fail", Count: 1, Key: "erase-fail@1"},
	}
	if !slices.Equal(fs, want) {
		t.Errorf("got %+v", fs)
	}
	for _, bad := range []string{"nope", "crash-after", "crash-after=x", "boot-fail=1", "erase-fail@0", "erase-fail@x"} {
		if _, err := parseFaults(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDeviceArgsAndHome(t *testing.T) {
	o, err := parseDeviceArgs([]string{DeviceCommand, "--", "platform=ios", "id=X", "dir=/d", "crash-after-ms=-1", "boot-ms=5", "name=A B"})
	if err != nil || o.id != "X" || o.dir != "/d" || o.crash != -1 || o.boot != 5*time.Millisecond || o.name != "A B" {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := parseDeviceArgs([]string{"id=X"}); err == nil {
		t.Error("missing dir accepted")
	}
	env := map[string]string{"HOME": "/home/u"}
	if got := Home(func(k string) string { return env[k] }); got != "/home/u/.simlock-simsdk" {
		t.Errorf("default home %q", got)
	}
	env[EnvHome] = "/x"
	if got := Home(func(k string) string { return env[k] }); got != "/x" {
		t.Errorf("home %q", got)
	}
}

func TestShutdownTakesTheShutdownTime(t *testing.T) {
	h := newHarness(t, EnvSpeed, "0.2") // a 0.3 s shutdown
	u := h.create("Phone", "iPhone 15", "iOS 18.0")
	h.env[EnvSpeed] = "0"
	h.must("boot", u)
	h.env[EnvSpeed] = "0.2"
	done := make(chan result, 1)
	go func() { done <- h.simctl("shutdown", u) }()
	waitFor(t, func() bool { return h.state(u) == "Shutting Down" })
	if r := <-done; r.code != 0 {
		t.Fatalf("shutdown: %+v", r)
	}
	if got := h.state(u); got != "Shutdown" {
		t.Errorf("after shutdown: %s", got)
	}
}
