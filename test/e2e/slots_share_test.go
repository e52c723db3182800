package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// Slots share the host (issue 22, ADR 0062): an idle slot device yields
// its running room, one principal's slot devices are bounded, a slot boot
// at a limit is refused at once, and a restart keeps a slot execution's
// lease long enough for its proxy to re-bind.

// deviceState is the daemon's state of the device with this UDID.
func (w *world) deviceState(udid string) string {
	for _, d := range w.status().Devices {
		if d.UDID == udid {
			return d.State
		}
	}
	return ""
}

// Three executions of one agent under three fresh runner namespaces leave
// three booted, idle slot devices at a limit of three. A plain lease is
// then granted after about one shutdown (the least recently used slot
// device yields; it is not deleted), where it used to wait for the
// scopes' abandonment an hour later.
func TestIdleSlotDevicesYieldToAPlainLeaseAtCapacity(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":3,"maxManaged":8}},"slots":{"maxDevicesPerPrincipal":3}}`)
	w.mustRun("daemon", "start")
	var devs []string
	for _, ns := range []string{"agent-config-1", "agent-config-2", "agent-config-3"} {
		p := w.slotProxy(t, slotLaunchJSON(ns, "boot-1", 0, "iPhone 15"))
		if p.res.Outcome != "ready" || p.res.device() == "" {
			t.Fatalf("%s: %+v (%s)", ns, p.res, p.res.failureCode())
		}
		devs = append(devs, p.res.device())
		p.end()
		eventually(t, ns+"'s execution to end", 15*time.Second, func() bool {
			_, l, ok := w.slotAssignment(ns, "boot-1", 0)
			return ok && l == ""
		})
	}
	if st := w.status(); st.Capacity.Running != 3 {
		t.Fatalf("after three executions %d devices run, want 3 (one per slot)", st.Capacity.Running)
	}
	start := time.Now()
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--timeout", "90s")
	took := time.Since(start)
	t.Logf("plain lease at capacity granted in %s", took)
	for _, d := range devs {
		if l.Device.UDID == d {
			t.Fatalf("the plain lease got slot device %s", d)
		}
	}
	if w.deviceState(devs[0]) != "shutdown" {
		t.Fatalf("the least recently used slot device %s is %q, want shutdown", devs[0], w.deviceState(devs[0]))
	}
	// Shut down, not deleted: every slot keeps its device.
	for i, ns := range []string{"agent-config-1", "agent-config-2", "agent-config-3"} {
		if d, _, ok := w.slotAssignment(ns, "boot-1", 0); !ok || d != devs[i] {
			t.Fatalf("%s's assignment after the yield: %q %v, want %s", ns, d, ok, devs[i])
		}
	}
	if st := w.status(); st.Capacity.Running > 3 {
		t.Fatalf("%d devices run at a limit of 3", st.Capacity.Running)
	}
	w.mustRun("release", l.LeaseID)
	// The yielded device boots again at its slot's next execution.
	p := w.slotProxy(t, slotLaunchJSON("agent-config-1", "boot-1", 0, "iPhone 15"))
	if p.res.Outcome != "ready" || p.res.device() != devs[0] || p.res.Slots[0].Disposition != "reused" {
		t.Fatalf("the yielded slot's next execution: %+v (%s)", p.res, p.res.failureCode())
	}
	if st := w.deviceState(devs[0]); st != "leased" {
		t.Fatalf("the re-booted slot device is %q, want leased", st)
	}
}

