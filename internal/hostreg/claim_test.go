package hostreg

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClaimReleaseLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openTest(t, dir, liveAB())
	k := mustKey(t, udid1)
	gen := func() int64 {
		t.Helper()
		g, err := db.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g0 := gen()
	if err := db.Claim(ctx, leaseClaim(k, ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkReleasing(ctx, k, ownerA); err != nil {
		t.Fatal(err)
	}
	if g := gen(); g != g0+2 {
		t.Fatalf("generation %d after two changes from %d", g, g0)
	}
	st := inspectOne(t, dir, liveAB())
	if st.Class != ClassReleasing {
		t.Fatalf("after MarkReleasing: %s", st.Class)
	}
	if err := db.MarkReleaseFailed(ctx, k, ownerA, []string{"shutdown", "delete"}); err != nil {
		t.Fatal(err)
	}
	st = inspectOne(t, dir, liveAB())
	if st.Class != ClassReleaseFailed || !reflect.DeepEqual(st.Claim.FailedSteps, []string{"shutdown", "delete"}) {
		t.Fatalf("after MarkReleaseFailed: %+v", st)
	}
	// Another owner can neither release nor change it.
	for name, f := range map[string]func() error{
		"release":        func() error { return db.Release(ctx, k, ownerB) },
		"releasing":      func() error { return db.MarkReleasing(ctx, k, ownerB) },
		"release-failed": func() error { return db.MarkReleaseFailed(ctx, k, ownerB, []string{"x"}) },
	} {
		var ce *ConflictError
		if err := f(); !errors.As(err, &ce) || ce.Reason != ReasonNotOwner || ce.Classification != ClassReleaseFailed {
			t.Fatalf("%s by another owner: %v", name, err)
		}
	}
	// A retried teardown may go back to releasing and clears the steps.
	if err := db.MarkReleasing(ctx, k, ownerA); err != nil {
		t.Fatal(err)
	}
	if st := inspectOne(t, dir, liveAB()); st.Class != ClassReleasing || st.Claim.FailedSteps != nil {
		t.Fatalf("retry: %+v", st)
	}
	g1 := gen()
	if err := db.Release(ctx, k, ownerA); err != nil {
		t.Fatal(err)
	}
	if gen() != g1+1 {
		t.Fatal("release did not bump the generation")
	}
	if all, err := db.Inspect(ctx); err != nil || len(all) != 0 {
		t.Fatalf("after release: %v, %v", all, err)
	}
	// Releasing a free device is a success: the claim is already gone.
	if err := db.Release(ctx, k, ownerA); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkReleasing(ctx, k, ownerA); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("MarkReleasing a free device: %v", err)
	}
	// A refused change leaves the generation alone.
	g2 := gen()
	db.Claim(ctx, leaseClaim(k, ownerA, "lse_1"))
	var ce *ConflictError
	if err := db.Claim(ctx, leaseClaim(k, ownerB, "lse_2")); !errors.As(err, &ce) || gen() != g2+1 {
		t.Fatalf("refused claim: %v, generation %d from %d", err, gen(), g2)
	}
}

func inspectOne(t *testing.T, dir string, p Prober) Status {
	t.Helper()
	all, err := Inspect(context.Background(), dir, p)
	if err != nil || len(all) != 1 {
		t.Fatalf("inspect: %v, %v", all, err)
	}
	return all[0]
}

func TestClaimConflictCarriesTheErrorContract(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	k := mustKey(t, udid1)
	if err := db.Claim(ctx, leaseClaim(k, ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	err := db.Claim(ctx, leaseClaim(k, ownerB, "lse_2"))
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("second owner's claim: %v", err)
	}
	want := ConflictError{
		Reason: ReasonHeld, Classification: ClassClaimed, Liveness: LivenessAlive, DeviceKey: k,
		Owner:    ConflictOwner{Home: homeA, LeaseID: "lse_1", DaemonPID: 100, DaemonStartTime: "t100"},
		Recovery: "simlock --home /homes/a device release ios:udid:" + udid1,
		Detail:   ce.Detail,
	}
	if *ce != want {
		t.Fatalf("conflict\n got %+v\nwant %+v", *ce, want)
	}
	// The owner dies: still refused (recovery is explicit), now orphaned
	// and with the --stale recovery.
	delete(p.procs, 100)
	err = db.Claim(ctx, leaseClaim(k, ownerB, "lse_2"))
	if !errors.As(err, &ce) || ce.Classification != ClassOrphaned || ce.Recovery != "simlock device release --stale ios:udid:"+udid1 {
		t.Fatalf("claim over an orphan: %v", err)
	}
}

func TestSameOwnerReclaimsAndMayChangeKind(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openTest(t, dir, liveAB())
	k := mustKey(t, udid1)
	tr := Claim{Key: k, Kind: KindTransient, Command: "erase", Owner: ownerA, ClaimedAt: time.UnixMilli(1)}
	if err := db.Claim(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if err := db.Claim(ctx, leaseClaim(k, ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	if st := inspectOne(t, dir, liveAB()); st.Claim.Kind != KindLease || st.Claim.LeaseID != "lse_1" {
		t.Fatalf("%+v", st.Claim)
	}
	// Same home, another process (a restarted daemon): not the same owner.
	restarted := Owner{Home: homeA, PID: 101, Start: "t101"}
	var ce *ConflictError
	if err := db.Claim(ctx, leaseClaim(k, restarted, "lse_9")); !errors.As(err, &ce) {
		t.Fatalf("restarted daemon re-claimed a live predecessor's device: %v", err)
	}
}

func TestInvalidClaimsAreNeverWritten(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	k := mustKey(t, udid1)
	bad := []Claim{
		{Key: "emulator-5554", Kind: KindLease, LeaseID: "l", Owner: ownerA},
		{Key: k, Kind: KindLease, Owner: ownerA},
		{Key: k, Kind: KindTransient, Owner: ownerA},
		{Key: k, Kind: "x", LeaseID: "l", Owner: ownerA},
		{Key: k, Kind: KindLease, LeaseID: "l", Owner: Owner{Home: "rel", PID: 1, Start: "s"}},
		{Key: k, Kind: KindLease, LeaseID: "l", Owner: Owner{Home: homeA, PID: 0, Start: "s"}},
		{Key: k, Kind: KindLease, LeaseID: "l", Owner: Owner{Home: homeA, PID: 1}},
		{Key: k, Kind: KindLease, LeaseID: "l", Owner: ownerA, State: StateReleasing},
	}
	for i, c := range bad {
		if err := db.Claim(ctx, c); err == nil {
			t.Errorf("claim %d was accepted: %+v", i, c)
		}
	}
	if err := db.MarkReleaseFailed(ctx, k, ownerA, nil); err == nil {
		t.Error("release-failed without steps accepted")
	}
}

func TestAdoptTakesOnlyItsOwnHomesOrphans(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	k := mustKey(t, udid1)
	if err := db.Claim(ctx, leaseClaim(k, ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkReleaseFailed(ctx, k, ownerA, []string{"shutdown"}); err != nil {
		t.Fatal(err)
	}
	successor := Owner{Home: homeA, PID: 101, Start: "t101"}
	p.procs[101] = "t101"
	var ce *ConflictError
	if _, err := db.Adopt(ctx, leaseClaim(k, successor, "lse_2")); !errors.As(err, &ce) || ce.Classification != ClassReleaseFailed {
		t.Fatalf("adopt from a live owner: %v", err)
	}
	delete(p.procs, 100) // the predecessor dies
	if _, err := db.Adopt(ctx, leaseClaim(k, ownerB, "lse_3")); !errors.As(err, &ce) || ce.Classification != ClassOrphaned {
		t.Fatalf("adopt by another home: %v", err)
	}
	prev, err := db.Adopt(ctx, leaseClaim(k, successor, "lse_2"))
	if err != nil {
		t.Fatal(err)
	}
	if prev.Owner != ownerA || !reflect.DeepEqual(prev.FailedSteps, []string{"shutdown"}) {
		t.Fatalf("adopted record %+v", prev)
	}
	if err := db.Release(ctx, k, successor); err != nil {
		t.Fatal(err)
	}
}

// A row only a raw writer could produce is inconsistent; nobody's Claim or
// Release touches it, and the recovery says --force.
func TestCorruptRowFailsClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openTest(t, dir, &fakeProber{}) // everyone provably dead
	k := mustKey(t, udid1)
	if _, err := db.sql.Exec(`INSERT INTO claims (`+selectColumns+`) VALUES (?, 1, 'lease', '', '/homes/a', 100, 't100', '', 5, 'claimed', NULL)`, string(k)); err != nil {
		t.Fatal(err)
	}
	var ce *ConflictError
	for name, err := range map[string]error{
		"claim":   db.Claim(ctx, leaseClaim(k, ownerB, "lse_2")),
		"release": db.Release(ctx, k, ownerA),
	} {
		if !errors.As(err, &ce) || ce.Classification != ClassInconsistent || !strings.Contains(ce.Recovery, "--force") {
			t.Fatalf("%s over a corrupt row: %v", name, err)
		}
	}
	if _, err := db.Adopt(ctx, leaseClaim(k, Owner{Home: homeA, PID: 7, Start: "t7"}, "lse_2")); !errors.As(err, &ce) {
		t.Fatalf("adopt over a corrupt row: %v", err)
	}
	if st := inspectOne(t, dir, &fakeProber{}); st.Class != ClassInconsistent || st.Claim.Owner.Home != homeA {
		t.Fatalf("inspect: %+v", st)
	}
}

// scanner hands fixed values to scanRow, as a driver would.
type scanner []any

func (s scanner) Scan(dst ...any) error {
	if len(dst) != len(s) {
		return errors.New("column count")
	}
	for i := range dst {
		*(dst[i].(*any)) = s[i]
	}
	return nil
}

func TestScanRowTellsBadTypesFromFailedReads(t *testing.T) {
	good := scanner{"ios:udid:" + udid1, int64(1), "lease", "", "/h", int64(7), "s", "l", int64(5), "claimed", nil}
	r, err := scanRow(good)
	if err != nil || r.PID != 7 || r.FailedSteps.Valid {
		t.Fatalf("%+v, %v", r, err)
	}
	bad := append(scanner{}, good...)
	bad[5] = "seven"
	var u errUnscannable
	if _, err := scanRow(bad); !errors.As(err, &u) {
		t.Fatalf("wrongly typed pid: %v", err)
	}
	// A failed read is not a verdict on the row.
	if _, err := scanRow(scanner{1}); err == nil || errors.As(err, &u) {
		t.Fatalf("failed read: %v", err)
	}
}
