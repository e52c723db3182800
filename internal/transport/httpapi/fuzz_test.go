package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// FuzzRequestDecoding drives arbitrary method, path, query, headers and body
// through the whole handler (auth, route table, input assembly, strict
// decoding, dispatch to a real daemon). Whatever arrives, the server must not
// panic or hang, and every refusal must be the contract error shape with
// the table's status. One daemon serves every input (starting one per
// input would cost more than the input); each input gets a fresh frontend
// and leaves no lease behind for the next.
func FuzzRequestDecoding(f *testing.F) {
	st := daemontest.Start(f, daemontest.Options{})
	agentTok, _ := st.Token(contract.TokenRoleAgent, "agent1")
	seeds := []struct {
		method, path, body, ctype, accept, prefer string
	}{
		{"POST", "/v1/leases", `{"platform":"ios"}`, "application/json", "", ""},
		{"POST", "/v1/leases", `{"platform":"ios","x":1}`, "application/json", "", "wait=0"},
		{"POST", "/v1/leases/lse_1/renew", `{"leaseId":"lse_2"}`, "", "", ""},
		{"GET", "/v1/catalog?platform=ios", "", "", "", ""},
		{"GET", "/v1/events?since=-1", "", "", "", ""},
		{"POST", "/v1/ops/lease.request", `{"platform":"ios"}`, "", "application/x-ndjson", "keep-open"},
		{"POST", "/v1/ops/hello", `{"protocol":{"min":5,"max":5}}`, "", "", ""},
		{"DELETE", "/v1/tokens/%2F..%2F", "", "", "", ""},
		{"GET", "/v1/requests/req_x?wait=99999999999999999999", "", "", "", ""},
		{"POST", "/v1/ops/status.get", `{"a":[1,2,{"b":null}]} trailing`, "text/plain", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body), s.ctype, s.accept, s.prefer)
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte, ctype, accept, prefer string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || len(method) == 0 || len(method) > 10 {
			return
		}
		// keep-open holds a stream until the client leaves, by design;
		// that is the test's 5 s timeout, not a finding.
		if strings.Contains(strings.ToLower(prefer), "keep-open") {
			return
		}
		// The frontend's own clock stands still: a Prefer: wait times out
		// on the request's deadline, as before.
		s := httpapi.New(httpapi.Options{Backend: st.Backend(), Clock: fake.NewClock(time.Unix(0, 0))})
		defer s.Close()
		defer func() {
			if err := st.Dispatch(daemontest.AdminSession(), contract.LeaseReleaseAll.Name, contract.LeaseReleaseAllIn{Everyone: true}, nil); err != nil {
				t.Fatal(err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(5*time.Second))
		defer cancel()
		r, err := http.NewRequestWithContext(ctx, method, "http://simlock.test"+u.RequestURI(), bytes.NewReader(body))
		if err != nil {
			return
		}
		r.Header.Set("Authorization", "Bearer "+agentTok)
		for k, v := range map[string]string{"Content-Type": ctype, "Accept": accept, "Prefer": prefer} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); s.Handler().ServeHTTP(w, r) }()
		select {
		case <-done:
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Fatalf("%s %s did not answer", method, target)
		}
		if w.Code < 400 {
			return
		}
		if w.Header().Get("Content-Type") == httpapi.MediaNDJSON {
			line, _, _ := bytes.Cut(w.Body.Bytes(), []byte("\n"))
			checkErrorBody(t, w.Code, line)
			return
		}
		checkErrorBody(t, w.Code, w.Body.Bytes())
	})
}

func checkErrorBody(t *testing.T, status int, b []byte) {
	t.Helper()
	var eb httpapi.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error == nil {
		t.Fatalf("status %d with body %q", status, b)
	}
	if _, known := contract.ErrorTable[eb.Error.Code]; !known {
		t.Fatalf("unknown code %s", eb.Error.Code)
	}
	if httpapi.StatusFor(eb.Error.Code) != status {
		t.Fatalf("%s answered %d, table says %d", eb.Error.Code, status, httpapi.StatusFor(eb.Error.Code))
	}
}
