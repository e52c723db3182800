package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 22's ownership invariant (ADR 0059), from outside: one live lease
// per device on the whole host through recoveries and restarts, and a dead
// owner's claim reclaimed by the other homes' watchers.

// ownPoll is the host watcher's interval in these tests.
const ownPoll = 200 * time.Millisecond

// ownSharedConfig is sharedRootConfig with a fast host watcher.
func ownSharedConfig(root string) string {
	return fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"pollIntervalMs":%d}},
 "cleanup":{"intervalMs":200,"idleShutdownMs":500,"idleDestroyMs":6000000},
 "drivers":{"ios":{"root":%q}}}`, ownPoll.Milliseconds(), root)
}

// ownEvent is one line of `simlock events --json`.
type ownEvent struct {
	Type    string         `json:"type"`
	LeaseID string         `json:"leaseId"`
	Reason  string         `json:"reason"`
	Data    map[string]any `json:"data"`
}

func (w *world) ownEvents(t *testing.T) []ownEvent {
	t.Helper()
	var out []ownEvent
	for _, line := range strings.Split(w.mustRun("events", "--json"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e ownEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func ownKill(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
}

func (w *world) ownReady(t *testing.T) status {
	t.Helper()
	var st status
	eventually(t, "the daemon to finish converging", 30*time.Second, func() bool {
		st = w.status()
		return st.Daemon.Health == "running"
	})
	return st
}

func ownHolds(st status, leaseID string) bool {
	for _, l := range st.Leases {
		if l.LeaseID == leaseID {
			return true
		}
	}
	return false
}

// scenarioOne sets up issue 22's scenario 1 up to the recovery: homes D and
// C share one device root and one host; D leases simulator U. recover
// takes U away from D (with D dead or hung); C then leases U with
// --device. It returns D's lease and C's.
func scenarioOne(t *testing.T, recover func(d, c *world, key string)) (d, c *world, ld, lc lease, key string) {
	shared, err := os.MkdirTemp("", "slo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	cfg := ownSharedConfig(filepath.Join(shared, "ios"))
	d = newWorld(t, cfg)
	c = newWorld(t, cfg)
	shareHost(d, c)
	c.mustRun("daemon", "start")
	d.json(&ld, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--requester", "d")
	udid := ld.Device.UDID
	if udid == "" {
		t.Fatalf("D's lease has no UDID: %+v", ld)
	}
	key = "ios:udid:" + strings.ToUpper(udid)
	recover(d, c, key)
	eventually(t, "C to lease U after the recovery", 60*time.Second, func() bool {
		r := c.run("lease", "--platform", "ios", "--device", udid, "--no-wait", "--detach", "--ttl", "10m", "--requester", "c", "--json")
		if r.code != 0 {
			return false
		}
		if err := json.Unmarshal([]byte(r.stdout), &lc); err != nil {
			t.Fatalf("C's lease %q: %v", r.stdout, err)
		}
		return true
	})
	if lc.Device.UDID != udid {
		t.Fatalf("C leased %s, want %s", lc.Device.UDID, udid)
	}
	return d, c, ld, lc, key
}

// oneHolder checks the end of scenario 1: exactly one live lease on U across
// both homes (C's), D's old lease reported lost with a reason naming the
// claim and the key, and D's exec on it refused.
func oneHolder(t *testing.T, d, c *world, ld, lc lease, key, reason string) {
	t.Helper()
	var lost *ownEvent
	eventually(t, "D's old lease to be reported lost", 30*time.Second, func() bool {
		for _, e := range d.ownEvents(t) {
			if e.Type == "lease.released" && e.LeaseID == ld.LeaseID {
				e := e
				lost = &e
				return true
			}
		}
		return false
	})
	if lost.Reason != reason {
		t.Fatalf("D's lease ended with reason %q, want %q", lost.Reason, reason)
	}
	var named bool
	for _, e := range d.ownEvents(t) {
		if e.Type == "claim.lost" && e.LeaseID == ld.LeaseID && e.Reason == reason && e.Data["deviceKey"] == key {
			named = true
		}
	}
	if !named {
		t.Fatalf("no claim.lost event names %s for lease %s", key, ld.LeaseID)
	}
	sd, sc := d.status(), c.status()
	if ownHolds(sd, ld.LeaseID) {
		t.Fatalf("D still lists its old lease: %+v", sd.Leases)
	}
	live := 0
	for _, st := range []status{sd, sc} {
		for _, l := range st.Leases {
			if strings.EqualFold(l.Device.UDID, ld.Device.UDID) {
				live++
			}
		}
	}
	if live != 1 || !ownHolds(sc, lc.LeaseID) {
		t.Fatalf("%d live leases on U across both homes (D %+v, C %+v), want C's alone", live, sd.Leases, sc.Leases)
	}
	r := d.run("exec", ld.LeaseID, "--", "simctl", "getenv", ld.Device.UDID, "HOME")
	if r.code == 0 || !strings.Contains(r.stderr, "UNKNOWN_LEASE") {
		t.Fatalf("D's exec on its lost lease: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// Scenario 1 through `--stale`: D is killed, the claim recovered, C leases
// U, and D's restarted daemon must not resume its old lease: the claim is
// C's, so the lease ends before D's readiness gate opens.
func TestScenarioOneStaleRecoveryLeavesOneHolder(t *testing.T) {
	d, c, ld, lc, key := scenarioOne(t, func(d, c *world, key string) {
		ownKill(t, d.status().Daemon.PID)
		var out struct {
			Released []struct {
				Cleared bool `json:"cleared"`
			} `json:"released"`
		}
		c.json(&out, "device", "release", "--stale", key, "--json")
		if len(out.Released) != 1 || !out.Released[0].Cleared {
			t.Fatalf("--stale: %+v", out)
		}
	})
	d.mustRun("daemon", "start")
	d.ownReady(t)
	oneHolder(t, d, c, ld, lc, key, "claim-held-by-another-home")
}

// Scenario 1 through the `--force` fallback: D's daemon is hung (SIGSTOP),
// so --force cannot reach it and clears the claim itself; C leases U; when
// D runs again its host watcher finds U's claim C's and ends its lease.
func TestScenarioOneForceRecoveryLeavesOneHolder(t *testing.T) {
	var pidD int
	d, c, ld, lc, key := scenarioOne(t, func(d, c *world, key string) {
		pidD = d.status().Daemon.PID
		// Let D write its lease onto the claim first, as in the field.
		eventually(t, "D's lease on U's claim", 10*time.Second, func() bool {
			return strings.Contains(c.mustRun("device", "status", key, "--json"), d.home)
		})
		if err := syscall.Kill(pidD, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(pidD, syscall.SIGCONT) })
		var out struct {
			Released []struct {
				Cleared bool   `json:"cleared"`
				Via     string `json:"via"`
			} `json:"released"`
		}
		c.json(&out, "device", "release", "--force", key, "--wait", "5s", "--json")
		if len(out.Released) != 1 || !out.Released[0].Cleared {
			t.Fatalf("--force: %+v", out)
		}
	})
	if err := syscall.Kill(pidD, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	oneHolder(t, d, c, ld, lc, key, "claim-held-by-another-home")
	if st := d.status(); st.Daemon.PID != pidD {
		t.Fatalf("D's daemon restarted (%d, was %d): the runtime check is what should have ended the lease", st.Daemon.PID, pidD)
	}
}

// Kill -9 a home's daemon while it holds a device and delete the home (a
// worktree removed): the other home's host watcher reclaims the dead
// owner's claim by itself, so its `lease --no-wait` at the host limit is
// granted within two watcher intervals of the reclaim, with no manual
// step; the reclaim is reported by the reclaiming daemon (claim.reclaimed).
func TestDeletedHomesClaimIsReclaimedByTheWatcher(t *testing.T) {
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":1,"pollIntervalMs":%d}}}`, ownPoll.Milliseconds())
	d := newWorld(t, cfg)
	c := newWorld(t, cfg)
	shareHost(d, c)
	c.mustRun("daemon", "start")
	var ld lease
	d.json(&ld, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--requester", "d")
	key := "ios:udid:" + strings.ToUpper(ld.Device.UDID)
	// While D lives, the host is full for C.
	// C learns of D's claim from its host watcher, a poll away; asking
	// before that would test the poll, not the limit.
	eventually(t, "C to see D's device on the host", 30*time.Second, func() bool {
		var st struct {
			Capacity struct {
				Host *struct {
					OtherHomes int `json:"otherHomes"`
				} `json:"host"`
			} `json:"capacity"`
		}
		c.json(&st, "status", "--json")
		return st.Capacity.Host != nil && st.Capacity.Host.OtherHomes >= 1
	})
	if r := c.run("lease", "--platform", "ios", "--no-wait", "--detach", "--requester", "c", "--json"); r.code == 0 ||
		!strings.Contains(r.stderr, "CAPACITY_EXHAUSTED") {
		t.Fatalf("C's lease while D holds the host's one device: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	ownKill(t, d.status().Daemon.PID)
	if err := os.RemoveAll(d.home); err != nil {
		t.Fatal(err)
	}
	var lc lease
	var took time.Duration
	start := time.Now()
	eventually(t, "C's lease --no-wait to be granted after D's home went", 60*time.Second, func() bool {
		r := c.run("lease", "--platform", "ios", "--no-wait", "--detach", "--requester", "c", "--json")
		if r.code != 0 {
			if !strings.Contains(r.stderr, "CAPACITY_EXHAUSTED") {
				t.Fatalf("C's lease: exit %d %s", r.code, r.stderr)
			}
			return false
		}
		took = time.Since(start)
		return json.Unmarshal([]byte(r.stdout), &lc) == nil
	})
	// The reclaim came from C's watcher: C's journal says what it took
	// back and why, and nobody ran a recovery command.
	var rec *ownEvent
	for _, e := range c.ownEvents(t) {
		if e.Type == "claim.reclaimed" && e.Data["deviceKey"] == key {
			e := e
			rec = &e
		}
	}
	if rec == nil {
		t.Fatalf("no claim.reclaimed for %s in C's journal", key)
	}
	// The pid is checked first, so the owner reads as dead; its device
	// set went with its home, so nothing of it can run.
	if (rec.Reason != "dead" && rec.Reason != "home-gone") || rec.Data["ownerHome"] != d.home || rec.Data["device"] != "absent" {
		t.Fatalf("claim.reclaimed %+v", rec)
	}
	if _, err := os.Stat(d.home); !os.IsNotExist(err) {
		t.Fatalf("the reclaim brought the deleted home back: %v", err)
	}
	t.Logf("granted %s after the home was deleted (watcher every %s)", took.Round(time.Millisecond), ownPoll)
	// device status says what was reclaimed, from whom and why, with no
	// claim of D's left.
	var ds struct {
		Claims []struct {
			OwnerHome string `json:"ownerHome"`
		} `json:"claims"`
		Reclaimed []struct {
			DeviceKey, OwnerHome, Reason, Action, ByHome, Summary string
		} `json:"reclaimed"`
	}
	c.json(&ds, "device", "status", "--json")
	for _, cl := range ds.Claims {
		if cl.OwnerHome == d.home {
			t.Fatalf("D's claim survived the reclaim: %s", c.mustRun("device", "status"))
		}
	}
	if len(ds.Reclaimed) != 1 || ds.Reclaimed[0].DeviceKey != key || ds.Reclaimed[0].OwnerHome != d.home ||
		ds.Reclaimed[0].ByHome != c.home || ds.Reclaimed[0].Action != "cleared" || ds.Reclaimed[0].Summary == "" {
		t.Fatalf("device status reclaimed %+v", ds.Reclaimed)
	}
	if out := c.mustRun("device", "status"); !strings.Contains(out, "recently reclaimed") || !strings.Contains(out, key) {
		t.Fatalf("device status:\n%s", out)
	}
}

// claimOwner is the home that claims key now ("" when nobody does).
func (w *world) claimOwner(t *testing.T, key string) string {
	t.Helper()
	var ds struct {
		Claims []struct {
			DeviceKey string `json:"deviceKey"`
			OwnerHome string `json:"ownerHome"`
		} `json:"claims"`
	}
	w.json(&ds, "device", "status", "--json")
	for _, c := range ds.Claims {
		if c.DeviceKey == key {
			return c.OwnerHome
		}
	}
	return ""
}

// A home that is only restarting keeps its running device: another home's
// watcher leaves a dead owner's running device alone for the grace window
// (capacity.host.orphanGraceMs, 2 minutes by default), and the restarted
// daemon resumes its lease with its deadline. A dead owner's claim of a
// device that no longer runs is cleared at once (within about one watcher
// interval), and the home that comes back after that finds its lease lost.
func TestARestartingHomeKeepsItsDeviceAndAStoppedOrphanIsCleared(t *testing.T) {
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":4,"pollIntervalMs":%d}}}`, ownPoll.Milliseconds())
	d := newWorld(t, cfg)
	c := newWorld(t, cfg)
	shareHost(d, c)
	c.mustRun("daemon", "start")
	var ld lease
	d.json(&ld, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--requester", "d")
	key := "ios:udid:" + strings.ToUpper(ld.Device.UDID)
	ownKill(t, d.status().Daemon.PID)
	// Several watcher passes of C see D's claim orphaned with its device
	// running: inside the grace window it stays D's.
	time.Sleep(8 * ownPoll)
	if got := c.claimOwner(t, key); got != d.home {
		t.Fatalf("within the grace window the claim is %q's, want D's", got)
	}
	d.mustRun("daemon", "start")
	st := d.ownReady(t)
	if len(st.Leases) != 1 || st.Leases[0].LeaseID != ld.LeaseID || !st.Leases[0].ExpiresAt.Equal(ld.ExpiresAt) {
		t.Fatalf("after a kill -9 and restart D's leases are %+v, want %s expiring %s", st.Leases, ld.LeaseID, ld.ExpiresAt)
	}

	// D dies again, and its device stops with it: C clears the claim.
	ownKill(t, st.Daemon.PID)
	d.xcrun("simctl", "--set", ld.Device.DeviceSet, "shutdown", ld.Device.UDID)
	stopped := time.Now()
	eventually(t, "C to clear the dead owner's claim of a stopped device", 30*time.Second, func() bool {
		return c.claimOwner(t, key) == ""
	})
	t.Logf("claim of a stopped device cleared %s after the shutdown (watcher every %s)", time.Since(stopped).Round(time.Millisecond), ownPoll)
	var rec *ownEvent
	for _, e := range c.ownEvents(t) {
		if e.Type == "claim.reclaimed" && e.Data["deviceKey"] == key {
			e := e
			rec = &e
		}
	}
	if rec == nil || rec.Data["action"] != "cleared" || rec.Data["device"] != "stopped" || rec.Reason != "dead" {
		t.Fatalf("claim.reclaimed %+v", rec)
	}
	// D comes back: the claim behind its lease is gone, so the lease ends
	// before D serves anyone.
	d.mustRun("daemon", "start")
	d.ownReady(t)
	if st := d.status(); ownHolds(st, ld.LeaseID) {
		t.Fatalf("D resumed a lease whose claim was reclaimed: %+v", st.Leases)
	}
	var reason string
	for _, e := range d.ownEvents(t) {
		if e.Type == "lease.released" && e.LeaseID == ld.LeaseID {
			reason = e.Reason
		}
	}
	if reason != "claim-released-by-recovery" {
		t.Fatalf("D's lease ended with %q", reason)
	}
}

// Past the grace window a dead owner's running device is shut down with
// the owner's own roots (its device set) and only then is its claim
// cleared: no device is left running without a claim.
func TestADeadOwnersRunningDeviceIsShutDownAfterTheGrace(t *testing.T) {
	dcfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":4,"pollIntervalMs":%d}}}`, ownPoll.Milliseconds())
	ccfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":4,"pollIntervalMs":%d,"orphanGraceMs":1000}}}`, ownPoll.Milliseconds())
	d := newWorld(t, dcfg)
	c := newWorld(t, ccfg)
	shareHost(d, c)
	c.mustRun("daemon", "start")
	var ld lease
	d.json(&ld, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--requester", "d")
	key := "ios:udid:" + strings.ToUpper(ld.Device.UDID)
	pid := d.status().Daemon.PID
	killed := time.Now()
	ownKill(t, pid)
	eventually(t, "C to reclaim the dead owner's running device", 60*time.Second, func() bool {
		return c.claimOwner(t, key) == ""
	})
	if took := time.Since(killed); took < time.Second {
		t.Fatalf("reclaimed %s after the kill, inside the 1s grace window", took)
	}
	var rec *ownEvent
	for _, e := range c.ownEvents(t) {
		if e.Type == "claim.reclaimed" && e.Data["deviceKey"] == key {
			e := e
			rec = &e
		}
	}
	if rec == nil || rec.Data["action"] != "shut-down" || rec.Data["device"] != "running" {
		t.Fatalf("claim.reclaimed %+v", rec)
	}
	list := d.xcrun("simctl", "--set", ld.Device.DeviceSet, "list", "devices", "-j")
	var l struct {
		Devices map[string][]struct{ UDID, State string }
	}
	if err := json.Unmarshal([]byte(list), &l); err != nil {
		t.Fatalf("simctl list: %v\n%s", err, list)
	}
	found := false
	for _, ds := range l.Devices {
		for _, dv := range ds {
			if strings.EqualFold(dv.UDID, ld.Device.UDID) {
				found = true
				if dv.State != "Shutdown" {
					t.Fatalf("the reclaimed device is %s, want Shutdown", dv.State)
				}
			}
		}
	}
	if !found {
		t.Fatalf("the device is gone from its set; a reclaim shuts down, never deletes:\n%s", list)
	}
}

// An emulator its home's adb server no longer knows (the server was
// restarted, or the emulator started just before its daemon died) lists as
// stopped through the owner's roots while its process runs. The reclaim
// must not take that listing as proof: it finds the emulator by its
// process, waits out the grace as for any running device of a live home,
// ends it, and only then clears the claim. Before the fix the claim was
// cleared at once and the emulator ran on unclaimed, over the host limit
// (found by the multi-home drill).
func TestAnEmulatorItsAdbServerForgotIsStillShutDownBeforeItsClaimIsCleared(t *testing.T) {
	dcfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":4,"pollIntervalMs":%d}}}`, ownPoll.Milliseconds())
	ccfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":4,"pollIntervalMs":%d,"orphanGraceMs":1000}}}`, ownPoll.Milliseconds())
	d := newWorld(t, dcfg)
	c := newWorld(t, ccfg)
	shareHost(d, c)
	var ld lease
	d.json(&ld, "lease", "--platform", "android", "--model", "pixel_6", "--detach", "--ttl", "10m", "--requester", "d")
	var dev struct {
		Device struct{ Env map[string]string }
	}
	d.json(&dev, "lease", "renew", ld.LeaseID)
	port := dev.Device.Env["ANDROID_ADB_SERVER_PORT"]
	if port == "" {
		t.Fatalf("the grant names no adb server port: %+v", dev)
	}
	var ds struct {
		Claims []struct {
			DeviceKey string `json:"deviceKey"`
		} `json:"claims"`
	}
	d.json(&ds, "device", "status", "--json")
	key := ""
	for _, cl := range ds.Claims {
		if strings.HasPrefix(cl.DeviceKey, "android:avd:") {
			key = cl.DeviceKey
		}
	}
	if key == "" {
		t.Fatal("no Android claim in the host registry")
	}
	ownKill(t, d.status().Daemon.PID)
	// The home's adb server forgets its emulator, as a restarted one does
	// (the simulated adb directly: simlock's passthrough refuses this).
	kill := exec.Command(filepath.Join(d.sdk, "adb"), "-P", port, "kill-server")
	kill.Env = d.env
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("adb kill-server: %v\n%s", err, out)
	}
	if d.emulators() != 1 {
		t.Fatal("the emulator should still run after its daemon's kill")
	}
	c.mustRun("daemon", "start")
	eventually(t, "C to reclaim the dead owner's emulator", 60*time.Second, func() bool {
		return c.claimOwner(t, key) == ""
	})
	if n := d.emulators(); n != 0 {
		t.Fatalf("the claim was cleared with %d emulator(s) still running", n)
	}
	var rec *ownEvent
	for _, e := range c.ownEvents(t) {
		if e.Type == "claim.reclaimed" && e.Data["deviceKey"] == key {
			e := e
			rec = &e
		}
	}
	if rec == nil || rec.Data["action"] != "shut-down" || rec.Data["device"] != "running" {
		t.Fatalf("claim.reclaimed %+v", rec)
	}
}
