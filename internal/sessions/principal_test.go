package sessions

import (
	"context"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// oneReceipt serves one session's receipt with the principal a case
// sets, as store migration 9 left it or an older one did.
type oneReceipt struct {
	Store
	rec       Record
	principal string
}

func (s oneReceipt) SessionReceiptBySession(_ context.Context, sid string) (Record, bool, error) {
	if sid != s.rec.Receipt.SessionID {
		return Record{}, false, nil
	}
	r := s.rec
	r.Principal = s.principal
	return r, true, nil
}

// principalOf reads the receipt's recorded principal first, then the
// broker's memory of the live session, then the owner of the held lease,
// and names nobody when none knows. The session's events and session.info
// answer from it alike: the event's ownerId is its answer, and info
// answers that principal and refuses another, for every case.
func TestPrincipalOfHasOnePrecedence(t *testing.T) {
	ctx := context.Background()
	const sid, leaseID = "s-1", "lease-1"
	// alice's ready session: its lease's owner is alice.
	base := Record{Identity: "id-1", OwnerDigest: PrincipalOwnerDigest("alice", "owner-a"), Principal: "alice",
		Receipt: contract.SessionReceipt{ContractVersion: 1, RequestID: "run", SessionID: sid, LeaseID: leaseID,
			Status: contract.SessionReady, Device: &contract.Device{ID: "dev-1"}}}
	bus := &recordingBus{}
	eng := leaseEngine{leases: map[string]core.LeaseRecord{leaseID: {ID: leaseID, OwnerID: "alice", DeviceID: "dev-1"}}}
	b := newTestBroker(t, Config{
		Store:  oneReceipt{rec: base, principal: "alice"},
		Engine: eng,
		Watch:  eng,
		Bus:    bus,
	})
	b.live[sid] = &liveSession{identity: base.Identity, leaseID: leaseID, deviceID: "dev-1", owner: "alice", ownerDigest: base.OwnerDigest}
	setMemory := func(owner string) {
		b.mu.Lock()
		b.live[sid].owner = owner
		b.mu.Unlock()
	}

	cases := []struct {
		name, recorded, memory, leaseID, want string
	}{
		{"the recorded principal wins", "carol", "dave", leaseID, "carol"},
		{"then the broker's memory", "", "dave", leaseID, "dave"},
		{"then the held lease's owner", "", "", leaseID, "alice"},
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
			e, ok := bus.last("session.test")
			if !ok {
				t.Fatal("no session.test event published")
			}
			if got, _ := e.Data["ownerId"].(string); got != c.want {
				t.Fatalf("the event's ownerId is %q, want %q", got, c.want)
			}
			if c.leaseID != leaseID {
				return // info reads the receipt's own lease
			}
			store := b.st
			b.st = oneReceipt{rec: base, principal: c.recorded}
			defer func() { b.st = store }()
			if _, err := b.Info(ctx, agentCall(c.want), contract.SessionInfoIn{SessionID: sid}); err != nil {
				t.Fatalf("session.info as %s: %v", c.want, err)
			}
			if _, err := b.Info(ctx, agentCall("mallory"), contract.SessionInfoIn{SessionID: sid}); !isCode(err, contract.CodeSessionOwnerMismatch) {
				t.Fatalf("session.info as mallory: %v", err)
			}
		})
	}
	setMemory("")
	if got := b.principalOf(Record{}); got != "" {
		t.Fatalf("principalOf an unknown session = %q, want nobody", got)
	}
	// The memory is written from principalOf when the session becomes live.
	setMemory("")
	b.adopt(base, leaseID, "dev-1", 0)
	b.mu.Lock()
	got := b.live[sid].owner
	b.mu.Unlock()
	if got != "alice" {
		t.Fatalf("adopt remembered %q as the owner, want alice", got)
	}
}
