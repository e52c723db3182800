package mcp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
)

const testSlotConfig = `{"contractVersion":1,"managedHostScope":"host-1","runnerNamespace":"runner-A","runnerIncarnation":"boot-1",
"localSlotCapacity":1,"requests":[{"slotIndex":0,"role":"main","platform":"ios","requestedSpec":{"runtime":"18.0","deviceType":"iPhone 16"}}]}`

func TestReadSlotConfigFlagWinsOverEnvAndTellsInlineFromPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "slot.json")
	if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, flag, env, want, from, path string
		ok                                bool
	}{
		{name: "none"},
		{name: "env inline", env: `{"from":"env"}`, want: `{"from":"env"}`, from: SlotConfigEnv, ok: true},
		{name: "env path", env: file, want: `{"from":"file"}`, from: SlotConfigEnv, path: file, ok: true},
		{name: "flag wins", flag: ` {"from":"flag"}`, env: file, want: `{"from":"flag"}`, from: "--slot-config", ok: true},
		{name: "flag path wins over env inline", flag: file, env: `{"from":"env"}`, want: `{"from":"file"}`, from: "--slot-config", path: file, ok: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, src, ok, err := ReadSlotConfig(c.flag, c.env, os.ReadFile)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok || string(raw) != c.want || (ok && (src.From != c.from || src.Path != c.path)) {
				t.Fatalf("got ok=%v raw=%q src=%+v; want ok=%v raw=%q from=%s path=%q", ok, raw, src, c.ok, c.want, c.from, c.path)
			}
		})
	}
	_, _, _, err := ReadSlotConfig(filepath.Join(dir, "missing.json"), "", os.ReadFile)
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeSlotConfigInvalid {
		t.Fatalf("missing file: got %v, want MANAGED_SLOT_CONFIG_INVALID", err)
	}
}

