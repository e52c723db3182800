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

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// These tests speak to the fixture's daemon over both of its frontends:
// the unix socket (raw JSON-RPC) and HTTP.

func (r *fixture) http(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, r.ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// socketError sends one request over a raw socket connection (after hello)
// and returns the raw bytes of error.data.
func socketError(t *testing.T, sock, method, params string) []byte {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, `{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":5,"max":5},"principal":"token:someone"}}`+"\n")
	io.WriteString(c, `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":`+params+"}\n")
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Data json.RawMessage `json:"data"`
			} `json:"error"`
		}
		json.Unmarshal(line, &m)
		if string(m.ID) == "2" {
			if m.Error == nil {
				t.Fatalf("socket %s did not fail: %s", method, line)
			}
			return m.Error.Data
		}
	}
}

func TestSocketAndHTTPRefuseWithIdenticalErrorObjects(t *testing.T) {
	r := newFixture(t, 1)
	cases := []struct{ method, params, httpMethod, path, body string }{
		{"lease.get", `{"leaseId":"lse_nope"}`, "GET", "/v1/leases/lse_nope", ""},
		{"list.get", `{}`, "GET", "/v1/devices", ""},
		{"lease.request", `{"platform":"ios","bogus":1}`, "POST", "/v1/leases", `{"platform":"ios","bogus":1}`},
		{"lease.cancel", `{"requesterId":"nobody"}`, "POST", "/v1/requests/cancel", `{"requesterId":"nobody"}`},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			want := socketError(t, r.st.Daemon.Paths().Socket, c.method, c.params)
			status, body := r.http(t, c.httpMethod, c.path, r.agent, c.body)
			var env struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(env.Error, want) {
				t.Fatalf("socket %s\nhttp   %s", want, env.Error)
			}
			var e contract.Error
			json.Unmarshal(want, &e)
			if status != httpapi.StatusFor(e.Code) {
				t.Fatalf("status %d for %s", status, e.Code)
			}
		})
	}
}

func TestRealDaemonLeaseOverHTTP(t *testing.T) {
	r := newFixture(t, 1)
	status, body := r.http(t, "POST", "/v1/leases", r.agent, `{"platform":"ios","ttlMs":60000}`)
	var l contract.Lease
	json.Unmarshal(body, &l)
	if status != 201 || l.Device == nil || !strings.HasPrefix(l.OwnerID, "token:") {
		t.Fatalf("lease: %d %s", status, body)
	}
	status, body = r.http(t, "POST", "/v1/leases/"+l.LeaseID+"/renew", r.agent, "")
	var rr httpapi.RenewReply
	json.Unmarshal(body, &rr)
	if status != 200 || rr.LeaseID != l.LeaseID || rr.Notices == nil {
		t.Fatalf("renew: %d %s", status, body)
	}
	c, err := client.DialHTTP(context.Background(), r.ts.URL, r.agent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	list, err := client.Do(context.Background(), c, contract.LeaseList, contract.LeaseListIn{})
	if err != nil || len(list.Leases) != 1 {
		t.Fatalf("client list: %v %+v", err, list)
	}
	if status, body = r.http(t, "DELETE", "/v1/leases/"+l.LeaseID, r.agent, ""); status != 200 {
		t.Fatalf("release: %d %s", status, body)
	}
}
