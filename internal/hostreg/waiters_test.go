package hostreg

import (
	"context"
	"testing"
	"time"
)

func waiterOf(o Owner, platform string, count int, since time.Time) Waiter {
	return Waiter{Owner: o, Platform: platform, Limit: "host.maxRunning", Count: count, Since: since}
}

func TestSetWaitersReplacesAHomesRowsAndBumpsOnlyOnChange(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	gen := func() int64 {
		t.Helper()
		g, err := db.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g0 := gen()
	if err := db.SetWaiters(ctx, ownerB, []Waiter{waiterOf(ownerB, "ios", 1, t0)}); err != nil {
		t.Fatal(err)
	}
	g1 := gen()
	if g1 == g0 {
		t.Fatal("a new waiter did not move the generation")
	}
	// The same rows again (a poll that found nothing new): no bump.
	if err := db.SetWaiters(ctx, ownerB, []Waiter{waiterOf(ownerB, "ios", 1, t0.Add(300*time.Microsecond))}); err != nil {
		t.Fatal(err)
	}
	if gen() != g1 {
		t.Fatal("an unchanged write moved the generation")
	}
	if err := db.SetWaiters(ctx, ownerA, []Waiter{waiterOf(ownerA, "android", 2, t0.Add(time.Second))}); err != nil {
		t.Fatal(err)
	}
	ws, err := db.Waiters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Owner != ownerB || ws[0].Platform != "ios" || !ws[0].Since.Equal(t0) || ws[1].Count != 2 || !ws[0].Live() || !ws[1].Live() {
		t.Fatalf("waiters = %+v", ws)
	}
	// Served: B clears its rows; A's stay.
	g2 := gen()
	if err := db.SetWaiters(ctx, ownerB, nil); err != nil {
		t.Fatal(err)
	}
	if gen() == g2 {
		t.Fatal("clearing a waiter did not move the generation")
	}
	ws, _ = db.Waiters(ctx)
	if len(ws) != 1 || ws[0].Owner != ownerA {
		t.Fatalf("after B cleared: %+v", ws)
	}
}

func TestSetWaitersRefusesAnotherOwnersRow(t *testing.T) {
	db := openTest(t, t.TempDir(), liveAB())
	if err := db.SetWaiters(context.Background(), ownerA, []Waiter{waiterOf(ownerB, "ios", 1, time.Now())}); err == nil {
		t.Fatal("A wrote B's waiter")
	}
	if err := db.SetWaiters(context.Background(), ownerA, []Waiter{waiterOf(ownerA, "ios", 0, time.Now())}); err == nil {
		t.Fatal("a waiter with count 0 was written")
	}
}

func TestWaitersOfADeadOwnerAreNotLiveAndArePruned(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	for _, o := range []Owner{ownerA, ownerB} {
		if err := db.SetWaiters(ctx, o, []Waiter{waiterOf(o, "ios", 1, t0)}); err != nil {
			t.Fatal(err)
		}
	}
	// B's daemon dies; A's pid is reused by another process; neither is live.
	delete(p.procs, 200)
	p.procs[100] = "t999"
	ws, err := db.Waiters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Live() {
			t.Fatalf("%s judged live: %+v", w.Owner.Home, w)
		}
	}
	// Before the prune, A's home restarts its daemon, which writes its own row:
	// the prune must not take the new owner's row.
	newA := Owner{Home: homeA, PID: 101, Start: "t101"}
	p.procs[101] = "t101"
	if err := db.SetWaiters(ctx, newA, []Waiter{waiterOf(newA, "ios", 1, t0)}); err != nil {
		t.Fatal(err)
	}
	g, _ := db.Generation(ctx)
	n, err := db.PruneWaiters(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("pruned %d rows, want 1 (B's)", n)
	}
	if g2, _ := db.Generation(ctx); g2 == g {
		t.Fatal("a prune did not move the generation")
	}
	left, _ := db.Waiters(ctx)
	if len(left) != 1 || left[0].Owner != newA || !left[0].Live() {
		t.Fatalf("left = %+v", left)
	}
}

func TestAWaiterWhoseOwnerCannotBeProbedStaysLive(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	if err := db.SetWaiters(ctx, ownerB, []Waiter{waiterOf(ownerB, "ios", 1, time.Now())}); err != nil {
		t.Fatal(err)
	}
	p.procErrs = map[int]error{200: errEPERM}
	ws, _ := db.Waiters(ctx)
	if len(ws) != 1 || !ws[0].Live() {
		t.Fatalf("an unprovable owner's waiter is not live: %+v", ws)
	}
	if n, err := db.PruneWaiters(ctx, ws); err != nil || n != 0 {
		t.Fatalf("prune = %d, %v", n, err)
	}
}
