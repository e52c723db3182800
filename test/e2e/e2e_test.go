// Package e2e drives the real simlock binary against the simulated SDK with
// real processes, real sockets and a real SQLite file, the way a user would:
// it runs commands, reads their JSON, kills the daemon and restarts it.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

var bin string

// TestMain builds the binary once through the shared harness (test/harness),
// which the conformance suites use too.
func TestMain(m *testing.M) {
	var err error
	if bin, err = harness.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	harness.Main(m)
}

// world is one isolated simlock installation: a home, a simulated SDK on
// PATH, and its simulated device state.
type world struct {
	t       *testing.T
	home    string
	sdk     string
	simHome string
	env     []string
}

// newWorld is a harness world (test/harness.NewWorld) seen through this
// package's lower-case fields. The harness stops the daemon, resets the
// simulated devices and removes the files when the test ends.
func newWorld(t *testing.T, config string) *world {
	t.Helper()
	h := harness.NewWorld(t, config)
	return &world{t: t, home: h.Home, sdk: h.SDK, simHome: h.SimHome, env: slices.Clone(h.Env)}
}

type result struct {
	stdout, stderr string
	code           int
}

func (w *world) cmd(args ...string) *exec.Cmd { return harness.Command(w.env, args...) }

func (w *world) run(args ...string) result {
	r := harness.Exec(w.t, w.env, args...)
	return result{r.Stdout, r.Stderr, r.Code}
}

func (w *world) mustRun(args ...string) string {
	w.t.Helper()
	return harness.MustExec(w.t, w.env, args...)
}

func (w *world) json(v any, args ...string) {
	w.t.Helper()
	harness.ExecJSON(w.t, w.env, v, args...)
}

type device struct {
	ID, UDID, DeviceSet, Model, OSVersion string
	Simulated                             bool
	// State is the device's runtime.lifecycle: the description keeps live
	// state under runtime, with no top-level copy.
	State   string `json:"-"`
	Runtime struct {
		Lifecycle string
		Lease     *string
	}
}

func (d *device) UnmarshalJSON(b []byte) error {
	type plain device
	if err := json.Unmarshal(b, (*plain)(d)); err != nil {
		return err
	}
	d.State = d.Runtime.Lifecycle
	return nil
}

type lease struct {
	LeaseID   string    `json:"leaseId"`
	ExpiresAt time.Time `json:"expiresAt"`
	TTLMs     int64     `json:"ttlMs"`
	Role      string    `json:"role"`
	Device    device    `json:"device"`
}

type status struct {
	Daemon struct {
		PID    int
		Health string
		Mode   string
	}
	Devices    []device
	Leases     []lease
	QueueDepth int
	Capacity   struct{ MaxRunning, Running int }
	Goldens    *struct {
		Devices  []struct{ State string }
		NotBuilt []struct{ Retrying bool }
	}
}

func (w *world) status() status {
	var st status
	w.json(&st, "status", "--json")
	return st
}

// eventually is harness.Eventually: it polls cond against the real daemon
// (real processes on a real clock, so there is no fake clock to advance).
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	harness.Eventually(t, what, within, cond)
}

