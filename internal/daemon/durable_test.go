package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

func TestIdempotentRepeatOverTheSocket(t *testing.T) {
	f := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(10*time.Second))
	defer cancel()
	in := contract.LeaseRequestIn{Platform: "ios", IdempotencyKey: "job-1"}
	a := f.dial("alice", "")
	l1, err := a.LeaseRequest(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := f.dial("alice", "")
	l2, err := b.LeaseRequest(ctx, in, nil)
	if err != nil || l2.LeaseID != l1.LeaseID || l2.RequestID == "" || l2.RequestID != l1.RequestID {
		t.Fatalf("repeat: %+v %v, first %+v", l2, err, l1)
	}
	in.TTLMs = 60_000
	if _, err := b.LeaseRequest(ctx, in, nil); !client.IsCode(err, contract.CodeIdempotencyMismatch) {
		t.Fatalf("different body: %v", err)
	}
	rc, err := client.Do(ctx, b, contract.LeaseRequestStatus, contract.LeaseRequestStatusIn{RequestID: l1.RequestID})
	if err != nil || rc.State != contract.RequestGranted || rc.Lease == nil || rc.Lease.LeaseID != l1.LeaseID || rc.Timing == nil {
		t.Fatalf("receipt %+v %v", rc, err)
	}
	if _, err := client.Do(ctx, f.dial("mallory", ""), contract.LeaseRequestStatus, contract.LeaseRequestStatusIn{RequestID: l1.RequestID}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("another principal read the receipt: %v", err)
	}
}
