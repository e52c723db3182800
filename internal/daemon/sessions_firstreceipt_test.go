package daemon

import (
	"context"
	"sync"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/sessions"
)

// slowFirstCommit holds the first receipt commit until a read of the
// receipts arrives while it waits: the prepare's own read after its
// waitMs, which then finds nothing stored yet.
type slowFirstCommit struct {
	sessions.Store
	mu        sync.Mutex
	held      bool // the first commit is waiting
	once      sync.Once
	read      chan struct{}
	committed bool
}

func (s *slowFirstCommit) CommitSessionReceipt(ctx context.Context, r sessions.Record, exp *sessions.Export) (sessions.Record, bool, error) {
	s.mu.Lock()
	first := !s.committed
	s.committed = true
	if first {
		s.held = true
	}
	s.mu.Unlock()
	if first {
		select {
		case <-s.read:
		case <-ctx.Done():
		}
	}
	return s.Store.CommitSessionReceipt(ctx, r, exp)
}

func (s *slowFirstCommit) SessionReceipt(ctx context.Context, identity string) (sessions.Record, bool, error) {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	rec, ok, err := s.Store.SessionReceipt(ctx, identity)
	if held && !ok {
		s.once.Do(func() { close(s.read) })
	}
	return rec, ok, err
}

// A prepare whose waitMs runs out before the preparation stored its first
// receipt (it was still being admitted) answers with that receipt once it
// is stored, not with INTERNAL (found by the multi-home drill's long run).
func TestAPrepareWhoseWaitEndsBeforeTheFirstReceiptWaitsForIt(t *testing.T) {
	f := sessionDaemon(t, nil)
	<-f.d.readyCh // startup's recovery reads the store; swap it after
	b := f.d.sessions
	b.SwapStore(func(cur sessions.Store) sessions.Store {
		return &slowFirstCommit{Store: cur, read: make(chan struct{})}
	})
	a := f.dial("alice", "")
	p, err := client.Do(context.Background(), a, contract.SessionPrepare,
		contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "o", WaitMs: 1})
	if err != nil || p.RequestID != "run" {
		t.Fatalf("prepare %+v %v, want its receipt", p, err)
	}
}