func TestLoadSlotConfigRefusesADeadExecutionOwnerPid(t *testing.T) {
	// A process that has exited (and been reaped) names no running process.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	withPid := func(pid int) string {
		return strings.Replace(testSlotConfig, `"localSlotCapacity":1`, `"localSlotCapacity":1,"executionOwnerPid":`+itoa(pid), 1)
	}
	_, ok, err := LoadSlotConfig(withPid(dead), "")
	ce := contract.AsError(err)
	if !ok || ce == nil || ce.Code != contract.CodeSlotConfigInvalid || ce.Details["field"] != "executionOwnerPid" {
		t.Fatalf("dead pid %d: got ok=%v err=%v, want MANAGED_SLOT_CONFIG_INVALID on executionOwnerPid", dead, ok, err)
	}
	cfg, ok, err := LoadSlotConfig(withPid(os.Getpid()), "")
	if err != nil || !ok || cfg.ExecutionOwnerPid != os.Getpid() {
		t.Fatalf("live pid: got ok=%v err=%v cfg=%+v", ok, err, cfg)
	}
	// A schema error keeps its typed code and says where the config came from.
	_, _, err = LoadSlotConfig("", `{"contractVersion":2}`)
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeContractUnsupported || ce.Details["source"] != SlotConfigEnv {
		t.Fatalf("contractVersion 2: got %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestSlotConfinementRefusesWithEachReason(t *testing.T) {
	b := slotBounds{leaseID: "L1", platform: "ios", ids: []string{"AAAAAAAA-0000-0000-0000-000000000001", "ios-1"},
		scope: contract.SlotScope{ManagedHostScope: "host-1", RunnerNamespace: "runner-A", RunnerIncarnation: "boot-1"}}
	other := "BBBBBBBB-0000-0000-0000-000000000002"
	for _, c := range []struct {
		name, tool, args, reason string
	}{
		{"own lease exec", ToolDeviceExec, `{"tool":"simctl","args":["listapps","AAAAAAAA-0000-0000-0000-000000000001"]}`, ""},
		{"reads stay open", ToolListDevices, `{"platform":"android"}`, ""},
		{"lease_status", ToolLeaseStatus, `{}`, ""},
		{"own lease named", ToolGetResources, `{"leaseId":"L1"}`, ""},
		{"lease_simulator", ToolLeaseSimulator, `{"platform":"ios"}`, outsideTool},
		{"release own lease", ToolReleaseSimulator, `{"leaseId":"L1"}`, outsideTool},
		{"shutdown own device", ToolDeviceExec, `{"tool":"simctl","args":["shutdown","AAAAAAAA-0000-0000-0000-000000000001"]}`, outsideTool},
		{"other lease", ToolDeviceScreenshot, `{"leaseId":"L2"}`, outsideSession},
		{"other device in simctl", ToolDeviceExec, `{"tool":"simctl","args":["listapps","` + other + `"]}`, outsideDevice},
		{"other platform's tool", ToolDeviceExec, `{"tool":"adb","args":["shell","true"]}`, outsideDevice},
		{"other device id", ToolDeviceInstall, `{"deviceId":"android-3"}`, outsideDevice},
		{"other platform", ToolDeviceOpenURL, `{"platform":"android","url":"x://y"}`, outsideDevice},
		{"other incarnation", ToolDeviceExec, `{"runnerIncarnation":"boot-0"}`, outsideScope},
		{"other namespace", ToolDeviceExec, `{"runnerNamespace":"runner-B"}`, outsideScope},
		{"other host", ToolDeviceExec, `{"managedHostScope":"host-2"}`, outsideHost},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := b.admit(c.tool, json.RawMessage(c.args))
			if c.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ce := contract.AsError(err)
			if ce == nil || ce.Code != contract.CodeDeviceOutsideSlots || ce.Details["reason"] != c.reason || ce.Info().Retryable {
				t.Fatalf("got %v (details %v), want DEVICE_OUTSIDE_MANAGED_SLOTS reason %s", err, detailsOf(ce), c.reason)
			}
		})
	}
	a := slotBounds{leaseID: "L1", platform: "android", ids: []string{"emulator-5554"}}
	for args, reason := range map[string]string{
		`{"tool":"adb","args":["-s","emulator-5556","shell","true"]}`: outsideDevice,
		`{"tool":"adb","args":["emu","kill"]}`:                        outsideTool,
		`{"tool":"adb","args":["-s","emulator-5554","reboot"]}`:       outsideTool,
		`{"tool":"adb","args":["shell","getprop"]}`:                   "",
	} {
		err := a.admit(ToolDeviceExec, json.RawMessage(args))
		if got := ""; err != nil {
			got, _ = contract.AsError(err).Details["reason"].(string)
			if got != reason {
				t.Errorf("%s: reason %q, want %q", args, got, reason)
			}
		} else if reason != "" {
			t.Errorf("%s: admitted, want reason %s", args, reason)
		}
	}
}

func detailsOf(ce *contract.Error) map[string]any {
	if ce == nil {
		return nil
	}
	return ce.Details
}

// fakeSlots is a scripted SlotBackend.
type fakeSlots struct {
	acquire func(ctx context.Context) (contract.ManagedSlotsResult, error)

	mu       sync.Mutex
	hbErr    error
	beats    int
	released []contract.SlotReleaseIn
	tokens   []string
}

func (f *fakeSlots) Acquire(ctx context.Context, in contract.SlotAcquireIn) (contract.ManagedSlotsResult, error) {
	f.mu.Lock()
	f.tokens = append(f.tokens, in.OwnerToken)
	f.mu.Unlock()
	return f.acquire(ctx)
}

func (f *fakeSlots) Heartbeat(_ context.Context, in contract.SlotHeartbeatIn) (contract.SlotHeartbeatOut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats++
	return contract.SlotHeartbeatOut{}, f.hbErr
}

func (f *fakeSlots) Release(_ context.Context, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, in)
	return contract.SlotReleaseOut{Outcome: "reusable_for_this_slot"}, nil
}

func (f *fakeSlots) setHeartbeat(err error) {
	f.mu.Lock()
	f.hbErr = err
	f.mu.Unlock()
}

