package hostreg

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func slotRefusal(t *testing.T, err error, reason string) {
	t.Helper()
	var se *SlotError
	if !errors.As(err, &se) || se.Reason != reason {
		t.Fatalf("want refusal %s, got %v", reason, err)
	}
}

func admit(t *testing.T, db *DB, inc string, now time.Time) ScopeAdmission {
	t.Helper()
	a, err := db.AdmitScope(context.Background(), "key-"+inc, "host-1", "runner-A", inc, now)
	if err != nil {
		t.Fatalf("admit %s: %v", inc, err)
	}
	return a
}

func ownerTok(o Owner, tok string) SlotOwner { return SlotOwner{Owner: o, Token: tok} }

// bindDevice takes slot 0 of scope for tok and binds stable to it.
func bindDevice(t *testing.T, db *DB, scope, tok string, o Owner, stable string, now time.Time) SlotRecord {
	t.Helper()
	ctx := context.Background()
	c, err := db.ClaimSlot(ctx, scope, 0, ownerTok(o, tok), now)
	if err != nil {
		t.Fatal(err)
	}
	in, gen, err := db.OpenIntent(ctx, SlotIntent{ScopeKey: scope, SlotIndex: 0, FPHash: "fp1", Step: StepCreate, Platform: "ios"}, tok, c.Slot.Generation, now)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := db.CommitBinding(ctx, scope, 0, tok, gen, Binding{Device: SlotDevice{Platform: "ios", StableID: stable, Name: "n", FPHash: "fp1"}, Intents: []int64{in.ID}}, now)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestSlotGenerationFencesStaleCommits(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	admit(t, db, "boot-1", t0)
	rec := bindDevice(t, db, "key-boot-1", "tokA", ownerA, "UDID-1", t0)
	if rec.Generation < 1 || rec.State != SlotReady || rec.Device.StableID != "UDID-1" {
		t.Fatalf("binding %+v", rec)
	}
	// A replace step consumes a generation on entering replacing, so a
	// commit fenced on the old one is refused.
	_, gen, err := db.OpenIntent(ctx, SlotIntent{ScopeKey: "key-boot-1", SlotIndex: 0, FPHash: "fp2", Step: StepReplace, Platform: "ios", OldStableID: "UDID-1"}, "tokA", rec.Generation, t0)
	if err != nil {
		t.Fatal(err)
	}
	if gen <= rec.Generation {
		t.Fatalf("replacing did not advance the generation: %d -> %d", rec.Generation, gen)
	}
	_, err = db.CommitBinding(ctx, "key-boot-1", 0, "tokA", rec.Generation, Binding{Device: SlotDevice{StableID: "UDID-2"}}, t0)
	slotRefusal(t, err, RefuseStaleGeneration)
	// Nor may another execution commit at the current generation.
	_, err = db.CommitBinding(ctx, "key-boot-1", 0, "tokB", gen, Binding{Device: SlotDevice{StableID: "UDID-2"}}, t0)
	slotRefusal(t, err, RefuseNotOwner)
	got, err := db.CommitBinding(ctx, "key-boot-1", 0, "tokA", gen, Binding{Device: SlotDevice{StableID: "UDID-2"}}, t0)
	if err != nil || got.Generation <= gen || got.Device.StableID != "UDID-2" {
		t.Fatalf("fresh commit: %+v %v", got, err)
	}
}

func TestSlotInUseThroughAnotherDaemonUntilItsOwnerDies(t *testing.T) {
	dir := t.TempDir()
	p := liveAB()
	a, b := openTest(t, dir, p), openTest(t, dir, p)
	admit(t, a, "boot-1", t0)
	bindDevice(t, a, "key-boot-1", "tokA", ownerA, "UDID-1", t0)
	_, err := b.ClaimSlot(context.Background(), "key-boot-1", 0, ownerTok(ownerB, "tokB"), t0)
	slotRefusal(t, err, RefuseSlotInUse)
	// Unknown liveness is not proof of death.
	p.procErrs = map[int]error{100: errEPERM}
	_, err = b.ClaimSlot(context.Background(), "key-boot-1", 0, ownerTok(ownerB, "tokB"), t0)
	slotRefusal(t, err, RefuseSlotInUse)
	p.procErrs = nil
	delete(p.procs, 100)
	c, err := b.ClaimSlot(context.Background(), "key-boot-1", 0, ownerTok(ownerB, "tokB"), t0)
	if err != nil || c.Slot.Device.StableID != "UDID-1" {
		t.Fatalf("claim after the owner died: %+v %v", c, err)
	}
}

func TestSlotJournalSurvivesACrashAndIsHandedToTheRetry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := liveAB()
	db := openTest(t, dir, p)
	admit(t, db, "boot-1", t0)
	c, err := db.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerA, "tokA"), t0)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := db.OpenIntent(ctx, SlotIntent{ScopeKey: "key-boot-1", SlotIndex: 0, FPHash: "fp1", Step: StepCreate, Platform: "android"}, "tokA", c.Slot.Generation, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.NoteIntentDevice(ctx, in.ID, "simlock-slot-x-0-g1-ab"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	delete(p.procs, 100) // kill -9 of daemon A
	again := openTest(t, dir, p)
	c2, err := again.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerB, "tokB"), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(c2.Journal) != 1 || c2.Journal[0].FPHash != "fp1" || c2.Journal[0].NewStableID != "simlock-slot-x-0-g1-ab" {
		t.Fatalf("retry did not find the open intent: %+v", c2.Journal)
	}
	// The retry adopts the half-made device and closes the intent in the
	// same commit: nothing stays open.
	if _, err := again.CommitBinding(ctx, "key-boot-1", 0, "tokB", c2.Slot.Generation, Binding{Device: SlotDevice{StableID: c2.Journal[0].NewStableID}, Intents: []int64{c2.Journal[0].ID}}, t0); err != nil {
		t.Fatal(err)
	}
	if open, _ := again.OpenIntents(ctx); len(open) != 0 {
		t.Fatalf("journal left open: %+v", open)
	}
}