const oneRunning = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`

func TestLeaseWaitReleaseAndExpiry(t *testing.T) {
	w := newWorld(t, oneRunning)

	var first lease
	w.json(&first, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach")
	if first.LeaseID == "" || first.Role != "admin" || first.Device.UDID == "" || !first.Device.Simulated || first.Device.Model != "iPhone 16" {
		t.Fatalf("grant %+v", first)
	}
	// The device really is booted in the simulated SDK, inside simlock's own set.
	var list struct {
		Devices map[string][]struct{ UDID, State string }
	}
	out, err := exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "--set", first.Device.DeviceSet, "list", "devices", "-j").Output()
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(out, &list)
	booted := false
	for _, ds := range list.Devices {
		for _, d := range ds {
			booted = booted || d.UDID == first.Device.UDID && d.State == "Booted"
		}
	}
	if !booted {
		t.Fatalf("simctl does not show %s booted:\n%s", first.Device.UDID, out)
	}
	// Invisible to the default device set (containment).
	out, _ = exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "list", "devices").Output()
	if strings.Contains(string(out), first.Device.UDID) {
		t.Fatal("the leased device leaked into the default device set")
	}

	r := w.run("lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--requester", "second", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, `"code":"NO_CAPACITY"`) {
		t.Fatalf("no-wait: exit %d stderr %s", r.code, r.stderr)
	}

	third := w.cmd("lease", "--platform", "ios", "--model", "iPhone 16", "--timeout", "60s", "--requester", "third", "--detach", "--json")
	var thirdOut bytes.Buffer
	third.Stdout = &thirdOut
	stderr, _ := third.StderrPipe()
	if err := third.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"queued"`) {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if st := w.status(); st.QueueDepth != 1 {
		t.Fatalf("queue depth %d", st.QueueDepth)
	}
	w.mustRun("release", first.LeaseID)
	if err := third.Wait(); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	var granted lease
	if err := json.Unmarshal(thirdOut.Bytes(), &granted); err != nil {
		t.Fatal(err)
	}
	if granted.Device.ID != first.Device.ID {
		t.Fatalf("waiter got %s, want the released %s", granted.Device.ID, first.Device.ID)
	}

	// A short lease nobody renews expires, and its device becomes available.
	w.mustRun("release", granted.LeaseID)
	var short lease
	w.json(&short, "lease", "--platform", "ios", "--model", "iPhone 16", "--ttl", "2s", "--detach", "--requester", "short")
	if short.TTLMs != 2000 {
		t.Fatalf("ttl %d", short.TTLMs)
	}
	eventually(t, "the 2s lease to expire and its device to be ready", 20*time.Second, func() bool {
		st := w.status()
		return len(st.Leases) == 0 && len(st.Devices) == 1 && st.Devices[0].State == "ready"
	})
	var again lease
	w.json(&again, "lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--detach", "--requester", "after-expiry")
	if again.Device.ID != first.Device.ID {
		t.Fatal("the expired lease's device was not reused")
	}
}

func TestKill9KeepsLeaseWithSameDeadline(t *testing.T) {
	w := newWorld(t, oneRunning)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach", "--ttl", "10m")
	pid := w.status().Daemon.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	// A fresh daemon starts over the same home (status itself starts none).
	w.mustRun("daemon", "start")
	// start answers once the socket does; the restart's recovery may still
	// be converging (health starting) for a moment on a loaded machine.
	var st status
	eventually(t, "the restarted daemon to finish converging", 10*time.Second, func() bool {
		st = w.status()
		return st.Daemon.Health != "starting"
	})
	if st.Daemon.PID == pid || st.Daemon.Health != "running" {
		t.Fatalf("after restart %+v", st.Daemon)
	}
	if len(st.Leases) != 1 || st.Leases[0].LeaseID != l.LeaseID || !st.Leases[0].ExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("leases after kill -9: %+v, want %s expiring %s", st.Leases, l.LeaseID, l.ExpiresAt)
	}
	// Nothing was double-granted: the device is still leased, capacity full.
	r := w.run("lease", "--platform", "ios", "--no-wait", "--requester", "other", "--json")
	if !strings.Contains(r.stderr, "NO_CAPACITY") {
		t.Fatalf("after restart a second grant was possible: %s %s", r.stdout, r.stderr)
	}
	// The restored lease can still be renewed and released.
	w.mustRun("lease", "renew", l.LeaseID)
	w.mustRun("release", l.LeaseID)
}

func TestSecondDaemonIsRefusedBeforeDeviceWork(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.mustRun("daemon", "start")
	r := w.run("daemon", "run")
	if r.code == 0 || !strings.Contains(r.stderr, "DAEMON_ALREADY_RUNNING") {
		t.Fatalf("second daemon: exit %d %s", r.code, r.stderr)
	}
	var st struct {
		PID    int    `json:"pid"`
		Health string `json:"health"`
		Socket string `json:"socket"`
	}
	w.json(&st, "daemon", "status", "--json")
	if st.Health != "running" || st.PID == 0 || st.Socket == "" {
		t.Fatalf("%+v", st)
	}
	// start is idempotent.
	w.mustRun("daemon", "start")
	w.mustRun("daemon", "stop")
	if r := w.run("daemon", "status", "--json"); r.code == 0 || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("after stop: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(w.home, "admin.token")); !os.IsNotExist(err) {
		t.Fatal("admin.token survived a graceful stop")
	}
}

