package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/testhost"
)

func sessionHarness(t *testing.T) *harness {
	t.Helper()
	return sessionHarnessTTL(t, 1500)
}

// sessionHarnessTTL serves sessions whose heartbeat TTL is ttlMs.
func sessionHarnessTTL(t *testing.T, ttlMs int64) *harness {
	t.Helper()
	h := newHarness(t)
	h.stop()
	h.cfg.Sessions = &config.Sessions{HeartbeatTTLMs: ttlMs}
	h.start()
	return h
}

func sessionCfg(req string, hw *contract.HardwareRequirement) contract.SessionConfig {
	return contract.SessionConfig{ContractVersion: 1, RequestID: req,
		Device: contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios", Hardware: hw}}
}

func published(t *testing.T, s *testSession) map[string]any {
	t.Helper()
	caps := s.cs.InitializeResult().Capabilities
	if caps == nil || caps.Experimental == nil {
		t.Fatal("initialize carries no experimental capabilities")
	}
	raw, _ := json.Marshal(caps.Experimental[SessionCapability])
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		t.Fatalf("no %s capability: %s", SessionCapability, raw)
	}
	return out
}

// An unsatisfiable requirement is answered at initialize, fast, with the
// typed failure, no tools, and nothing created.
func TestSessionConfigUnsatisfiableAnswersInitializeWithTheFailure(t *testing.T) {
	h := sessionHarness(t)
	o := h.options("agent-s", newLogs())
	o.Session = &SessionOptions{Config: sessionCfg("r1", &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: "foldable"}), OwnerToken: "tok"}
	start := time.Now()
	s := serve(t, o)
	// "Fast" is against a boot or a prepare's wait, tens of seconds; 5 s
	// leaves a loaded machine's stall of 2-3 s room. That nothing was
	// created is checked below, whatever the time.
	if took := time.Since(start); took > testhost.Scale(5*time.Second) {
		t.Fatalf("initialize took %s", took)
	}
	p := published(t, s)
	f, _ := p["failure"].(map[string]any)
	if p["status"] != contract.SessionFailed || f == nil || f["code"] != string(contract.CodeUnsupportedHardware) {
		t.Fatalf("published %v", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(5*time.Second))
	defer cancel()
	tl, err := s.cs.ListTools(ctx, &mcpsdk.ListToolsParams{})
	if err != nil || len(tl.Tools) != 0 {
		t.Fatalf("tools %v %v, want none", tl, err)
	}
	if _, ce := s.call(ToolListDevices, map[string]any{}, nil); ce == nil || ce.Code != contract.CodeUnsupportedHardware {
		t.Fatalf("a tool call got %v, want UNSUPPORTED_HARDWARE", ce)
	}
	if n := len(h.d.Engine().Devices()); n != 0 {
		t.Fatalf("%d devices created", n)
	}
	if h.launched() {
		t.Fatal("the keeper launched a daemon")
	}
}

// A ready session is published, kept alive past its TTL by heartbeats, and
// released when stdin closes. The TTL is 3 s, not the harness's 1.5 s: a
// keeper stalled for a second on a loaded CI machine lapsed the shorter
// one between the check and the release.
func TestSessionConfigReadyIsHeldAndReleasedOnEOF(t *testing.T) {
	h := sessionHarnessTTL(t, 3000)
	o := h.options("agent-s", newLogs())
	o.Session = &SessionOptions{Config: sessionCfg("r2", &contract.HardwareRequirement{Kind: contract.HardwareModel,
		Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}), OwnerToken: "tok"}
	s := serve(t, o)
	p := published(t, s)
	if p["status"] != contract.SessionReady || p["sessionId"] == "" {
		t.Fatalf("published %v", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(5*time.Second))
	defer cancel()
	tl, err := s.cs.ListTools(ctx, &mcpsdk.ListToolsParams{})
	if err != nil || len(tl.Tools) == 0 {
		t.Fatalf("no tools for a ready session: %v", err)
	}
	// The session is the server's one lease: nothing leases or releases
	// another, listed or called by name.
	for _, tool := range tl.Tools {
		if tool.Name == ToolLeaseSimulator || tool.Name == ToolReleaseSimulator {
			t.Errorf("a session's server lists %s", tool.Name)
		}
	}
	for _, name := range []string{ToolLeaseSimulator, ToolReleaseSimulator} {
		if _, cerr := s.call(name, map[string]any{}, nil); cerr == nil || cerr.Code != contract.CodeForbidden {
			t.Errorf("%s on a session's server: %+v, want FORBIDDEN", name, cerr)
		}
	}
	own := &acquired{receipt: contract.SessionReceipt{Status: contract.SessionReady, LeaseID: p["leaseId"].(string)}}
	if id, err := own.ownLease(""); err != nil || id != p["leaseId"] {
		t.Errorf("ownLease(\"\") = %q, %v; want the session's lease", id, err)
	}
	if _, err := own.ownLease("lease_other"); contract.AsError(err) == nil || contract.AsError(err).Code != contract.CodeForbidden {
		t.Errorf("ownLease of another lease: %v, want FORBIDDEN", err)
	}
	time.Sleep(4 * time.Second) // past the 3 s heartbeat TTL
	st, err := client.Do(context.Background(), h.admin(), contract.SessionStatus, contract.SessionStatusIn{RequestID: "r2", OwnerToken: "tok"})
	if err != nil || st.Status != contract.SessionReady {
		t.Fatalf("the kept session after its TTL: %+v %v", st, err)
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
	st, err = client.Do(context.Background(), h.admin(), contract.SessionStatus, contract.SessionStatusIn{RequestID: "r2", OwnerToken: "tok"})
	if err != nil || st.Status != contract.SessionReleased {
		t.Fatalf("after stdin closed: %+v %v", st, err)
	}
}

// A daemon that serves no sessions answers every heartbeat
// SESSIONS_NOT_CONFIGURED, which no retry can change: the keeper stops
// (as `simlock session hold` always did) and every tool call is refused
// with it, instead of heartbeating a session no daemon holds forever.
func TestSessionKeeperStopsWhenTheDaemonServesNoSessions(t *testing.T) {
	// A TTL a busy machine does not outlast (with 1.5 s a keeper slowed by
	// load could lapse first, and the old daemon's SESSION_ENDED would then
	// be the stop code this test reads), yet short enough that the keeper's
	// next heartbeat, at a third of it, reaches the new daemon within the
	// wait below.
	h := sessionHarnessTTL(t, 6000)
	logs := newLogs()
	o := h.options("agent-s", logs)
	o.Session = &SessionOptions{Config: sessionCfg("r3", &contract.HardwareRequirement{Kind: contract.HardwareModel,
		Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}), OwnerToken: "tok"}
	s := serve(t, o)
	if p := published(t, s); p["status"] != contract.SessionReady {
		t.Fatalf("published %v", p)
	}
	h.stop()
	h.cfg.Sessions = nil
	h.start()
	logs.wait(t, "the session ended under its keeper", 1)
	if _, ce := s.call(ToolListDevices, map[string]any{}, nil); ce == nil || ce.Code != contract.CodeSessionsNotConfigured {
		t.Fatalf("a tool call after the keeper stopped: %+v, want SESSIONS_NOT_CONFIGURED", ce)
	}
	if err := s.end(); err != nil {
		t.Fatalf("the server's end: %v", err)
	}
}