// One principal keeps at most slots.maxDevicesPerPrincipal (default 2)
// slot devices booted: its third execution first shuts down its own least
// recently used idle slot device; with every one live, it is refused
// CAPACITY_EXHAUSTED naming the bound, at once.
func TestOnePrincipalsSlotDevicesAreBounded(t *testing.T) {
	w := newWorld(t, slotWorldConfig) // maxRunning 4: the bound binds, not the host
	w.mustRun("daemon", "start")
	c := w.dial(t, "agent")
	var first []contract.SlotResult
	var toks []string
	for _, ns := range []string{"cfg-1", "cfg-2"} {
		res, tok := acquireSlot(t, c, slotConfig(ns, "boot-1", "iPhone 15"))
		first = append(first, mustReady(t, res, contract.SlotCreated))
		toks = append(toks, tok)
	}
	// Both live: a third is refused, naming the bound, and makes nothing.
	start := time.Now()
	res, _ := acquireSlot(t, c, slotConfig("cfg-3", "boot-1", "iPhone 15"))
	if took := time.Since(start); failureCode(res) != contract.CodeCapacityExhausted || took > testhost.Scale(20*time.Second) {
		b, _ := json.Marshal(res)
		t.Fatalf("third live execution of one principal (after %s): %s", took, b)
	}
	if d := res.Failure.Details; d["binding"] != "slots.maxDevicesPerPrincipal" || fmt.Sprint(d["limit"]) != "2" || res.Failure.NextAction == "" || !res.Failure.Retryable {
		t.Fatalf("the bound's refusal: %+v", res.Failure)
	}
	// The first ends: the third shuts its device down and is served.
	releaseSlot(t, c, first[0], toks[0])
	res, tok := acquireSlot(t, c, slotConfig("cfg-3", "boot-1", "iPhone 15"))
	third := mustReady(t, res, contract.SlotCreated)
	if st := w.deviceState(first[0].Device.StableID); st != "shutdown" {
		t.Fatalf("the principal's idle slot device is %q, want shutdown", st)
	}
	if d, _, ok := w.slotAssignment("cfg-1", "boot-1", 0); !ok || d != first[0].Device.StableID {
		t.Fatalf("cfg-1 lost its device: %q %v", d, ok)
	}
	// Another principal is not bounded by this one's devices.
	other := w.dial(t, "other-agent")
	ores, otok := acquireSlot(t, other, slotConfig("other-1", "boot-1", "iPhone 15"))
	o := mustReady(t, ores, contract.SlotCreated)
	releaseSlot(t, other, o, otok)
	releaseSlot(t, c, third, tok)
	releaseSlot(t, c, first[1], toks[1])
}

// Reusing a shut-down slot device while the platform runs at its limit
// (and nothing idle could yield) answers CAPACITY_EXHAUSTED at once with
// its details and the scope key, instead of PREPARATION_TIMEOUT after the
// whole preparation deadline.
func TestASlotReuseAtTheLimitIsRefusedAtOnce(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":4}}}`)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	cfg := slotConfig("runner-A", "boot-1", "iPhone 15")
	res, tok := acquireSlot(t, c, cfg)
	s := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, c, s, tok)
	// A plain lease takes the only running room: the idle slot device yields.
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--timeout", "90s")
	if st := w.deviceState(s.Device.StableID); st != "shutdown" {
		t.Fatalf("the idle slot device is %q beside the plain lease, want shutdown", st)
	}
	start := time.Now()
	res, _ = acquireSlot(t, c, cfg) // preparationTimeoutMs: the 600 s default
	took := time.Since(start)
	b, _ := json.Marshal(res)
	if failureCode(res) != contract.CodeCapacityExhausted || took > testhost.Scale(20*time.Second) {
		t.Fatalf("reuse at the limit after %s: %s", took, b)
	}
	f := res.Failure
	if !f.Retryable || f.RetryAfterMs == nil || *f.RetryAfterMs <= 0 || res.Scope.ScopeKey == nil || *res.Scope.ScopeKey == "" {
		t.Fatalf("reuse at the limit: %s", b)
	}
	for k, v := range map[string]string{"limit": "1", "booted": "1", "platform": "ios", "externalDevices": "0"} {
		if got := fmt.Sprint(f.Details[k]); got != v {
			t.Fatalf("detail %s is %q, want %s: %s", k, got, v, b)
		}
	}
	if _, ok := f.Details["retryAfterMs"]; !ok {
		t.Fatalf("no retryAfterMs detail: %s", b)
	}
	// The refused slot keeps its device, and once the room frees it boots
	// (retrying as told while the released device's reclaim holds it).
	w.mustRun("release", l.LeaseID)
	eventually(t, "the slot's reuse once the plain lease is released", 60*time.Second, func() bool {
		res, tok = acquireSlot(t, c, cfg)
		if failureCode(res) == contract.CodeCapacityExhausted {
			time.Sleep(time.Duration(*res.Failure.RetryAfterMs) * time.Millisecond / 5)
			return false
		}
		return true
	})
	s2 := mustReady(t, res, contract.SlotReused)
	if s2.Device.StableID != s.Device.StableID {
		t.Fatalf("after the room freed the slot got %s, want %s", s2.Device.StableID, s.Device.StableID)
	}
	releaseSlot(t, c, s2, tok)
}

