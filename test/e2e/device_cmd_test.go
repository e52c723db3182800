package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/hostreg"
)

func (w *world) hostDir() string {
	for _, kv := range w.env {
		if v, ok := strings.CutPrefix(kv, "SIMLOCK_HOST_DIR="); ok {
			return v
		}
	}
	w.t.Fatal("no SIMLOCK_HOST_DIR")
	return ""
}

// claimOf is key's claim in the world's host registry; ok false when free.
func (w *world) claimOf(key hostreg.Key) (hostreg.Status, bool) {
	w.t.Helper()
	sts, err := hostreg.Inspect(context.Background(), w.hostDir(), hostreg.SystemProber{})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, st := range sts {
		if st.Key == key {
			return st, true
		}
	}
	return hostreg.Status{}, false
}

// requireClaim waits for the daemon's own claim of key to name its lease
// (the lease id reaches the record from a background writer) and fails if
// it never does: the daemon, not the test, must have written it.
func (w *world) requireClaim(key hostreg.Key, daemonPID int, leaseID string) {
	w.t.Helper()
	eventually(w.t, "the daemon's claim of "+string(key), 10*time.Second, func() bool {
		st, ok := w.claimOf(key)
		return ok && st.Claim.Owner.PID == daemonPID && st.Claim.LeaseID == leaseID
	})
}

// simState is the simulated SDK's state for udid in set ("" if absent).
func (w *world) simState(set, udid string) string {
	w.t.Helper()
	var list struct {
		Devices map[string][]struct{ UDID, State string }
	}
	cmd := exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "--set", set, "list", "devices", "-j")
	cmd.Env = w.env
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatal(err)
	}
	json.Unmarshal(out, &list)
	for _, ds := range list.Devices {
		for _, d := range ds {
			if d.UDID == udid {
				return d.State
			}
		}
	}
	return ""
}

// leaseIOS leases an iOS device and waits for the daemon's claim of it.
func (w *world) leaseIOS() (lease, hostreg.Key, int) {
	w.t.Helper()
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach", "--ttl", "10m")
	key, err := hostreg.IOSSimulatorKey(l.Device.UDID)
	if err != nil {
		w.t.Fatal(err)
	}
	pid := w.status().Daemon.PID
	w.requireClaim(key, pid, l.LeaseID)
	return l, key, pid
}

func (w *world) daemonRunning() bool {
	_, err := os.Stat(filepath.Join(w.home, "daemon.sock"))
	return err == nil
}

type releaseOut struct {
	Released []struct {
		DeviceKey      string
		Via            string
		Cleared        bool
		DeviceShutDown bool
		ReclaimedBy    string
		Warnings       []string
	}
}

// kill -9 of the owning daemon leaves its claim orphaned; `device status`
// says so with no daemon running (and starts none), and `device release
// --stale` shuts the device down in the simulated SDK and clears the claim.
func TestStaleReleaseAfterTheOwnerWasKilled(t *testing.T) {
	w := newWorld(t, oneRunning)
	l, key, pid := w.leaseIOS()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if st := w.simState(l.Device.DeviceSet, l.Device.UDID); st != "Booted" {
		t.Fatalf("before recovery the device is %q", st)
	}
	out := w.mustRun("device", "status", string(key), "--json")
	if !strings.Contains(out, `"classification":"orphaned"`) || !strings.Contains(out, "simlock device release --stale "+string(key)) {
		t.Fatalf("status after kill -9: %s", out)
	}
	var ro releaseOut
	w.json(&ro, "device", "release", "--stale", string(key), "--json")
	if len(ro.Released) != 1 || !ro.Released[0].Cleared || !ro.Released[0].DeviceShutDown {
		t.Fatalf("release --stale: %+v", ro)
	}
	if st := w.simState(l.Device.DeviceSet, l.Device.UDID); st != "Shutdown" {
		t.Fatalf("after --stale the simulated SDK shows the device %q", st)
	}
	if _, held := w.claimOf(key); held {
		t.Fatal("the claim survived --stale")
	}
	if w.daemonRunning() {
		t.Fatal("device status or release started a daemon")
	}
}

