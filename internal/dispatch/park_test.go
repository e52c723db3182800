package dispatch

import (
	"context"
	"log/slog"
	"testing"

	"github.com/simlock/simlock/contract"
)

// A park refusal may be answered in the operation's own terms: the hook
// sees the method and the refusal, and nil keeps the park's.
func TestParkRefusalHookAnswersForItsOperations(t *testing.T) {
	d := New(Options{Log: slog.New(slog.DiscardHandler),
		Ready: func(context.Context) error { return contract.Errorf(contract.CodeDaemonStopping, "stopping") },
		ParkRefusal: func(method string, err *contract.Error) *contract.Error {
			if method == contract.LeaseRenew.Name && err.Code == contract.CodeDaemonStopping {
				return contract.Errorf(contract.CodeSessionBrokerStopping, "mine")
			}
			return nil
		}})
	Handle(d, contract.LeaseRenew, func(context.Context, *Call, contract.LeaseRenewIn) (contract.Lease, error) {
		return contract.Lease{}, nil
	})
	Handle(d, contract.LeaseRelease, func(context.Context, *Call, contract.LeaseReleaseIn) (contract.LeaseReleaseOut, error) {
		return contract.LeaseReleaseOut{}, nil
	})
	call := func(method string) *contract.Error {
		_, err := d.Dispatch(context.Background(), &Call{Session: contract.Session{Role: contract.RoleAdmin, Compatible: true}}, method, []byte(`{"leaseId":"lse_x"}`))
		return err
	}
	if err := call(contract.LeaseRenew.Name); err == nil || err.Code != contract.CodeSessionBrokerStopping {
		t.Fatalf("the hooked operation: %v", err)
	}
	if err := call(contract.LeaseRelease.Name); err == nil || err.Code != contract.CodeDaemonStopping {
		t.Fatalf("another operation: %v", err)
	}
}