func readyResult() contract.ManagedSlotsResult {
	key := contract.ScopeKey("host-1", "runner-A", "boot-1")
	return contract.ManagedSlotsResult{ContractVersion: 1, Outcome: contract.SlotOutcomeReady, IdleTimeoutMs: 120000,
		Scope: contract.SlotScope{ManagedHostScope: "host-1", RunnerNamespace: "runner-A", RunnerIncarnation: "boot-1", ScopeKey: &key},
		Slots: []contract.SlotResult{{SlotIndex: 0, Role: "main", Platform: "ios", AssignmentGeneration: 1, LeaseID: "L1",
			Device:      &contract.SlotDevice{StableID: "AAAAAAAA-0000-0000-0000-000000000001", Name: "simlock-slot-x-0-g1-a"},
			Disposition: contract.SlotCreated, Readiness: "ready"}}}
}

// slotSession serves a managed execution over the scripted backend.
func slotSession(t *testing.T, be *fakeSlots, clock *fake.Clock) (*testSession, *fakeParent) {
	t.Helper()
	cfg, err := contract.ParseSlotLaunchConfig([]byte(testSlotConfig))
	if err != nil {
		t.Fatal(err)
	}
	owner := &fakeParent{gone: make(chan struct{})}
	o := Options{Socket: filepath.Join(t.TempDir(), "none.sock"), Principal: "slot-test", Clock: clock,
		Logger: slog.New(newLogs()), Version: "test", DeviceTools: true,
		Slot: &SlotOptions{Config: cfg, Backend: be, OwnerWatch: owner}}
	return serve(t, o), owner
}

func capabilityResult(t *testing.T, s *testSession) contract.ManagedSlotsResult {
	t.Helper()
	caps := s.cs.InitializeResult().Capabilities
	raw, err := json.Marshal(caps.Experimental[SlotCapability])
	if err != nil {
		t.Fatal(err)
	}
	var res contract.ManagedSlotsResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func resourceResult(t *testing.T, s *testSession) contract.ManagedSlotsResult {
	t.Helper()
	r, err := s.cs.ReadResource(context.Background(), &mcpsdk.ReadResourceParams{URI: SlotResourceURI})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Contents) != 1 || r.Contents[0].MIMEType != "application/json" {
		t.Fatalf("resource contents %+v", r.Contents)
	}
	var res contract.ManagedSlotsResult
	if err := json.Unmarshal([]byte(r.Contents[0].Text), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSlotResourceAddsExecutionEndedAfterAnIdleRelease(t *testing.T) {
	clock := fake.NewClock(time.Unix(1_700_000_000, 0))
	be := &fakeSlots{acquire: func(context.Context) (contract.ManagedSlotsResult, error) { return readyResult(), nil }}
	s, _ := slotSession(t, be, clock)

	if res := capabilityResult(t, s); res.Outcome != contract.SlotOutcomeReady || res.Slots[0].LeaseID != "L1" || res.Slots[0].Disposition != contract.SlotCreated {
		t.Fatalf("initialize capability %+v", res)
	}
	if res := resourceResult(t, s); res.Slots[0].ExecutionEnded != nil {
		t.Fatalf("executionEnded before any release: %+v", res.Slots[0].ExecutionEnded)
	}
	clock.Advance(slotHeartbeatEvery)
	be.setHeartbeat(contract.Errorf(contract.CodeExecutionEnded, "idle").WithDetails("reason", "idle_timeout", "idle", true))
	clock.Advance(slotHeartbeatEvery)

	res := resourceResult(t, s)
	end := res.Slots[0].ExecutionEnded
	if end == nil || end.Reason != "idle_timeout" || !end.Idle || end.NextAction != "relaunch_execution" {
		t.Fatalf("executionEnded %+v", end)
	}
	if res.Outcome != contract.SlotOutcomeReady || res.Slots[0].LeaseID != "L1" {
		t.Fatalf("the resource lost the acquisition evidence: %+v", res)
	}
	_, cerr := s.call(ToolLeaseStatus, map[string]any{}, nil)
	if cerr == nil || cerr.Code != contract.CodeExecutionEnded || cerr.Details["idle"] != true || cerr.Details["nextAction"] != "relaunch_execution" {
		t.Fatalf("call after idle release: %+v", cerr)
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
	if len(be.released) != 0 {
		t.Fatalf("released an execution the daemon had already ended: %+v", be.released)
	}
}

func TestSlotFailedAcquisitionServesZeroToolsAndRefusesEveryCall(t *testing.T) {
	clock := fake.NewClock(time.Unix(1_700_000_000, 0))
	be := &fakeSlots{acquire: func(context.Context) (contract.ManagedSlotsResult, error) {
		return contract.ManagedSlotsResult{}, contract.Errorf(contract.CodeSpecUnsupported, "runtime android-36 is not installed")
	}}
	s, _ := slotSession(t, be, clock)
	res := capabilityResult(t, s)
	if res.Outcome != contract.SlotOutcomeFailed || res.Failure == nil || res.Failure.Code != contract.CodeSpecUnsupported || res.Scope.ScopeKey != nil {
		t.Fatalf("initialize capability %+v", res)
	}
	tools, err := s.cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 0 {
		t.Fatalf("tools %v %v, want none", tools, err)
	}
	for _, name := range []string{ToolListDevices, ToolLeaseSimulator, "no_such_tool"} {
		_, cerr := s.call(name, map[string]any{}, nil)
		if cerr == nil || cerr.Code != contract.CodeSlotAcquisitionFailed {
			t.Fatalf("%s: %+v, want MANAGED_SLOT_ACQUISITION_FAILED", name, cerr)
		}
		f, _ := cerr.Details["acquisitionFailure"].(map[string]any)
		if f["code"] != string(contract.CodeSpecUnsupported) {
			t.Fatalf("%s: acquisitionFailure %v", name, cerr.Details)
		}
	}
	if res := resourceResult(t, s); res.Outcome != contract.SlotOutcomeFailed {
		t.Fatalf("resource %+v", res)
	}
}

func TestSlotAcquisitionAbortsOnStdinEOF(t *testing.T) {
	clock := fake.NewClock(time.Unix(1_700_000_000, 0))
	started := make(chan struct{})
	be := &fakeSlots{acquire: func(ctx context.Context) (contract.ManagedSlotsResult, error) {
		close(started)
		<-ctx.Done()
		return contract.ManagedSlotsResult{}, ctx.Err()
	}}
	cfg, err := contract.ParseSlotLaunchConfig([]byte(testSlotConfig))
	if err != nil {
		t.Fatal(err)
	}
	in, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Clock: clock, Socket: "/nonexistent",
			Slot: &SlotOptions{Config: cfg, Backend: be, OwnerWatch: &fakeParent{gone: make(chan struct{})}}}, in, io.Discard)
	}()
	<-started
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("stdin EOF did not abort the acquisition")
	}
	if len(be.released) != 0 {
		t.Fatalf("released though nothing was acquired: %+v", be.released)
	}
}

