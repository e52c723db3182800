package client

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/transport/httpapi"
	"github.com/simlock/simlock/internal/transport/httpapi/httpapitest"
)

type httpFixture struct {
	b   *httpapitest.Backend
	srv *httpapi.Server
	ts  *httptest.Server
}

func serveHTTP(t *testing.T, devices int) *httpFixture {
	t.Helper()
	b := httpapitest.New(devices)
	b.AddToken("agent-1", contract.TokenRoleAgent, "a1")
	b.AddToken("agent-2", contract.TokenRoleAgent, "a2")
	b.AddToken("operator", contract.TokenRoleOperator, "op")
	srv := httpapi.New(httpapi.Options{Backend: b, Version: "test"})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // first: ends open streams
	return &httpFixture{b: b, srv: srv, ts: ts}
}

func (f *httpFixture) dial(t *testing.T, token string) *Client {
	t.Helper()
	c, err := DialHTTP(context.Background(), f.ts.URL+"/", token, WithClientName("http-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func spin(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		runtime.Gosched()
	}
}

func TestHTTPClientRoundTrip(t *testing.T) {
	f := serveHTTP(t, 1)
	ctx := context.Background()
	c := f.dial(t, "agent-1")
	if h := c.Hello(); h.Role != contract.RoleAgent || h.Principal != "token:a1" || h.Selected != contract.ProtocolMax {
		t.Fatalf("hello %+v", h)
	}
	st, err := Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil || st.Daemon.Version != "test" {
		t.Fatalf("status: %v %+v", err, st.Daemon)
	}

	// A queued request streams its progress, then resolves with the lease.
	other := f.dial(t, "agent-2")
	held, err := other.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var phases []string
	got := make(chan contract.Lease, 1)
	go func() {
		l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, func(p contract.Progress) {
			mu.Lock()
			phases = append(phases, p.Phase)
			mu.Unlock()
		})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	spin(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(phases) == 1 })
	if _, err := Do(ctx, other, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: held.LeaseID}); err != nil {
		t.Fatal(err)
	}
	l := <-got
	mu.Lock()
	if l.OwnerID != "token:a1" || len(phases) != 2 || phases[0] != "queued" || phases[1] != "granted" {
		t.Fatalf("lease %+v after %v", l, phases)
	}
	mu.Unlock()
	if r, err := Do(ctx, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: l.LeaseID, TTLMs: 5000}); err != nil || r.TTLMs != 5000 {
		t.Fatalf("renew: %v %+v", err, r)
	}

	// Refusals come back as the contract's errors.
	if _, err := Do(ctx, other, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); !IsCode(err, contract.CodeForbidden) {
		t.Fatalf("foreign release: %v", err)
	}
	if _, err := Do(ctx, c, contract.ListGet, contract.ListGetIn{}); !IsCode(err, contract.CodeForbidden) {
		t.Fatalf("admin op as agent: %v", err)
	}
	if _, err := c.Raw(ctx, "no.such", nil, nil); !IsCode(err, contract.CodeUnknownOperation) {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		t.Fatal("refusals must not lose the client")
	default:
	}
}

func TestHTTPClientFollowsEvents(t *testing.T) {
	f := serveHTTP(t, 1)
	c := f.dial(t, "operator")
	before := f.b.Emit(contract.Event{Type: "daemon.started"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := make(chan contract.Event, 4)
	out, err := c.Events(ctx, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) { live <- e })
	if err != nil || len(out.Events) != 1 || out.Events[0].Seq != before.Seq {
		t.Fatalf("backlog %v %+v", err, out)
	}
	spin(t, func() bool { return f.b.Subscribers() >= 2 }) // the server's own notice follower is the other
	sent := f.b.Emit(contract.Event{Type: "device.recovered", DeviceID: "dev-1"})
	select {
	case e := <-live:
		if e.Seq != sent.Seq || e.Type != sent.Type {
			t.Fatalf("live event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event")
	}
	cancel()
	spin(t, func() bool { return f.b.Subscribers() == 1 })
	select {
	case <-c.Done():
		t.Fatal("ending a follow by its context must not lose the client")
	default:
	}
}

func TestHTTPClientReportsALostServerOnce(t *testing.T) {
	f := serveHTTP(t, 1)
	c := f.dial(t, "operator")
	var mu sync.Mutex
	var lost []error
	c.OnConnectionLost(func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() })
	if _, err := c.Events(context.Background(), contract.EventsSubscribeIn{Follow: true}, nil); err != nil {
		t.Fatal(err)
	}
	f.srv.Close() // ends the follow stream: the daemon went away
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not notice its stream ending")
	}
	f.ts.Close()
	if _, err := Do(context.Background(), c, contract.StatusGet, contract.StatusGetIn{}); !IsCode(err, contract.CodeConnectionLost) {
		t.Fatalf("call after loss: %v", err)
	}
	spin(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(lost) > 0 }) // hooks run after Done closes
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || !IsCode(lost[0], contract.CodeConnectionLost) {
		t.Fatalf("hooks ran %d times: %v", len(lost), lost)
	}
}

func TestDialHTTPRefusals(t *testing.T) {
	f := serveHTTP(t, 1)
	ctx := context.Background()
	if _, err := DialHTTP(ctx, f.ts.URL, "wrong"); !IsCode(err, contract.CodeUnauthenticated) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := DialHTTP(ctx, "unix:///tmp/x", "t"); !IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("bad URL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	if _, err := DialHTTP(ctx, "http://"+addr, "t"); !IsCode(err, contract.CodeDaemonNotRunning) {
		t.Fatalf("nothing listening: %v", err)
	}
}

func TestHTTPClientTimeouts(t *testing.T) {
	tr := newHTTPTransport("http://127.0.0.1:1", "t", httpConfig{})
	if tr.ordinary.Timeout != ordinaryCallTimeout || tr.waiting.Timeout != 0 {
		t.Fatalf("ordinary %v, waiting %v", tr.ordinary.Timeout, tr.waiting.Timeout)
	}
	for _, op := range []string{contract.LeaseRequest.Name, contract.EventsSubscribe.Name, "device.exec"} {
		if !waitingOps[op] {
			t.Errorf("%s must not be cut by the ordinary timeout", op)
		}
	}
}

func TestHTTPClientRelaysExecOutput(t *testing.T) {
	f := serveHTTP(t, 1)
	ctx := context.Background()
	c := f.dial(t, "agent-1")
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	raw, err := c.Raw(ctx, contract.DeviceExec.Name, []byte(`{"leaseId":"`+l.LeaseID+`","tool":"simctl","args":["fail"]}`),
		func(method string, params json.RawMessage) { chunks = append(chunks, method+" "+string(params)) })
	if err != nil || string(raw) != `{"exitCode":3}` {
		t.Fatalf("exec: %v %s", err, raw)
	}
	if len(chunks) != 1 || chunks[0] != `output {"stream":"stdout","chunk":"fail\n"}` {
		t.Fatalf("output %q", chunks)
	}
}
