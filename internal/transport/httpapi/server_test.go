package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

func TestHealthzAnswersWithoutAToken(t *testing.T) {
	f := newFixture(t, 1)
	var h httpapi.Health
	resp := f.call("GET", "/v1/healthz", "", "", &h)
	if resp.StatusCode != 200 || h.Status != "ok" || h.Version != "1.2.3" {
		t.Fatalf("healthz: %d %+v", resp.StatusCode, h)
	}
}

func TestAuthMatrix(t *testing.T) {
	f := newFixture(t, 1)
	cases := []struct {
		method, path, token string
		want                int
		code                contract.Code
	}{
		{"GET", "/v1/status", "", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/status", "nope", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/status", f.worker, 403, contract.CodeForbidden},
		{"GET", "/v1/status", f.agent, 200, ""},
		{"GET", "/v1/status", f.operator, 200, ""},
		{"GET", "/v1/devices", f.agent, 403, contract.CodeForbidden}, // list.get is admin: the dispatcher refuses
		{"GET", "/v1/devices", f.operator, 200, ""},
		{"GET", "/v1/config", f.agent, 403, contract.CodeForbidden},
		{"GET", "/v1/tokens", f.agent, 403, contract.CodeForbidden},
		{"POST", "/v1/daemon/stop", f.agent, 403, contract.CodeForbidden},
		{"GET", "/v1/openapi.json", "", 200, ""}, // public, so generators can fetch it
		{"GET", "/v1/openapi.json", f.agent, 200, ""},
		{"GET", "/v1/no-such-route", "", 401, contract.CodeUnauthenticated},
		{"GET", "/v1/no-such-route", f.agent, 404, contract.CodeUnknownOperation},
		{"POST", "/v1/ops/status.get", f.worker, 403, contract.CodeForbidden},
		{"POST", "/v1/hello", f.worker, 403, contract.CodeForbidden},
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
	r.Header.Set("Authorization", "Basic "+f.agent)
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
		if httpapi.StatusFor(code) != info.HTTPStatus {
			t.Errorf("%s: %d, table %d", code, httpapi.StatusFor(code), info.HTTPStatus)
		}
	}
	if httpapi.StatusFor("SOMETHING_NEW") != contract.ErrorTable[contract.CodeUnknownDaemonError].HTTPStatus {
		t.Error("an unknown code must map like UNKNOWN_DAEMON_ERROR")
	}

	f := newFixture(t, 1)
	held := f.lease(f.agent)
	cases := []struct {
		name, method, path, token, body string
		code                            contract.Code
		status                          int
	}{
		{"unknown lease", "GET", "/v1/leases/lse_nope", f.agent, "", contract.CodeUnknownLease, 404},
		{"another's lease", "POST", "/v1/leases/" + held.LeaseID + "/renew", f.agent2, "", contract.CodeForbidden, 403},
		{"no capacity", "POST", "/v1/leases", f.agent2, `{"platform":"ios","noWait":true}`, contract.CodeNoCapacity, 503},
		{"already leased", "POST", "/v1/leases", f.agent, `{"platform":"ios"}`, contract.CodeRequesterLeased, 409},
		{"unsupported platform", "GET", "/v1/catalog?platform=android", f.agent, "", contract.CodeUnsupportedPlatform, 422},
		{"missing platform", "POST", "/v1/ops/lease.request", f.agent, `{}`, contract.CodeBadRequest, 400},
		{"unknown operation", "POST", "/v1/ops/no.such", f.agent, "", contract.CodeUnknownOperation, 404},
		{"no pending request", "POST", "/v1/requests/cancel", f.agent, "", contract.CodeNoPendingRequest, 404},
		{"unknown token", "DELETE", "/v1/tokens/tok_nope", f.operator, "", contract.CodeUnknownToken, 404},
		{"protocol", "POST", "/v1/hello", f.agent, `{"protocol":{"min":1,"max":2}}`, contract.CodeProtocolUnsupported, 426},
		{"passthrough not served", "POST", "/v1/ops/driver.passthrough", f.agent, `{"tool":"simctl","args":["list"]}`, contract.CodeUnknownOperation, 404},
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
	f := newFixture(t, 1)
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
		{"oversized", "POST", "/v1/ops/status.get", `{"x":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`, "", "exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := []string{}
			if c.ctype != "" {
				hdr = append(hdr, "Content-Type", c.ctype)
			}
			e, _ := f.refusal(c.method, c.path, f.operator, c.body, hdr...)
			if e.Code != contract.CodeBadRequest || !strings.Contains(e.Message, c.want) {
				t.Fatalf("got %s %q, want BAD_REQUEST mentioning %q", e.Code, e.Message, c.want)
			}
		})
	}
}

