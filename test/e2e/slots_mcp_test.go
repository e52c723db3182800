package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/testhost"
)

// Four devices may run at once: runner A's slot device, runner B's two,
// and a replacement beside them.
const slotsConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":8}}}`

// The simulated SDK's iOS runtime the slot specs ask for.
const slotRuntime = "com.apple.CoreSimulator.SimRuntime.iOS-18-0"

// slotResult is the managed-slots result as the e2e reads it.
type slotResult struct {
	Outcome string `json:"outcome"`
	Scope   struct {
		ScopeKey *string `json:"scopeKey"`
	} `json:"scope"`
	Failure *struct {
		Code string `json:"code"`
	} `json:"failure"`
	Slots []struct {
		AssignmentGeneration int64 `json:"assignmentGeneration"`
		Device               *struct {
			StableID string `json:"stableId"`
			Name     string `json:"name"`
		} `json:"device"`
		LeaseID     string `json:"leaseId"`
		Disposition string `json:"disposition"`
		Failure     *struct {
			Code string `json:"code"`
		} `json:"failure"`
	} `json:"slots"`
}

func (r slotResult) failureCode() string {
	if r.Failure != nil {
		return r.Failure.Code
	}
	for _, s := range r.Slots {
		if s.Failure != nil {
			return s.Failure.Code
		}
	}
	return ""
}

func (r slotResult) device() string {
	if len(r.Slots) == 0 || r.Slots[0].Device == nil {
		return ""
	}
	return r.Slots[0].Device.StableID
}

// slotProxy is one `simlock mcp --slot-config` execution and its client.
type slotProxy struct {
	*mcpAgent
	res      slotResult
	initTook time.Duration
}

func slotLaunchJSON(namespace, incarnation string, slot int, model string) string {
	spec := map[string]any{"runtime": slotRuntime}
	if model != "" {
		spec["deviceType"] = model
	}
	b, _ := json.Marshal(map[string]any{"contractVersion": 1, "managedHostScope": "host-1", "runnerNamespace": namespace,
		"runnerIncarnation": incarnation, "localSlotCapacity": 1, "preparationTimeoutMs": 60000,
		"requests": []any{map[string]any{"slotIndex": slot, "role": "main", "platform": "ios", "requestedSpec": spec}}})
	return string(b)
}

func (w *world) slotProxy(t *testing.T, cfg string) *slotProxy {
	t.Helper()
	cmd := w.cmd("mcp", "--device-tools", "--slot-config", cfg)
	a := &mcpAgent{t: t, cmd: cmd, progress: make(chan *mcpsdk.ProgressNotificationParams, 64)}
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e-runner", Version: "1"}, nil)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(90*time.Second))
	defer cancel()
	cs, err := cl.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.cs = cs
	p := &slotProxy{mcpAgent: a, initTook: time.Since(start)}
	raw, _ := json.Marshal(cs.InitializeResult().Capabilities.Experimental["simlock/managedSlots"])
	if err := json.Unmarshal(raw, &p.res); err != nil || p.res.Outcome == "" {
		t.Fatalf("initialize carries no managed-slots result: %s", raw)
	}
	t.Cleanup(p.end)
	return p
}

// end closes the proxy's stdin (EOF) and waits for it to exit. The MCP
// SDK's command transport owns the process (its Close waits for it, and so
// does its own teardown when the process exits first), so the test never
// waits on the command itself: two Waits at once are a data race.
func (p *slotProxy) end() {
	_ = p.cs.Close()
}

// refusal calls a tool that must fail and returns its error code and reason.
func (p *slotProxy) refusal(name string, args map[string]any) (string, string) {
	p.t.Helper()
	text, isErr := p.call(name, args, nil)
	if !isErr {
		p.t.Fatalf("%s %v was not refused: %s", name, args, text)
	}
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &e); err != nil {
		p.t.Fatalf("%s: %s", name, text)
	}
	reason, _ := e.Error.Details["reason"].(string)
	return e.Error.Code, reason
}

type slotList struct {
	Assignments []struct {
		RunnerNamespace   string `json:"runnerNamespace"`
		RunnerIncarnation string `json:"runnerIncarnation"`
		SlotIndex         int    `json:"slotIndex"`
		Device            *struct {
			StableID string `json:"stableId"`
		} `json:"device"`
		LeaseID string `json:"leaseId"`
	} `json:"assignments"`
}

