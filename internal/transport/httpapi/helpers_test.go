package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/transport/httpapi/httpapitest"
)

const (
	agentTok    = "agent-secret"
	agent2Tok   = "agent2-secret"
	operatorTok = "operator-secret"
	workerTok   = "worker-secret"
)

type fixture struct {
	t   *testing.T
	b   *httpapitest.Backend
	s   *Server
	ts  *httptest.Server
	clk *fake.Clock // nil when the system clock drives the server
}

// newFixture serves a fake backend with n devices. With fakeClock, waits
// and timers move only on f.clk.Advance.
func newFixture(t *testing.T, devices int, fakeClock bool) *fixture {
	t.Helper()
	b := httpapitest.New(devices)
	b.AddToken(agentTok, contract.TokenRoleAgent, "agent1")
	b.AddToken(agent2Tok, contract.TokenRoleAgent, "agent2")
	b.AddToken(operatorTok, contract.TokenRoleOperator, "op1")
	b.AddToken(workerTok, contract.TokenRoleWorker, "wk1")
	f := &fixture{t: t, b: b}
	var clk ports.Clock = ports.SystemClock{}
	if fakeClock {
		f.clk = fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		clk = f.clk
	}
	f.s = New(Options{Backend: b, Clock: clk, Version: "1.2.3"})
	f.ts = httptest.NewServer(f.s.Handler())
	t.Cleanup(f.ts.Close)
	t.Cleanup(f.s.Close) // runs first: ends streams so ts.Close need not wait
	// The notice follower subscribes asynchronously; wait for it so tests
	// that emit events know it is listening.
	eventually(t, func() bool { return b.Subscribers() >= 1 })
	return f
}

// eventually spins (without sleeping) until cond holds, failing after 5s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		runtime.Gosched()
	}
}

// req sends a request; hdr is name, value pairs.
func (f *fixture) req(method, path, token, body string, hdr ...string) *http.Response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, f.ts.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.ts.Client().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// call sends a request and decodes a JSON answer into out (when non-nil);
// it returns the response with its body consumed.
func (f *fixture) call(method, path, token, body string, out any, hdr ...string) *http.Response {
	f.t.Helper()
	resp := f.req(method, path, token, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp
}

// refusal sends a request expected to fail and returns its contract error.
func (f *fixture) refusal(method, path, token, body string, hdr ...string) (*contract.Error, *http.Response) {
	f.t.Helper()
	var eb ErrorBody
	resp := f.call(method, path, token, body, &eb, hdr...)
	if eb.Error == nil {
		f.t.Fatalf("%s %s: status %d without an error body", method, path, resp.StatusCode)
	}
	if resp.StatusCode != StatusFor(eb.Error.Code) {
		f.t.Fatalf("%s %s: status %d for %s, table says %d", method, path, resp.StatusCode, eb.Error.Code, StatusFor(eb.Error.Code))
	}
	return eb.Error, resp
}

// lease grants a lease to token and returns it.
func (f *fixture) lease(token string) contract.Lease {
	f.t.Helper()
	var l contract.Lease
	resp := f.call("POST", "/v1/leases", token, `{"platform":"ios"}`, &l)
	if resp.StatusCode != http.StatusCreated {
		f.t.Fatalf("lease: status %d", resp.StatusCode)
	}
	return l
}

// waitTimers waits until the fake clock has at least n armed timers.
func (f *fixture) waitTimers(n int) {
	f.t.Helper()
	eventually(f.t, func() bool { return f.clk.Pending() >= n })
}

// ndjson reads NDJSON lines from r.
type ndjson struct{ r *bufio.Reader }

func (n ndjson) next(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	b, err := n.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read line: %v (%q)", err, b)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("line %q: %v", b, err)
	}
	return m
}
