package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
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

// simlock-architecture, HTTP frontend: errors have one shape everywhere. A
// request net/http cannot read (junk bytes in Last-Event-ID) is refused with
// the typed BAD_REQUEST body, not net/http's plain text; a well-formed
// request on the same server is untouched.
func TestAnUnreadableRequestGetsTheTypedError(t *testing.T) {
	f := newFixture(t, 1)
	s := httpapi.New(httpapi.Options{Backend: f.st.Backend(), Version: "x"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()
	addr := ln.Addr().String()
	for _, head := range []string{
		"GET /v1/events HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + f.operator + "\r\nLast-Event-ID: \x01junk\r\n\r\n",
		"GET /v1/events HTTP/1.1\r\nHost: h\r\nLast-Event-ID: 7\x7f\r\n\r\n",
		"GET /v1/status HTTP/1.1\r\nHost: a b\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, head)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", head, err)
		}
		var body httpapi.ErrorBody
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" || derr != nil ||
			body.Error == nil || body.Error.Code != contract.CodeBadRequest || body.Error.NextAction == "" {
			t.Fatalf("%q: %d %q %+v %v", head, resp.StatusCode, resp.Header.Get("Content-Type"), body.Error, derr)
		}
	}
	r, _ := http.NewRequest("GET", "http://"+addr+"/v1/healthz", nil)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h httpapi.Health
	if json.NewDecoder(resp.Body).Decode(&h) != nil || resp.StatusCode != 200 || h.Status != "ok" {
		t.Fatalf("healthz through the same listener: %d %+v", resp.StatusCode, h)
	}
}