func (w *world) slotAssignment(namespace, incarnation string, slot int) (device, lease string, ok bool) {
	var l slotList
	w.json(&l, "slot", "list", "--json")
	for _, a := range l.Assignments {
		if a.RunnerNamespace == namespace && a.RunnerIncarnation == incarnation && a.SlotIndex == slot && a.Device != nil {
			return a.Device.StableID, a.LeaseID, true
		}
	}
	return "", "", false
}

func indexOf(lines []string, match func(string) bool) int {
	for i, l := range lines {
		if match(l) {
			return i
		}
	}
	return -1
}

// The reference's six-step scenario, with real `simlock mcp` processes
// on the simulated SDK.
func TestManagedSlotsSixStepsThroughRealMCPProxies(t *testing.T) {
	w := newWorld(t, slotsConfig)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")

	// 1. Runner A's first execution creates the slot's device, generation 1.
	p1 := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if p1.res.Outcome != "ready" || p1.res.Slots[0].Disposition != "created" || p1.res.Slots[0].AssignmentGeneration != 1 || p1.res.device() == "" {
		t.Fatalf("step 1: %+v (failure %s)", p1.res, p1.res.failureCode())
	}
	d, lease1 := p1.res.device(), p1.res.Slots[0].LeaseID
	if name := p1.res.Slots[0].Device.Name; !strings.HasPrefix(name, "simlock-slot-") {
		t.Fatalf("step 1: device name %q, want simlock-slot-...", name)
	}
	t.Logf("step 1: created %s (%s) in %s", d, p1.res.Slots[0].Device.Name, p1.initTook)
	if code, reason := p1.refusal("lease_simulator", map[string]any{"platform": "ios"}); code != "DEVICE_OUTSIDE_MANAGED_SLOTS" || reason != "tool" {
		t.Fatalf("step 1: lease_simulator on a slot connection: %s %s", code, reason)
	}

	// 2. stdin EOF ends the execution; the assignment stays, with no lease.
	p1.end()
	eventually(t, "A's slot to be idle and still assigned", 15*time.Second, func() bool {
		dev, l, ok := w.slotAssignment("runner-A", "boot-1", 0)
		return ok && dev == d && l == ""
	})

	// 3. Runner B's slot gets its own device and cannot drive, stop or
	// delete D; a plain client cannot either.
	pb := w.slotProxy(t, slotLaunchJSON("runner-B", "boot-1", 1, "iPhone 15"))
	if pb.res.Outcome != "ready" || pb.res.device() == "" || pb.res.device() == d {
		t.Fatalf("step 3: runner B's slot %+v, want a device of its own (A has %s)", pb.res, d)
	}
	for _, args := range []map[string]any{
		{"tool": "simctl", "args": []string{"listapps", d}},
		{"tool": "simctl", "args": []string{"delete", d}},
		{"tool": "simctl", "args": []string{"shutdown", d}},
	} {
		if code, _ := pb.refusal("device_exec", args); code != "DEVICE_OUTSIDE_MANAGED_SLOTS" {
			t.Fatalf("step 3: B's %v on D: %s", args["args"], code)
		}
	}
	if r := w.run("simctl", "shutdown", d); r.code == 0 || !strings.Contains(r.stderr, "DEVICE_ASSIGNED_TO_MANAGED_SLOT") {
		t.Fatalf("step 3: a plain client's shutdown of D: exit %d %s", r.code, r.stderr)
	}
	pb.end()
	// B's slot 0 is another scoped identity than A's slot 0: its own device.
	pb0 := w.slotProxy(t, slotLaunchJSON("runner-B", "boot-1", 0, "iPhone 15"))
	if pb0.res.Outcome != "ready" || pb0.res.device() == d || pb0.res.device() == pb.res.device() {
		t.Fatalf("step 3: runner B's slot 0 %+v, want a third device", pb0.res)
	}
	pb0.end()

	// 4. A's next execution reuses D with a fresh lease.
	p2 := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if p2.res.Outcome != "ready" || p2.res.Slots[0].Disposition != "reused" || p2.res.device() != d || p2.res.Slots[0].LeaseID == lease1 {
		t.Fatalf("step 4: %+v, want D %s reused with a lease other than %s", p2.res, d, lease1)
	}
	if text, isErr := p2.call("device_exec", map[string]any{"tool": "simctl", "args": []string{"listapps", d}}, nil); isErr {
		t.Fatalf("step 4: the slot's own device: %s", text)
	}
	if text, isErr := p2.call("lease_status", map[string]any{}, nil); isErr || !strings.Contains(text, p2.res.Slots[0].LeaseID) {
		t.Fatalf("step 4: lease_status on the slot connection: %s", text)
	}
	// A duplicate proxy for the live slot is served, refused SLOT_IN_USE.
	dup := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if dup.res.Outcome != "failed" || dup.res.failureCode() != "SLOT_IN_USE" {
		t.Fatalf("step 4: duplicate proxy %+v (%s)", dup.res, dup.res.failureCode())
	}
	dup.end()
	p2.end()

	// 5. A spec change replaces D: deleted, absence verified, then E created.
	p3 := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 16"))
	e := p3.res.device()
	if p3.res.Outcome != "ready" || p3.res.Slots[0].Disposition != "replaced" || e == "" || e == d ||
		p3.res.Slots[0].AssignmentGeneration <= p2.res.Slots[0].AssignmentGeneration {
		t.Fatalf("step 5: %+v", p3.res)
	}
	cmds := w.commandLog(logPath)
	del := indexOf(cmds, func(l string) bool { return strings.Contains(l, " delete ") && strings.Contains(l, d) })
	create := indexOf(cmds, func(l string) bool { return strings.Contains(l, " create ") && strings.Contains(l, "iPhone-16") })
	if del < 0 || create < 0 || del > create {
		t.Fatalf("step 5: delete of D at line %d, create of E at %d in the SDK's command log:\n%s", del, create, strings.Join(cmds, "\n"))
	}
	p3.end()

	// 6. A new incarnation adopts E; a late proxy on the old one is refused.
	p4 := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-2", 0, "iPhone 16"))
	if p4.res.Outcome != "ready" || p4.res.Slots[0].Disposition != "adopted" || p4.res.device() != e {
		t.Fatalf("step 6: %+v, want E %s adopted", p4.res, e)
	}
	late := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 16"))
	if late.res.Outcome != "failed" || late.res.failureCode() != "SCOPE_INVALIDATED" {
		t.Fatalf("step 6: late proxy on boot-1: %+v (%s)", late.res, late.res.failureCode())
	}
	if code, _ := late.refusal("list_devices", map[string]any{}); code != "MANAGED_SLOT_ACQUISITION_FAILED" {
		t.Fatalf("step 6: late proxy's call: %s", code)
	}
	p4.end()
	if dev, _, ok := w.slotAssignment("runner-B", "boot-1", 1); !ok || dev != pb.res.device() {
		t.Fatalf("step 6: runner B's assignment changed: %s %v", dev, ok)
	}
}