func TestScopeTransitionWaitsThenFreesDevicesForAdoption(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	admit(t, db, "boot-1", t0)
	bindDevice(t, db, "key-boot-1", "tok1", ownerA, "UDID-1", t0)

	_, err := db.AdmitScope(ctx, "key-boot-2", "host-1", "runner-A", "boot-2", t0)
	slotRefusal(t, err, RefuseScopePending)
	if s, _, _ := db.Scope(ctx, "key-boot-1"); s.State != ScopeInvalidating {
		t.Fatalf("old scope is %s while it waits", s.State)
	}
	// The old incarnation cannot start new work meanwhile.
	_, err = db.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerA, "tok1b"), t0)
	slotRefusal(t, err, RefuseScopePending)

	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tok1", false, t0); err != nil {
		t.Fatal(err)
	}
	a := admit(t, db, "boot-2", t0)
	if len(a.Retired) != 1 || a.Retired[0] != "key-boot-1" {
		t.Fatalf("retired %v", a.Retired)
	}
	free, _ := db.FreePool(ctx)
	if len(free) != 1 || free[0].StableID != "UDID-1" {
		t.Fatalf("free pool %+v", free)
	}
	managed, _ := db.ManagedDevices(ctx)
	if _, ok := managed["UDID-1"]; !ok {
		t.Fatal("a free-pool device went back to the general pool")
	}
	_, err = db.AdmitScope(ctx, "key-boot-1", "host-1", "runner-A", "boot-1", t0)
	slotRefusal(t, err, RefuseScopeInvalidated)

	// Adoption takes it out of the free pool exactly once.
	c, err := db.ClaimSlot(ctx, "key-boot-2", 0, ownerTok(ownerA, "tok2"), t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CommitBinding(ctx, "key-boot-2", 0, "tok2", c.Slot.Generation, Binding{Device: free[0].SlotDevice, FromFreePool: true}, t0); err != nil {
		t.Fatal(err)
	}
	if free, _ := db.FreePool(ctx); len(free) != 0 {
		t.Fatalf("adopted device still free: %+v", free)
	}
	// boot-2's live owner holds a boot-3 admission off in turn.
	_, err = db.AdmitScope(ctx, "key-boot-3", "host-1", "runner-A", "boot-3", t0)
	slotRefusal(t, err, RefuseScopePending)
	// Another namespace on the host is untouched.
	if _, err := db.AdmitScope(ctx, "key-B", "host-1", "runner-B", "boot-1", t0); err != nil {
		t.Fatal(err)
	}
}

