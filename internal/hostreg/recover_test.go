package hostreg

import (
	"context"
	"errors"
	"testing"
)

func statusOf(t *testing.T, db *DB, k Key) Status {
	t.Helper()
	sts, err := db.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Key == k {
			return st
		}
	}
	t.Fatalf("%s not claimed", k)
	return Status{}
}

func held(t *testing.T, db *DB, k Key) bool {
	t.Helper()
	sts, err := db.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Key == k {
			return true
		}
	}
	return false
}

// --stale clears only a record that is still the inspected one and still
// proven orphaned inside the transaction; a live owner is refused.
func TestReleaseStaleNeedsProofInsideTheTransaction(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	k := mustKey(t, udid1)
	if err := db.Claim(ctx, leaseClaim(k, ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	live := statusOf(t, db, k)
	_, err := db.ReleaseStale(ctx, k, live)
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Reason != ReasonNotOrphaned || ce.Classification != ClassClaimed {
		t.Fatalf("live owner: %v, want a not-orphaned conflict", err)
	}
	if ce.Recovery != "simlock --home /homes/a device release "+string(k) {
		t.Fatalf("recovery %q", ce.Recovery)
	}
	delete(p.procs, 100) // the owner dies
	dead := statusOf(t, db, k)
	if dead.Class != ClassOrphaned {
		t.Fatalf("class %s", dead.Class)
	}
	// Seen orphaned, but the owner came back (say, a pid probe that
	// raced): the re-check inside the transaction refuses.
	p.procs[100] = "t100"
	if _, err := db.ReleaseStale(ctx, k, dead); !errors.As(err, &ce) || ce.Reason != ReasonNotOrphaned {
		t.Fatalf("revived owner: %v", err)
	}
	delete(p.procs, 100)
	// The record changed since inspection: refused.
	stale := dead
	stale.Claim.LeaseID = "lse_other"
	if _, err := db.ReleaseStale(ctx, k, stale); !errors.Is(err, ErrClaimChanged) {
		t.Fatalf("changed record: %v", err)
	}
	cleared, err := db.ReleaseStale(ctx, k, dead)
	if err != nil || !cleared || held(t, db, k) {
		t.Fatalf("orphan: cleared=%v err=%v", cleared, err)
	}
	if cleared, err := db.ReleaseStale(ctx, k, dead); err != nil || cleared {
		t.Fatalf("already free: cleared=%v err=%v", cleared, err)
	}
}

// A corrupt record is never freed by --stale, even when the pid it names
// is dead; --force clears it, but only the record it inspected.
func TestCorruptClaimOnlyForceClears(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	k := mustKey(t, udid1)
	if _, err := db.sql.Exec(`INSERT INTO claims (`+selectColumns+`) VALUES (?, 1, 'bogus', '', '/homes/a', 999, 's', '', 5, 'claimed', NULL)`, string(k)); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, db, k)
	if st.Class != ClassInconsistent || st.Reclaimable() {
		t.Fatalf("corrupt record: %+v", st)
	}
	if got := RecoveryCommand(st); got != "simlock device release --force "+string(k) {
		t.Fatalf("recovery %q", got)
	}
	var ce *ConflictError
	if _, err := db.ReleaseStale(ctx, k, st); !errors.As(err, &ce) || ce.Classification != ClassInconsistent {
		t.Fatalf("--stale on a corrupt record: %v", err)
	}
	if !held(t, db, k) {
		t.Fatal("--stale freed a corrupt record")
	}
	other := st
	other.Claim.Owner.PID = 998
	if _, err := db.ForceRelease(ctx, k, other); !errors.Is(err, ErrClaimChanged) || !held(t, db, k) {
		t.Fatalf("force on another record: %v", err)
	}
	if cleared, err := db.ForceRelease(ctx, k, st); err != nil || !cleared || held(t, db, k) {
		t.Fatalf("force: cleared=%v err=%v", cleared, err)
	}
}

// --force clears a live owner's record too (the CLI asks the owner first).
func TestForceReleaseClearsALiveOwnersRecord(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	k := mustKey(t, udid1)
	if err := db.Claim(ctx, leaseClaim(k, ownerB, "lse_2")); err != nil {
		t.Fatal(err)
	}
	g0, _ := db.Generation(ctx)
	if cleared, err := db.ForceRelease(ctx, k, statusOf(t, db, k)); err != nil || !cleared {
		t.Fatalf("cleared=%v err=%v", cleared, err)
	}
	if g1, _ := db.Generation(ctx); g1 != g0+1 {
		t.Fatalf("generation %d -> %d: other daemons would not notice", g0, g1)
	}
}
