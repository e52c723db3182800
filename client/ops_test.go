package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// methodAliases are the operations whose method predates the naming rule
// (the operation's name in Go case) and keeps its shorter name; hello is
// the handshake every Dial performs, whose answer Hello returns.
var methodAliases = map[string]string{
	contract.Hello.Name:           "Hello",
	contract.EventsSubscribe.Name: "Events",
	contract.DeviceExec.Name:      "Exec",
	contract.DeviceUpload.Name:    "Upload",
}

// methodFor is the client method an operation is served by:
// lease.requestStatus is LeaseRequestStatus.
func methodFor(op string) string {
	if m, ok := methodAliases[op]; ok {
		return m
	}
	var b strings.Builder
	for _, part := range strings.Split(op, ".") {
		r := []rune(part)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

// Every operation in the contract has a typed method on *Client, ctx
// first (hello aside), answering the operation's own output type and an
// error: a new operation without a method fails here, so the set cannot
// drift from the contract.
func TestEveryOperationHasAMethod(t *testing.T) {
	ct := reflect.TypeFor[*client.Client]()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for _, op := range contract.Registry() {
		name := methodFor(op.Name)
		m, ok := ct.MethodByName(name)
		if !ok {
			t.Errorf("%s has no client method %s", op.Name, name)
			continue
		}
		ft := m.Type // the receiver is In(0)
		if op.Name != contract.Hello.Name && (ft.NumIn() < 2 || ft.In(1) != ctxType) {
			t.Errorf("%s: %s does not take a context.Context first: %s", op.Name, name, ft)
		}
		wantOut := 2
		if op.Name == contract.Hello.Name {
			wantOut = 1
		}
		if ft.NumOut() != wantOut || ft.Out(0) != op.Out || (wantOut == 2 && ft.Out(1) != errType) {
			t.Errorf("%s: %s answers %s, want (%s, error)", op.Name, name, ft, op.Out)
		}
	}
}

// The package documentation's operation list names every operation and
// its method, so `go doc` of the client is the index of what it can do.
func TestThePackageDocListsEveryOperation(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, op := range contract.Registry() {
		// The name as a list item's word: "lease.request" is not found in
		// "lease.requestStatus".
		if !regexp.MustCompile(`[\s,]` + regexp.QuoteMeta(op.Name) + `[,:\s]`).MatchString(doc) {
			t.Errorf("doc.go does not list %s", op.Name)
		}
		if !regexp.MustCompile(`\b` + methodFor(op.Name) + `\b`).MatchString(doc) {
			t.Errorf("doc.go does not name %s's method %s", op.Name, methodFor(op.Name))
		}
	}
}

// opsSessionConfig is a session request the fake driver can serve.
func opsSessionConfig(t *testing.T, requestID string) contract.SessionConfig {
	t.Helper()
	var cfg contract.SessionConfig
	raw := `{"contractVersion":1,"requestId":"` + requestID + `","device":{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"simlock-model","value":"Phone"}}}}`
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func dialAs(t *testing.T, st *daemontest.Stack, principal, credential string) *client.Client {
	t.Helper()
	c, err := client.Dial(t.Context(), client.Options{Socket: client.SocketPath(st.Home), Principal: principal, Credential: credential, Name: "ops-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantCode fails unless err is a *contract.Error (found with errors.As, as
// a caller would) with code.
func wantCode(t *testing.T, op string, err error, code contract.Code) {
	t.Helper()
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: %v, want %s", op, err, code)
	}
}

// Transports the round trips run over.
const (
	viaSocket = "socket"
	viaHTTP   = "http"
)

// opsStack is a daemon with sessions served and an agent and an admin
// (operator token) client of it, over the socket or over the daemon's HTTP
// API in front of the same stack. agentPrincipal is who the agent is.
func opsStack(t *testing.T, via string, edit func(*config.Config)) (st *daemontest.Stack, agent, admin *client.Client, agentPrincipal string) {
	t.Helper()
	st = daemontest.Start(t, daemontest.Options{Devices: 2, Config: func(c *config.Config) {
		c.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000}
		if edit != nil {
			edit(c)
		}
	}})
	secret, _ := st.Token(contract.TokenRoleOperator, "ops-admin")
	if via == viaSocket {
		return st, dialAs(t, st, "ops-agent", ""), dialAs(t, st, "ops-admin", secret), "ops-agent"
	}
	agentTok, principal := st.Token(contract.TokenRoleAgent, "ops-agent")
	srv := httpapi.New(httpapi.Options{Backend: st.Backend(), Clock: st.Clock, Version: "test"})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // first: ends open streams
	dial := func(token string) *client.Client {
		c, err := client.DialHTTP(t.Context(), ts.URL, token, client.WithClientName("ops-test"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return st, dial(agentTok), dial(secret), principal
}

// stepper runs one operation's check as a subtest and records the
// operation as covered; a failed step ends its group, since later steps
// build on it.
type stepper struct {
	t       *testing.T
	covered map[string]bool
}

func (s stepper) step(op string, f func(t *testing.T)) {
	s.t.Helper()
	s.covered[op] = true
	if !s.t.Run(op, f) {
		s.t.FailNow()
	}
}

// Every typed method reaches a real daemon (the real dispatcher, handlers,
// engine and store on the fake driver) under its own operation's name and
// decodes its answer: each step checks something only the right
// operation answers, a refusal being the handler's own code, read with
// errors.As. The steps must together cover contract.Registry(), so a new
// operation's method cannot go untested.
func TestEveryMethodRoundTrips(t *testing.T) {
	covered := map[string]bool{}
	groups := []struct {
		name string
		run  func(*testing.T, string, map[string]bool)
	}{{"leases", leaseSteps}, {"sessions", sessionSteps}, {"slots", slotSteps}, {"gateway", gatewaySteps}, {"stop", stopSteps}}
	all := true
	for _, via := range []string{viaSocket, viaHTTP} {
		for _, g := range groups {
			ran := false
			t.Run(via+"/"+g.name, func(t *testing.T) { ran = true; g.run(t, via, covered) })
			all = all && ran
		}
	}
	if !all {
		t.Log("a -run filter skipped some groups; coverage of the contract is not checked")
		return
	}
	for _, op := range contract.Registry() {
		if !covered[op.Name] {
			t.Errorf("no round trip covers %s (%s)", op.Name, methodFor(op.Name))
		}
	}
}

// stepContext ends a little before the test binary's deadline, so a call
// that never answers fails its step instead of the whole binary.
func stepContext(t *testing.T) context.Context {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		c, cancel := context.WithDeadline(ctx, d.Add(-5*time.Second))
		t.Cleanup(cancel)
		ctx = c
	}
	return ctx
}

func leaseSteps(t *testing.T, via string, covered map[string]bool) {
	st, agent, admin, agentPrincipal := opsStack(t, via, nil)
	ctx := stepContext(t)
	s := stepper{t, covered}
	step := s.step
	var lease contract.Lease

	step(contract.Hello.Name, func(t *testing.T) {
		if h := agent.Hello(); h.Principal != agentPrincipal || h.Role != contract.RoleAgent {
			t.Fatalf("agent hello %+v", h)
		}
		if h := admin.Hello(); h.Role != contract.RoleAdmin {
			t.Fatalf("admin hello %+v", h)
		}
	})
	step(contract.CapabilitiesGet.Name, func(t *testing.T) {
		out, err := agent.CapabilitiesGet(ctx)
		if err != nil || len(out.Contracts) == 0 || out.Contracts[0] != contract.ContractSessionBroker {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.StatusGet.Name, func(t *testing.T) {
		out, err := agent.StatusGet(ctx)
		if err != nil || out.Daemon.Home != st.Home {
			t.Fatalf("%+v %v", out.Daemon, err)
		}
	})
	step(contract.CatalogGet.Name, func(t *testing.T) {
		out, err := agent.CatalogGet(ctx, "ios")
		if err != nil || len(out.Platforms) != 1 || out.Platforms[0].Platform != "ios" {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.ConfigGet.Name, func(t *testing.T) {
		out, err := admin.ConfigGet(ctx)
		if err != nil || !bytes.Contains(out.Config, []byte(`"sessions"`)) {
			t.Fatalf("%+v %v", out, err)
		}
		_, err = agent.ConfigGet(ctx)
		wantCode(t, "config.get as an agent", err, contract.CodeForbidden)
	})
	step(contract.LeaseRequest.Name, func(t *testing.T) {
		var err error
		lease, err = agent.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil, client.TTL(90*time.Second))
		if err != nil || lease.TTLMs != 90_000 {
			t.Fatalf("%+v %v", lease, err)
		}
	})
	step(contract.LeaseGet.Name, func(t *testing.T) {
		out, err := agent.LeaseGet(ctx, lease.LeaseID)
		if err != nil || out.DeviceID != lease.DeviceID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.LeaseRenew.Name, func(t *testing.T) {
		out, err := agent.LeaseRenew(ctx, lease.LeaseID, client.TTL(2*time.Minute))
		if err != nil || out.TTLMs != 120_000 {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.LeaseList.Name, func(t *testing.T) {
		out, err := agent.LeaseList(ctx)
		if err != nil || len(out.Leases) != 1 || out.Leases[0].LeaseID != lease.LeaseID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.LeaseRequestStatus.Name, func(t *testing.T) {
		out, err := agent.LeaseRequestStatus(ctx, lease.RequestID)
		if err != nil || out.LeaseID != lease.LeaseID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.ListGet.Name, func(t *testing.T) {
		out, err := admin.ListGet(ctx, contract.ListGetIn{})
		if err != nil || len(out.Devices) != 1 || out.Devices[0].ID != lease.DeviceID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.QueueList.Name, func(t *testing.T) {
		out, err := agent.QueueList(ctx, contract.QueueListIn{Limit: 10})
		if err != nil || out.Depth != 0 || len(out.Entries) != 0 {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.DeviceExec.Name, func(t *testing.T) {
		var stdout strings.Builder
		out, err := agent.Exec(ctx, contract.DeviceExecIn{LeaseID: lease.LeaseID, Tool: "fakectl", Args: []string{"hi"}}, func(o contract.ExecOutput) {
			if o.Stream == "stdout" {
				stdout.WriteString(o.Chunk)
			}
		})
		if err != nil || out.ExitCode != 0 || stdout.String() != "hi\n" {
			t.Fatalf("%+v %q %v", out, stdout.String(), err)
		}
	})
	step(contract.DeviceUpload.Name, func(t *testing.T) {
		out, err := agent.Upload(ctx, lease.LeaseID, "a.txt", strings.NewReader("payload"))
		if err != nil || !out.Complete || out.Received != 7 {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.Passthrough.Name, func(t *testing.T) {
		out, err := agent.DriverPassthrough(ctx, contract.PassthroughIn{Tool: "fakectl", Args: []string{"list"}})
		if via == viaHTTP {
			// It resolves a command for the daemon's own machine, so the
			// HTTP API does not serve it (docs/http-api.md).
			wantCode(t, "driver.passthrough over HTTP", err, contract.CodeUnknownOperation)
			return
		}
		if err != nil || out.Platform != "ios" {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.ResourcesGet.Name, func(t *testing.T) {
		out, err := agent.ResourcesGet(ctx, lease.LeaseID)
		if err != nil || out.DeviceID != lease.DeviceID || out.Resources["widgets"].State != contract.ResourceUnsupported {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.ResourcesSet.Name, func(t *testing.T) {
		_, err := agent.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: lease.LeaseID,
			Resources: map[string]contract.ResourceState{"widgets": contract.ResourceDisabled}}, client.Timeout(time.Minute))
		// The handler's own refusal: resource tuning is off in this daemon.
		wantCode(t, "resources.set", err, contract.CodeResourcesDisabled)
	})
	step(contract.ResourcesReconcile.Name, func(t *testing.T) {
		_, err := agent.ResourcesReconcile(ctx, contract.ResourcesReconcileIn{LeaseID: lease.LeaseID,
			Resources: map[string]contract.ResourceState{"widgets": contract.ResourceDisabled}}, client.Timeout(time.Minute))
		wantCode(t, "resources.reconcile", err, contract.CodeResourcesDisabled)
	})
	step(contract.EventsSubscribe.Name, func(t *testing.T) {
		out, err := agent.Events(ctx, contract.EventsSubscribeIn{}, nil)
		if err != nil || !slices.ContainsFunc(out.Events, func(e contract.Event) bool { return e.Type == "lease.granted" && e.LeaseID == lease.LeaseID }) {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.LeaseRelease.Name, func(t *testing.T) {
		out, err := agent.LeaseRelease(ctx, lease.LeaseID)
		if err != nil || !out.Released || out.LeaseID != lease.LeaseID {
			t.Fatalf("%+v %v", out, err)
		}
		_, err = agent.LeaseGet(ctx, lease.LeaseID)
		wantCode(t, "lease.get after release", err, contract.CodeUnknownLease)
	})
	step(contract.LeaseReleaseAll.Name, func(t *testing.T) {
		l, err := agent.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := agent.LeaseReleaseAll(ctx, contract.LeaseReleaseAllIn{})
		if err != nil || !slices.Equal(out.Released, []string{l.LeaseID}) {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.LeaseCancel.Name, func(t *testing.T) {
		// Both devices held, a third request queues; cancelling it answers
		// the waiting call too.
		for _, who := range []string{"hold-1", "hold-2"} {
			if _, err := admin.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: who}, nil); err != nil {
				t.Fatal(err)
			}
		}
		queued := make(chan struct{})
		waited := make(chan error, 1)
		go func() {
			var once sync.Once
			_, err := agent.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, func(p contract.Progress) {
				if p.Phase == "queued" {
					once.Do(func() { close(queued) })
				}
			}, client.QueueTimeout(time.Hour))
			waited <- err
		}()
		select {
		case <-queued:
		case err := <-waited:
			t.Fatalf("the third request did not queue: %v", err)
		}
		q, err := agent.QueueList(ctx, contract.QueueListIn{})
		if err != nil || q.Depth != 1 || len(q.Entries) != 1 {
			t.Fatalf("queue.list with one waiter: %+v %v", q, err)
		}
		out, err := agent.LeaseCancel(ctx, "")
		if err != nil || !out.Cancelled {
			t.Fatalf("%+v %v", out, err)
		}
		if err := <-waited; err == nil {
			t.Fatal("the cancelled request was granted")
		}
		if _, err := admin.LeaseReleaseAll(ctx, contract.LeaseReleaseAllIn{Everyone: true}); err != nil {
			t.Fatal(err)
		}
	})
	step(contract.TokenCreate.Name, func(t *testing.T) {
		tok, err := admin.TokenCreate(ctx, contract.TokenCreateIn{Role: contract.TokenRoleAgent, Name: "ops-made"})
		if err != nil || tok.Token == "" || tok.ID == "" {
			t.Fatalf("%+v %v", tok, err)
		}
		list, err := admin.TokenList(ctx)
		if err != nil || !slices.ContainsFunc(list.Tokens, func(i contract.TokenInfo) bool { return i.ID == tok.ID }) {
			t.Fatalf("token.list %+v %v", list, err)
		}
		s.covered[contract.TokenList.Name] = true
		rev, err := admin.TokenRevoke(ctx, tok.ID)
		if err != nil || !rev.Revoked {
			t.Fatalf("token.revoke %+v %v", rev, err)
		}
		s.covered[contract.TokenRevoke.Name] = true
	})
	step(contract.CleanupRun.Name, func(t *testing.T) {
		out, err := admin.CleanupRun(ctx, contract.CleanupRunIn{DryRun: true})
		if err != nil || !out.DryRun {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.DoctorRun.Name, func(t *testing.T) {
		out, err := agent.DoctorRun(ctx, contract.DoctorRunIn{})
		if err != nil || !out.Healthy {
			t.Fatalf("%+v %v", out, err)
		}
		_, err = agent.DoctorRun(ctx, contract.DoctorRunIn{Fix: true})
		wantCode(t, "doctor.run fix as an agent", err, contract.CodeForbidden)
	})
	step(contract.DeviceRelease.Name, func(t *testing.T) {
		// A key no device of this daemon has: the handler's own answer.
		_, err := admin.DeviceRelease(ctx, "ios:udid:00000000-0000-0000-0000-000000000000")
		wantCode(t, "device.release", err, contract.CodeUnknownDevice)
	})
}

func sessionSteps(t *testing.T, via string, covered map[string]bool) {
	_, agent, _, _ := opsStack(t, via, nil)
	ctx := stepContext(t)
	step := stepper{t, covered}.step
	var session contract.SessionReceipt
	step(contract.SessionPrepare.Name, func(t *testing.T) {
		var err error
		session, err = agent.SessionPrepare(ctx, contract.SessionPrepareIn{Config: opsSessionConfig(t, "ops-r1"), OwnerToken: "o",
			Export: &contract.SessionExport{PrepareID: "ops-p1", RequestDigest: "ops-d1"}}, client.Wait(time.Hour))
		if err != nil || session.Status != contract.SessionReady || session.SessionID == "" {
			t.Fatalf("%+v %v", session, err)
		}
	})
	step(contract.SessionStatus.Name, func(t *testing.T) {
		out, err := agent.SessionStatus(ctx, contract.SessionStatusIn{RequestID: "ops-r1", OwnerToken: "o"})
		if err != nil || out.SessionID != session.SessionID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SessionInfo.Name, func(t *testing.T) {
		out, err := agent.SessionInfo(ctx, session.SessionID)
		if err != nil || out.Device == nil || out.Device.ID != session.Device.ID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SessionHeartbeat.Name, func(t *testing.T) {
		out, err := agent.SessionHeartbeat(ctx, contract.SessionHeartbeatIn{SessionID: session.SessionID, OwnerToken: "o"})
		if err != nil || out.SessionID != session.SessionID || out.ExpiresAtMs == 0 {
			t.Fatalf("%+v %v", out, err)
		}
		_, err = agent.SessionHeartbeat(ctx, contract.SessionHeartbeatIn{SessionID: session.SessionID, OwnerToken: "x"})
		wantCode(t, "session.heartbeat with another token", err, contract.CodeSessionOwnerMismatch)
	})
	step(contract.SessionGetExport.Name, func(t *testing.T) {
		out, err := agent.SessionGetExport(ctx, contract.SessionExportIn{PrepareID: "ops-p1", RequestDigest: "ops-d1", OwnerToken: "o"})
		if err != nil || out.Acknowledged || out.Result.SessionID != session.SessionID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SessionAcknowledgeExport.Name, func(t *testing.T) {
		out, err := agent.SessionAcknowledgeExport(ctx, contract.SessionExportIn{PrepareID: "ops-p1", RequestDigest: "ops-d1", OwnerToken: "o"})
		if err != nil || out.Outcome != "acknowledged" {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SessionRelease.Name, func(t *testing.T) {
		out, err := agent.SessionRelease(ctx, contract.SessionReleaseIn{SessionID: session.SessionID, OwnerToken: "o"}, client.ReplyBudget(10*time.Second))
		if err != nil || out.Outcome != contract.ReleaseReleased {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SessionAbandon.Name, func(t *testing.T) {
		out, err := agent.SessionAbandon(ctx, contract.SessionAbandonIn{RequestID: "ops-never", OwnerToken: "o"})
		if err != nil || out.Failure == nil || out.Failure.Code != contract.CodeSessionAbandoned {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SessionStats.Name, func(t *testing.T) {
		out, err := agent.SessionStats(ctx, contract.SessionStatsIn{Limit: 10}, client.Window(time.Hour))
		// Window(time.Hour) reached the wire as windowMs: the answer's
		// span is exactly that hour.
		if err != nil || out.UntilMs-out.SinceMs != time.Hour.Milliseconds() || out.Limit != 10 || len(out.Groups) != 1 {
			t.Fatalf("%+v %v", out, err)
		}
	})
}

func slotSteps(t *testing.T, via string, covered map[string]bool) {
	_, agent, admin, _ := opsStack(t, via, nil)
	ctx := stepContext(t)
	step := stepper{t, covered}.step
	cfg := contract.SlotLaunchConfig{ContractVersion: 1, ManagedHostScope: "h", RunnerNamespace: "ops", RunnerIncarnation: "b1", LocalSlotCapacity: 1,
		Requests: []contract.SlotRequest{{SlotIndex: 0, Role: "main", Platform: "ios", RequestedSpec: contract.SlotSpec{Runtime: "18.0"}}}}
	var slot contract.SlotResult
	step(contract.SlotAcquire.Name, func(t *testing.T) {
		res, err := agent.SlotAcquire(ctx, contract.SlotAcquireIn{Config: cfg, OwnerToken: "exec-1"})
		if err != nil || res.Outcome != contract.SlotOutcomeReady || len(res.Slots) != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		slot = res.Slots[0]
	})
	step(contract.SlotHeartbeat.Name, func(t *testing.T) {
		out, err := agent.SlotHeartbeat(ctx, contract.SlotHeartbeatIn{LeaseID: slot.LeaseID, OwnerToken: "exec-1"})
		if err != nil || out.ExpiresAtMs == 0 {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SlotList.Name, func(t *testing.T) {
		out, err := admin.SlotList(ctx)
		if err != nil || len(out.Assignments) != 1 || out.Assignments[0].LeaseID != slot.LeaseID {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SlotRelease.Name, func(t *testing.T) {
		out, err := agent.SlotRelease(ctx, contract.SlotReleaseIn{LeaseID: slot.LeaseID, OwnerToken: "exec-1"})
		if err != nil || out.Outcome != "reusable_for_this_slot" {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.SlotResetScope.Name, func(t *testing.T) {
		out, err := admin.SlotResetScope(ctx, contract.SlotResetScopeIn{RunnerNamespace: "ops", RunnerIncarnation: "b1", ManagedHostScope: "h"}, client.Wait(0))
		if err != nil || out.Outcome != "invalidated" || len(out.Scopes) != 1 {
			t.Fatalf("%+v %v", out, err)
		}
	})
}

func gatewaySteps(t *testing.T, via string, covered map[string]bool) {
	_, _, admin, _ := opsStack(t, via, func(c *config.Config) {
		c.Mode = "gateway"
		c.Sessions = nil
		c.HTTP = config.HTTP{Enabled: true, Listen: "127.0.0.1:0"}
	})
	ctx := stepContext(t)
	step := stepper{t, covered}.step
	step(contract.WorkerList.Name, func(t *testing.T) {
		// A worker daemon has no such operation; the gateway answers.
		out, err := admin.WorkerList(ctx)
		if err != nil || len(out.Workers) != 0 {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.WorkerDrain.Name, func(t *testing.T) {
		_, err := admin.WorkerDrain(ctx, "nosuch")
		wantCode(t, "WorkerDrain", err, contract.CodeUnknownDevice)
	})
	step(contract.WorkerUndrain.Name, func(t *testing.T) {
		_, err := admin.WorkerUndrain(ctx, "nosuch")
		wantCode(t, "WorkerUndrain", err, contract.CodeUnknownDevice)
	})
	step(contract.WorkerRemove.Name, func(t *testing.T) {
		_, err := admin.WorkerRemove(ctx, "nosuch")
		wantCode(t, "WorkerRemove", err, contract.CodeUnknownDevice)
	})
}

func stopSteps(t *testing.T, via string, covered map[string]bool) {
	_, agent, admin, _ := opsStack(t, via, nil)
	ctx := stepContext(t)
	step := stepper{t, covered}.step
	step(contract.NukeRun.Name, func(t *testing.T) {
		l, err := agent.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := admin.NukeRun(ctx)
		if err != nil || !slices.Equal(out.ReleasedLeases, []string{l.LeaseID}) || len(out.DestroyedDevices) != 1 {
			t.Fatalf("%+v %v", out, err)
		}
	})
	step(contract.DaemonStop.Name, func(t *testing.T) {
		out, err := admin.DaemonStop(ctx, contract.DaemonStopIn{})
		if err != nil || !out.Stopping {
			t.Fatalf("%+v %v", out, err)
		}
	})
}
