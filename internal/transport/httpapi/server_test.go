package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestHealthzAnswersWithoutAToken(t *testing.T) {
	f := newFixture(t, 1, false)
	var h Health
	resp := f.call("GET", "/v1/healthz", "", "", &h)
	if resp.StatusCode != 200 || h.Status != "ok" || h.Version != "1.2.3" {
		t.Fatalf("healthz: %d %+v", resp.StatusCode, h)
	}
}

func TestAuthMatrix(t *testing.T) {
	f := newFixture(t, 1, false)
	cases := []struct {
		method, path, token string
		want                int
		code                contract.Code
	}{
		{"GET", "/v1/status", "", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/status", "nope", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/status", workerTok, 403, contract.CodeForbidden},
		{"GET", "/v1/status", agentTok, 200, ""},
		{"GET", "/v1/status", operatorTok, 200, ""},
		{"GET", "/v1/devices", agentTok, 403, contract.CodeForbidden}, // list.get is admin: the dispatcher refuses
		{"GET", "/v1/devices", operatorTok, 200, ""},
		{"GET", "/v1/config", agentTok, 403, contract.CodeForbidden},
		{"GET", "/v1/tokens", agentTok, 403, contract.CodeForbidden},
		{"POST", "/v1/daemon/stop", agentTok, 403, contract.CodeForbidden},
		{"GET", "/v1/openapi.json", "", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/openapi.json", agentTok, 200, ""},
		{"GET", "/v1/no-such-route", "", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/no-such-route", agentTok, 404, contract.CodeUnknownOperation},
		{"POST", "/v1/ops/status.get", workerTok, 403, contract.CodeForbidden},
		{"POST", "/v1/hello", workerTok, 403, contract.CodeForbidden},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path+" "+c.token, func(t *testing.T) {
			if c.code == "" {
				resp := f.call(c.method, c.path, c.token, "", nil)
				if resp.StatusCode != c.want {
					t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
				}
				return
			}
			e, resp := f.refusal(c.method, c.path, c.token, "")
			if resp.StatusCode != c.want || e.Code != c.code {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, e.Code, c.want, c.code)
			}
			if c.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	r, _ := http.NewRequest("GET", f.ts.URL+"/v1/status", nil)
	r.Header.Set("Authorization", "Basic "+agentTok)
	resp, err := f.ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("Basic scheme: %d", resp.StatusCode)
	}
}

func TestErrorCodesMapThroughTheTable(t *testing.T) {
	for code, info := range contract.ErrorTable {
		if StatusFor(code) != info.HTTPStatus {
			t.Errorf("%s: %d, table %d", code, StatusFor(code), info.HTTPStatus)
		}
	}
	if StatusFor("SOMETHING_NEW") != contract.ErrorTable[contract.CodeUnknownDaemonError].HTTPStatus {
		t.Error("an unknown code must map like UNKNOWN_DAEMON_ERROR")
	}

	f := newFixture(t, 1, false)
	held := f.lease(agentTok)
	cases := []struct {
		name, method, path, token, body string
		code                            contract.Code
		status                          int
	}{
		{"unknown lease", "GET", "/v1/leases/lse_nope", agentTok, "", contract.CodeUnknownLease, 404},
		{"another's lease", "POST", "/v1/leases/" + held.LeaseID + "/renew", agent2Tok, "", contract.CodeForbidden, 403},
		{"no capacity", "POST", "/v1/leases", agent2Tok, `{"platform":"ios","noWait":true}`, contract.CodeNoCapacity, 503},
		{"already leased", "POST", "/v1/leases", agentTok, `{"platform":"ios"}`, contract.CodeRequesterLeased, 409},
		{"unsupported platform", "GET", "/v1/catalog?platform=android", agentTok, "", contract.CodeUnsupportedPlatform, 422},
		{"missing platform", "POST", "/v1/ops/lease.request", agentTok, `{}`, contract.CodeBadRequest, 400},
		{"unknown operation", "POST", "/v1/ops/no.such", agentTok, "", contract.CodeUnknownOperation, 404},
		{"no pending request", "POST", "/v1/requests/cancel", agentTok, "", contract.CodeNoPendingRequest, 404},
		{"unknown token", "DELETE", "/v1/tokens/tok_nope", operatorTok, "", contract.CodeUnknownToken, 404},
		{"protocol", "POST", "/v1/hello", agentTok, `{"protocol":{"min":1,"max":2}}`, contract.CodeProtocolUnsupported, 426},
		{"passthrough not served", "POST", "/v1/ops/driver.passthrough", agentTok, `{"tool":"simctl","args":["list"]}`, contract.CodeUnknownOperation, 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, resp := f.refusal(c.method, c.path, c.token, c.body)
			if e.Code != c.code || resp.StatusCode != c.status {
				t.Fatalf("got %d %s (%s), want %d %s", resp.StatusCode, e.Code, e.Message, c.status, c.code)
			}
			if c.code == contract.CodeNoCapacity && resp.Header.Get("Retry-After") != "5" {
				t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		})
	}
}

func TestBodiesAndQueriesAreStrict(t *testing.T) {
	f := newFixture(t, 1, false)
	cases := []struct {
		name, method, path, body, ctype, want string
	}{
		{"unknown field", "POST", "/v1/leases", `{"platform":"ios","colour":"red"}`, "", "colour"},
		{"unknown field, generic route", "POST", "/v1/ops/lease.request", `{"platform":"ios","colour":"red"}`, "", "colour"},
		{"trailing data", "POST", "/v1/ops/status.get", `{} {}`, "", "trailing"},
		{"not an object", "POST", "/v1/leases/x/renew", `[1]`, "", "object"},
		{"wrong type", "POST", "/v1/leases", `{"platform":7}`, "", "platform"},
		{"form body", "POST", "/v1/leases", `platform=ios`, "application/x-www-form-urlencoded", "JSON"},
		{"body on GET", "GET", "/v1/status", `{}`, "", "GET"},
		{"unknown query", "GET", "/v1/catalog?colour=red", "", "", "colour"},
		{"bad query type", "GET", "/v1/events?since=soon", "", "", "since"},
		{"query on POST", "POST", "/v1/leases?platform=ios", `{}`, "", "query"},
		{"path and body disagree", "POST", "/v1/leases/lse_1/renew", `{"leaseId":"lse_2"}`, "", "disagrees"},
		{"oversized", "POST", "/v1/ops/status.get", `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, "", "exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := []string{}
			if c.ctype != "" {
				hdr = append(hdr, "Content-Type", c.ctype)
			}
			e, _ := f.refusal(c.method, c.path, operatorTok, c.body, hdr...)
			if e.Code != contract.CodeBadRequest || !strings.Contains(e.Message, c.want) {
				t.Fatalf("got %s %q, want BAD_REQUEST mentioning %q", e.Code, e.Message, c.want)
			}
		})
	}
}

func TestHelloTakesRoleAndPrincipalFromTheToken(t *testing.T) {
	f := newFixture(t, 1, false)
	var out contract.HelloOut
	resp := f.call("POST", "/v1/hello", operatorTok, `{"protocol":{"min":5,"max":5},"client":"test"}`, &out)
	if resp.StatusCode != 200 || out.Role != contract.RoleAdmin || out.Principal != "token:op1" || out.Selected != 5 {
		t.Fatalf("hello: %d %+v", resp.StatusCode, out)
	}
	e, _ := f.refusal("POST", "/v1/ops/hello", agentTok, `{"protocol":{"min":5,"max":5},"credential":"x"}`)
	if e.Code != contract.CodeBadRequest {
		t.Fatalf("credential in hello: %s", e.Code)
	}
}

func TestLeaseLifecycleRoutes(t *testing.T) {
	f := newFixture(t, 2, false)
	resp := f.req("POST", "/v1/leases", agentTok, `{"platform":"ios","ttlMs":60000}`)
	var l contract.Lease
	json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Location") != "/v1/leases/"+l.LeaseID || l.OwnerID != "token:agent1" {
		t.Fatalf("grant: %d %q %+v", resp.StatusCode, resp.Header.Get("Location"), l)
	}
	var got contract.Lease
	if r := f.call("GET", "/v1/leases/"+l.LeaseID, agentTok, "", &got); r.StatusCode != 200 || got.LeaseID != l.LeaseID {
		t.Fatalf("get: %d %+v", r.StatusCode, got)
	}
	var list contract.LeaseListOut
	f.call("GET", "/v1/leases", agent2Tok, "", &list)
	if len(list.Leases) != 0 {
		t.Fatalf("another agent sees %d leases", len(list.Leases))
	}
	var rel contract.LeaseReleaseOut
	if r := f.call("DELETE", "/v1/leases/"+l.LeaseID, agentTok, "", &rel); r.StatusCode != 200 || !rel.Released {
		t.Fatalf("release: %d %+v", r.StatusCode, rel)
	}
	l2 := f.lease(agent2Tok)
	if r := f.call("POST", "/v1/leases/"+l2.LeaseID+"/release", agent2Tok, "", &rel); r.StatusCode != 200 || rel.LeaseID != l2.LeaseID {
		t.Fatalf("release via POST: %d %+v", r.StatusCode, rel)
	}
	f.lease(agentTok)
	f.lease(agent2Tok)
	var all contract.LeaseReleaseAllOut
	if r := f.call("POST", "/v1/leases/release-all", agentTok, "", &all); r.StatusCode != 200 || len(all.Released) != 1 {
		t.Fatalf("release-all: %d %+v", r.StatusCode, all)
	}
}

func TestTokensAndDaemonStop(t *testing.T) {
	f := newFixture(t, 1, false)
	var tok contract.TokenCreateOut
	if r := f.call("POST", "/v1/tokens", operatorTok, `{"role":"agent","name":"ci"}`, &tok); r.StatusCode != 201 || tok.Token == "" {
		t.Fatalf("create: %d %+v", r.StatusCode, tok)
	}
	if r := f.call("GET", "/v1/status", tok.Token, "", nil); r.StatusCode != 200 {
		t.Fatalf("the new token: %d", r.StatusCode)
	}
	var rev contract.TokenRevokeOut
	if r := f.call("DELETE", "/v1/tokens/"+tok.ID, operatorTok, "", &rev); r.StatusCode != 200 || !rev.Revoked {
		t.Fatalf("revoke: %d", r.StatusCode)
	}
	if r := f.call("GET", "/v1/status", tok.Token, "", nil); r.StatusCode != 401 {
		t.Fatalf("a revoked token: %d", r.StatusCode)
	}
	var stop contract.DaemonStopOut
	if r := f.call("POST", "/v1/daemon/stop", operatorTok, "", &stop); r.StatusCode != 200 || !stop.Stopping {
		t.Fatalf("stop: %d", r.StatusCode)
	}
	if f.b.Stops() != 1 {
		t.Fatal("daemon.stop's after hook did not run")
	}
}

func TestNDJSONStreamsProgressThenTheResult(t *testing.T) {
	for _, path := range []string{"/v1/ops/lease.request", "/v1/leases"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t, 1, false)
			held := f.lease(agentTok)
			resp := f.req("POST", path, agent2Tok, `{"platform":"ios"}`, "Accept", mediaNDJSON)
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != mediaNDJSON {
				t.Fatalf("content type %q", ct)
			}
			lines := ndjson{bufio.NewReader(resp.Body)}
			first := lines.next(t)
			var p contract.Progress
			json.Unmarshal(first["params"], &p)
			if string(first["method"]) != `"progress"` || p.Phase != "queued" || p.QueuePosition != 1 {
				t.Fatalf("first line %v", first)
			}
			f.call("DELETE", "/v1/leases/"+held.LeaseID, agentTok, "", nil)
			var last map[string]json.RawMessage
			for last = lines.next(t); last["result"] == nil; last = lines.next(t) {
				if last["error"] != nil {
					t.Fatalf("error line %s", last["error"])
				}
			}
			var l contract.Lease
			json.Unmarshal(last["result"], &l)
			if l.OwnerID != "token:agent2" {
				t.Fatalf("result %s", last["result"])
			}
		})
	}
}

func TestNDJSONRefusalKeepsItsStatus(t *testing.T) {
	f := newFixture(t, 1, false)
	resp := f.req("POST", "/v1/ops/list.get", agentTok, "", "Accept", mediaNDJSON)
	defer resp.Body.Close()
	line := ndjson{bufio.NewReader(resp.Body)}.next(t)
	if resp.StatusCode != 403 || !strings.Contains(string(line["error"]), "FORBIDDEN") {
		t.Fatalf("%d %v", resp.StatusCode, line)
	}
}

func TestServeShutsDownLongStreams(t *testing.T) {
	f := newFixture(t, 1, false)
	s := New(Options{Backend: f.b, Version: "x"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	r, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/events", nil)
	r.Header.Set("Authorization", "Bearer "+operatorTok)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return with an SSE stream open")
	}
}

func TestExecStreamsOutputAsLines(t *testing.T) {
	f := newFixture(t, 1, false)
	l := f.lease(agentTok)
	resp := f.req("POST", "/v1/leases/"+l.LeaseID+"/exec", agentTok, `{"tool":"simctl","args":["getenv","booted","HOME"],"stdin":"x"}`,
		"Accept", mediaNDJSON)
	defer resp.Body.Close()
	lines := ndjson{bufio.NewReader(resp.Body)}
	var got []string
	for {
		m := lines.next(t)
		if m["result"] != nil {
			if string(m["result"]) != `{"exitCode":0}` {
				t.Fatalf("result %s", m["result"])
			}
			break
		}
		var out contract.ExecOutput
		json.Unmarshal(m["params"], &out)
		got = append(got, string(m["method"])+" "+out.Stream+" "+out.Chunk)
	}
	if strings.Join(got, "|") != `"output" stdout getenv booted HOME`+"\n"+`|"output" stderr x` {
		t.Fatalf("pushes %q", got)
	}
	// Another principal may not exec on the lease.
	if e, _ := f.refusal("POST", "/v1/leases/"+l.LeaseID+"/exec", agent2Tok, `{"tool":"simctl","args":["list"]}`); e.Code != contract.CodeForbidden {
		t.Fatalf("foreign exec: %s", e.Code)
	}
}