// --stale and a daemon's watcher never reclaim one orphan together: a
// --stale that finds the watcher's mark on the record touches neither the
// device nor the claim, waits for that reclaim, and answers with who freed
// the device. (Without the mark, a watcher that saw the device stopped half
// way through --stale cleared the claim under it, and --stale answered
// cleared:false with nothing said: found by TestScenarioOneStaleRecovery in
// CI.)
func TestStaleWaitsForAWatchersReclaimUnderWay(t *testing.T) {
	w := newWorld(t, oneRunning)
	l, key, pid := w.leaseIOS()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	ctx := context.Background()
	db, err := hostreg.Open(ctx, w.hostDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, held := w.claimOf(key)
	if !held || st.Class != hostreg.ClassOrphaned {
		t.Fatalf("after kill -9 the claim is %+v (held %v), want orphaned", st, held)
	}
	// A watcher of another home (this test, in its name) begins the reclaim.
	watcher := hostreg.Owner{Home: t.TempDir(), PID: os.Getpid()}
	marked, err := db.BeginReclaim(ctx, key, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := w.run("device", "release", "--stale", "--wait", "1s", string(key), "--json")
	if r.code == 0 || !strings.Contains(r.stderr, `"code":"DEVICE_IN_USE"`) || !strings.Contains(r.stderr, "reclaiming") {
		t.Fatalf("--stale beside a reclaim under way: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if s := w.simState(l.Device.DeviceSet, l.Device.UDID); s != "Booted" {
		t.Fatalf("--stale touched a device another reclaimer holds: it is %q", s)
	}
	if cur, held := w.claimOf(key); !held || !cur.BeingReclaimed() {
		t.Fatalf("--stale changed the marked claim: %+v (held %v)", cur, held)
	}
	// A second --stale waits for the watcher, which finishes once that
	// command says it is waiting.
	waiting := w.cmd("device", "release", "--stale", "--wait", "2m", string(key), "--json")
	var stdout bytes.Buffer
	waiting.Stdout = &stdout
	stderr, err := waiting.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var said []string
	for sc.Scan() {
		said = append(said, sc.Text())
		if strings.Contains(sc.Text(), "is reclaiming "+string(key)) {
			break
		}
	}
	if len(said) == 0 || !strings.Contains(said[len(said)-1], "waiting up to 2m0s") {
		_ = waiting.Wait()
		t.Fatalf("--stale beside a reclaim under way never said it waits: %q", said)
	}
	if _, err := db.FinishReclaim(ctx, key, marked, hostreg.Reclaimed{Key: key, Owner: st.Claim.Owner, Reason: st.Liveness,
		Action: "shut-down", By: watcher, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	if err := waiting.Wait(); err != nil {
		t.Fatalf("--stale after the watcher's reclaim: %v\nstdout: %s\nstderr: %s", err, stdout.String(), rest)
	}
	var ro releaseOut
	if err := json.Unmarshal(stdout.Bytes(), &ro); err != nil {
		t.Fatalf("--stale after the watcher's reclaim: %v\nstdout: %s", err, stdout.String())
	}
	if len(ro.Released) != 1 || ro.Released[0].Cleared || ro.Released[0].ReclaimedBy != watcher.Home || len(ro.Released[0].Warnings) == 0 {
		t.Fatalf("--stale after the watcher's reclaim: %+v, want cleared:false, reclaimedBy %s and a warning", ro, watcher.Home)
	}
}

// Against a live owner --stale refuses (DEVICE_IN_USE, not retryable, with
// a recovery command); --force goes through the owner first: the lease is
// released by the owning daemon, the device shut down, the claim cleared.
func TestStaleRefusesALiveOwnerAndForceAsksItFirst(t *testing.T) {
	w := newWorld(t, oneRunning)
	l, key, _ := w.leaseIOS()
	r := w.run("device", "release", "--stale", string(key), "--json")
	if r.code != 9 || !strings.Contains(r.stderr, `"code":"DEVICE_IN_USE"`) || !strings.Contains(r.stderr, `"retryable":false`) ||
		!strings.Contains(r.stderr, `"classification":"live-owner"`) {
		t.Fatalf("--stale against a live owner: exit %d %s", r.code, r.stderr)
	}
	if _, held := w.claimOf(key); !held {
		t.Fatal("--stale freed a live owner's claim")
	}
	var ro releaseOut
	w.json(&ro, "device", "release", "--force", "--wait", "5s", string(key), "--json")
	if len(ro.Released) != 1 || !ro.Released[0].Cleared {
		t.Fatalf("release --force: %+v", ro)
	}
	st := w.status()
	if len(st.Leases) != 0 {
		t.Fatalf("the owner still holds %+v", st.Leases)
	}
	if s := w.simState(l.Device.DeviceSet, l.Device.UDID); s != "Shutdown" && s != "" {
		t.Fatalf("after --force the device is %q", s)
	}
	if _, held := w.claimOf(key); held {
		t.Fatal("the claim survived --force")
	}
}

// A corrupt claim record is never freed by --stale; only --force clears it.
func TestCorruptClaimNeedsForce(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.mustRun("device", "status") // no registry yet: nothing claimed, nothing created
	db, err := hostreg.Open(context.Background(), w.hostDir())
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite", filepath.Join(w.hostDir(), hostreg.FileName))
	if err != nil {
		t.Fatal(err)
	}
	key := hostreg.Key("ios:udid:DEADBEEF-0000-0000-0000-000000000000")
	if _, err := raw.Exec(`INSERT INTO claims (device_key, record_version, kind, command, owner_home, owner_pid, owner_start, lease_id, claimed_at, state)
		VALUES (?, 7, 'lease', '', '/nowhere', 999999, 'x', 'lse_x', 1, 'claimed')`, string(key)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	out := w.mustRun("device", "status", "--json")
	if !strings.Contains(out, `"classification":"inconsistent"`) || !strings.Contains(out, "simlock device release --force "+string(key)) {
		t.Fatalf("status: %s", out)
	}
	if r := w.run("device", "release", "--stale", string(key)); r.code == 0 {
		t.Fatalf("--stale freed a corrupt record: %s", r.stdout)
	}
	if _, held := w.claimOf(key); !held {
		t.Fatal("--stale freed a corrupt record")
	}
	w.mustRun("device", "release", "--force", string(key))
	if _, held := w.claimOf(key); held {
		t.Fatal("--force left the corrupt record")
	}
}

type stopOut struct {
	Stopped           bool
	Mode              string
	CleanupConfidence string
	ClaimsReleased    []string
	ClaimsOrphaned    []string
	Pending           *[]string
	Warnings          []string
	Clean             *struct {
		ReleasedLeases []string
		ShutDown       []string
		Failed         map[string]string
	}
}

// `daemon stop --clean` after kill -9 of the home's device process reports
// what it proved and what it did not: the lease it released, each claim
// either released or orphaned, and never "verified" while a claim remains.
func TestDaemonStopCleanReportsWhatItCouldProve(t *testing.T) {
	w := newWorld(t, oneRunning)
	l, key, _ := w.leaseIOS()
	w.crash(l.Device.UDID)
	var so stopOut
	w.json(&so, "daemon", "stop", "--clean", "--json", "--timeout", "60s")
	if !so.Stopped || so.Mode != "graceful" || so.Clean == nil || len(so.Clean.ReleasedLeases) != 1 || so.Clean.ReleasedLeases[0] != l.LeaseID {
		t.Fatalf("stop --clean: %+v", so)
	}
	if so.Pending == nil {
		t.Fatal("a graceful stop reported its pending cleanup as unknowable")
	}
	inReleased, inOrphaned := false, false
	for _, k := range so.ClaimsReleased {
		inReleased = inReleased || k == string(key)
	}
	for _, k := range so.ClaimsOrphaned {
		inOrphaned = inOrphaned || k == string(key)
	}
	if inReleased == inOrphaned {
		t.Fatalf("the claim on %s must be released or orphaned, exactly one: %+v", key, so)
	}
	_, held := w.claimOf(key)
	if held != inOrphaned {
		t.Fatalf("the result says orphaned=%v but the registry says held=%v", inOrphaned, held)
	}
	if held && so.CleanupConfidence == "verified" {
		t.Fatalf("claimed verified cleanup with %s still claimed: %+v", key, so)
	}
	// Forced: a second daemon killed from under the CLI is never graded
	// beyond what it proves, and its pending state is unknowable.
	w.mustRun("daemon", "start")
	w.json(&so, "daemon", "stop", "--json")
	if so.Mode != "graceful" || so.CleanupConfidence != "verified" || so.Pending == nil {
		t.Fatalf("idle graceful stop: %+v", so)
	}
}

// The Android side of --stale: after kill -9 of the owner, the emulator it
// left running is stopped through the owner root's private adb server (its
// recorded console port) before the claim is cleared.
func TestStaleReleaseStopsAnOrphanedEmulator(t *testing.T) {
	w := newWorld(t, androidConfig)
	var l lease
	w.json(&l, "lease", "--platform", "android", "--model", "pixel_6", "--detach")
	pid := w.status().Daemon.PID
	root, _ := filepath.Abs(filepath.Join(w.home, "devices", "android"))
	inis, _ := filepath.Glob(filepath.Join(root, "*.ini"))
	if len(inis) != 1 {
		t.Fatalf("AVDs in %s: %v", root, inis)
	}
	key, err := hostreg.AndroidAVDKey(root, strings.TrimSuffix(filepath.Base(inis[0]), ".ini"))
	if err != nil {
		t.Fatal(err)
	}
	w.requireClaim(key, pid, l.LeaseID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if w.emulators() == 0 {
		t.Skip("the simulated emulator did not outlive its daemon; nothing to reconcile")
	}
	var ro releaseOut
	w.json(&ro, "device", "release", "--stale", string(key), "--json")
	if len(ro.Released) != 1 || !ro.Released[0].Cleared || !ro.Released[0].DeviceShutDown {
		t.Fatalf("release --stale: %+v", ro)
	}
	if n := w.emulators(); n != 0 {
		t.Fatalf("%d emulator processes survived --stale", n)
	}
	if _, held := w.claimOf(key); held {
		t.Fatal("the claim survived --stale")
	}
}

func (w *world) emulators() int {
	var procs []struct{ ID string }
	w.json(&procs, "simsdk", "ps", "--json")
	return len(procs)
}

// The recovery command a refusal prints works when copied into a shell:
// for a live owner it names the owner's home, and running it releases the
// device through that owner.
func TestRecoveryCommandWorksWhenCopied(t *testing.T) {
	w := newWorld(t, oneRunning)
	_, key, _ := w.leaseIOS()
	r := w.run("device", "release", "--stale", string(key), "--json")
	var e struct {
		Error struct {
			Details struct {
				Recovery struct{ Command string }
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || !strings.HasPrefix(e.Error.Details.Recovery.Command, "simlock ") {
		t.Fatalf("refusal %q: %v", r.stderr, err)
	}
	sh := exec.Command("sh", "-c", e.Error.Details.Recovery.Command)
	sh.Env = append(w.env, "PATH="+filepath.Dir(bin)+":"+w.sdk+":"+os.Getenv("PATH"))
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", e.Error.Details.Recovery.Command, err, out)
	}
	if len(w.status().Leases) != 0 {
		t.Fatal("the owner still holds the lease after the recovery command")
	}
	if _, held := w.claimOf(key); held {
		t.Fatal("the claim survived the recovery command")
	}
}

// A daemon that cannot answer is stopped by signals: the result is forced,
// pending is null (unknowable), its claims are orphaned, never released by
// its death; with --clean each claim is reconciled as --stale does.
func TestForcedStopNeverClaimsUnknownCleanup(t *testing.T) {
	for _, clean := range []bool{false, true} {
		w := newWorld(t, oneRunning)
		l, key, pid := w.leaseIOS()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		args := []string{"daemon", "stop", "--json", "--timeout", "1s", "--grace", "1s"}
		if clean {
			args = append(args, "--clean")
		}
		var so stopOut
		w.json(&so, args...)
		if !so.Stopped || so.Mode != "forced" || so.Pending != nil || len(so.Warnings) == 0 {
			t.Fatalf("clean=%v: %+v", clean, so)
		}
		_, held := w.claimOf(key)
		switch {
		case !clean && (so.CleanupConfidence != "unknown" || len(so.ClaimsReleased) != 0 || len(so.ClaimsOrphaned) != 1 || !held):
			t.Fatalf("forced stop: %+v (claim held %v)", so, held)
		case clean && (so.CleanupConfidence != "partial" || len(so.ClaimsReleased) != 1 || held):
			t.Fatalf("forced stop --clean: %+v (claim held %v)", so, held)
		case clean && w.simState(l.Device.DeviceSet, l.Device.UDID) != "Shutdown":
			t.Fatal("--clean after a forced stop left the device running")
		}
	}
}