func TestHelloTakesRoleAndPrincipalFromTheToken(t *testing.T) {
	f := newFixture(t, 1)
	var out contract.HelloOut
	resp := f.call("POST", "/v1/hello", f.operator, `{"protocol":{"min":5,"max":5},"client":"test"}`, &out)
	if resp.StatusCode != 200 || out.Role != contract.RoleAdmin || out.Principal != f.principal(f.operator) || out.Selected != 5 {
		t.Fatalf("hello: %d %+v", resp.StatusCode, out)
	}
	e, _ := f.refusal("POST", "/v1/ops/hello", f.agent, `{"protocol":{"min":5,"max":5},"credential":"x"}`)
	if e.Code != contract.CodeBadRequest {
		t.Fatalf("credential in hello: %s", e.Code)
	}
}

func TestLeaseLifecycleRoutes(t *testing.T) {
	f := newFixture(t, 2)
	resp := f.req("POST", "/v1/leases", f.agent, `{"platform":"ios","ttlMs":60000}`)
	var l contract.Lease
	json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Location") != "/v1/leases/"+l.LeaseID || l.OwnerID != f.principal(f.agent) {
		t.Fatalf("grant: %d %q %+v", resp.StatusCode, resp.Header.Get("Location"), l)
	}
	var got contract.Lease
	if r := f.call("GET", "/v1/leases/"+l.LeaseID, f.agent, "", &got); r.StatusCode != 200 || got.LeaseID != l.LeaseID {
		t.Fatalf("get: %d %+v", r.StatusCode, got)
	}
	var list contract.LeaseListOut
	f.call("GET", "/v1/leases", f.agent2, "", &list)
	if len(list.Leases) != 0 {
		t.Fatalf("another agent sees %d leases", len(list.Leases))
	}
	var rel contract.LeaseReleaseOut
	if r := f.call("DELETE", "/v1/leases/"+l.LeaseID, f.agent, "", &rel); r.StatusCode != 200 || !rel.Released {
		t.Fatalf("release: %d %+v", r.StatusCode, rel)
	}
	l2 := f.lease(f.agent2)
	if r := f.call("POST", "/v1/leases/"+l2.LeaseID+"/release", f.agent2, "", &rel); r.StatusCode != 200 || rel.LeaseID != l2.LeaseID {
		t.Fatalf("release via POST: %d %+v", r.StatusCode, rel)
	}
	f.lease(f.agent)
	f.lease(f.agent2)
	var all contract.LeaseReleaseAllOut
	if r := f.call("POST", "/v1/leases/release-all", f.agent, "", &all); r.StatusCode != 200 || len(all.Released) != 1 {
		t.Fatalf("release-all: %d %+v", r.StatusCode, all)
	}
}

