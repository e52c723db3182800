package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

const slotWorldConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":8}}}`

func slotConfig(ns, inc, model string) contract.SlotLaunchConfig {
	return contract.SlotLaunchConfig{ContractVersion: 1, ManagedHostScope: "host-1", RunnerNamespace: ns, RunnerIncarnation: inc,
		LocalSlotCapacity: 1, Requests: []contract.SlotRequest{{SlotIndex: 0, Role: "main", Platform: "ios",
			RequestedSpec: contract.SlotSpec{Runtime: "com.apple.CoreSimulator.SimRuntime.iOS-18-0", DeviceType: model}}}}
}

func (w *world) dial(t *testing.T, principal string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), client.Options{Socket: filepath.Join(w.home, "simlock.sock"), Principal: principal, Name: "e2e-slots"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var tokenSeq int

func acquireSlot(t *testing.T, c *client.Client, cfg contract.SlotLaunchConfig) (contract.ManagedSlotsResult, string) {
	t.Helper()
	tokenSeq++
	tok := fmt.Sprintf("proxy-%d-%d", os.Getpid(), tokenSeq)
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(60*time.Second))
	defer cancel()
	res, err := client.Do(ctx, c, contract.SlotAcquire, contract.SlotAcquireIn{Config: cfg, OwnerToken: tok})
	if err != nil {
		t.Fatalf("slot.acquire: %v", err)
	}
	return res, tok
}

func mustReady(t *testing.T, res contract.ManagedSlotsResult, disposition string) contract.SlotResult {
	t.Helper()
	if res.Outcome != contract.SlotOutcomeReady || len(res.Slots) != 1 {
		b, _ := json.Marshal(res)
		t.Fatalf("acquisition not ready: %s", b)
	}
	s := res.Slots[0]
	if s.Disposition != disposition || s.Device == nil || s.LeaseID == "" {
		b, _ := json.Marshal(s)
		t.Fatalf("want disposition %s, got %s", disposition, b)
	}
	return s
}

func releaseSlot(t *testing.T, c *client.Client, s contract.SlotResult, tok string) {
	t.Helper()
	out, err := client.Do(context.Background(), c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: tok})
	if err != nil || out.Outcome != "reusable_for_this_slot" {
		t.Fatalf("slot.release: %+v %v", out, err)
	}
}

func failureCode(res contract.ManagedSlotsResult) contract.Code {
	if res.Failure == nil {
		return ""
	}
	return res.Failure.Code
}

