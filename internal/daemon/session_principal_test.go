package daemon

import (
	"context"
	"testing"

	"github.com/simlock/simlock/client"
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

// principalOf reads the receipt's recorded principal first, then the
// broker's memory of the live session, then the owner of the held lease,
// and names nobody when none knows. The session's events and session.info
// answer from it alike: the event's ownerId is its answer, and info
// answers that principal and refuses another, for every case.
func TestPrincipalOfHasOnePrecedence(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	r := prepare(t, a, "run", "owner-a") // alice's lease: its owner is alice
	b := f.d.sessions
	base, ok, err := b.st.SessionReceiptBySession(ctx, r.SessionID)
	if err != nil || !ok || base.Principal != "alice" {
		t.Fatalf("alice's receipt %+v %v %v", base, ok, err)
	}
	setMemory := func(owner string) {
		b.mu.Lock()
		b.live[r.SessionID].owner = owner
		b.mu.Unlock()
	}
	store := b.st
	t.Cleanup(func() { b.st = store })
	evs, unsub := f.d.bus.Subscribe(64)
	defer unsub()

	cases := []struct {
		name, recorded, memory, leaseID, want string
	}{
		{"the recorded principal wins", "carol", "dave", r.LeaseID, "carol"},
		{"then the broker's memory", "", "dave", r.LeaseID, "dave"},
		{"then the held lease's owner", "", "", r.LeaseID, "alice"},
		{"a lease no longer held names nobody", "", "", "lease-gone", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setMemory(c.memory)
			rec := base
			rec.Principal, rec.Receipt.LeaseID = c.recorded, c.leaseID
			if got := b.principalOf(rec); got != c.want {
				t.Fatalf("principalOf = %q, want %q", got, c.want)
			}
			b.emit("session.test", rec, "", nil)
			for e := range evs {
				if e.Type != "session.test" {
					continue
				}
				if got, _ := e.Data["ownerId"].(string); got != c.want {
					t.Fatalf("the event's ownerId is %q, want %q", got, c.want)
				}
				break
			}
			if c.leaseID != r.LeaseID {
				return // info reads the receipt's own lease
			}
			b.st = principalAs{Store: store, sid: r.SessionID, principal: c.recorded}
			defer func() { b.st = store }()
			if _, err := client.Do(ctx, f.dial(c.want, ""), contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil {
				t.Fatalf("session.info as %s: %v", c.want, err)
			}
			if _, err := client.Do(ctx, f.dial("mallory", ""), contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
				t.Fatalf("session.info as mallory: %v", err)
			}
		})
	}
	setMemory("")
	if got := b.principalOf(sessions.Record{}); got != "" {
		t.Fatalf("principalOf an unknown session = %q, want nobody", got)
	}
	// The memory is written from principalOf when the session becomes live.
	setMemory("")
	b.adopt(base, r.LeaseID, r.Device.ID, 0)
	b.mu.Lock()
	got := b.live[r.SessionID].owner
	b.mu.Unlock()
	if got != "alice" {
		t.Fatalf("adopt remembered %q as the owner, want alice", got)
	}
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
			if e.Type == evSessionEnded && e.Data["sessionId"] == r.SessionID {
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
