package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/sessions"
)

func sessionRec(id, req, status string, at time.Time) sessions.Record {
	return sessions.Record{Identity: strings.Repeat(id, 64), OwnerDigest: strings.Repeat("o", 64),
		Receipt: contract.SessionReceipt{ContractVersion: 1, RequestID: req, Status: status,
			CreatedAtMs: at.UnixMilli(), UpdatedAtMs: at.UnixMilli()}}
}

func TestSessionReceiptCommitsOnceAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	db, path := newTestDB(t)
	at := time.UnixMilli(1_000_000)
	first := sessionRec("a", "r1", contract.SessionPending, at)
	first.Receipt.SessionID = "s1"
	if _, created, err := db.CommitSessionReceipt(ctx, first, nil); err != nil || !created {
		t.Fatalf("first commit: created %v err %v", created, err)
	}
	// A concurrent caller with its own failure cannot replace the receipt.
	second := sessionRec("a", "r1", contract.SessionFailed, at)
	second.Receipt.Failure = &contract.SessionFailure{Code: contract.CodeInternal}
	got, created, err := db.CommitSessionReceipt(ctx, second, nil)
	if err != nil || created || got.Receipt.Status != contract.SessionPending || got.Receipt.SessionID != "s1" {
		t.Fatalf("second commit replaced the first: %+v created %v err %v", got.Receipt, created, err)
	}
	ready := first
	ready.Receipt.Status = contract.SessionReady
	if err := db.UpdateSessionReceipt(ctx, ready); err != nil {
		t.Fatal(err)
	}
	failed := ready
	failed.Receipt.Status = contract.SessionFailed
	failed.Receipt.Failure = &contract.SessionFailure{Code: contract.CodeSessionOwnerExited}
	if err := db.UpdateSessionReceipt(ctx, failed); err != nil {
		t.Fatal(err)
	}
	back := failed
	back.Receipt.Status = contract.SessionReady
	if err := db.UpdateSessionReceipt(ctx, back); !errors.Is(err, sessions.ErrTerminal) {
		t.Fatalf("a terminal receipt was moved back: %v", err)
	}
	db.Close()
	db2 := openAt(t, path)
	for name, read := range map[string]func() (sessions.Record, bool, error){
		"identity": func() (sessions.Record, bool, error) { return db2.SessionReceipt(ctx, first.Identity) },
		"request": func() (sessions.Record, bool, error) {
			return db2.SessionReceiptByRequest(ctx, first.OwnerDigest, "r1")
		},
		"session": func() (sessions.Record, bool, error) { return db2.SessionReceiptBySession(ctx, "s1") },
	} {
		r, ok, err := read()
		if err != nil || !ok || r.Receipt.Status != contract.SessionFailed || r.Receipt.Failure.Code != contract.CodeSessionOwnerExited {
			t.Errorf("by %s after reopen: %+v %v %v", name, r.Receipt, ok, err)
		}
	}
}

