package hostreg

import (
	"context"
	"errors"
	"testing"
	"time"
)

var portNow = time.UnixMilli(1_700_000_000_000).UTC()

func consoleReq(o Owner, avd string, free func(int) bool) PortRequest {
	return PortRequest{Purpose: PortConsole, Owner: o, Serves: avd, First: 5700, Last: 5710, Step: 2, Free: free, Now: portNow}
}

func allFree(int) bool { return true }

func mustAllocate(t *testing.T, db *DB, req PortRequest) (PortLease, bool) {
	t.Helper()
	l, reused, err := db.AllocatePort(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return l, reused
}

func TestTwoOwnersGetDistinctPorts(t *testing.T) {
	db := openTest(t, t.TempDir(), liveAB())
	a, _ := mustAllocate(t, db, consoleReq(ownerA, "simlock-1", allFree))
	b, _ := mustAllocate(t, db, consoleReq(ownerB, "simlock-1", allFree))
	if a.Port != 5700 || b.Port != 5702 {
		t.Fatalf("ports %d and %d, want 5700 and 5702 (a console lease covers two ports)", a.Port, b.Port)
	}
	// Asking again for the same AVD returns the same lease.
	again, reused := mustAllocate(t, db, consoleReq(ownerA, "simlock-1", allFree))
	if again.Port != 5700 || !reused {
		t.Fatalf("repeat request got %d (reused %v), want 5700 reused", again.Port, reused)
	}
	// An adb server port may not sit inside a console lease's adb port.
	srv, _ := mustAllocate(t, db, PortRequest{Purpose: PortADBServer, Owner: ownerA, Serves: homeA, First: 5701, Last: 5710, Step: 1, Free: allFree, Now: portNow})
	if srv.Port != 5704 {
		t.Fatalf("adb server port %d, want 5704 (5701 and 5703 are the consoles' adb ports)", srv.Port)
	}
}

func TestBindProofSkipsPortsSomeProgramHolds(t *testing.T) {
	db := openTest(t, t.TempDir(), liveAB())
	var asked []int
	free := func(p int) bool { asked = append(asked, p); return p != 5700 && p != 5702 }
	l, _ := mustAllocate(t, db, consoleReq(ownerA, "simlock-1", free))
	if l.Port != 5704 {
		t.Fatalf("port %d, want 5704: 5700 and 5702 are bound by another program", l.Port)
	}
	if len(asked) != 3 {
		t.Fatalf("bind proof asked for %v, want 5700, 5702, 5704", asked)
	}
	_, _, err := db.AllocatePort(context.Background(), consoleReq(ownerB, "simlock-2", func(int) bool { return false }))
	if !errors.Is(err, ErrNoFreePort) {
		t.Fatalf("every port bound: err %v, want ErrNoFreePort", err)
	}
	// Want is taken back without a bind proof: the caller's emulator may
	// be the one listening on it.
	w := consoleReq(ownerB, "simlock-3", func(int) bool { return false })
	w.Want = 5708
	if l, reused := mustAllocate(t, db, w); l.Port != 5708 || !reused {
		t.Fatalf("wanted 5708, got %d (reused %v)", l.Port, reused)
	}
	// ...but not when another owner's lease covers it.
	w = consoleReq(ownerB, "simlock-4", allFree)
	w.Want = 5704
	if l, _ := mustAllocate(t, db, w); l.Port == 5704 {
		t.Fatal("took a port another owner leases")
	}
}

func TestDeadOwnersPortsAreReclaimable(t *testing.T) {
	dir := t.TempDir()
	p := liveAB()
	db := openTest(t, dir, p)
	a, _ := mustAllocate(t, db, consoleReq(ownerA, "simlock-1", allFree))
	delete(p.procs, ownerA.PID) // home A's daemon dies; its home stays

	st, err := db.Ports(context.Background())
	if err != nil || len(st) != 1 || st[0].Class != ClassOrphaned || st[0].Liveness != LivenessDead {
		t.Fatalf("ports %+v, %v: want one orphaned lease", st, err)
	}
	// Another home does not take it while other ports are free: its home
	// may come back for it.
	b, _ := mustAllocate(t, db, consoleReq(ownerB, "simlock-9", allFree))
	if b.Port == a.Port {
		t.Fatal("took a dead owner's port while others were free")
	}
	// The restarted daemon of home A takes its own port back.
	restarted := Owner{Home: homeA, PID: 101, Start: "t101"}
	p.procs[101] = "t101"
	back, reused := mustAllocate(t, db, consoleReq(restarted, "simlock-1", allFree))
	if back.Port != a.Port || !reused || back.Owner != restarted {
		t.Fatalf("restart got %+v (reused %v), want port %d owned by the new daemon", back, reused, a.Port)
	}
	// Once every other candidate is taken, a dead owner's port is
	// reclaimed by anyone.
	delete(p.procs, 101)
	narrow := PortRequest{Purpose: PortConsole, Owner: ownerB, Serves: "simlock-10", First: 5700, Last: 5702, Step: 2, Free: allFree, Now: portNow}
	got, _ := mustAllocate(t, db, narrow)
	if got.Port != 5700 || got.Owner != ownerB {
		t.Fatalf("exhausted range got %+v, want the orphaned 5700", got)
	}
}

func TestPortOfAGoneHomeIsDroppedAtOnce(t *testing.T) {
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	mustAllocate(t, db, consoleReq(ownerA, "simlock-1", allFree))
	delete(p.procs, ownerA.PID)
	delete(p.homes, homeA)
	b, _ := mustAllocate(t, db, consoleReq(ownerB, "simlock-2", allFree))
	if b.Port != 5700 {
		t.Fatalf("port %d, want 5700: its owner's home is gone", b.Port)
	}
}

func TestLiveOwnersPortsAreNeverTakenAndUnknownProbesFailClosed(t *testing.T) {
	p := liveAB()
	p.procErrs = map[int]error{100: errEPERM}
	db := openTest(t, t.TempDir(), p)
	mustAllocate(t, db, consoleReq(ownerA, "simlock-1", allFree))
	narrow := PortRequest{Purpose: PortConsole, Owner: ownerB, Serves: "simlock-2", First: 5700, Last: 5700, Step: 2, Free: allFree, Now: portNow}
	if _, _, err := db.AllocatePort(context.Background(), narrow); !errors.Is(err, ErrNoFreePort) {
		t.Fatalf("err %v: an owner whose liveness is unknown keeps its port", err)
	}
}

func TestReleasePortOnlyByItsOwner(t *testing.T) {
	db := openTest(t, t.TempDir(), liveAB())
	a, _ := mustAllocate(t, db, consoleReq(ownerA, "simlock-1", allFree))
	var held *PortHeldError
	if err := db.ReleasePort(context.Background(), a.Port, ownerB); !errors.As(err, &held) {
		t.Fatalf("release by another owner: %v", err)
	}
	if err := db.ReleasePort(context.Background(), a.Port, ownerA); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleasePort(context.Background(), a.Port, ownerA); err != nil {
		t.Fatalf("releasing a free port: %v", err)
	}
	if st, _ := db.Ports(context.Background()); len(st) != 0 {
		t.Fatalf("ports after release: %+v", st)
	}
}

func TestCorruptPortRowHoldsItsPort(t *testing.T) {
	db := openTest(t, t.TempDir(), liveAB())
	if _, err := db.sql.Exec(`INSERT INTO ports VALUES (5700, 99, 'console', '/homes/a', 100, 't100', 'x', 1)`); err != nil {
		t.Fatal(err)
	}
	st, err := db.Ports(context.Background())
	if err != nil || len(st) != 1 || st[0].Class != ClassInconsistent {
		t.Fatalf("ports %+v, %v: want one inconsistent row", st, err)
	}
	l, _ := mustAllocate(t, db, consoleReq(ownerB, "simlock-2", allFree))
	if l.Port == 5700 {
		t.Fatal("an unreadable row's port was handed out")
	}
}
