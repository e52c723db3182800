package sessions

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/simlock/simlock/contract"
)

// nothingStored is a receipt store with no receipts that counts the
// commits made to it.
type nothingStored struct {
	Store
	commits atomic.Int64
}

func (s *nothingStored) CommitSessionReceipt(_ context.Context, r Record, _ *Export) (Record, bool, error) {
	s.commits.Add(1)
	return r, true, nil
}

func (*nothingStored) SessionReceiptByRequest(context.Context, string, string) (Record, bool, error) {
	return Record{}, false, nil
}

func TestSessionOperationsAreRefusedOnceTheStopBegins(t *testing.T) {
	ctx := context.Background()
	st := &nothingStored{}
	b := newTestBroker(t, Config{Store: st})
	b.mu.Lock()
	b.stopping = true
	b.mu.Unlock()
	a := agentCall("alice")
	_, err := b.Prepare(ctx, a, contract.SessionPrepareIn{Config: cfg("r"), OwnerToken: "o"})
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeSessionBrokerStopping || !ce.Retryable || ce.RetryAfterMs == nil || *ce.RetryAfterMs != 5000 {
		t.Fatalf("prepare while stopping: %v", err)
	}
	if _, err := b.Abandon(ctx, a, contract.SessionAbandonIn{RequestID: "r", OwnerToken: "o"}); !isCode(err, contract.CodeSessionBrokerStopping) {
		t.Fatalf("abandon while stopping: %v", err)
	}
	// Nothing was stored: the refusal is not the identity's answer.
	if _, err := b.Status(ctx, a, contract.SessionStatusIn{RequestID: "r", OwnerToken: "o"}); !isCode(err, contract.CodeUnknownRequest) {
		t.Fatalf("a stopping refusal was stored: %v", err)
	}
	if n := st.commits.Load(); n != 0 {
		t.Fatalf("a stopping refusal was stored: %d commits", n)
	}
}

func isCode(err error, code contract.Code) bool {
	ce := contract.AsError(err)
	return ce != nil && ce.Code == code
}