func TestSlotExecutionHeartbeatsWaitsForAnAbsentDaemonAndReleasesAtOwnerLoss(t *testing.T) {
	clock := fake.NewClock(time.Unix(1_700_000_000, 0))
	be := &fakeSlots{acquire: func(context.Context) (contract.ManagedSlotsResult, error) { return readyResult(), nil }}
	s, owner := slotSession(t, be, clock)
	capabilityResult(t, s)

	clock.Advance(slotHeartbeatEvery)
	clock.Advance(slotHeartbeatEvery)
	if be.beats != 2 {
		t.Fatalf("%d heartbeats after two intervals, want 2", be.beats)
	}
	be.setHeartbeat(contract.Errorf(contract.CodeConnectionLost, "the daemon went away"))
	clock.Advance(slotHeartbeatEvery)
	_, cerr := s.call(ToolLeaseStatus, map[string]any{}, nil)
	rec, _ := detailsOf(cerr)["recovery"].(map[string]any)
	if cerr == nil || cerr.Code != contract.CodeDaemonStalled || rec["action"] != "wait_for_managed_reclaim" {
		t.Fatalf("call while the daemon is away: %+v", cerr)
	}
	// The daemon answers again: the same lease is heartbeaten and calls pass
	// the stall gate again, to meet confinement (which runs after it).
	be.setHeartbeat(nil)
	clock.Advance(slotHeartbeatEvery)
	// The first answer after the re-bind says so (the same connection
	// answered again: a stall, not a restart), and only the first.
	for i, want := range []any{"daemon_stall_resumed", nil} {
		r, err := s.cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ToolLeaseSimulator, Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		var got any
		if m, ok := r.Meta[SlotCapability].(map[string]any); ok {
			got = m["notice"]
		}
		if got != want {
			t.Fatalf("answer %d after the re-bind: notice %v, want %v", i, got, want)
		}
	}
	if _, cerr := s.call(ToolDeviceExec, map[string]any{"tool": "simctl", "args": []string{"shutdown", "AAAAAAAA-0000-0000-0000-000000000001"}}, nil); cerr == nil || cerr.Code != contract.CodeDeviceOutsideSlots {
		t.Fatalf("lifecycle on the own device after re-bind: %+v", cerr)
	}

	owner.die()
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.released) != 1 || be.released[0].LeaseID != "L1" || be.released[0].Reason != "owner_exited" || be.released[0].OwnerToken != be.tokens[0] {
		t.Fatalf("release %+v (token %v), want L1 with the acquiring token and reason owner_exited", be.released, be.tokens)
	}
}