func TestScopeAbandonedAfterAnHourAndRevived(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	admit(t, db, "boot-1", t0)
	bindDevice(t, db, "key-boot-1", "tok1", ownerA, "UDID-1", t0)
	if got, _ := db.MarkAbandoned(ctx, t0.Add(2*time.Hour)); len(got) != 0 {
		t.Fatalf("a scope with a live owner was abandoned: %v", got)
	}
	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tok1", false, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.MarkAbandoned(ctx, t0.Add(59*time.Minute)); len(got) != 0 {
		t.Fatalf("abandoned before the hour: %v", got)
	}
	if got, _ := db.MarkAbandoned(ctx, t0.Add(61*time.Minute)); len(got) != 1 {
		t.Fatalf("not abandoned after the hour: %v", got)
	}
	a := admit(t, db, "boot-1", t0.Add(62*time.Minute))
	if !a.Revived || a.Scope.State != ScopeValid {
		t.Fatalf("return of the incarnation: %+v", a)
	}
	if s, ok, _ := db.Slot(ctx, "key-boot-1", 0); !ok || s.Device.StableID != "UDID-1" {
		t.Fatalf("revived scope lost its assignment: %+v", s)
	}
}

func TestResetScopeForceRefusalsAndIdempotence(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	admit(t, db, "boot-1", t0)
	bindDevice(t, db, "key-boot-1", "tok1", ownerA, "UDID-1", t0)
	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tok1", true, t0); err != nil {
		t.Fatal(err)
	}
	// Settling blocks a new execution while its daemon lives.
	_, err := db.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerB, "tokB"), t0)
	slotRefusal(t, err, RefuseSlotSettling)

	reps, err := db.ResetScope(ctx, "runner-A", "boot-1", "", true, t0.Add(time.Minute))
	if err != nil || len(reps) != 1 {
		t.Fatal(reps, err)
	}
	r := reps[0]
	if r.State != ScopeInvalidating || len(r.Settling) != 1 || len(r.ForceRefusals) != 1 || r.ForceRefusals[0].Reason != "within_settlement_cap" || r.ForceRefusals[0].RemainingMs != (4*time.Minute).Milliseconds() {
		t.Fatalf("forced reset inside the cap: %+v", r)
	}
	// Past the cap with the daemon alive: live_owner.
	reps, _ = db.ResetScope(ctx, "runner-A", "boot-1", "", true, t0.Add(10*time.Minute))
	if reps[0].ForceRefusals[0].Reason != "live_owner" {
		t.Fatalf("refusals %+v", reps[0].ForceRefusals)
	}
	// Past the cap with the daemon proven dead: force clears it.
	delete(p.procs, 100)
	reps, _ = db.ResetScope(ctx, "runner-A", "boot-1", "", true, t0.Add(10*time.Minute))
	if reps[0].State != ScopeInvalidated || len(reps[0].FreedDevices) != 1 {
		t.Fatalf("forced reset after death: %+v", reps[0])
	}
	reps, _ = db.ResetScope(ctx, "runner-A", "boot-1", "", true, t0.Add(11*time.Minute))
	if len(reps) != 1 || reps[0].State != ScopeInvalidated {
		t.Fatalf("second reset not idempotent: %+v", reps)
	}
	if reps, _ := db.ResetScope(ctx, "runner-A", "boot-9", "", false, t0); len(reps) != 0 {
		t.Fatalf("matched a scope that does not exist: %+v", reps)
	}
}

