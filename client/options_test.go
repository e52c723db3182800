package client

import (
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

// Each option lands in its request's millisecond field; a positive
// duration under a millisecond is not sent as 0, which would mean the
// opposite (no bound, or the default).
func TestCallOptionsWriteTheWiresMilliseconds(t *testing.T) {
	var lr contract.LeaseRequestIn
	if err := apply("lease.request", &lr, []CallOption{TTL(10 * time.Minute), QueueTimeout(1500 * time.Microsecond)}); err != nil {
		t.Fatal(err)
	}
	if lr.TTLMs != 600_000 || lr.TimeoutMs != 2 {
		t.Fatalf("lease.request ttlMs=%d timeoutMs=%d", lr.TTLMs, lr.TimeoutMs)
	}
	var rs contract.SessionReleaseIn
	if err := apply("session.release", &rs, []CallOption{ReplyBudget(0)}); err != nil {
		t.Fatal(err)
	}
	if rs.ReplyBudgetMs == nil || *rs.ReplyBudgetMs != 0 {
		t.Fatalf("ReplyBudget(0) is an explicit zero on the wire, got %v", rs.ReplyBudgetMs)
	}
	var sc contract.SlotResetScopeIn
	if err := apply("slot.resetScope", &sc, []CallOption{Wait(time.Nanosecond)}); err != nil || sc.WaitMs == nil || *sc.WaitMs != 1 {
		t.Fatalf("slot.resetScope waitMs %v %v", sc.WaitMs, err)
	}
	var st contract.SessionStatsIn
	if err := apply("session.stats", &st, []CallOption{Window(time.Hour), Window(2 * time.Hour)}); err != nil || st.WindowMs != 7_200_000 {
		t.Fatalf("the later option wins: windowMs %d %v", st.WindowMs, err)
	}
}

// An option the operation has no field for, or a negative duration, is
// refused before anything is sent, with the operation named.
func TestCallOptionsRefuseWhatDoesNotApply(t *testing.T) {
	var renew contract.LeaseRenewIn
	for name, opts := range map[string][]CallOption{
		"QueueTimeout on a renew": {QueueTimeout(time.Second)},
		"negative TTL":            {TTL(-time.Second)},
	} {
		err := apply("lease.renew", &renew, opts)
		if ce := contract.AsError(err); err == nil || ce.Code != contract.CodeBadRequest || ce.Details["operation"] != "lease.renew" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if renew.TTLMs != 0 {
		t.Fatalf("a refused option still wrote ttlMs=%d", renew.TTLMs)
	}
}
