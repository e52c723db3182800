package httpapi_test

import (
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// simlock-architecture, wait queue: lease.cancel means the same on every
// frontend. DELETE /v1/requests/{id} is the caller's own cancel: the
// request ends as REQUEST_CANCELLED with request.cancelled, never as a
// caller that went away (CONNECTION_LOST, request.abandoned).
func TestDeletingAHandleCancelsItsRequest(t *testing.T) {
	f := newFixture(t, 1)
	f.lease(f.agent)
	var pend httpapi.PendingRequest
	f.call("POST", "/v1/leases", f.agent2, `{"platform":"ios","requesterId":"job-9"}`, &pend, "Prefer", "respond-async")
	eventually(t, func() bool { return f.st.Queued() == 1 })
	var drop httpapi.DropReply
	if r := f.call("DELETE", "/v1/requests/"+pend.RequestID, f.agent2, "", &drop); r.StatusCode != 200 || !drop.Cancelled {
		t.Fatalf("drop: %d %+v", r.StatusCode, drop)
	}
	if f.st.Queued() != 0 {
		t.Fatal("the request is still queued after the DELETE answered")
	}
	// The daemon's receipt answers the handle now: the cancel, stored as
	// the caller's own (not interrupted).
	if e, r := f.refusal("GET", "/v1/requests/"+pend.RequestID, f.agent2, ""); e.Code != contract.CodeRequestCancelled || r.StatusCode != 409 {
		t.Fatalf("handle after DELETE: %d %+v", r.StatusCode, e)
	}
	var rc contract.LeaseRequestReceipt
	f.call("GET", "/v1/lease-requests/"+pend.RequestID, f.agent2, "", &rc)
	if rc.State != contract.RequestCancelled || rc.Interrupted || rc.Error == nil || rc.Error.Code != contract.CodeRequestCancelled {
		t.Fatalf("receipt %+v %+v", rc, rc.Error)
	}
	var evs contract.EventsSubscribeOut
	f.st.Admin(contract.EventsSubscribe.Name, contract.EventsSubscribeIn{}, &evs)
	var cancelled, abandoned int
	for _, e := range evs.Events {
		switch e.Type {
		case "request.cancelled":
			cancelled++
		case "request.abandoned":
			abandoned++
		}
	}
	if cancelled != 1 || abandoned != 0 {
		t.Fatalf("request.cancelled %d, request.abandoned %d", cancelled, abandoned)
	}
}