func TestResetScopeCleanupPendingAndJournalRefuse(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	admit(t, db, "boot-1", t0)
	bindDevice(t, db, "key-boot-1", "tok1", ownerA, "UDID-1", t0)
	if _, err := db.MarkCleanupPending(ctx, "key-boot-1", 0, "tok1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.OpenIntent(ctx, SlotIntent{ScopeKey: "key-boot-1", SlotIndex: 0, FPHash: "fp2", Step: StepDelete, Platform: "ios", OldStableID: "UDID-1"}, "tok1", -1, t0); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tok1", false, t0); err != nil {
		t.Fatal(err)
	}
	reps, _ := db.ResetScope(ctx, "runner-A", "boot-1", "host-1", true, t0)
	reasons := map[string]bool{}
	for _, f := range reps[0].ForceRefusals {
		reasons[f.Reason] = true
	}
	if reps[0].State != ScopeInvalidating || reps[0].OpenJournal != 1 || !reasons["other_open_journal"] {
		t.Fatalf("reset with an open journal: %+v", reps[0])
	}
}

// Every committed slot decision moves the slot counter, in the same
// one-row read as the claim generation, and leaves the claim generation
// alone; a refused decision moves nothing.
func TestSlotDecisionsMoveTheSlotCounterOnly(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	gens := func() Generations {
		t.Helper()
		g, err := db.Generations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g0 := gens()
	admit(t, db, "boot-1", t0)
	g1 := gens()
	if g1.Slots <= g0.Slots || g1.Claims != g0.Claims {
		t.Fatalf("admission: %+v -> %+v", g0, g1)
	}
	bindDevice(t, db, "key-boot-1", "tokA", ownerA, "UDID-1", t0)
	g2 := gens()
	if g2.Slots < g1.Slots+3 || g2.Claims != g1.Claims {
		t.Fatalf("claim, intent and binding: %+v -> %+v", g1, g2)
	}
	_, err := db.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerB, "tokB"), t0)
	slotRefusal(t, err, RefuseSlotInUse)
	if g := gens(); g != g2 {
		t.Fatalf("a refused claim moved the counters: %+v -> %+v", g2, g)
	}
	if err := db.Claim(ctx, leaseClaim(mustKey(t, udid1), ownerA, "L1")); err != nil {
		t.Fatal(err)
	}
	if g := gens(); g.Slots != g2.Slots || g.Claims <= g2.Claims {
		t.Fatalf("a device claim: %+v -> %+v", g2, g)
	}
}

