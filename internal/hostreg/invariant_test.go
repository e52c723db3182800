package hostreg

import (
	"context"
	"strings"
	"testing"
)

// A restored lease is trusted only on its own daemon's claim, or on its
// home's previous daemon's once that one is proven dead; a cleared claim,
// another home's, a live other daemon's, an unreadable one and a record
// under reclaim each end it, naming why.
func TestLeaseTrust(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t, udid1)
	self := Owner{Home: homeA, PID: 300, Start: "t300"} // A's restarted daemon
	p := liveAB()
	p.procs[300] = "t300"
	judge := func(c Claim) Status { return Classify(ctx, p, c) }
	deadA := ownerA // A's previous daemon (pid 100)
	cases := []struct {
		name    string
		st      Status
		found   bool
		trusted bool
		adopt   bool
		reason  string
	}{
		{"no claim", Status{}, false, false, false, ReasonClaimReleased},
		{"own claim", judge(leaseClaim(k, self, "lse_1")), true, true, false, ""},
		{"another home's claim", judge(leaseClaim(k, ownerB, "lse_b")), true, false, false, ReasonClaimHeldElsewhere},
		{"a live daemon of this home", judge(leaseClaim(k, deadA, "lse_1")), true, false, false, ReasonClaimHeldElsewhere},
		{"unreadable", Status{Key: k, Class: ClassInconsistent, Detail: "garbage"}, true, false, false, ReasonClaimUnreadable},
	}
	for _, c := range cases {
		tr := LeaseTrust(self, c.st, c.found)
		if tr.Trusted != c.trusted || tr.Adopt != c.adopt || tr.Reason != c.reason {
			t.Errorf("%s: %+v, want trusted=%v adopt=%v reason=%q", c.name, tr, c.trusted, c.adopt, c.reason)
		}
	}
	// A's previous daemon dies: its record is adoptable, and trusted once adopted.
	delete(p.procs, 100)
	if tr := LeaseTrust(self, judge(leaseClaim(k, deadA, "lse_1")), true); !tr.Trusted || !tr.Adopt {
		t.Errorf("dead previous daemon: %+v", tr)
	}
	// ...and its pid reused by another process proves it dead too.
	p.procs[100] = "other"
	if tr := LeaseTrust(self, judge(leaseClaim(k, deadA, "lse_1")), true); !tr.Trusted || !tr.Adopt {
		t.Errorf("reused pid: %+v", tr)
	}
	// Another home's dead owner is still not this home's.
	delete(p.procs, 200)
	if tr := LeaseTrust(self, judge(leaseClaim(k, ownerB, "lse_b")), true); tr.Trusted || tr.Reason != ReasonClaimHeldElsewhere {
		t.Errorf("another home's orphan: %+v", tr)
	}
	// A record another daemon marked for reclaim is not trusted either,
	// although it still names this home's dead daemon.
	db := openTest(t, t.TempDir(), p)
	if err := db.Claim(ctx, leaseClaim(k, deadA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	st, _, err := db.Lookup(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	marked, err := db.BeginReclaim(ctx, k, st, st.Claim.ClaimedAt)
	if err != nil {
		t.Fatal(err)
	}
	if tr := LeaseTrust(self, marked, true); tr.Trusted || tr.Reason != ReasonClaimReleased {
		t.Errorf("record under reclaim: %+v", tr)
	}
	// And Adopt refuses it: the home cannot take the device back mid-shutdown.
	if _, err := db.Adopt(ctx, Claim{Key: k, Kind: KindTransient, Command: "restart", Owner: self, ClaimedAt: st.Claim.ClaimedAt}); err == nil {
		t.Fatal("Adopt took a record under reclaim")
	}
}

// Violations flags two live leases on one key and a live lease whose key
// its home does not claim; a clean host has none.
func TestViolations(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	k1, k2 := mustKey(t, udid1), mustKey(t, "99999999-2222-3333-4444-555555555555")
	claims := []Status{Classify(ctx, p, leaseClaim(k1, ownerA, "lse_a"))}
	clean := []LiveLease{{Home: homeA, LeaseID: "lse_a", Key: k1}}
	if v := Violations(claims, clean); len(v) != 0 {
		t.Fatalf("clean host: %+v", v)
	}
	// Scenario 1 of issue 22: home B leases the device too.
	two := append(clean, LiveLease{Home: homeB, LeaseID: "lse_b", Key: k1})
	v := Violations(claims, two)
	if len(v) != 2 || v[0].Rule != RuleLeaseWithoutClaim || v[1].Rule != RuleTwoHolders || !strings.Contains(v[0].Detail, "lse_b") {
		t.Fatalf("two holders: %+v", v)
	}
	// A lease on a device nobody claims.
	v = Violations(claims, append(clean, LiveLease{Home: homeB, LeaseID: "lse_c", Key: k2}))
	if len(v) != 1 || v[0].Key != k2 || v[0].Rule != RuleLeaseWithoutClaim {
		t.Fatalf("unclaimed lease: %+v", v)
	}
}