// kill -9 of the daemon during a managed execution, about 12 s away (past
// the execution's 10 s heartbeat TTL), then a restart: the restarted
// daemon keeps the execution's lease for the re-bind window, the proxy
// re-binds the same lease, and the execution goes on.
func TestAManagedExecutionOutlivesAKill9AndATwelveSecondOutage(t *testing.T) {
	w := newWorld(t, slotsConfig)
	w.mustRun("daemon", "start")
	p := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if p.res.Outcome != "ready" {
		t.Fatalf("acquisition %+v (%s)", p.res, p.res.failureCode())
	}
	d, leaseID := p.res.device(), p.res.Slots[0].LeaseID
	listapps := map[string]any{"tool": "simctl", "args": []string{"listapps", d}}
	if text, isErr := p.call("device_exec", listapps, nil); isErr {
		t.Fatal(text)
	}
	w.kill9()
	time.Sleep(12 * time.Second)
	w.mustRun("daemon", "start")
	var text string
	eventually(t, "the proxy to re-bind its execution", 60*time.Second, func() bool {
		var isErr bool
		text, isErr = p.call("device_exec", listapps, nil)
		if isErr && strings.Contains(text, "MANAGED_EXECUTION_ENDED") {
			t.Fatalf("the execution ended across the outage: %s", text)
		}
		return !isErr
	})
	if _, l, _ := w.slotAssignment("runner-A", "boot-1", 0); l != leaseID {
		t.Fatalf("after the restart the slot's lease is %q, want the same %s", l, leaseID)
	}
	// Past the re-bind window's first heartbeats the execution still lives:
	// the proxy's heartbeats renew it on the new daemon.
	time.Sleep(12 * time.Second)
	if text, isErr := p.call("device_exec", listapps, nil); isErr {
		t.Fatalf("the re-bound execution %s later: %s", 12*time.Second, text)
	}
}

// The same refusal when the slot's device was shut down by a restart's
// capacity sweep rather than by a yield: two slot devices run at a limit
// of two, the daemon comes back with a limit of one while B's execution
// lives, the sweep stops A's idle device, and A's next execution is
// refused CAPACITY_EXHAUSTED at once (it used to wait out its whole
// preparationTimeoutMs and fail PREPARATION_TIMEOUT with no scope key).
func TestASlotReuseAtTheLimitAfterARestartIsRefusedAtOnce(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}}}`)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	cfgA, cfgB := slotConfig("runner-A", "boot-1", "iPhone 15"), slotConfig("runner-B", "boot-1", "iPhone 15")
	resA, tokA := acquireSlot(t, c, cfgA)
	a := mustReady(t, resA, contract.SlotCreated)
	releaseSlot(t, c, a, tokA)
	resB, tokB := acquireSlot(t, c, cfgB)
	b := mustReady(t, resB, contract.SlotCreated)
	c.Close()

	w.mustRun("daemon", "stop")
	writeConfig(t, w, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":4}}}`)
	w.mustRun("daemon", "start")
	c = w.dial(t, "runner")
	if _, err := client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: b.LeaseID, OwnerToken: tokB}); err != nil {
		t.Fatalf("B's execution after the restart: %v", err)
	}
	eventually(t, "the startup sweep to stop A's idle device", 30*time.Second, func() bool { return w.deviceState(a.Device.StableID) == "shutdown" })

	cfgA.PreparationTimeoutMs = 30_000
	start := time.Now()
	res, _ := acquireSlot(t, c, cfgA)
	took := time.Since(start)
	raw, _ := json.Marshal(res)
	if failureCode(res) != contract.CodeCapacityExhausted || took > testhost.Scale(15*time.Second) {
		t.Fatalf("A's reuse at the limit after %s: %s", took, raw)
	}
	if res.Scope.ScopeKey == nil || res.Failure.RetryAfterMs == nil || fmt.Sprint(res.Failure.Details["limit"]) != "1" || fmt.Sprint(res.Failure.Details["booted"]) != "1" {
		t.Fatalf("A's refusal: %s", raw)
	}
	releaseSlot(t, c, b, tokB)
}