// A committed slot transaction that changes nothing another daemon reads
// (a repeated bind, re-own, claim, admission, reset, journal note or
// close) leaves the slot counter where it was, so no daemon rereads the
// slot tables for it; the same call that does change something moves it.
func TestNoOpSlotWritesLeaveTheSlotCounter(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	slots := func() int64 {
		t.Helper()
		g, err := db.Generations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g.Slots
	}
	step := func(what string, moves bool, f func() error) {
		t.Helper()
		before := slots()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if after := slots(); moves && after == before {
			t.Errorf("%s: a real change left the slot counter at %d", what, before)
		} else if !moves && after != before {
			t.Errorf("%s: a no-op moved the slot counter %d -> %d", what, before, after)
		}
	}
	const scope = "key-boot-1"
	step("admission", true, func() error { _, err := db.AdmitScope(ctx, scope, "host-1", "runner-A", "boot-1", t0); return err })
	step("the same incarnation admitted again", false, func() error {
		_, err := db.AdmitScope(ctx, scope, "host-1", "runner-A", "boot-1", t0.Add(time.Minute))
		return err
	})
	claim := func() error {
		_, err := db.ClaimSlot(ctx, scope, 0, ownerTok(ownerA, "tokA"), t0.Add(2*time.Minute))
		return err
	}
	step("claim", true, claim)
	step("the same execution claiming again", false, claim)
	in, gen, err := db.OpenIntent(ctx, SlotIntent{ScopeKey: scope, SlotIndex: 0, FPHash: "fp1", Step: StepCreate, Platform: "ios"}, "tokA", -1, t0)
	if err != nil {
		t.Fatal(err)
	}
	step("the journal names the device", true, func() error { return db.NoteIntentDevice(ctx, in.ID, "UDID-1") })
	step("the journal names it again", false, func() error { return db.NoteIntentDevice(ctx, in.ID, "UDID-1") })
	step("binding", true, func() error {
		_, err := db.CommitBinding(ctx, scope, 0, "tokA", gen, Binding{Device: SlotDevice{Platform: "ios", StableID: "UDID-1", Name: "n", FPHash: "fp1"}, Intents: []int64{in.ID}}, t0)
		return err
	})
	step("closing a closed entry", false, func() error { return db.CloseIntent(ctx, in.ID, t0) })
	step("bind the lease", true, func() error { return db.BindLease(ctx, scope, 0, "tokA", "L1") })
	step("bind the same lease again", false, func() error { return db.BindLease(ctx, scope, 0, "tokA", "L1") })
	step("bind another lease", true, func() error { return db.BindLease(ctx, scope, 0, "tokA", "L2") })
	reown := func(o Owner) func() error {
		return func() error { _, err := db.ReownSlot(ctx, scope, 0, "L2", o); return err }
	}
	step("re-own by the owner it has", false, reown(ownerA))
	delete(p.procs, ownerA.PID) // the daemon died; its successor re-owns
	next := Owner{Home: homeA, PID: 101, Start: "t101"}
	p.procs[101] = "t101"
	step("re-own by a restarted daemon", true, reown(next))
	step("reset while the execution runs", true, func() error {
		reps, err := db.ResetScope(ctx, "runner-A", "boot-1", "host-1", false, t0)
		if err == nil && reps[0].State != ScopeInvalidating {
			t.Fatalf("reset with a live owner: %+v", reps[0])
		}
		return err
	})
	step("the same reset again", false, func() error { _, err := db.ResetScope(ctx, "runner-A", "boot-1", "host-1", false, t0); return err })
	s, ok, err := db.Slot(ctx, scope, 0)
	if err != nil || !ok || s.Owner == nil || s.Owner.Owner != next || s.Owner.LeaseID != "L2" || s.Owner.Token != "tokA" || s.Device.StableID != "UDID-1" {
		t.Fatalf("the slot after the no-ops: %+v %v", s, err)
	}
}

// The execution's idle window is kept with its owner record and survives
// a re-own by a restarted daemon.
func TestSlotOwnerKeepsItsIdleWindow(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	admit(t, db, "boot-1", t0)
	o := ownerTok(ownerA, "tokA")
	o.Idle = 7 * time.Minute
	if _, err := db.ClaimSlot(ctx, "key-boot-1", 0, o, t0); err != nil {
		t.Fatal(err)
	}
	if err := db.BindLease(ctx, "key-boot-1", 0, "tokA", "L1"); err != nil {
		t.Fatal(err)
	}
	delete(p.procs, ownerA.PID) // the daemon died; its successor re-owns
	next := Owner{Home: homeA, PID: 101, Start: "t101"}
	p.procs[101] = "t101"
	if _, err := db.ReownSlot(ctx, "key-boot-1", 0, "L1", next); err != nil {
		t.Fatal(err)
	}
	s, ok, err := db.Slot(ctx, "key-boot-1", 0)
	if err != nil || !ok || s.Owner == nil || s.Owner.Owner != next || s.Owner.Idle != 7*time.Minute {
		t.Fatalf("owner after the re-own: %+v %v", s.Owner, err)
	}
}

