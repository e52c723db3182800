package httpapi_test

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

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// fixture is the HTTP frontend in front of a real daemon (dispatcher,
// handlers, engine, store) on a fake clock with the scripted fake driver;
// see internal/daemon/daemontest. Build it with newFixture.
type fixture struct {
	t   *testing.T
	st  *daemontest.Stack
	s   *httpapi.Server
	ts  *httptest.Server
	clk *fake.Clock // the engine's and the server's: waits and timers move only on Advance

	// Bearer secrets of four tokens minted in the daemon's store.
	agent, agent2, operator, worker string
	principals                      map[string]string // secret -> "token:<id>"
}

// newFixture starts a daemon whose iOS driver has room for devices
// devices (provisioned on demand) and serves it over HTTP on a loopback
// listener. Everything stops when the test ends.
//
// Porting a test written for the old fake backend (httpapitest):
//   - newFixture(t, n, fakeClock) becomes newFixture(t, n): the clock is
//     always fake, shared by the engine and the server (f.clk);
//   - the file is package httpapi_test: prefix the package's names
//     (httpapi.ErrorBody, httpapi.StatusFor, httpapi.MediaNDJSON, ...);
//     frontend state to wait on is in export_test.go;
//   - agentTok, agent2Tok, operatorTok, workerTok become f.agent, f.agent2,
//     f.operator, f.worker, and "token:agent1" becomes f.principal(f.agent);
//   - f.b.Queued() is f.st.Queued(); f.b.Crash/LoseDevice are
//     f.st.Driver.Crash/Vanish(f.st.Handle(deviceID)) then
//     f.st.HealthTicks(f.st.Config.Health.StableObservations); f.b.Expire
//     is f.clk.Advance past the TTL; exec uses the fake driver's tool
//     "fakectl" (see daemontest.Stack.Runner); f.st.Admin runs any
//     operation as admin through the real dispatcher.
func newFixture(t *testing.T, devices int) *fixture {
	t.Helper()
	st := daemontest.Start(t, daemontest.Options{Devices: devices})
	f := &fixture{t: t, st: st, clk: st.Clock, principals: map[string]string{}}
	for _, tk := range []struct {
		dst        *string
		role, name string
	}{{&f.agent, contract.TokenRoleAgent, "agent1"}, {&f.agent2, contract.TokenRoleAgent, "agent2"},
		{&f.operator, contract.TokenRoleOperator, "op1"}, {&f.worker, contract.TokenRoleWorker, "wk1"}} {
		secret, principal := st.Token(tk.role, tk.name)
		*tk.dst, f.principals[secret] = secret, principal
	}
	f.s = httpapi.New(httpapi.Options{Backend: st.Backend(), Clock: st.Clock, Version: "1.2.3"})
	f.ts = httptest.NewServer(f.s.Handler())
	t.Cleanup(f.ts.Close)
	t.Cleanup(f.s.Close) // runs first: ends streams so ts.Close need not wait
	return f
}

// principal is the principal a bearer of secret acts as.
func (f *fixture) principal(secret string) string { return f.principals[secret] }

// eventually spins (without sleeping) until cond holds, failing after 5s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
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
	var eb httpapi.ErrorBody
	resp := f.call(method, path, token, body, &eb, hdr...)
	if eb.Error == nil {
		f.t.Fatalf("%s %s: status %d without an error body", method, path, resp.StatusCode)
	}
	if resp.StatusCode != httpapi.StatusFor(eb.Error.Code) {
		f.t.Fatalf("%s %s: status %d for %s, table says %d", method, path, resp.StatusCode, eb.Error.Code, httpapi.StatusFor(eb.Error.Code))
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

// polls counts the polls waiting on handles (their timers are armed).
func (f *fixture) polls() int { return httpapi.PollsWaiting(f.s) }

// handles counts the handles still waiting for an outcome.
func (f *fixture) handles() int { return httpapi.HandlesWaiting(f.s) }

// handle reports on handle id, or with "" on the one still waiting.
func (f *fixture) handle(id string) (progress, finished bool) { return httpapi.HandleState(f.s, id) }

// buffered reports how many notices wait for lease id.
func (f *fixture) buffered(id string) (n int, ended bool) { return httpapi.NoticesBuffered(f.s, id) }

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

// sseMessage is one parsed Server-Sent Events message.
type sseMessage struct{ event, id, data string }

func readSSE(t *testing.T, r *bufio.Reader) sseMessage {
	t.Helper()
	var m sseMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read SSE: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if m.data != "" {
				return m
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			m.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			m.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			m.data = strings.TrimPrefix(line, "data: ")
		}
	}
}