func TestTokensAndDaemonStop(t *testing.T) {
	f := newFixture(t, 1)
	var tok contract.TokenCreateOut
	if r := f.call("POST", "/v1/tokens", f.operator, `{"role":"agent","name":"ci"}`, &tok); r.StatusCode != 201 || tok.Token == "" {
		t.Fatalf("create: %d %+v", r.StatusCode, tok)
	}
	if r := f.call("GET", "/v1/status", tok.Token, "", nil); r.StatusCode != 200 {
		t.Fatalf("the new token: %d", r.StatusCode)
	}
	var rev contract.TokenRevokeOut
	if r := f.call("DELETE", "/v1/tokens/"+tok.ID, f.operator, "", &rev); r.StatusCode != 200 || !rev.Revoked {
		t.Fatalf("revoke: %d", r.StatusCode)
	}
	if r := f.call("GET", "/v1/status", tok.Token, "", nil); r.StatusCode != 401 {
		t.Fatalf("a revoked token: %d", r.StatusCode)
	}
	var stop contract.DaemonStopOut
	if r := f.call("POST", "/v1/daemon/stop", f.operator, "", &stop); r.StatusCode != 200 || !stop.Stopping {
		t.Fatalf("stop: %d", r.StatusCode)
	}
	// daemon.stop's after hook runs once the answer is out: the real
	// daemon stops.
	select {
	case <-f.st.Daemon.Done():
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("daemon.stop's after hook did not stop the daemon")
	}
}

func TestNDJSONStreamsProgressThenTheResult(t *testing.T) {
	for _, path := range []string{"/v1/ops/lease.request", "/v1/leases"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t, 1)
			held := f.lease(f.agent)
			resp := f.req("POST", path, f.agent2, `{"platform":"ios"}`, "Accept", httpapi.MediaNDJSON)
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != httpapi.MediaNDJSON {
				t.Fatalf("content type %q", ct)
			}
			lines := ndjson{bufio.NewReader(resp.Body)}
			first := lines.next(t)
			var p contract.Progress
			json.Unmarshal(first["params"], &p)
			if string(first["method"]) != `"progress"` || p.Phase != "queued" || p.QueuePosition != 1 {
				t.Fatalf("first line %v", first)
			}
			f.call("DELETE", "/v1/leases/"+held.LeaseID, f.agent, "", nil)
			var last map[string]json.RawMessage
			for last = lines.next(t); last["result"] == nil; last = lines.next(t) {
				if last["error"] != nil {
					t.Fatalf("error line %s", last["error"])
				}
			}
			var l contract.Lease
			json.Unmarshal(last["result"], &l)
			if l.OwnerID != f.principal(f.agent2) {
				t.Fatalf("result %s", last["result"])
			}
		})
	}
}

func TestNDJSONRefusalKeepsItsStatus(t *testing.T) {
	f := newFixture(t, 1)
	resp := f.req("POST", "/v1/ops/list.get", f.agent, "", "Accept", httpapi.MediaNDJSON)
	defer resp.Body.Close()
	line := ndjson{bufio.NewReader(resp.Body)}.next(t)
	if resp.StatusCode != 403 || !strings.Contains(string(line["error"]), "FORBIDDEN") {
		t.Fatalf("%d %v", resp.StatusCode, line)
	}
}

