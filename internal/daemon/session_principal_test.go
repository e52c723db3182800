package daemon

import (
	"context"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/sessions"
)

// principalAs serves one session's receipt with the principal a case
// sets, as store migration 9 left it or an older one did.
type principalAs struct {
	sessions.Store
	sid, principal string
}

func (s principalAs) SessionReceiptBySession(ctx context.Context, sid string) (sessions.Record, bool, error) {
	r, ok, err := s.Store.SessionReceiptBySession(ctx, sid)
	if sid == s.sid {
		r.Principal = s.principal
	}
	return r, ok, err
}

// A daemon that ends the sessions of a crashed predecessor names their
// owner from the receipt: the lease and the memory are gone, but the
// session.ended it publishes still carries alice as ownerId, so alice's
// agent sees it.
func TestSessionEndedAfterACrashNamesTheRecordedPrincipal(t *testing.T) {
	f := sessionDaemon(t, nil)
	r := prepare(t, f.dial("alice", ""), "run", "o")
	restartDaemon(t, f, true)
	waitReceipt(t, f.dial("alice", ""), "run", "o", func(r contract.SessionReceipt) bool { return !r.CleanupPending })
	var ended map[string]any
	waitFor(t, "the session.ended of "+r.SessionID+" journaled after the crash", func() bool {
		evs, err := f.d.db.EventsBetween(context.Background(), 0, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == sessions.EvSessionEnded && e.Data["sessionId"] == r.SessionID {
				ended = e.Data
				return true
			}
		}
		return false
	})
	if ended["ownerId"] != "alice" {
		t.Fatalf("session.ended after the crash %+v, want ownerId alice", ended)
	}
}
