package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

func (r *fixture) send(t *testing.T, method, path, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, r.ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.agent)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestIdempotencyKeyHeaderRepeatsTheSameLease(t *testing.T) {
	r := newFixture(t, 1)
	body := `{"platform":"ios","requesterId":"ci-7"}`
	var a, b contract.Lease
	code, raw := r.send(t, "POST", "/v1/leases", body, "Idempotency-Key", "build-7")
	if code != 201 || json.Unmarshal(raw, &a) != nil || a.RequestID == "" || a.Timing == nil {
		t.Fatalf("first: %d %s", code, raw)
	}
	code, raw = r.send(t, "POST", "/v1/leases", body, "Idempotency-Key", "build-7")
	if code != 201 || json.Unmarshal(raw, &b) != nil || b.LeaseID != a.LeaseID {
		t.Fatalf("repeat: %d %s, want %s", code, raw, a.LeaseID)
	}
	code, raw = r.send(t, "POST", "/v1/leases", `{"platform":"ios","requesterId":"ci-7","ttlMs":60000}`, "Idempotency-Key", "build-7")
	if code != 409 || !strings.Contains(string(raw), "IDEMPOTENCY_KEY_MISMATCH") {
		t.Fatalf("different body: %d %s", code, raw)
	}
	var rc contract.LeaseRequestReceipt
	code, raw = r.send(t, "GET", "/v1/lease-requests/"+a.RequestID, "")
	if code != 200 || json.Unmarshal(raw, &rc) != nil || rc.State != contract.RequestGranted || rc.Lease == nil || rc.Lease.LeaseID != a.LeaseID {
		t.Fatalf("receipt: %d %s", code, raw)
	}
}

// A 202 comes only once the request is stored and queued, so a cancel sent
// right after it always finds the request (hardening 5).
func TestCancelRightAfterA202FindsTheRequest(t *testing.T) {
	r := newFixture(t, 1)
	if code, raw := r.send(t, "POST", "/v1/leases", `{"platform":"ios","requesterId":"holder"}`); code != 201 {
		t.Fatalf("holder: %d %s", code, raw)
	}
	for i := 0; i < 20; i++ {
		req := fmt.Sprintf("waiter-%d", i)
		var pend httpapi.PendingRequest
		code, raw := r.send(t, "POST", "/v1/leases", `{"platform":"ios","requesterId":"`+req+`"}`, "Prefer", "respond-async")
		if code != 202 || json.Unmarshal(raw, &pend) != nil || !strings.HasPrefix(pend.RequestID, "req_") {
			t.Fatalf("try %d: %d %s", i, code, raw)
		}
		code, raw = r.send(t, "POST", "/v1/requests/cancel", `{"requesterId":"`+req+`"}`)
		if code != 200 || !strings.Contains(string(raw), `"cancelled":true`) {
			t.Fatalf("try %d: cancel right after the 202: %d %s", i, code, raw)
		}
		var rc contract.LeaseRequestReceipt
		code, raw = r.send(t, "GET", "/v1/lease-requests/"+pend.RequestID, "")
		if code != 200 || json.Unmarshal(raw, &rc) != nil || rc.State != contract.RequestCancelled {
			t.Fatalf("try %d: receipt %d %s", i, code, raw)
		}
	}
}

// A later poll of a finished request reads the daemon's receipt, not a copy
// the handle kept: once the lease is released, the poll says it has ended
// instead of answering the old lease as if it still held.
func TestAPollAfterTheOutcomeReadsTheReceipt(t *testing.T) {
	r := newFixture(t, 1)
	var pend httpapi.PendingRequest
	code, raw := r.send(t, "POST", "/v1/leases", `{"platform":"ios","requesterId":"ci"}`, "Prefer", "respond-async")
	if code != 202 || json.Unmarshal(raw, &pend) != nil {
		t.Fatalf("async request: %d %s", code, raw)
	}
	var l contract.Lease
	code, raw = r.send(t, "GET", "/v1/requests/"+pend.RequestID+"?wait=30", "")
	if code != 200 || json.Unmarshal(raw, &l) != nil || l.LeaseID == "" {
		t.Fatalf("poll for the grant: %d %s", code, raw)
	}
	if code, raw = r.send(t, "DELETE", "/v1/leases/"+l.LeaseID, ""); code != 200 {
		t.Fatalf("release: %d %s", code, raw)
	}
	code, raw = r.send(t, "GET", "/v1/requests/"+pend.RequestID, "")
	if code == 200 || !strings.Contains(string(raw), string(contract.CodeUnknownLease)) || !strings.Contains(string(raw), l.LeaseID) {
		t.Fatalf("poll after the release answered %d %s; want UNKNOWN_LEASE naming %s", code, raw, l.LeaseID)
	}
}