// goldensSettled waits until no golden is being built or asked for again.
// Since ADR 0057 the daemon may build a golden in any idle gap once a
// request has left the queue; the build boots a device process for a
// while and shuts it down. A test that asserts no device process is left
// waits for that first: a golden that never shut down still fails it.
// Quiet on two looks 200 ms apart: a retry marked a moment ago may not
// show as building on the first.
func (w *world) goldensSettled(t *testing.T) {
	t.Helper()
	eventually(t, "golden builds to settle", 60*time.Second, func() bool {
		if !w.goldensQuiet() {
			return false
		}
		time.Sleep(200 * time.Millisecond)
		return w.goldensQuiet()
	})
}

// goldensQuiet reports whether status shows no golden being built,
// reclaimed or asked for again.
func (w *world) goldensQuiet() bool {
	g := w.status().Goldens
	if g == nil {
		return true
	}
	for _, d := range g.Devices {
		if d.State == "building" || d.State == "reclaiming" {
			return false
		}
	}
	for _, n := range g.NotBuilt {
		if n.Retrying {
			return false
		}
	}
	return true
}

// rawConn speaks the socket protocol by hand, as a foreign client would.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (w *world) raw(t *testing.T) *rawConn {
	c, err := net.Dial("unix", filepath.Join(w.home, "simlock.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) send(line string) map[string]any {
	rc.t.Helper()
	if _, err := rc.c.Write([]byte(line + "\n")); err != nil {
		rc.t.Fatal(err)
	}
	for {
		b, err := rc.r.ReadBytes('\n')
		if err != nil {
			rc.t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			rc.t.Fatalf("daemon sent %q: %v", b, err)
		}
		if _, push := m["method"]; !push {
			return m
		}
	}
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	s, _ := d["code"].(string)
	return s
}

func TestRawProtocolRefusals(t *testing.T) {
	w := newWorld(t, oneRunning)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")

	rc := w.raw(t)
	if got := errCode(rc.send(`{"jsonrpc":"2.0","id":1,"method":"status.get"}`)); got != "HELLO_REQUIRED" {
		t.Fatalf("before hello: %s", got)
	}
	if got := errCode(rc.send(`{"jsonrpc":"2.0","id":2,"method":"hello","params":{"protocol":{"min":1,"max":3}}}`)); got != "PROTOCOL_VERSION_UNSUPPORTED" {
		t.Fatalf("old protocol: %s", got)
	}
	hello := rc.send(`{"jsonrpc":"2.0","id":3,"method":"hello","params":{"protocol":{"min":5,"max":5},"principal":"intruder"}}`)
	res, _ := hello["result"].(map[string]any)
	if res["role"] != "agent" {
		t.Fatalf("hello without credential: %v", hello)
	}
	if got := errCode(rc.send(`{"jsonrpc":"2.0","id":4,"method":"lease.request","params":{"platform":"ios","colour":"red"}}`)); got != "BAD_REQUEST" {
		t.Fatalf("unknown field: %s", got)
	}
	if got := errCode(rc.send(`{"jsonrpc":"2.0","id":5,"method":"lease.renew","params":{"leaseId":"` + l.LeaseID + `"}}`)); got != "FORBIDDEN" {
		t.Fatalf("renew someone else's lease: %s", got)
	}
	if got := errCode(rc.send(`{"jsonrpc":"2.0","id":6,"method":"list.get"}`)); got != "FORBIDDEN" {
		t.Fatalf("agent list.get: %s", got)
	}
	if got := errCode(rc.send(`{not json`)); got != "BAD_REQUEST" {
		t.Fatalf("malformed line: %s", got)
	}
	if got := errCode(rc.send(`{"jsonrpc":"2.0","id":7,"method":"lease.explode"}`)); got != "UNKNOWN_OPERATION" {
		t.Fatalf("unknown op: %s", got)
	}
	// The connection survived every refusal.
	st := rc.send(`{"jsonrpc":"2.0","id":8,"method":"status.get"}`)
	if st["result"] == nil {
		t.Fatalf("status after refusals: %v", st)
	}
	// A wrong credential is refused outright.
	rc2 := w.raw(t)
	if got := errCode(rc2.send(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":5,"max":5},"credential":"guess"}}`)); got != "ADMIN_AUTHENTICATION_FAILED" {
		t.Fatalf("bad credential: %s", got)
	}
}

func TestHeldLeaseIsReleasedOnSignal(t *testing.T) {
	w := newWorld(t, oneRunning)
	c := w.cmd("lease", "--platform", "ios", "--ttl", "30s")
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var l lease
	if err := json.NewDecoder(stdout).Decode(&l); err != nil {
		t.Fatal(err)
	}
	if len(w.status().Leases) != 1 {
		t.Fatal("held lease not visible")
	}
	c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		t.Fatalf("holder exit: %v", err)
	}
	if st := w.status(); len(st.Leases) != 0 {
		t.Fatalf("lease survived the holder's SIGTERM: %+v", st.Leases)
	}
}

func TestDemoFinishesAndTellsTheStory(t *testing.T) {
	r := exec.Command(bin, "demo", "--speed", "0")
	r.Env = append(os.Environ(), "SIMLOCK_HOME=", "SIMLOCK_HOST_DIR="+t.TempDir()) // never the user's own host registry
	out, err := r.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"agent-A holds", "queued at position 1", "NO_CAPACITY", "agent-B granted", "lease.expired", "done:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestScopedPassthrough(t *testing.T) {
	w := newWorld(t, oneRunning)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	out := w.mustRun("simctl", "list", "devices")
	if !strings.Contains(out, l.Device.UDID) || !strings.Contains(out, "Booted") {
		t.Fatalf("simlock simctl list devices does not show the leased device:\n%s", out)
	}
	r := w.run("simctl", "erase", l.Device.UDID)
	if r.code == 0 || !strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("erase through passthrough: exit %d %s", r.code, r.stderr)
	}
	r = w.run("simctl", "--set", "/tmp", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("re-scoping --set: exit %d %s", r.code, r.stderr)
	}
	// The tool's own exit code comes back unchanged.
	r = w.run("simctl", "bootstatus", "00000000-0000-0000-0000-000000000000")
	if r.code == 0 || r.code > 200 {
		t.Fatalf("tool failure exit code %d", r.code)
	}
}