// The reference's scenario through the socket client: create, release
// keeps the assignment, reuse with a fresh lease, replace on a spec change
// (delete verified before create in the SDK's command log), a new
// incarnation adopts, and the old one is SCOPE_INVALIDATED for good. A
// plain lease never gets the slot's device, and exec or release on the
// slot's lease by anyone else is DEVICE_ASSIGNED_TO_MANAGED_SLOT.
func TestManagedSlotLifecycleOnTheSimulatedSDK(t *testing.T) {
	w := newWorld(t, slotWorldConfig)
	log := filepath.Join(w.home, "commands.log")
	w.setEnv("SIMLOCK_SIMSDK_COMMAND_LOG", log)
	w.mustRun("daemon", "start")
	runner := w.dial(t, "runner")
	plain := w.dial(t, "plain")
	ctx := context.Background()

	caps, err := client.Do(ctx, runner, contract.CapabilitiesGet, contract.CapabilitiesGetIn{})
	if err != nil || len(caps.Contracts) == 0 || caps.Contracts[0] != contract.ContractManagedSlots {
		t.Fatalf("capabilities: %+v %v", caps, err)
	}

	res, tok := acquireSlot(t, runner, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s1 := mustReady(t, res, contract.SlotCreated)
	if s1.AssignmentGeneration < 1 || res.Scope.ScopeKey == nil || len(*res.Scope.ScopeKey) != 64 {
		t.Fatalf("first acquisition: %+v", res)
	}
	devD := s1.Device.StableID
	if want := fmt.Sprintf("simlock-slot-%.8s-0-g", *res.Scope.ScopeKey); !strings.HasPrefix(s1.Device.Name, want) {
		t.Fatalf("slot device named %q, want %s<n>-<suffix>", s1.Device.Name, want)
	}

	// A plain lease of the same spec gets another device.
	l, err := plain.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 15", OSVersion: "18.0", TTLMs: 60000, NoWait: false, TimeoutMs: 30000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.DeviceID == s1.Device.DeviceID {
		t.Fatal("a plain lease was granted the slot's device")
	}
	// Exec and release on the slot's lease by anyone but the execution are
	// refused: another principal already by lease ownership, the same
	// principal under another requester and the admin CLI as assigned.
	if _, err := plain.Exec(ctx, contract.DeviceExecIn{LeaseID: s1.LeaseID, Tool: "simctl", Args: []string{"getenv", devD, "HOME"}}, nil); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("exec on the slot's lease by another principal: %v", err)
	}
	if _, err := runner.Exec(ctx, contract.DeviceExecIn{LeaseID: s1.LeaseID, RequesterID: "runner/other", Tool: "simctl", Args: []string{"getenv", devD, "HOME"}}, nil); !client.IsCode(err, contract.CodeDeviceAssignedToSlot) {
		t.Fatalf("exec on the slot's lease under another requester: %v", err)
	}
	for _, args := range [][]string{{"exec", s1.LeaseID, "--", "simctl", "getenv", devD, "HOME"}, {"release", s1.LeaseID}, {"simctl", "shutdown", devD}} {
		if r := w.run(args...); r.code == 0 || !strings.Contains(r.stderr, string(contract.CodeDeviceAssignedToSlot)) {
			t.Fatalf("simlock %v on the slot's device: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if _, err := client.Do(ctx, plain, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	// release --everyone leaves the slot's lease alone.
	w.mustRun("release", "--everyone", "--yes")
	if _, err := client.Do(ctx, runner, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s1.LeaseID, OwnerToken: tok}); err != nil {
		t.Fatalf("the slot's lease after release --everyone: %v", err)
	}
	// The execution itself may exec on its device.
	if _, err := runner.Exec(ctx, contract.DeviceExecIn{LeaseID: s1.LeaseID, RequesterID: s1.RequesterID, Tool: "simctl", Args: []string{"getenv", devD, "HOME"}}, nil); err != nil {
		t.Fatalf("exec by the slot's own execution: %v", err)
	}
	// A second execution of the slot while this one lives is SLOT_IN_USE.
	dup, _ := acquireSlot(t, runner, slotConfig("runner-A", "boot-1", "iPhone 15"))
	if failureCode(dup) != contract.CodeSlotInUse || !dup.Failure.Retryable {
		t.Fatalf("duplicate execution: %+v", dup.Failure)
	}
	releaseSlot(t, runner, s1, tok)

	// Released, the assignment stays; the device stays out of the pool.
	var list contract.SlotListOut
	w.json(&list, "slot", "list", "--json")
	if len(list.Assignments) != 1 || list.Assignments[0].Device == nil || list.Assignments[0].Device.StableID != devD || list.Assignments[0].LeaseID != "" {
		t.Fatalf("after release: %+v", list)
	}
	l2, err := plain.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 15", OSVersion: "18.0", TTLMs: 60000, TimeoutMs: 30000}, nil)
	if err != nil || l2.DeviceID == s1.Device.DeviceID {
		t.Fatalf("plain lease after the slot's release: %v %v", l2.DeviceID, err)
	}
	if _, err := client.Do(ctx, plain, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l2.LeaseID}); err != nil {
		t.Fatal(err)
	}
	// Naming the idle slot device in a plain lease request is refused at once.
	if r := w.run("lease", "--device", devD, "--no-wait", "--json"); r.code == 0 || !strings.Contains(r.stderr, string(contract.CodeDeviceAssignedToSlot)) {
		t.Fatalf("plain lease of the slot's device: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	// device.release of the idle slot device is refused too.
	if r := w.run("device", "release", "ios:udid:"+devD); r.code == 0 || !strings.Contains(r.stderr+r.stdout, string(contract.CodeDeviceAssignedToSlot)) {
		t.Fatalf("device release of a slot device: exit %d %s %s", r.code, r.stdout, r.stderr)
	}

	// The same slot reuses the device with a fresh lease.
	res, tok = acquireSlot(t, runner, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s2 := mustReady(t, res, contract.SlotReused)
	if s2.Device.StableID != devD || s2.LeaseID == s1.LeaseID {
		t.Fatalf("reuse: %+v", s2)
	}
	// Another runner's slot 0 is another identity with its own device.
	resB, tokB := acquireSlot(t, runner, slotConfig("runner-B", "boot-1", "iPhone 15"))
	sB := mustReady(t, resB, contract.SlotCreated)
	if sB.Device.StableID == devD {
		t.Fatal("runner B's slot 0 got runner A's device")
	}
	releaseSlot(t, runner, sB, tokB)
	releaseSlot(t, runner, s2, tok)

	// A spec change replaces: the old device is deleted (and gone) before
	// the new one is created.
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, tok = acquireSlot(t, runner, slotConfig("runner-A", "boot-1", "iPhone 16"))
	s3 := mustReady(t, res, contract.SlotReplaced)
	if s3.Device.StableID == devD || s3.AssignmentGeneration <= s2.AssignmentGeneration {
		t.Fatalf("replace: %+v", s3)
	}
	lines := strings.Split(readFile(log), "\n")
	del, create := -1, -1
	for i, ln := range lines {
		if strings.Contains(ln, "simctl") && strings.Contains(ln, " delete ") && strings.Contains(ln, devD) && del < 0 {
			del = i
		}
		if strings.Contains(ln, "simctl") && strings.Contains(ln, " create ") && create < 0 {
			create = i
		}
	}
	if del < 0 || create < 0 || del > create {
		t.Fatalf("command log (delete at %d, create at %d):\n%s", del, create, readFile(log))
	}
	releaseSlot(t, runner, s3, tok)

	// A new incarnation retires boot-1 and adopts its device.
	res, tok = acquireSlot(t, runner, slotConfig("runner-A", "boot-2", "iPhone 16"))
	s4 := mustReady(t, res, contract.SlotAdopted)
	if s4.Device.StableID != s3.Device.StableID {
		t.Fatalf("adopted %s, want %s", s4.Device.StableID, s3.Device.StableID)
	}
	late, _ := acquireSlot(t, runner, slotConfig("runner-A", "boot-1", "iPhone 16"))
	if failureCode(late) != contract.CodeScopeInvalidated || late.Failure.Retryable {
		t.Fatalf("late proxy on the old incarnation: %+v", late.Failure)
	}
	releaseSlot(t, runner, s4, tok)
	// reset-scope of the retired incarnation is idempotent.
	r := w.run("slot", "reset-scope", "--runner-namespace", "runner-A", "--incarnation", "boot-1", "--wait-ms", "0")
	if r.code != 0 || !strings.Contains(r.stdout, `"invalidated"`) {
		t.Fatalf("reset-scope: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := w.run("slot", "reset-scope", "--runner-namespace", "runner-Z", "--incarnation", "boot-1"); r.code != 1 {
		t.Fatalf("reset-scope of no scope: exit %d %s", r.code, r.stdout)
	}
}

// Two daemons (two homes) on one host registry and one device root: a slot
// held through one is SLOT_IN_USE through the other.
func TestASlotHeldThroughOneDaemonIsInUseThroughAnother(t *testing.T) {
	shared, err := os.MkdirTemp("", "sls-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}},"drivers":{"ios":{"root":%q}}}`, filepath.Join(shared, "ios"))
	a := newWorld(t, cfg)
	b := newWorld(t, cfg)
	for _, kv := range a.env {
		for _, k := range []string{"SIMLOCK_HOST_DIR=", "SIMLOCK_SIMSDK_HOME="} {
			if strings.HasPrefix(kv, k) {
				b.setEnv(strings.TrimSuffix(k, "="), strings.TrimPrefix(kv, k))
			}
		}
	}
	a.mustRun("daemon", "start")
	b.mustRun("daemon", "start")
	ca, cb := a.dial(t, "runner"), b.dial(t, "runner")
	res, tok := acquireSlot(t, ca, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s := mustReady(t, res, contract.SlotCreated)
	other, _ := acquireSlot(t, cb, slotConfig("runner-A", "boot-1", "iPhone 15"))
	if failureCode(other) != contract.CodeSlotInUse || !other.Failure.Retryable {
		t.Fatalf("the same slot through the other daemon: %+v", other.Failure)
	}
	// Both daemons list the same assignment.
	var la, lb contract.SlotListOut
	a.json(&la, "slot", "list", "--json")
	b.json(&lb, "slot", "list", "--json")
	if len(la.Assignments) != 1 || len(lb.Assignments) != 1 || la.Assignments[0].AssignmentGeneration != lb.Assignments[0].AssignmentGeneration {
		t.Fatalf("the homes disagree: %+v / %+v", la, lb)
	}
	releaseSlot(t, ca, s, tok)
}

// kill -9 of the daemon in the middle of a replacement, then a restart:
// the retry converges to exactly one device for the slot, and nothing
// leaks (the simulated SDK and doctor agree).
func TestKill9MidReplacementConvergesToOneDevice(t *testing.T) {
	w := newWorld(t, slotWorldConfig)
	log := filepath.Join(w.home, "commands.log")
	w.setEnv("SIMLOCK_SIMSDK_COMMAND_LOG", log)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	res, tok := acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s1 := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, c, s1, tok)
	c.Close()
	w.mustRun("daemon", "stop")

	// Slow the SDK so the replacement's first boot takes seconds.
	w.setEnv("SIMLOCK_SIMSDK_SPEED", "0.2")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.mustRun("daemon", "start")
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(w.home, "daemon.pid"))))
	c = w.dial(t, "runner")
	go func() {
		tokenSeq++
		_, _ = client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotConfig("runner-A", "boot-1", "iPhone 16"), OwnerToken: "doomed"})
	}()
	eventually(t, "the replacement's create", 20*time.Second, func() bool {
		l := readFile(log)
		return strings.Contains(l, " delete ") && strings.Contains(l, " create ")
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon's death", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	c.Close()

	w.setEnv("SIMLOCK_SIMSDK_SPEED", "0")
	w.mustRun("daemon", "start")
	c = w.dial(t, "runner")
	res, tok = acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 16"))
	s2 := mustReady(t, res, contract.SlotReplaced)
	releaseSlot(t, c, s2, tok)
	// The retry found the interrupted replacement in the journal.
	journaled := false
	for _, d := range s2.Decisions {
		journaled = journaled || d.Step == "journal"
	}
	if !journaled {
		b, _ := json.Marshal(s2.Decisions)
		t.Fatalf("the retry did not converge from the journal: %s", b)
	}
	t.Logf("decisions after the restart: %+v", s2.Decisions)

	var list contract.SlotListOut
	w.json(&list, "slot", "list", "--json")
	if len(list.Assignments) != 1 || list.Assignments[0].Device.StableID != s2.Device.StableID {
		t.Fatalf("assignments after convergence: %+v", list)
	}
	// The SDK runs exactly the slot's device, the daemon records only it,
	// and doctor finds nothing astray.
	w.goldensSettled(t)
	ps := w.mustRun("simsdk", "ps")
	running := 0
	for _, ln := range strings.Split(ps, "\n") {
		if strings.HasPrefix(ln, "ios") {
			running++
		}
	}
	if running != 1 || !strings.Contains(ps, s2.Device.StableID) {
		t.Fatalf("simsdk ps after convergence (%d running, want only %s):\n%s", running, s2.Device.StableID, ps)
	}
	var st status
	w.json(&st, "status", "--json")
	if len(st.Devices) != 1 || st.Devices[0].UDID != s2.Device.StableID {
		t.Fatalf("the daemon's devices after convergence: %+v", st.Devices)
	}
	doc := w.run("doctor", "--json")
	if doc.code != 0 || strings.Contains(doc.stdout, "orphan") {
		t.Fatalf("doctor after convergence: exit %d\n%s%s", doc.code, doc.stdout, doc.stderr)
	}
}

// A daemon restart keeps a live execution: its lease is durable, the new
// daemon re-owns the registry's record, and the execution's heartbeat and
// release work against it.
func TestASlotExecutionSurvivesADaemonRestart(t *testing.T) {
	w := newWorld(t, slotWorldConfig)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	res, tok := acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s := mustReady(t, res, contract.SlotCreated)
	c.Close()
	w.mustRun("daemon", "stop")
	w.mustRun("daemon", "start")
	c = w.dial(t, "runner")
	hb, err := client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: tok})
	if err != nil || hb.ExpiresAtMs == 0 {
		t.Fatalf("heartbeat after the restart: %+v %v", hb, err)
	}
	// Still the slot's: a second execution is refused.
	dup, _ := acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	if failureCode(dup) != contract.CodeSlotInUse {
		t.Fatalf("second execution after the restart: %+v", dup.Failure)
	}
	releaseSlot(t, c, s, tok)
	// Released through the restarted daemon, the slot reuses its device.
	res, tok = acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s2 := mustReady(t, res, contract.SlotReused)
	if s2.Device.StableID != s.Device.StableID {
		t.Fatalf("after the restart the slot got %s, want %s", s2.Device.StableID, s.Device.StableID)
	}
	releaseSlot(t, c, s2, tok)
	// A call on the ended execution is terminal.
	_, err = client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s2.LeaseID, OwnerToken: tok})
	if !client.IsCode(err, contract.CodeExecutionEnded) {
		t.Fatalf("heartbeat of a released execution: %v", err)
	}
}

