package hostreg

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The reclaim rules, decision by decision: only another home's proven
// orphan is touched; a stopped device is cleared at once; a running one
// waits out the grace window while its home exists and is shut down at
// once when the home is gone; an unknown state waits unless the home is
// gone; a live, unverifiable or inconsistent owner is never reclaimed.
func TestReclaimDecision(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t, udid1)
	p := liveAB()
	now := time.UnixMilli(1_700_000_100_000).UTC()
	grace := 2 * time.Minute
	live := Classify(ctx, p, leaseClaim(k, ownerB, "lse_b"))
	delete(p.procs, 200)
	dead := Classify(ctx, p, leaseClaim(k, ownerB, "lse_b"))
	p.procs[200] = "reused"
	reused := Classify(ctx, p, leaseClaim(k, ownerB, "lse_b"))
	delete(p.procs, 200)
	delete(p.homes, homeB)
	// With the home gone, a live pid is no proof either.
	p.procs[200] = "t200"
	gone := Classify(ctx, p, leaseClaim(k, ownerB, "lse_b"))
	p.procs[200] = "t200"
	p.homes[homeB] = true
	p.procErrs = map[int]error{200: errEPERM}
	unverifiable := Classify(ctx, p, leaseClaim(k, ownerB, "lse_b"))
	if dead.Liveness != LivenessDead || reused.Liveness != LivenessReused || gone.Liveness != LivenessHomeGone || unverifiable.Class != ClassClaimed {
		t.Fatalf("fixtures: %s %s %s %s", dead.Liveness, reused.Liveness, gone.Liveness, unverifiable.Class)
	}
	inconsistent := Status{Key: k, Class: ClassInconsistent, Claim: leaseClaim(k, ownerB, "lse_b")}
	cases := []struct {
		name string
		st   Status
		self string
		run  DeviceRun
		for_ time.Duration
		want ReclaimAction
	}{
		{"live owner, stopped device", live, homeA, DeviceStopped, time.Hour, ReclaimNone},
		{"unverifiable owner", unverifiable, homeA, DeviceStopped, time.Hour, ReclaimNone},
		{"inconsistent record", inconsistent, homeA, DeviceStopped, time.Hour, ReclaimNone},
		{"own home's orphan (it adopts)", dead, homeB, DeviceStopped, time.Hour, ReclaimNone},
		{"dead owner, stopped device", dead, homeA, DeviceStopped, 0, ReclaimClear},
		{"dead owner, device gone from its root", dead, homeA, DeviceAbsent, 0, ReclaimClear},
		{"dead owner, running, in grace", dead, homeA, DeviceRunning, grace - time.Second, ReclaimWait},
		{"dead owner, running, past grace", dead, homeA, DeviceRunning, grace, ReclaimShutDown},
		{"reused pid, running, past grace", reused, homeA, DeviceRunning, grace, ReclaimShutDown},
		{"dead owner, unknown state", dead, homeA, DeviceUnknown, time.Hour, ReclaimWait},
		{"home gone, running", gone, homeA, DeviceRunning, 0, ReclaimShutDown},
		{"home gone, unknown", gone, homeA, DeviceUnknown, 0, ReclaimShutDown},
		{"home gone, stopped", gone, homeA, DeviceStopped, 0, ReclaimClear},
	}
	for _, c := range cases {
		if got := ReclaimDecision(c.st, c.self, c.run, c.for_, grace, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Two daemons race to reclaim one orphan: BeginReclaim lets exactly one
// mark it, the other sees the reclaim under way until its mark is older
// than ReclaimTimeout, and ReleaseStale clears only the marked record.
func TestBeginReclaimHasOneWinner(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	dir := t.TempDir()
	x, y := openTest(t, dir, p), openTest(t, dir, p)
	k := mustKey(t, udid1)
	if err := x.Claim(ctx, leaseClaim(k, ownerB, "lse_b")); err != nil {
		t.Fatal(err)
	}
	live, _, _ := x.Lookup(ctx, k)
	if _, err := x.BeginReclaim(ctx, k, live, time.Now()); err == nil {
		t.Fatal("marked a live owner's claim")
	}
	delete(p.procs, 200)
	orphans, err := y.Orphans(ctx)
	if err != nil || len(orphans) != 1 || orphans[0].Key != k {
		t.Fatalf("orphans %+v %v", orphans, err)
	}
	seen := orphans[0]
	now := time.UnixMilli(1_700_000_500_000).UTC()
	marked, err := x.BeginReclaim(ctx, k, seen, now)
	if err != nil {
		t.Fatal(err)
	}
	if !marked.BeingReclaimed() || marked.Claim.Owner != ownerB {
		t.Fatalf("mark %+v", marked)
	}
	// y acts on its older view: the record changed under it.
	if _, err := y.BeginReclaim(ctx, k, seen, now); !errors.Is(err, ErrClaimChanged) {
		t.Fatalf("second reclaimer: %v", err)
	}
	// y's next look sees the reclaim under way, and leaves it alone.
	cur, _, _ := y.Lookup(ctx, k)
	if a := ReclaimDecision(cur, homeA, DeviceRunning, time.Hour, time.Minute, now.Add(time.Second)); a != ReclaimInFlight {
		t.Fatalf("during x's reclaim: %q", a)
	}
	if a := ReclaimDecision(cur, homeA, DeviceRunning, time.Hour, time.Minute, now.Add(ReclaimTimeout)); a != ReclaimShutDown {
		t.Fatalf("after x's reclaim timed out: %q", a)
	}
	// ReleaseStale against the original record is refused; against the mark it clears.
	if _, err := y.ReleaseStale(ctx, k, seen); !errors.Is(err, ErrClaimChanged) {
		t.Fatalf("stale clear of the old view: %v", err)
	}
	rec := Reclaimed{Key: k, Owner: ownerB, LeaseID: "lse_b", Reason: LivenessDead, Action: "cleared", By: ownerA, At: now}
	if cleared, err := x.FinishReclaim(ctx, k, marked, rec); err != nil || !cleared {
		t.Fatalf("clear: %v %v", cleared, err)
	}
	if _, found, _ := x.Lookup(ctx, k); found {
		t.Fatal("claim survived the reclaim")
	}
	// The history says what was reclaimed, from whom, by whom and why,
	// to a reader that needs no daemon.
	rep, err := InspectReport(ctx, dir, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Claims) != 0 || len(rep.Reclaimed) != 1 {
		t.Fatalf("report %+v", rep)
	}
	got := rep.Reclaimed[0]
	if got.Key != k || got.Owner.Home != homeB || got.Owner.PID != 200 || got.LeaseID != "lse_b" || got.Reason != LivenessDead ||
		got.Action != "cleared" || got.By.Home != homeA || !got.At.Equal(now) {
		t.Fatalf("reclaimed %+v", got)
	}
}

// The history keeps the newest reclaimsKept rows.
func TestReclaimHistoryIsBounded(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	delete(p.procs, 200)
	dir := t.TempDir()
	db := openTest(t, dir, p)
	k := mustKey(t, udid1)
	for i := 0; i < reclaimsKept+5; i++ {
		if err := db.Claim(ctx, leaseClaim(k, ownerB, "lse_b")); err != nil {
			t.Fatal(err)
		}
		st, _, _ := db.Lookup(ctx, k)
		at := time.UnixMilli(1_700_000_000_000 + int64(i)).UTC()
		marked, err := db.BeginReclaim(ctx, k, st, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.FinishReclaim(ctx, k, marked, Reclaimed{Key: k, Owner: ownerB, Reason: LivenessDead, Action: "cleared", By: ownerA, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := InspectReport(ctx, dir, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Reclaimed) != reclaimsKept || rep.Reclaimed[0].At.UnixMilli() != 1_700_000_000_000+int64(reclaimsKept+4) {
		t.Fatalf("%d rows, newest %v", len(rep.Reclaimed), rep.Reclaimed[0].At)
	}
}