func TestDeviceExecStreamsOutputAndExitCode(t *testing.T) {
	w := newWorld(t, oneRunning)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	out := w.mustRun("exec", l.LeaseID, "--", "simctl", "list", "devices")
	if !strings.Contains(out, l.Device.UDID) {
		t.Fatalf("exec output lacks the device:\n%s", out)
	}
	r := w.run("exec", l.LeaseID, "--", "simctl", "erase", l.Device.UDID)
	if r.code == 0 || !strings.Contains(r.stderr, "PASSTHROUGH_REFUSED") {
		t.Fatalf("refused verb through exec: %d %s", r.code, r.stderr)
	}
	r = w.run("exec", l.LeaseID, "--", "simctl", "bootstatus", "00000000-0000-0000-0000-000000000000")
	if r.code == 0 {
		t.Fatal("a failing command's exit code was lost")
	}
	// Another requester may not run commands on this lease, admin or not.
	r = w.run("exec", l.LeaseID, "--requester", "someone-else", "--", "simctl", "list")
	if !strings.Contains(r.stderr, "FORBIDDEN") {
		t.Fatalf("foreign requester: %d %s", r.code, r.stderr)
	}
}

func TestHolderLearnsAtOnceThatItsLeaseIsGone(t *testing.T) {
	w := newWorld(t, oneRunning)
	c := w.cmd("lease", "--platform", "ios", "--ttl", "10m")
	stdout, _ := c.StdoutPipe()
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var l lease
	if err := json.NewDecoder(stdout).Decode(&l); err != nil {
		t.Fatal(err)
	}
	w.mustRun("nuke", "--yes")
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "was lost") {
			t.Fatalf("holder exit %v, stderr %s", err, stderr.String())
		}
	case <-time.After(testhost.Scale(10 * time.Second)):
		// Renewing at TTL/3 would take minutes to notice; the push must not.
		c.Process.Kill()
		t.Fatal("the holder did not learn its lease was lost")
	}
}