// A malformed spec is refused by the daemon at once: initialize answers
// in under a second with outcome failed, no tools are listed, every call
// is MANAGED_SLOT_ACQUISITION_FAILED, and nothing was created.
func TestManagedSlotMalformedSpecFailsFastAndCreatesNothing(t *testing.T) {
	w := newWorld(t, slotsConfig)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	cfg := strings.Replace(slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"), `"runtime":"`+slotRuntime+`"`, `"runtime":"ios-banana"`, 1)

	p := w.slotProxy(t, cfg)
	t.Logf("malformed spec: initialize answered in %s with %s", p.initTook, p.res.failureCode())
	if p.initTook >= time.Second {
		t.Fatalf("initialize took %s, want under 1 s", p.initTook)
	}
	// A runtime the host has not installed is SPEC_UNSUPPORTED, decided
	// before any device work.
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
		if strings.Contains(l, " create ") {
			t.Fatalf("a device was created: %s", l)
		}
	}
	if _, _, ok := w.slotAssignment("runner-A", "boot-1", 0); ok {
		t.Fatal("a malformed spec left an assignment")
	}
}

// While the daemon is away a slot proxy answers DAEMON_STALLED (waiting to
// reclaim, never starting a daemon itself); once a daemon is back it
// re-binds the same lease and its tools work again.
func TestManagedSlotProxyWaitsOutADaemonRestart(t *testing.T) {
	w := newWorld(t, slotsConfig)
	w.mustRun("daemon", "start")
	p := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if p.res.Outcome != "ready" {
		t.Fatalf("acquisition %+v (%s)", p.res, p.res.failureCode())
	}
	d, lease := p.res.device(), p.res.Slots[0].LeaseID
	listapps := map[string]any{"tool": "simctl", "args": []string{"listapps", d}}
	if text, isErr := p.call("device_exec", listapps, nil); isErr {
		t.Fatal(text)
	}

	w.mustRun("daemon", "stop")
	text, isErr := p.call("lease_status", map[string]any{}, nil)
	if !isErr || !strings.Contains(text, "DAEMON_STALLED") || !strings.Contains(text, "wait_for_managed_reclaim") {
		t.Fatalf("a call while the daemon is away: %s", text)
	}
	if w.daemonRunning() {
		t.Fatal("the slot proxy started a daemon")
	}

	w.mustRun("daemon", "start")
	var notice any
	eventually(t, "the proxy to re-bind its execution", 15*time.Second, func() bool {
		r, err := p.cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "device_exec", Arguments: listapps})
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := r.Meta["simlock/managedSlots"].(map[string]any); ok {
			notice = m["notice"]
		}
		return !r.IsError || !strings.Contains(r.Content[0].(*mcpsdk.TextContent).Text, "DAEMON_STALLED")
	})
	if notice != "daemon_restart_resumed" {
		t.Fatalf("the first answer after the re-bind carries notice %v, want daemon_restart_resumed", notice)
	}
	if text, isErr := p.call("device_exec", listapps, nil); isErr {
		t.Fatalf("after the re-bind: %s", text)
	}
	if _, l, _ := w.slotAssignment("runner-A", "boot-1", 0); l != lease {
		t.Fatalf("after the restart the slot's lease is %q, want the same %s", l, lease)
	}
	p.end()
	eventually(t, "the execution to be released at EOF", 15*time.Second, func() bool {
		_, l, ok := w.slotAssignment("runner-A", "boot-1", 0)
		return ok && l == ""
	})
}