func writeConfig(t *testing.T, w *world, config string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.home, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The ordinary idle-shutdown policy stops an idle slot device too (here
// after 2 s), rather than keeping it booted until its scope is abandoned;
// the slot keeps the device, and its next execution boots it again.
func TestTheIdleShutdownRuleStopsAnIdleSlotDevice(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}},"cleanup":{"intervalMs":500,"idleShutdownMs":2000,"idleDestroyMs":2000}}`)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	cfg := slotConfig("runner-A", "boot-1", "iPhone 15")
	res, tok := acquireSlot(t, c, cfg)
	s := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, c, s, tok)
	eventually(t, "idle-shutdown to stop the idle slot device", 60*time.Second, func() bool { return w.deviceState(s.Device.StableID) == "shutdown" })
	// idle-destroy (here as short) never deletes it.
	time.Sleep(3 * time.Second)
	if d, _, ok := w.slotAssignment("runner-A", "boot-1", 0); !ok || d != s.Device.StableID || w.deviceState(s.Device.StableID) != "shutdown" {
		t.Fatalf("after idle-destroy's window: assignment %q %v, state %q", d, ok, w.deviceState(s.Device.StableID))
	}
	res, tok = acquireSlot(t, c, cfg)
	s2 := mustReady(t, res, contract.SlotReused)
	if s2.Device.StableID != s.Device.StableID || w.deviceState(s.Device.StableID) != "leased" {
		t.Fatalf("the next execution got %s (%s), want %s booted and leased", s2.Device.StableID, w.deviceState(s2.Device.StableID), s.Device.StableID)
	}
	releaseSlot(t, c, s2, tok)
}

// Two homes on one device root: home A's idle slot device, shut down by
// the idle-shutdown rule, holds no host claim any more, yet home B may not
// take it in with `lease --device`: the host registry's slot tables say it
// is a slot's (DEVICE_ASSIGNED_TO_MANAGED_SLOT), and B runs nothing on it.
func TestAShutDownSlotDeviceOfASharedRootStaysTheSlots(t *testing.T) {
	shared, err := os.MkdirTemp("", "slr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	cfg := sharedRootConfig(filepath.Join(shared, "ios"))
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
	c := a.dial(t, "runner")
	res, tok := acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, c, s, tok)
	eventually(t, "A's idle slot device to be shut down", 30*time.Second, func() bool { return a.deviceState(s.Device.StableID) == "shutdown" })
	r := b.run("lease", "--platform", "ios", "--device", s.Device.StableID, "--no-wait", "--detach", "--requester", "b", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, string(contract.CodeDeviceAssignedToSlot)) {
		t.Fatalf("home B's lease of A's shut-down slot device: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res, tok = acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s2 := mustReady(t, res, contract.SlotReused)
	if s2.Device.StableID != s.Device.StableID {
		t.Fatalf("A's slot got %s, want %s", s2.Device.StableID, s.Device.StableID)
	}
	releaseSlot(t, c, s2, tok)
}
