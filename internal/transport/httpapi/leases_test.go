package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

type answer struct {
	status int
	header http.Header
	body   []byte
}

// async sends a request on its own goroutine.
func (f *fixture) async(ctx context.Context, method, path, token, body string, hdr ...string) <-chan answer {
	ch := make(chan answer, 1)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequestWithContext(ctx, method, f.ts.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	go func() {
		resp, err := f.ts.Client().Do(r)
		if err != nil {
			ch <- answer{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- answer{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	return ch
}

func get(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("no answer within 10s")
	}
	return answer{}
}

func TestPreferWaitAnswers202ThenLongPollCollectsTheLease(t *testing.T) {
	f := newFixture(t, 1)
	held := f.lease(f.agent) // 201 at once: a device is free

	post := f.async(context.Background(), "POST", "/v1/leases", f.agent2, `{"platform":"ios"}`, "Prefer", "wait=5")
	eventually(t, func() bool { p, _ := f.handle(""); return f.polls() == 1 && p })
	f.clk.Advance(5 * time.Second)
	a := get(t, post)
	var pend httpapi.PendingRequest
	json.Unmarshal(a.body, &pend)
	if a.status != 202 || a.header.Get("Preference-Applied") != "wait=5" || a.header.Get("Location") != "/v1/requests/"+pend.RequestID {
		t.Fatalf("POST: %d %v %s", a.status, a.header, a.body)
	}
	if pend.Status != "pending" || pend.Progress == nil || pend.Progress.QueuePosition != 1 || pend.AbandonAfterMs != httpapi.AbandonAfter.Milliseconds() {
		t.Fatalf("pending body %s", a.body)
	}

	// Someone else's handle is not theirs to poll.
	if e, _ := f.refusal("GET", "/v1/requests/"+pend.RequestID+"?wait=0", f.agent, ""); e.Code != contract.CodeForbidden {
		t.Fatalf("foreign poll: %s", e.Code)
	}

	// A long-poll asking for an hour is capped at httpapi.MaxWait.
	poll := f.async(context.Background(), "GET", "/v1/requests/"+pend.RequestID+"?wait=3600", f.agent2, "")
	eventually(t, func() bool { return f.polls() == 1 })
	f.clk.Advance(httpapi.MaxWait - time.Second)
	select {
	case a := <-poll:
		t.Fatalf("answered before the cap: %d %s", a.status, a.body)
	default:
	}
	f.clk.Advance(time.Second)
	if a := get(t, poll); a.status != 202 {
		t.Fatalf("capped poll: %d %s", a.status, a.body)
	}

	// The device frees up while a poll waits: the poll answers the lease.
	poll = f.async(context.Background(), "GET", "/v1/requests/"+pend.RequestID+"?wait=30", f.agent2, "")
	eventually(t, func() bool { return f.polls() == 1 })
	f.call("DELETE", "/v1/leases/"+held.LeaseID, f.agent, "", nil)
	a = get(t, poll)
	var l contract.Lease
	json.Unmarshal(a.body, &l)
	if a.status != 200 || l.OwnerID != f.principal(f.agent2) || a.header.Get("Location") != "/v1/leases/"+l.LeaseID {
		t.Fatalf("granted poll: %d %s", a.status, a.body)
	}

	// A retried poll gets the same answer until httpapi.KeepOutcome passes.
	var again contract.Lease
	if r := f.call("GET", "/v1/requests/"+pend.RequestID+"?wait=0", f.agent2, "", &again); r.StatusCode != 200 || again.LeaseID != l.LeaseID {
		t.Fatalf("retried poll: %d %+v", r.StatusCode, again)
	}
	// After KeepOutcome the frontend forgets the handle; the poll is then
	// answered from the daemon's stored receipt: the same lease.
	f.clk.Advance(httpapi.KeepOutcome)
	if f.handles() != 0 {
		t.Fatal("the handle outlived KeepOutcome")
	}
	again = contract.Lease{}
	if r := f.call("GET", "/v1/requests/"+pend.RequestID, f.agent2, "", &again); r.StatusCode != 200 || again.LeaseID != l.LeaseID {
		t.Fatalf("expired handle: %d %+v", r.StatusCode, again)
	}
	if e, _ := f.refusal("GET", "/v1/requests/"+pend.RequestID+"?wait=0", f.agent, ""); e.Code != contract.CodeForbidden {
		t.Fatalf("foreign poll of the receipt: %s", e.Code)
	}
}

func TestUnpolledRequestIsAbandonedAndItsLeaseReleased(t *testing.T) {
	f := newFixture(t, 1)
	held := f.lease(f.agent)

	var pend httpapi.PendingRequest
	r := f.call("POST", "/v1/leases", f.agent2, `{"platform":"ios"}`, &pend, "Prefer", "respond-async")
	if r.StatusCode != 202 || r.Header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("respond-async: %d", r.StatusCode)
	}
	eventually(t, func() bool { return f.st.Queued() == 1 })
	f.clk.Advance(httpapi.AbandonAfter)
	eventually(t, func() bool { return f.st.Queued() == 0 })
	// The handle is gone; the daemon's receipt keeps the refusal the
	// abandonment ended the request with.
	if e, _ := f.refusal("GET", "/v1/requests/"+pend.RequestID, f.agent2, ""); e.Code != contract.CodeConnectionLost {
		t.Fatalf("abandoned handle: %s", e.Code)
	}

	// Granted while nobody polls: the lease is released at abandonment.
	f.call("POST", "/v1/leases", f.agent2, `{"platform":"ios"}`, &pend, "Prefer", "wait=0")
	eventually(t, func() bool { return f.st.Queued() == 1 })
	f.call("DELETE", "/v1/leases/"+held.LeaseID, f.agent, "", nil)
	leases := func() int {
		var out contract.LeaseListOut
		f.call("GET", "/v1/leases", f.operator, "", &out)
		return len(out.Leases)
	}
	eventually(t, func() bool { _, done := f.handle(pend.RequestID); return done })
	if leases() != 1 {
		t.Fatal("the queued request was not granted")
	}
	f.clk.Advance(httpapi.AbandonAfter)
	eventually(t, func() bool { return leases() == 0 && f.handles() == 0 })
}

func TestDroppingAHandleLeavesTheQueue(t *testing.T) {
	f := newFixture(t, 1)
	f.lease(f.agent)
	var pend httpapi.PendingRequest
	f.call("POST", "/v1/leases", f.agent2, `{"platform":"ios"}`, &pend, "Prefer", "wait=0")
	eventually(t, func() bool { return f.st.Queued() == 1 })
	var drop httpapi.DropReply
	if r := f.call("DELETE", "/v1/requests/"+pend.RequestID, f.agent2, "", &drop); r.StatusCode != 200 || !drop.Cancelled {
		t.Fatalf("drop: %d %+v", r.StatusCode, drop)
	}
	eventually(t, func() bool { return f.st.Queued() == 0 && f.handles() == 0 })
}

func TestAClientLeavingThePOSTDropsItsRequest(t *testing.T) {
	f := newFixture(t, 1)
	f.lease(f.agent)
	ctx, cancel := context.WithCancel(context.Background())
	post := f.async(ctx, "POST", "/v1/leases", f.agent2, `{"platform":"ios"}`, "Prefer", "wait=30")
	eventually(t, func() bool { return f.polls() == 1 && f.st.Queued() == 1 })
	cancel()
	get(t, post)
	eventually(t, func() bool { return f.st.Queued() == 0 && f.handles() == 0 })
}

func TestCancelRouteEndsThePendingHandle(t *testing.T) {
	f := newFixture(t, 1)
	f.lease(f.agent)
	var pend httpapi.PendingRequest
	f.call("POST", "/v1/leases", f.agent2, `{"platform":"ios","requesterId":"job-7"}`, &pend, "Prefer", "wait=0")
	eventually(t, func() bool { return f.st.Queued() == 1 })
	var out contract.LeaseCancelOut
	if r := f.call("POST", "/v1/requests/cancel", f.agent2, `{"requesterId":"job-7"}`, &out); r.StatusCode != 200 || !out.Cancelled {
		t.Fatalf("cancel: %d", r.StatusCode)
	}
	if e, _ := f.refusal("GET", "/v1/requests/"+pend.RequestID+"?wait=5", f.agent2, ""); e.Code != contract.CodeRequestCancelled {
		t.Fatalf("after cancel: %s", e.Code)
	}
}
