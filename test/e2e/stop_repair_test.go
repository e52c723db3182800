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

	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/testhost"
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
	if took > testhost.Scale(30*time.Second) {
		t.Fatalf("sl daemon stop took %s", took)
	}
	eventually(t, "the daemon process to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if !lockFree(t, w.home) {
		t.Fatal("the home lock is still held after the stop")
	}
	t.Logf("sl daemon stop of a SIGSTOPped daemon: %s, %s", took, strings.TrimSpace(r.stdout))
}

// damagedRefusal is a HOST_REGISTRY_DAMAGED error as --json prints it.
type damagedRefusal struct {
	Error struct {
		Code       string `json:"code"`
		Message    string `json:"message"`
		Retryable  bool   `json:"retryable"`
		NextAction string `json:"nextAction"`
	} `json:"error"`
}

// requireDamaged checks that r is HOST_REGISTRY_DAMAGED, not retryable,
// naming the file and the repair command.
func requireDamaged(t *testing.T, what string, r result, file string) {
	t.Helper()
	var e damagedRefusal
	if r.code == 0 || json.Unmarshal([]byte(strings.TrimSpace(lastLine(r.stderr))), &e) != nil {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
	}
	if e.Error.Code != "HOST_REGISTRY_DAMAGED" || e.Error.Retryable || !strings.Contains(e.Error.Message, file) ||
		!strings.Contains(e.Error.Message+e.Error.NextAction, "simlock host repair") {
		t.Fatalf("%s: %+v", what, e.Error)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

type repairOut struct {
	Registry   string
	Damage     string
	Repaired   bool
	MovedAside []string
	Homes      []struct {
		Home           string
		State          string
		ClaimsRestored []string
		Reopened       bool
	}
	Warnings []string
}

// TestAScrambledHostRegistryIsRepaired: two homes share one host registry,
// each holding a lease; both daemons go (one kill -9, one graceful stop)
// and host.db is overwritten with garbage. Every reader answers
// HOST_REGISTRY_DAMAGED (not retryable, naming the file and the repair):
// daemon start, an auto-starting lease, device status. `simlock host
// repair` moves the file aside and restores each home's claim from its
// own store; then both homes serve again with their leases intact: the
// same lease ids, renewable, the claims in their names, and a third lease
// is granted.
func TestAScrambledHostRegistryIsRepaired(t *testing.T) {
	const cfg = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3},"host":{"maxRunning":3}}}`
	a := newWorld(t, cfg)
	b := newWorld(t, cfg)
	for _, kv := range a.env {
		for _, k := range []string{"SIMLOCK_HOST_DIR=", "SIMLOCK_SIMSDK_HOME="} {
			if strings.HasPrefix(kv, k) {
				b.setEnv(strings.TrimSuffix(k, "="), strings.TrimPrefix(kv, k))
			}
		}
	}
	la, keyA, pidA := a.leaseIOS()
	lb, keyB, _ := b.leaseIOS()
	if keyA == keyB {
		t.Fatal("both homes hold one device")
	}

	if err := syscall.Kill(pidA, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A's killed daemon to let go of its home", 10*time.Second, func() bool { return lockFree(t, a.home) })
	b.mustRun("daemon", "stop")
	file := filepath.Join(a.hostDir(), "host.db")
	if err := os.WriteFile(file, bytes.Repeat([]byte("not a database, just garbage. "), 512), 0o600); err != nil {
		t.Fatal(err)
	}

	requireDamaged(t, "daemon start", a.run("daemon", "start", "--json"), file)
	requireDamaged(t, "lease (starting a daemon)", b.run("lease", "--platform", "ios", "--no-wait", "--detach", "--json"), file)
	requireDamaged(t, "device status", a.run("device", "status", "--json"), file)

	var rep repairOut
	a.json(&rep, "host", "repair", "--json")
	if !rep.Repaired || rep.Registry != file || rep.Damage == "" || len(rep.MovedAside) == 0 ||
		!strings.HasPrefix(filepath.Base(rep.MovedAside[0]), "host.db.damaged-") {
		t.Fatalf("repair: %+v", rep)
	}
	restored := map[string][]string{}
	for _, h := range rep.Homes {
		if h.State != "stopped" {
			t.Fatalf("repair saw home %s as %s, want stopped: %+v", h.Home, h.State, rep)
		}
		restored[h.Home] = h.ClaimsRestored
	}
	if len(rep.Homes) != 2 || !slicesEqual(restored[a.home], []string{string(keyA)}) || !slicesEqual(restored[b.home], []string{string(keyB)}) {
		t.Fatalf("repair restored %v, want %s for A and %s for B", restored, keyA, keyB)
	}
	if b, err := os.ReadFile(rep.MovedAside[0]); err != nil || !bytes.HasPrefix(b, []byte("not a database")) {
		t.Fatalf("the damaged file was not kept aside: %v", err)
	}
	// Until the homes restart, the restored claims keep their devices from
	// anyone else, in their homes' names.
	for key, home := range map[hostreg.Key]string{keyA: a.home, keyB: b.home} {
		st, ok := a.claimOf(key)
		if !ok || st.Claim.Owner.Home != home {
			t.Fatalf("after the repair %s is claimed %v by %+v, want home %s", key, ok, st.Claim.Owner, home)
		}
	}

	for _, w := range []struct {
		w   *world
		l   lease
		key hostreg.Key
	}{{a, la, keyA}, {b, lb, keyB}} {
		w.w.mustRun("daemon", "start")
		st := w.w.status()
		if len(st.Leases) != 1 || st.Leases[0].LeaseID != w.l.LeaseID {
			t.Fatalf("%s after the repair lists leases %+v, want %s", w.w.home, st.Leases, w.l.LeaseID)
		}
		w.w.mustRun("lease", "renew", w.l.LeaseID)
		w.w.requireClaim(w.key, st.Daemon.PID, w.l.LeaseID)
	}
	var l3 lease
	a.json(&l3, "lease", "--platform", "ios", "--no-wait", "--detach", "--requester", "third", "--json")
	if l3.LeaseID == "" || l3.LeaseID == la.LeaseID || l3.Device.UDID == la.Device.UDID || l3.Device.UDID == lb.Device.UDID {
		t.Fatalf("third lease %+v", l3)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestARebuildUnderARunningDaemon: the registry is rebuilt (--force: a
// registry damaged under a live daemon's WAL may still read) while a
// daemon holding a lease runs. The repair finds the home running; the
// daemon notices the replaced file, reopens it and writes its claim there
// (the repair waits for that and says so); the lease renews and a second
// lease is granted and claimed in the new file.
func TestARebuildUnderARunningDaemon(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3},"host":{"pollIntervalMs":200}}}`)
	l, key, pid := w.leaseIOS()
	var rep repairOut
	w.json(&rep, "host", "repair", "--json")
	if rep.Repaired {
		t.Fatalf("a readable registry was rebuilt without --force: %+v", rep)
	}
	w.json(&rep, "host", "repair", "--force", "--json")
	if !rep.Repaired || len(rep.MovedAside) == 0 || len(rep.Homes) != 1 || rep.Homes[0].Home != w.home ||
		rep.Homes[0].State != "running" || !rep.Homes[0].Reopened {
		t.Fatalf("repair: %+v", rep)
	}
	// The daemon wrote its claim, with its lease, into the new file.
	w.requireClaim(key, pid, l.LeaseID)
	w.mustRun("lease", "renew", l.LeaseID)
	var l2 lease
	w.json(&l2, "lease", "--platform", "ios", "--no-wait", "--detach", "--requester", "second", "--json")
	if l2.Device.UDID == l.Device.UDID {
		t.Fatalf("second lease on the first lease's device: %+v", l2)
	}
	k2, _ := hostreg.IOSSimulatorKey(l2.Device.UDID)
	w.requireClaim(k2, pid, l2.LeaseID)
}
