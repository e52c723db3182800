package client_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// httpFixture is the HTTP frontend over a real daemon (daemontest: the
// real dispatcher, engine and store on a fake clock and the fake driver),
// with three tokens minted in its store.
type httpFixture struct {
	st                       *daemontest.Stack
	srv                      *httpapi.Server
	ts                       *httptest.Server
	agent1, agent2, operator string
	principal1               string
}

func serveHTTP(t *testing.T, devices int) *httpFixture {
	t.Helper()
	st := daemontest.Start(t, daemontest.Options{Devices: devices})
	f := &httpFixture{st: st}
	f.agent1, f.principal1 = st.Token(contract.TokenRoleAgent, "a1")
	f.agent2, _ = st.Token(contract.TokenRoleAgent, "a2")
	f.operator, _ = st.Token(contract.TokenRoleOperator, "op")
	f.srv = httpapi.New(httpapi.Options{Backend: st.Backend(), Clock: st.Clock, Version: "test"})
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.ts.Close)
	t.Cleanup(f.srv.Close) // first: ends open streams
	return f
}

func (f *httpFixture) dial(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.DialHTTP(context.Background(), f.ts.URL+"/", token, client.WithClientName("http-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func spin(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
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
	c := f.dial(t, f.agent1)
	if h := c.Hello(); h.Role != contract.RoleAgent || h.Principal != f.principal1 || h.Selected != contract.ProtocolMax {
		t.Fatalf("hello %+v", h)
	}
	st, err := client.Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil || st.Daemon.Version != "test" {
		t.Fatalf("status: %v %+v", err, st.Daemon)
	}

	// A queued request streams its progress, then resolves with the lease.
	other := f.dial(t, f.agent2)
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
	if _, err := client.Do(ctx, other, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: held.LeaseID}); err != nil {
		t.Fatal(err)
	}
	l := <-got
	mu.Lock()
	if l.OwnerID != f.principal1 || len(phases) == 0 || phases[0] != "queued" {
		t.Fatalf("lease %+v after %v", l, phases)
	}
	mu.Unlock()
	if r, err := client.Do(ctx, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: l.LeaseID, TTLMs: 5000}); err != nil || r.TTLMs != 5000 {
		t.Fatalf("renew: %v %+v", err, r)
	}

	// Refusals come back as the contract's errors.
	if _, err := client.Do(ctx, other, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("foreign release: %v", err)
	}
	if _, err := client.Do(ctx, c, contract.ListGet, contract.ListGetIn{}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("admin op as agent: %v", err)
	}
	if _, err := c.Raw(ctx, "no.such", nil, nil); !client.IsCode(err, contract.CodeUnknownOperation) {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
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
	c := f.dial(t, f.operator)
	// The daemon's own backlog so far (daemon.started and the rest).
	var before contract.EventsSubscribeOut
	f.st.Admin(contract.EventsSubscribe.Name, contract.EventsSubscribeIn{}, &before)
	if len(before.Events) == 0 {
		t.Fatal("the daemon published nothing at start")
	}
	last := before.Events[len(before.Events)-1].Seq
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := make(chan contract.Event, 64)
	out, err := c.Events(ctx, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) { live <- e })
	if err != nil || len(out.Events) != len(before.Events) || out.Events[len(out.Events)-1].Seq != last {
		t.Fatalf("backlog %v %+v", err, out)
	}
	// A lease granted now is a live fact, delivered next in sequence.
	var l contract.Lease
	f.st.Admin(contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios", RequesterID: "job-1"}, &l)
	for granted := false; !granted; {
		select {
		case e := <-live:
			if e.Seq != last+1 {
				t.Fatalf("live event %+v after seq %d", e, last)
			}
			last = e.Seq
			granted = e.Type == "lease.granted" && e.LeaseID == l.LeaseID
		case <-time.After(testhost.Scale(5 * time.Second)):
			t.Fatal("no live lease.granted")
		}
	}
	cancel()
	select {
	case <-c.Done():
		t.Fatal("ending a follow by its context must not lose the client")
	default:
	}
}

func TestHTTPClientReportsALostServerOnce(t *testing.T) {
	f := serveHTTP(t, 1)
	c := f.dial(t, f.operator)
	var mu sync.Mutex
	var lost []error
	c.OnConnectionLost(func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() })
	if _, err := c.Events(context.Background(), contract.EventsSubscribeIn{Follow: true}, nil); err != nil {
		t.Fatal(err)
	}
	f.srv.Close() // ends the follow stream: the daemon went away
	select {
	case <-c.Done():
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("the client did not notice its stream ending")
	}
	f.ts.Close()
	if _, err := client.Do(context.Background(), c, contract.StatusGet, contract.StatusGetIn{}); !client.IsCode(err, contract.CodeConnectionLost) {
		t.Fatalf("call after loss: %v", err)
	}
	spin(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(lost) > 0 }) // hooks run after Done closes
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || !client.IsCode(lost[0], contract.CodeConnectionLost) {
		t.Fatalf("hooks ran %d times: %v", len(lost), lost)
	}
}

func TestDialHTTPRefusals(t *testing.T) {
	f := serveHTTP(t, 1)
	ctx := context.Background()
	if _, err := client.DialHTTP(ctx, f.ts.URL, "wrong"); !client.IsCode(err, contract.CodeUnauthenticated) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := client.DialHTTP(ctx, "unix:///tmp/x", "t"); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("bad URL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	if _, err := client.DialHTTP(ctx, "http://"+addr, "t"); !client.IsCode(err, contract.CodeDaemonNotRunning) {
		t.Fatalf("nothing listening: %v", err)
	}
}

func TestHTTPClientRelaysExecOutput(t *testing.T) {
	f := serveHTTP(t, 1)
	ctx := context.Background()
	c := f.dial(t, f.agent1)
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	raw, err := c.Raw(ctx, contract.DeviceExec.Name, []byte(`{"leaseId":"`+l.LeaseID+`","tool":"fakectl","args":["fail"]}`),
		func(method string, params json.RawMessage) { chunks = append(chunks, method+" "+string(params)) })
	if err != nil || string(raw) != `{"exitCode":3}` {
		t.Fatalf("exec: %v %s", err, raw)
	}
	if len(chunks) != 1 || chunks[0] != `output {"stream":"stdout","chunk":"fail\n"}` {
		t.Fatalf("output %q", chunks)
	}
}