// A sweep with no scope old enough to judge only reads: it answers while
// another process holds the registry's write lock.
func TestAnAbandonmentSweepWithNothingToJudgeTakesNoWriteLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openTest(t, dir, liveAB())
	admit(t, db, "boot-1", t0)
	other := openTest(t, dir, liveAB())
	conn, err := other.sql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.ExecContext(ctx, "ROLLBACK") }()
	start := time.Now()
	got, err := db.MarkAbandoned(ctx, t0.Add(time.Minute))
	if err != nil || len(got) != 0 {
		t.Fatalf("sweep under another writer: %v %v", got, err)
	}
	if d := time.Since(start); d > busyTimeout/2 {
		t.Fatalf("the sweep waited %v for the write lock", d)
	}
	if live, err := db.SlotsInUse(ctx); err != nil || !live {
		t.Fatalf("a valid scope exists: %v %v", live, err)
	}
}

// A registry written at migration 3 keeps its slot rows through migration
// 4: an owner recorded before it reads with no idle window (the daemon
// then applies the default), and the slot counter starts at zero.
func TestMigration4KeepsSlotRowsWrittenBeforeIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := open(ctx, dir, liveAB(), migrations[:3])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.sql.ExecContext(ctx, `INSERT INTO slot_scopes (scope_key, host_scope, namespace, incarnation, state, created_at, last_activity) VALUES ('k', 'h', 'n', 'i', 'valid', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.sql.ExecContext(ctx, `INSERT INTO slot_assignments (scope_key, slot_index, state, generation, owner_home, owner_pid, owner_start, owner_token, lease_id) VALUES ('k', 0, 'ready', 1, ?, ?, ?, 'tok', 'L1')`,
		ownerA.Home, ownerA.PID, ownerA.Start); err != nil {
		t.Fatal(err)
	}
	old.Close()
	db := openTest(t, dir, liveAB())
	s, ok, err := db.Slot(ctx, "k", 0)
	if err != nil || !ok || s.Owner == nil || s.Owner.LeaseID != "L1" || s.Owner.Idle != 0 {
		t.Fatalf("slot after migration 4: %+v %v", s.Owner, err)
	}
	if g, err := db.Generations(ctx); err != nil || g.Slots != 0 {
		t.Fatalf("generations after migration 4: %+v %v", g, err)
	}
}

// Reference, "Concepts": entering replacing advances the generation, and
// a replacement is fenced for deletion before its empty binding commits.
// An execution that ends in the middle (its acquisition failed, or its
// daemon died and the next one released it) leaves the slot replacing at
// the fenced generation while the journal holds the step, never ready
// with the device the step was deleting; a release with no open step
// still returns the slot to ready.
func TestConfSlotAnInterruptedReplaceStaysReplacing(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, t.TempDir(), liveAB())
	admit(t, db, "boot-1", t0)
	rec := bindDevice(t, db, "key-boot-1", "tokA", ownerA, "UDID-1", t0)
	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tokA", false, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerA, "tokB"), t0); err != nil {
		t.Fatal(err)
	}
	in, gen, err := db.OpenIntent(ctx, SlotIntent{ScopeKey: "key-boot-1", SlotIndex: 0, FPHash: "fp2", Step: StepReplace, Platform: "ios", OldStableID: "UDID-1"}, "tokB", rec.Generation, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tokB", false, t0); err != nil {
		t.Fatal(err)
	}
	got, _, err := db.Slot(ctx, "key-boot-1", 0)
	if err != nil || got.State != SlotReplacing || got.Generation != gen || got.Owner != nil {
		t.Fatalf("after an interrupted replace: %+v %v (want replacing at %d, no owner)", got, err, gen)
	}
	// Once the step is closed, a release returns the slot to ready.
	if _, err := db.ClaimSlot(ctx, "key-boot-1", 0, ownerTok(ownerA, "tokC"), t0); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseIntent(ctx, in.ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleaseSlot(ctx, "key-boot-1", 0, "tokC", false, t0); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = db.Slot(ctx, "key-boot-1", 0); got.State != SlotReady {
		t.Fatalf("after the step closed: %+v", got)
	}
}