// executionOwnerPid's exit ends the execution even though the proxy's
// parent (this test) lives on: the proxy exits and releases the slot,
// which keeps its device.
func TestManagedSlotEndsWhenItsExecutionOwnerExits(t *testing.T) {
	w := newWorld(t, slotsConfig)
	w.mustRun("daemon", "start")
	owner := exec.Command("sleep", "120")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer owner.Process.Kill()
	cfg := strings.Replace(slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"), `"localSlotCapacity":1`,
		fmt.Sprintf(`"localSlotCapacity":1,"executionOwnerPid":%d`, owner.Process.Pid), 1)
	p := w.slotProxy(t, cfg)
	if p.res.Outcome != "ready" {
		t.Fatalf("acquisition %+v (%s)", p.res, p.res.failureCode())
	}
	d := p.res.device()
	owner.Process.Kill()
	_ = owner.Wait()
	exited := make(chan error, 1)
	go func() { exited <- p.cs.Wait() }() // the connection ends when the process exits
	select {
	case <-exited:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the proxy outlived its execution owner")
	}
	eventually(t, "the slot to be released with its device kept", 10*time.Second, func() bool {
		dev, l, ok := w.slotAssignment("runner-A", "boot-1", 0)
		return ok && dev == d && l == ""
	})
}

// SIGTERM ends the execution like stdin EOF: the proxy releases the slot at
// once (not after the heartbeat expiry) and exits; the device stays.
func TestManagedSlotProxyReleasesOnSIGTERM(t *testing.T) {
	w := newWorld(t, slotsConfig)
	w.mustRun("daemon", "start")
	p := w.slotProxy(t, slotLaunchJSON("runner-A", "boot-1", 0, "iPhone 15"))
	if p.res.Outcome != "ready" {
		t.Fatalf("acquisition %+v (%s)", p.res, p.res.failureCode())
	}
	d := p.res.device()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cs.Wait() }() // the connection ends when the process exits
	select {
	case <-exited:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the proxy did not exit on SIGTERM")
	}
	if _, l, ok := w.slotAssignment("runner-A", "boot-1", 0); !ok || l != "" {
		t.Fatalf("after SIGTERM the slot still has lease %q (ok %v)", l, ok)
	}
	t.Logf("SIGTERM to released and exited: %s", time.Since(start).Round(time.Millisecond))
	if dev, _, _ := w.slotAssignment("runner-A", "boot-1", 0); dev != d {
		t.Fatalf("the slot's device changed to %s", dev)
	}
}
