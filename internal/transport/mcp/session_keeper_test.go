package mcp

import (
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
)

// The keeper's first heartbeat goes as soon as the session is ready, not
// after a delay of its own: the broker's heartbeat clock started when the
// session went live, and the ready answer's trip here already spent part
// of the TTL. The keeper's clock is frozen, so only a heartbeat sent at
// once can renew the session's lease.
func TestSessionKeeperHeartbeatsAtOnce(t *testing.T) {
	h := sessionHarnessTTL(t, 60_000)
	o := h.options("agent-k", newLogs())
	o.Clock = fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	o.Session = &SessionOptions{Config: sessionCfg("r-now", &contract.HardwareRequirement{Kind: contract.HardwareModel,
		Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}), OwnerToken: "tok"}
	s := serve(t, o)
	p := published(t, s)
	if p["status"] != contract.SessionReady {
		t.Fatalf("published %v", p)
	}
	id, _ := p["leaseId"].(string)
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for {
		l, ok := h.d.Engine().Lease(id)
		if !ok {
			t.Fatalf("the session's lease %s is not held", id)
		}
		if l.LastRenewedAt.After(l.GrantedAt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat renewed the session's lease without the keeper's clock moving: %+v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
}
