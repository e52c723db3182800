package e2e

// Managed device slots, issue 23: the deviations of the slots slice, each
// proved on the real binary and the simulated SDK.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// Reference, "Concepts": entering replacing consumes a generation, and a
// replacement is fenced for deletion before its empty binding. A daemon
// killed in the middle of a replace leaves the slot, as `slot list` shows
// it after the restart, replacing at the fenced generation (the journal
// still holds the step), not ready with the device the step deleted.
func TestConfSlotsAnInterruptedReplaceListsReplacing(t *testing.T) {
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

	// Slow the SDK so the replacement's create takes seconds.
	w.setEnv("SIMLOCK_SIMSDK_SPEED", "0.2")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.mustRun("daemon", "start")
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(w.home, "daemon.pid"))))
	c = w.dial(t, "runner")
	go func() {
		_, _ = client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotConfig("runner-A", "boot-1", "iPhone 16"), OwnerToken: "doomed"})
	}()
	eventually(t, "the replacement's delete and create", 20*time.Second, func() bool {
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

	var list contract.SlotListOut
	w.json(&list, "slot", "list", "--json")
	if len(list.Assignments) != 1 {
		t.Fatalf("assignments: %+v", list)
	}
	a := list.Assignments[0]
	if a.State != "replacing" || a.AssignmentGeneration <= s1.AssignmentGeneration || a.LeaseID != "" {
		t.Fatalf("after an interrupted replace the slot lists %q at generation %d (bound at %d), lease %q; want replacing past it",
			a.State, a.AssignmentGeneration, s1.AssignmentGeneration, a.LeaseID)
	}
	// The retry converges, and the slot is ready again.
	c = w.dial(t, "runner")
	res, tok = acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 16"))
	s2 := mustReady(t, res, contract.SlotReplaced)
	releaseSlot(t, c, s2, tok)
	w.json(&list, "slot", "list", "--json")
	if len(list.Assignments) != 1 || list.Assignments[0].State != "ready" {
		t.Fatalf("after the retry: %+v", list)
	}
}

// Reference, "End-to-end example": the malformed runtime "android-36"
// served MCP "in under a second with outcome failed, spec_unsupported,
// zero tools" and no AVD created. The daemon judges the spec's form
// before it admits the scope, so nothing runs or is written for it.
func TestConfSlotsAMalformedAndroidRuntimeIsSpecUnsupportedAtOnce(t *testing.T) {
	w := newWorld(t, slotsConfig)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	cfg := `{"contractVersion":1,"managedHostScope":"host-1","runnerNamespace":"runner-A","runnerIncarnation":"boot-1",` +
		`"localSlotCapacity":1,"preparationTimeoutMs":60000,"requests":[{"slotIndex":0,"role":"main","platform":"android",` +
		`"requestedSpec":{"runtime":"android-36","deviceType":"pixel_6"}}]}`
	p := w.slotProxy(t, cfg)
	t.Logf("android-36: initialize answered in %s with %s", p.initTook, p.res.failureCode())
	if p.initTook >= time.Second {
		t.Fatalf("initialize took %s, want under 1 s", p.initTook)
	}
	if p.res.Outcome != "failed" || p.res.failureCode() != "SPEC_UNSUPPORTED" {
		t.Fatalf("result %+v (%s)", p.res, p.res.failureCode())
	}
	tools, err := p.cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 0 {
		t.Fatalf("tools %v %v, want none", tools, err)
	}
	if code, _ := p.refusal("list_devices", map[string]any{}); code != "MANAGED_SLOT_ACQUISITION_FAILED" {
		t.Fatalf("call: %s", code)
	}
	for _, l := range w.commandLog(logPath) {
		if strings.HasPrefix(l, "avdmanager") && strings.Contains(l, " create ") {
			t.Fatalf("an AVD was created: %s", l)
		}
	}
	if _, _, ok := w.slotAssignment("runner-A", "boot-1", 0); ok {
		t.Fatal("a malformed spec left an assignment")
	}
}

// Reference, "Results and failure": scopeKey is "null if it failed before
// the scope resolved", so a failure after the daemon admitted the scope
// names it. Here the slot's device never finishes booting (the simulated
// SDK's boot-hang): first the acquisition's deadline passes
// (PREPARATION_TIMEOUT), then the daemon is killed mid-acquisition
// (CONNECTION_LOST); both results carry the scope's key.
func TestConfSlotsAFailureAfterTheScopeResolvedNamesItsKey(t *testing.T) {
	w := newWorld(t, slotsConfig)
	w.setEnv("SIMLOCK_SIMSDK_FAULTS", "boot-hang")
	w.mustRun("daemon", "start")
	want := contract.ScopeKey("host-1", "runner-A", "boot-1")
	short := strings.Replace(slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"), `"preparationTimeoutMs":60000`, `"preparationTimeoutMs":3000`, 1)

	p := w.slotProxy(t, short)
	if p.res.Outcome != "failed" || p.res.failureCode() != "PREPARATION_TIMEOUT" {
		t.Fatalf("a hanging boot: %+v (%s)", p.res, p.res.failureCode())
	}
	if p.res.Scope.ScopeKey == nil || *p.res.Scope.ScopeKey != want {
		t.Fatalf("PREPARATION_TIMEOUT after the scope resolved has scopeKey %v, want %s", p.res.Scope.ScopeKey, want)
	}
	p.end()

	pid := w.status().Daemon.PID
	want = contract.ScopeKey("host-1", "runner-B", "boot-1")
	long := slotLaunchJSON("runner-B", "boot-1", 0, "iPhone 15")
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		// The acquisition has claimed its slot (so its scope is
		// admitted) before the daemon dies.
		deadline := time.Now().Add(testhost.Scale(30 * time.Second))
		for time.Now().Before(deadline) {
			var l slotList
			if r := w.run("slot", "list", "--json"); r.code == 0 && json.Unmarshal([]byte(r.stdout), &l) == nil {
				for _, a := range l.Assignments {
					if a.RunnerNamespace == "runner-B" {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						return
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	q := w.slotProxy(t, long)
	if q.res.Outcome != "failed" || q.res.failureCode() != "CONNECTION_LOST" {
		t.Fatalf("a daemon killed mid-acquisition: %+v (%s)", q.res, q.res.failureCode())
	}
	<-killed
	if q.res.Scope.ScopeKey == nil || *q.res.Scope.ScopeKey != want {
		t.Fatalf("CONNECTION_LOST after the scope resolved has scopeKey %v, want %s", q.res.Scope.ScopeKey, want)
	}
}

// Reference, "Lifecycle", item 3: once the execution ends, every managed
// answer and the resource report "the daemon's release reason, or
// session-not-found when none was named". A proxy frozen (SIGSTOP) past
// the heartbeat TTL has its lease ended by the daemon for expiry; once it
// runs again, the resource and a tool call say expired.
func TestConfSlotsTheProxyReportsTheDaemonsEndReason(t *testing.T) {
	w := newWorld(t, slotsConfig)
	w.mustRun("daemon", "start")
	p := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if p.res.Outcome != "ready" {
		t.Fatalf("acquisition %+v (%s)", p.res, p.res.failureCode())
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon to end the frozen execution's lease", 30*time.Second, func() bool {
		_, l, ok := w.slotAssignment("runner-A", "boot-1", 0)
		return ok && l == ""
	})
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var reason any
	eventually(t, "the proxy to learn its execution ended", 20*time.Second, func() bool {
		r, err := p.cs.ReadResource(context.Background(), &mcpsdk.ReadResourceParams{URI: "simlock://managed-slots"})
		if err != nil || len(r.Contents) == 0 {
			return false
		}
		var res struct {
			Slots []struct {
				ExecutionEnded *struct {
					Reason string `json:"reason"`
				} `json:"executionEnded"`
			} `json:"slots"`
		}
		if json.Unmarshal([]byte(r.Contents[0].Text), &res) != nil || len(res.Slots) == 0 || res.Slots[0].ExecutionEnded == nil {
			return false
		}
		reason = res.Slots[0].ExecutionEnded.Reason
		return true
	})
	if reason != "expired" {
		t.Fatalf("the resource says the execution ended for %v; the daemon ended its lease for expired", reason)
	}
	text, isErr := p.call("lease_status", map[string]any{}, nil)
	if !isErr || !strings.Contains(text, "MANAGED_EXECUTION_ENDED") || !strings.Contains(text, `"reason":"expired"`) {
		t.Fatalf("a call after the expiry: %s", text)
	}
}

// Reference, "Error codes": every slot failure "carries retryable and a
// nextAction", and they must agree with its message. Home A made the
// slot's device in its own root; acquired through home B's daemon (same
// host registry, another device root) the slot is refused for good with
// DEVICE_OUTSIDE_MANAGED_SLOTS, whose message and next step both send the
// runner to A's daemon (ADR 0069), and a retry through A reuses the device.
func TestConfSlotsADeviceInAnotherHomeSendsTheRunnerThere(t *testing.T) {
	a := newWorld(t, slotWorldConfig)
	b := newWorld(t, slotWorldConfig)
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
	s1 := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, ca, s1, tok)

	other, _ := acquireSlot(t, cb, slotConfig("runner-A", "boot-1", "iPhone 15"))
	f := other.Failure
	if f == nil || f.Code != contract.CodeDeviceOutsideSlots || f.Retryable {
		t.Fatalf("the slot through another home's daemon: %+v", f)
	}
	if !strings.Contains(f.Message, a.home) || !strings.Contains(f.NextAction, a.home) || strings.Contains(f.NextAction, "inventory") {
		t.Fatalf("message %q and next step %q disagree (want both to name %s)", f.Message, f.NextAction, a.home)
	}
	res, tok = acquireSlot(t, ca, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s2 := mustReady(t, res, contract.SlotReused)
	if s2.Device.StableID != s1.Device.StableID {
		t.Fatalf("through home A again: %+v", s2)
	}
	releaseSlot(t, ca, s2, tok)
}