// A new incarnation waits for the old one's live execution
// (SCOPE_TRANSITION_PENDING), reset-scope reports the live owner and exits
// 2, and once the execution ends the new incarnation adopts the device.
func TestScopeTransitionWaitsForTheOldIncarnation(t *testing.T) {
	w := newWorld(t, slotWorldConfig)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	res, tok := acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s := mustReady(t, res, contract.SlotCreated)

	r := w.run("slot", "reset-scope", "--runner-namespace", "runner-A", "--incarnation", "boot-1", "--wait-ms", "0", "--force")
	if r.code != 2 || !strings.Contains(r.stderr, "live_owner") || !strings.Contains(r.stdout, `"waiting"`) {
		t.Fatalf("reset-scope with a live owner: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pending, _ := acquireSlot(t, c, slotConfig("runner-A", "boot-2", "iPhone 15"))
	if failureCode(pending) != contract.CodeScopeTransitionPending || !pending.Failure.Retryable {
		t.Fatalf("new incarnation while the old one runs: %+v", pending.Failure)
	}
	// The live execution keeps working meanwhile.
	if _, err := client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: tok}); err != nil {
		t.Fatalf("heartbeat of the old incarnation's execution: %v", err)
	}
	releaseSlot(t, c, s, tok)
	res, tok = acquireSlot(t, c, slotConfig("runner-A", "boot-2", "iPhone 15"))
	s2 := mustReady(t, res, contract.SlotAdopted)
	if s2.Device.StableID != s.Device.StableID {
		t.Fatalf("adopted %s, want %s", s2.Device.StableID, s.Device.StableID)
	}
	releaseSlot(t, c, s2, tok)
}