func TestSlotPreparationDeadlineFailsTheAcquisitionAndStillServes(t *testing.T) {
	be := &fakeSlots{acquire: func(ctx context.Context) (contract.ManagedSlotsResult, error) {
		<-ctx.Done()
		return contract.ManagedSlotsResult{}, ctx.Err()
	}}
	cfg, err := contract.ParseSlotLaunchConfig([]byte(strings.Replace(testSlotConfig, `"localSlotCapacity":1`, `"localSlotCapacity":1,"preparationTimeoutMs":50`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Socket: "/nonexistent", Clock: fake.NewClock(time.Unix(1_700_000_000, 0)), Logger: slog.New(newLogs()),
		Slot: &SlotOptions{Config: cfg, Backend: be, OwnerWatch: &fakeParent{gone: make(chan struct{})}}}
	s := serve(t, o)
	res := capabilityResult(t, s)
	if res.Outcome != contract.SlotOutcomeFailed || res.Failure == nil || res.Failure.Code != contract.CodePreparationTimeout {
		t.Fatalf("result %+v, want failed with PREPARATION_TIMEOUT", res)
	}
	if _, cerr := s.call(ToolLeaseStatus, map[string]any{}, nil); cerr == nil || cerr.Code != contract.CodeSlotAcquisitionFailed {
		t.Fatalf("call: %+v", cerr)
	}
}

func TestExecOwnerWatchSeesAnExplicitOwnerExit(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := execOwnerWatch{pid: cmd.Process.Pid, interval: 5 * time.Millisecond}.Watch(ctx)
	select {
	case <-gone:
		t.Fatal("a running owner was reported gone")
	case <-time.After(50 * time.Millisecond):
	}
	cmd.Process.Kill()
	_ = cmd.Wait()
	select {
	case <-gone:
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("the owner's exit went unnoticed")
	}
}

// deadlineSlots records how long each Release call was given.
type deadlineSlots struct {
	fakeSlots
	budget time.Duration
}

func (d *deadlineSlots) Release(ctx context.Context, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error) {
	if dl, ok := ctx.Deadline(); ok {
		d.budget = time.Until(dl)
	}
	return d.fakeSlots.Release(ctx, in)
}

// The proxy waits for slot.release at least as long as the daemon may take
// to answer it (its settle wait, from the same contract constant), so it
// never logs a failed release that the daemon then completes.
func TestSlotReleaseBudgetCoversTheDaemonsSettleWait(t *testing.T) {
	cfg, err := contract.ParseSlotLaunchConfig([]byte(testSlotConfig))
	if err != nil {
		t.Fatal(err)
	}
	be := &deadlineSlots{}
	x := newSlotExec(SlotOptions{Config: cfg}, be, fake.NewClock(time.Now()), slog.New(slog.DiscardHandler))
	x.leaseID = "L1"
	if err := x.release(); err != nil {
		t.Fatal(err)
	}
	settle := time.Duration(contract.SlotReleaseSettleWaitMs) * time.Millisecond
	if be.budget <= settle {
		t.Fatalf("the proxy gave slot.release %v; the daemon may wait %v for released work before it answers", be.budget, settle)
	}
	if len(be.released) != 1 || be.released[0].LeaseID != "L1" {
		t.Fatalf("released %+v", be.released)
	}
}