func TestSessionExportLinksOnceAndPinsTheReceipt(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	day := 24 * time.Hour
	at := time.UnixMilli(0).Add(1000 * day)
	r := sessionRec("b", "r", contract.SessionReleased, at)
	exp := &sessions.Export{PrepareID: "p1", RequestDigest: "d1", CreatedAt: at}
	if _, _, err := db.CommitSessionReceipt(ctx, r, exp); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CommitSessionReceipt(ctx, r, exp); err != nil {
		t.Fatalf("an exact replay of the link failed: %v", err)
	}
	if _, _, err := db.CommitSessionReceipt(ctx, r, &sessions.Export{PrepareID: "p1", RequestDigest: "other", CreatedAt: at}); !errors.Is(err, sessions.ErrExportMismatch) {
		t.Fatalf("another digest: %v", err)
	}
	if _, _, err := db.CommitSessionReceipt(ctx, r, &sessions.Export{PrepareID: "p2", RequestDigest: "d1", CreatedAt: at}); !errors.Is(err, sessions.ErrExportMismatch) {
		t.Fatalf("a second prepare id: %v", err)
	}
	plain := sessionRec("c", "r2", contract.SessionReleased, at)
	if _, _, err := db.CommitSessionReceipt(ctx, plain, nil); err != nil {
		t.Fatal(err)
	}
	ret, max := 30*day, 180*day
	n, err := db.PruneSessionReceipts(ctx, at.Add(40*day), ret, max)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the unexported one only", n, err)
	}
	if _, ok, _ := db.SessionReceipt(ctx, r.Identity); !ok {
		t.Fatal("the pinned receipt was pruned")
	}
	if err := db.AcknowledgeSessionExport(ctx, r.OwnerDigest, "p1", at.Add(41*day)); err != nil {
		t.Fatal(err)
	}
	_ = db.AcknowledgeSessionExport(ctx, r.OwnerDigest, "p1", at.Add(50*day))
	e, ok, _ := db.SessionExport(ctx, r.OwnerDigest, "p1")
	if !ok || !e.AcknowledgedAt.Equal(at.Add(41*day)) {
		t.Fatalf("acknowledgement %+v, want the first time kept", e)
	}
	if n, _ := db.PruneSessionReceipts(ctx, at.Add(42*day), ret, max); n != 1 {
		t.Fatalf("the acknowledged export's receipt was not pruned (%d)", n)
	}
	if _, ok, _ := db.SessionExport(ctx, r.OwnerDigest, "p1"); ok {
		t.Fatal("the export link outlived its receipt")
	}
}