func TestServeShutsDownLongStreams(t *testing.T) {
	f := newFixture(t, 1)
	s := httpapi.New(httpapi.Options{Backend: f.st.Backend(), Version: "x"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	r, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/events", nil)
	r.Header.Set("Authorization", "Bearer "+f.operator)
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
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("Serve did not return with an SSE stream open")
	}
}

func TestExecStreamsOutputAsLines(t *testing.T) {
	f := newFixture(t, 1)
	l := f.lease(f.agent)
	resp := f.req("POST", "/v1/leases/"+l.LeaseID+"/exec", f.agent, `{"tool":"fakectl","args":["getenv","booted","HOME"],"stdin":"x"}`,
		"Accept", httpapi.MediaNDJSON)
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
	if e, _ := f.refusal("POST", "/v1/leases/"+l.LeaseID+"/exec", f.agent2, `{"tool":"fakectl","args":["list"]}`); e.Code != contract.CodeForbidden {
		t.Fatalf("foreign exec: %s", e.Code)
	}
}

func TestOpenAPIIsServedAsGenerated(t *testing.T) {
	f := newFixture(t, 1)
	resp := f.req("GET", "/v1/openapi.json", f.agent, "")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(b, httpapi.OpenAPIBytes(f.s)) {
		t.Fatalf("openapi: %d, %d bytes, generated %d", resp.StatusCode, len(b), len(httpapi.OpenAPIBytes(f.s)))
	}
}

// TestOpenAPIIsServedWithoutAToken: generators fetch the document before
// anyone has a token.
func TestOpenAPIIsServedWithoutAToken(t *testing.T) {
	f := newFixture(t, 1)
	resp := f.req("GET", "/v1/openapi.json", "", "")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(b, httpapi.OpenAPIBytes(f.s)) {
		t.Fatalf("openapi without a token: %d, %.200s", resp.StatusCode, b)
	}
}

// TestStreamTwinsAnswerNDJSONWithoutAccept: a :stream twin streams with no
// Accept header at all (a generated client sends none, or application/json),
// and the plain route still streams with Accept: application/x-ndjson.
func TestStreamTwinsAnswerNDJSONWithoutAccept(t *testing.T) {
	f := newFixture(t, 1)
	l := f.lease(f.agent)
	for _, c := range []struct {
		name, path string
		hdr        []string
	}{
		{"route twin", "/v1/leases/" + l.LeaseID + "/exec:stream", nil},
		{"route twin, JSON asked", "/v1/leases/" + l.LeaseID + "/exec:stream", []string{"Accept", "application/json"}},
		{"ops twin", "/v1/ops/device.exec:stream", nil},
		{"Accept on the plain route", "/v1/leases/" + l.LeaseID + "/exec", []string{"Accept", httpapi.MediaNDJSON}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"tool":"fakectl","args":["getenv","booted","HOME"]}`
			if strings.HasPrefix(c.path, "/v1/ops/") {
				body = `{"leaseId":"` + l.LeaseID + `","tool":"fakectl","args":["getenv","booted","HOME"]}`
			}
			resp := f.req("POST", c.path, f.agent, body, c.hdr...)
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != httpapi.MediaNDJSON {
				t.Fatalf("%d %q", resp.StatusCode, ct)
			}
			lines := ndjson{bufio.NewReader(resp.Body)}
			first := lines.next(t)
			if string(first["method"]) != `"output"` {
				t.Fatalf("first line %v", first)
			}
			for m := first; m["result"] == nil; m = lines.next(t) {
				if m["error"] != nil {
					t.Fatalf("error line %s", m["error"])
				}
			}
		})
	}
	// Without either, the plain route answers JSON.
	var out contract.DeviceExecOut
	if resp := f.call("POST", "/v1/leases/"+l.LeaseID+"/exec", f.agent, `{"tool":"fakectl","args":["list"]}`, &out); resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("plain exec answered %q", resp.Header.Get("Content-Type"))
	}
	// A refusal before the first line keeps its table status on a twin too.
	resp := f.req("POST", "/v1/ops/list.get:stream", f.agent, "")
	defer resp.Body.Close()
	line := ndjson{bufio.NewReader(resp.Body)}.next(t)
	if resp.StatusCode != 403 || !strings.Contains(string(line["error"]), "FORBIDDEN") {
		t.Fatalf("%d %v", resp.StatusCode, line)
	}
}

// TestLeaseRequestStreamTwin: POST /v1/leases:stream queues, pushes
// progress and ends with the lease, 200, with no Accept header.
func TestLeaseRequestStreamTwin(t *testing.T) {
	f := newFixture(t, 1)
	held := f.lease(f.agent)
	resp := f.req("POST", "/v1/leases:stream", f.agent2, `{"platform":"ios"}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != httpapi.MediaNDJSON {
		t.Fatalf("%d %q", resp.StatusCode, ct)
	}
	lines := ndjson{bufio.NewReader(resp.Body)}
	if first := lines.next(t); string(first["method"]) != `"progress"` {
		t.Fatalf("first line %v", first)
	}
	f.call("DELETE", "/v1/leases/"+held.LeaseID, f.agent, "", nil)
	var last map[string]json.RawMessage
	for last = lines.next(t); last["result"] == nil; last = lines.next(t) {
		if last["error"] != nil {
			t.Fatalf("error line %s", last["error"])
		}
	}
	var l contract.Lease
	if err := json.Unmarshal(last["result"], &l); err != nil || l.OwnerID != f.principal(f.agent2) {
		t.Fatalf("result %s: %v", last["result"], err)
	}
}
