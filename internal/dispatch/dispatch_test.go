package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

func testDispatcher(ready func(context.Context) error) (*Dispatcher, *[]string) {
	var calls []string
	d := New(Options{Log: slog.New(slog.DiscardHandler), Ready: ready, LeaseOwner: func(_ context.Context, id string) (string, bool, error) {
		if id == "lse_mine" {
			return "me", true, nil
		}
		if id == "lse_theirs" {
			return "them", true, nil
		}
		return "", false, nil
	}})
	Handle(d, contract.StatusGet, func(context.Context, *Call, contract.StatusGetIn) (contract.StatusGetOut, error) {
		calls = append(calls, "status")
		return contract.StatusGetOut{}, nil
	})
	Handle(d, contract.LeaseRenew, func(_ context.Context, _ *Call, in contract.LeaseRenewIn) (contract.Lease, error) {
		calls = append(calls, "renew "+in.LeaseID)
		return contract.Lease{LeaseID: in.LeaseID}, nil
	})
	Handle(d, contract.ListGet, func(context.Context, *Call, contract.ListGetIn) (contract.ListGetOut, error) {
		calls = append(calls, "list")
		return contract.ListGetOut{}, nil
	})
	Handle(d, contract.LeaseList, func(context.Context, *Call, contract.LeaseListIn) (contract.LeaseListOut, error) {
		return contract.LeaseListOut{}, errors.New("disk on fire")
	})
	return d, &calls
}

func agent(p string) *Call {
	return &Call{Session: contract.Session{Principal: p, Role: contract.RoleAgent, Compatible: true}}
}
func admin() *Call {
	return &Call{Session: contract.Session{Principal: "op", Role: contract.RoleAdmin, Compatible: true}}
}

func ready(context.Context) error { return nil }

func TestPipelineOrderDecodeRoleAuthorize(t *testing.T) {
	d, calls := testDispatcher(ready)
	cases := []struct {
		call   *Call
		method string
		params string
		code   contract.Code
	}{
		{agent("me"), "nope.nope", `{}`, contract.CodeUnknownOperation},
		{agent("me"), "lease.renew", `{"leaseId":"lse_mine","extra":1}`, contract.CodeBadRequest},
		{agent("me"), "list.get", `{}`, contract.CodeForbidden},
		{agent("me"), "lease.renew", `{"leaseId":"lse_theirs"}`, contract.CodeForbidden},
		{agent("me"), "lease.renew", `{"leaseId":"lse_gone"}`, contract.CodeUnknownLease},
		{agent("me"), "lease.list", `{}`, contract.CodeInternal},
		{&Call{Session: contract.Session{Role: contract.RoleAdmin}}, "status.get", `{}`, contract.CodeProtocolUnsupported},
	}
	for _, c := range cases {
		_, err := d.Dispatch(context.Background(), c.call, c.method, []byte(c.params))
		if err == nil || err.Code != c.code {
			t.Errorf("%s %s: got %v, want %s", c.method, c.params, err, c.code)
		}
	}
	if len(*calls) != 0 {
		t.Fatalf("refused calls reached handlers: %v", *calls)
	}
	if _, err := d.Dispatch(context.Background(), agent("me"), "lease.renew", []byte(`{"leaseId":"lse_mine"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(context.Background(), admin(), "lease.renew", []byte(`{"leaseId":"lse_theirs"}`)); err != nil {
		t.Fatalf("admin bypasses ownership: %v", err)
	}
}

func TestRequestsParkUntilReadyButStatusAnswers(t *testing.T) {
	gate := make(chan struct{})
	d, calls := testDispatcher(func(ctx context.Context) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if _, err := d.Dispatch(context.Background(), admin(), "status.get", nil); err != nil {
		t.Fatalf("status.get must answer during startup: %v", err)
	}
	done := make(chan *contract.Error, 1)
	go func() {
		_, err := d.Dispatch(context.Background(), admin(), "list.get", nil)
		done <- err
	}()
	select {
	case <-done:
		t.Fatal("list.get ran before readiness")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if (*calls)[len(*calls)-1] != "list" {
		t.Fatalf("calls %v", *calls)
	}
}

func TestFailedStartupRejectsParkedRequests(t *testing.T) {
	d, _ := testDispatcher(func(context.Context) error {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "convergence failed")
	})
	_, err := d.Dispatch(context.Background(), admin(), "list.get", nil)
	if err == nil || err.Code != contract.CodeDaemonStartupFailed {
		t.Fatalf("got %v", err)
	}
}

func TestOwnershipIsCheckedOnlyAfterTheRegistryIsLoaded(t *testing.T) {
	gate := make(chan struct{})
	d, _ := testDispatcher(func(ctx context.Context) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	done := make(chan *contract.Error, 1)
	go func() {
		_, err := d.Dispatch(context.Background(), agent("me"), "lease.renew", []byte(`{"leaseId":"lse_mine"}`))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("renew answered before readiness: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A handler that panics answers INTERNAL, logs the stack, and leaves the
// dispatcher serving; so does a panicking after-response hook.
func TestHandlerPanicAnswersInternalAndKeepsServing(t *testing.T) {
	var logged strings.Builder
	d := New(Options{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	Handle(d, contract.StatusGet, func(_ context.Context, call *Call, _ contract.StatusGetIn) (contract.StatusGetOut, error) {
		call.After(func() { panic("hook boom") })
		var devices []contract.Device
		_ = devices[len(call.Session.Principal)] // index out of range: a real runtime panic
		return contract.StatusGetOut{}, nil
	})
	Handle(d, contract.ListGet, func(context.Context, *Call, contract.ListGetIn) (contract.ListGetOut, error) {
		return contract.ListGetOut{}, nil
	})
	call := admin()
	out, err := d.Dispatch(context.Background(), call, "status.get", nil)
	if err == nil || err.Code != contract.CodeInternal || out != nil {
		t.Fatalf("panicking handler answered %v, %v; want INTERNAL", out, err)
	}
	call.RunAfter() // must not panic
	if _, err := d.Dispatch(context.Background(), admin(), "list.get", nil); err != nil {
		t.Fatalf("the dispatcher stopped serving after a panic: %v", err)
	}
	for _, want := range []string{"operation panicked", "op=status.get", "index out of range", "dispatch_test.go", "hook boom"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logged.String())
		}
	}
}