func TestRecentSessionReceiptsReportTruncation(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	base := time.UnixMilli(5_000_000)
	for i, id := range []string{"d", "e", "f"} {
		if _, _, err := db.CommitSessionReceipt(ctx, sessionRec(id, id, contract.SessionReleased, base.Add(time.Duration(i)*time.Second)), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, trunc, err := db.RecentSessionReceipts(ctx, base, 2)
	if err != nil || !trunc || len(got) != 2 || got[0].Receipt.RequestID != "f" {
		t.Fatalf("got %d trunc %v err %v", len(got), trunc, err)
	}
	if got, trunc, _ := db.RecentSessionReceipts(ctx, base.Add(time.Second), 5); trunc || len(got) != 2 {
		t.Fatalf("window: %d %v", len(got), trunc)
	}
}

// countingQuerier counts the statements a transaction sends.
type countingQuerier struct {
	querier
	n int
}

func (c *countingQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n++
	return c.querier.ExecContext(ctx, query, args...)
}

func (c *countingQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.querier.QueryContext(ctx, query, args...)
}

func (c *countingQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.n++
	return c.querier.QueryRowContext(ctx, query, args...)
}

// The hourly prune over many receipts keeps exactly what the rule keeps
// (pinned exports, recent receipts, open ones) and sends one read plus a
// bounded number of batched deletes, not a query per receipt.
func TestPruneOfManyReceiptsIsOneReadAndBatchedDeletes(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	day := 24 * time.Hour
	now := time.UnixMilli(0).Add(2000 * day)
	ret, maxAge := 30*day, 180*day
	const n = 1300
	want := map[string]bool{} // identity → kept
	err := db.immediate(ctx, func(q querier) error {
		for i := range n {
			id := fmt.Sprintf("%064x", i)
			status, at := contract.SessionReleased, now.Add(-40*day)
			var exp *sessions.Export
			ack := false
			kept := false
			switch i % 7 {
			case 0: // pinned: an unacknowledged export younger than exportMaxAge
				exp, kept = &sessions.Export{PrepareID: "p" + id, RequestDigest: "d", CreatedAt: now.Add(-50 * day)}, true
			case 1: // acknowledged: the pin is gone
				exp, ack = &sessions.Export{PrepareID: "p" + id, RequestDigest: "d", CreatedAt: now.Add(-50 * day)}, true
			case 2: // unacknowledged, but past exportMaxAge
				exp = &sessions.Export{PrepareID: "p" + id, RequestDigest: "d", CreatedAt: now.Add(-200 * day)}
			case 3: // plain, old: gone
				status = contract.SessionFailed
			case 4: // recent: inside the retention
				at, kept = now.Add(-10*day), true
			case 5: // still open: never pruned however old
				status, kept = contract.SessionReady, true
			case 6: // old and plain
			}
			r := sessions.Record{Identity: id, OwnerDigest: strings.Repeat("o", 64),
				Receipt: contract.SessionReceipt{ContractVersion: 1, RequestID: "r" + id, Status: status,
					CreatedAtMs: at.UnixMilli(), UpdatedAtMs: at.UnixMilli()}}
			if status == contract.SessionFailed {
				r.Receipt.Failure = &contract.SessionFailure{Code: contract.CodeSessionOwnerExited}
			}
			if err := writeSession(ctx, q, r, true); err != nil {
				return err
			}
			if exp != nil {
				if err := linkExport(ctx, q, r.OwnerDigest, id, *exp); err != nil {
					return err
				}
				if ack {
					if _, err := q.ExecContext(ctx, `UPDATE session_exports SET acknowledged_at = ? WHERE identity = ?`, now.Add(-45*day).UnixMilli(), id); err != nil {
						return err
					}
				}
			}
			want[id] = kept
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, kept := range want {
		if !kept {
			gone++
		}
	}
	var cq *countingQuerier
	var pruned int
	err = db.immediate(ctx, func(q querier) error {
		cq = &countingQuerier{querier: q}
		var err error
		pruned, err = pruneSessions(ctx, cq, now, ret, maxAge)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if pruned != gone {
		t.Errorf("pruned %d, want %d", pruned, gone)
	}
	if max := 1 + (gone+pruneBatch-1)/pruneBatch; cq.n > max {
		t.Errorf("the prune of %d receipts sent %d statements, want at most %d (one read, batched deletes)", n, cq.n, max)
	}
	for id, kept := range want {
		_, ok, err := db.SessionReceipt(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok != kept {
			t.Fatalf("receipt %s: present %v, want %v", id, ok, kept)
		}
	}
	var links int
	if err := db.sql.QueryRowContext(ctx, `SELECT count(*) FROM session_exports`).Scan(&links); err != nil {
		t.Fatal(err)
	}
	if pinned := (n + 6) / 7; links != pinned {
		t.Errorf("%d export links left, want the %d pinned ones (the others went with their receipts)", links, pinned)
	}
	// The public entry point agrees: nothing more to prune.
	if again, err := db.PruneSessionReceipts(ctx, now, ret, maxAge); err != nil || again != 0 {
		t.Errorf("a second prune removed %d (%v)", again, err)
	}
}

// Migration 9 records the principal of receipts written before it where a
// held lease vouches for it (a live session: the lease's owner prepared
// it); an ended session's receipt keeps none. A receipt written after it
// keeps its principal, and an update never changes it.
func TestPrincipalMigrationBackfillsFromHeldLeases(t *testing.T) {
	ctx := context.Background()
	old, path := oldDB(t, 8)
	at := time.UnixMilli(7_000_000)
	live := sessionRec("l", "r-live", contract.SessionReady, at)
	live.Receipt.SessionID, live.Receipt.LeaseID = "s-live", "lease_1"
	ended := sessionRec("e", "r-ended", contract.SessionReleased, at)
	ended.Receipt.SessionID, ended.Receipt.LeaseID = "s-ended", "lease_gone"
	if _, err := old.sql.ExecContext(ctx, `INSERT INTO devices (id, platform, handle, name, state, spec, simulated)
		VALUES ('d1', 'ios', 'U1', 'n', 'leased', '{}', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.sql.ExecContext(ctx, `INSERT INTO leases (id, device_id, requester_id, owner_id, platform, ttl_ms)
		VALUES ('lease_1', 'd1', 'alice/session/s-live', 'alice', 'ios', 15000)`); err != nil {
		t.Fatal(err)
	}
	oldReceipts(t, old, at, live, ended)
	old.Close()
	db := openAt(t, path)
	if got, ok, err := db.SessionReceiptBySession(ctx, "s-live"); err != nil || !ok || got.Principal != "alice" {
		t.Errorf("the live receipt after migration 9: principal %q (%v %v), want its lease's owner", got.Principal, ok, err)
	}
	if got, ok, err := db.SessionReceiptBySession(ctx, "s-ended"); err != nil || !ok || got.Principal != "" {
		t.Errorf("the ended receipt after migration 9: principal %q (%v %v), want none", got.Principal, ok, err)
	}

	fresh := sessionRec("f", "r-new", contract.SessionPending, at)
	fresh.Receipt.SessionID, fresh.Principal = "s-new", "bob"
	if _, _, err := db.CommitSessionReceipt(ctx, fresh, nil); err != nil {
		t.Fatal(err)
	}
	fresh.Receipt.Status, fresh.Principal = contract.SessionReady, "mallory"
	if err := db.UpdateSessionReceipt(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := db.SessionReceiptBySession(ctx, "s-new"); got.Principal != "bob" || got.Receipt.Status != contract.SessionReady {
		t.Errorf("after an update: principal %q status %s, want bob (written once) and ready", got.Principal, got.Receipt.Status)
	}
}

// oldReceipts writes rs into a database of schema 8 or 9 by hand, in the
// columns those versions have (no principal), as a daemon of then did.
func oldReceipts(t *testing.T, old *DB, at time.Time, rs ...sessions.Record) {
	t.Helper()
	for _, r := range rs {
		b, _ := r.Encode()
		if _, err := old.sql.ExecContext(context.Background(), `INSERT INTO session_receipts (identity, owner_digest, request_id, session_id, status, record, created_at, updated_at)
			VALUES (?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?)`, r.Identity, r.OwnerDigest, r.Receipt.RequestID, r.Receipt.SessionID, r.Receipt.Status, string(b), at.UnixMilli(), at.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
}

// ownedRec is sessionRec under another owner's digest.
func ownedRec(id, owner, req, status string, at time.Time) sessions.Record {
	r := sessionRec(id, req, status, at)
	r.OwnerDigest = strings.Repeat(owner, 64)
	return r
}

// A prepare id names an export only within its owner's links: two owners
// link the same id to their own receipts, each reads and acknowledges
// only her own, and the same owner is still refused a second digest or a
// second receipt under one id.
func TestSessionExportLinksAreScopedByOwner(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	at := time.UnixMilli(9_000_000)
	alice, mallory := ownedRec("a", "1", "r", contract.SessionReleased, at), ownedRec("m", "2", "r", contract.SessionFailed, at)
	mallory.Receipt.Failure = &contract.SessionFailure{Code: contract.CodeUnsupportedHardware}
	if _, _, err := db.CommitSessionReceipt(ctx, mallory, &sessions.Export{PrepareID: "p", RequestDigest: "d-m", CreatedAt: at}); err != nil {
		t.Fatalf("mallory's link: %v", err)
	}
	if _, _, err := db.CommitSessionReceipt(ctx, alice, &sessions.Export{PrepareID: "p", RequestDigest: "d-a", CreatedAt: at}); err != nil {
		t.Fatalf("alice's link of the id mallory linked first: %v", err)
	}
	for _, r := range []sessions.Record{alice, mallory} {
		e, ok, err := db.SessionExport(ctx, r.OwnerDigest, "p")
		if err != nil || !ok || e.Identity != r.Identity {
			t.Errorf("owner %s reads %+v %v %v, want her own receipt %s", r.OwnerDigest[:1], e, ok, err, r.Identity[:1])
		}
	}
	if _, ok, _ := db.SessionExport(ctx, strings.Repeat("3", 64), "p"); ok {
		t.Error("a third owner reads an export she never linked")
	}
	if err := db.AcknowledgeSessionExport(ctx, mallory.OwnerDigest, "p", at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if e, _, _ := db.SessionExport(ctx, alice.OwnerDigest, "p"); !e.AcknowledgedAt.IsZero() {
		t.Errorf("mallory's acknowledgement reached alice's export: %+v", e)
	}
	if _, _, err := db.CommitSessionReceipt(ctx, alice, &sessions.Export{PrepareID: "p", RequestDigest: "d-other", CreatedAt: at}); !errors.Is(err, sessions.ErrExportMismatch) {
		t.Errorf("alice's second digest under her id: %v", err)
	}
	other := ownedRec("b", "1", "r2", contract.SessionReleased, at)
	if _, _, err := db.CommitSessionReceipt(ctx, other, &sessions.Export{PrepareID: "p", RequestDigest: "d-a", CreatedAt: at}); !errors.Is(err, sessions.ErrExportMismatch) {
		t.Errorf("alice's second receipt under her id: %v", err)
	}
	if linked, err := db.SessionExportLinked(ctx, "p"); err != nil || !linked {
		t.Errorf("SessionExportLinked(p) %v %v", linked, err)
	}
	if linked, err := db.SessionExportLinked(ctx, "q"); err != nil || linked {
		t.Errorf("SessionExportLinked(q) %v %v", linked, err)
	}
}

// Migration 10 rekeys export links by (owner digest, prepare id), taking
// each link's owner from its receipt: a link made before it keeps its
// digest and acknowledgement and is read by its owner (and no one else),
// another owner may then link the same prepare id, a link still goes
// with its receipt, and one receipt still has one link.
func TestExportScopeMigrationBackfillsOwnersFromReceipts(t *testing.T) {
	ctx := context.Background()
	old, path := oldDB(t, 9)
	at := time.UnixMilli(8_000_000)
	alice, bob := ownedRec("a", "1", "r", contract.SessionReleased, at), ownedRec("b", "2", "r", contract.SessionReleased, at)
	oldReceipts(t, old, at, alice, bob)
	if _, err := old.sql.ExecContext(ctx, `INSERT INTO session_exports (prepare_id, request_digest, identity, created_at, acknowledged_at)
		VALUES ('p-a', 'd-a', ?, ?, NULL), ('p-b', 'd-b', ?, ?, ?)`,
		alice.Identity, at.UnixMilli(), bob.Identity, at.UnixMilli(), at.Add(time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	old.Close()

	db := openAt(t, path)
	if v := version(t, db); v != len(migrations) {
		t.Fatalf("schema version %d after the upgrade, want %d", v, len(migrations))
	}
	e, ok, err := db.SessionExport(ctx, alice.OwnerDigest, "p-a")
	if err != nil || !ok || e.Identity != alice.Identity || e.RequestDigest != "d-a" || !e.AcknowledgedAt.IsZero() || !e.CreatedAt.Equal(at) {
		t.Errorf("alice's export after migration 10: %+v %v %v", e, ok, err)
	}
	e, ok, err = db.SessionExport(ctx, bob.OwnerDigest, "p-b")
	if err != nil || !ok || e.Identity != bob.Identity || !e.AcknowledgedAt.Equal(at.Add(time.Minute)) {
		t.Errorf("bob's export after migration 10: %+v %v %v", e, ok, err)
	}
	if _, ok, _ := db.SessionExport(ctx, bob.OwnerDigest, "p-a"); ok {
		t.Error("bob reads alice's migrated export")
	}
	// Bob may now use alice's prepare id for his own receipt.
	bob2 := ownedRec("c", "2", "r2", contract.SessionReleased, at)
	if _, _, err := db.CommitSessionReceipt(ctx, bob2, &sessions.Export{PrepareID: "p-a", RequestDigest: "d-x", CreatedAt: at}); err != nil {
		t.Errorf("bob's link of alice's prepare id after migration 10: %v", err)
	}
	// One receipt, one link: identity stays UNIQUE.
	if _, err := db.sql.ExecContext(ctx, `INSERT INTO session_exports (owner_digest, prepare_id, request_digest, identity, created_at) VALUES (?, 'p-z', 'd', ?, 0)`,
		alice.OwnerDigest, alice.Identity); err == nil {
		t.Error("a second link of alice's receipt was stored")
	}
	// A link still goes with its receipt.
	if _, err := db.sql.ExecContext(ctx, `DELETE FROM session_receipts WHERE identity = ?`, alice.Identity); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.SessionExport(ctx, alice.OwnerDigest, "p-a"); ok {
		t.Error("alice's link outlived her receipt after migration 10")
	}
}
