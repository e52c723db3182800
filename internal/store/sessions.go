package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/sessions"
)

var _ sessions.Store = (*DB)(nil)

const sessionColumns = `record, principal`

func scanSession(row interface{ Scan(...any) error }) (sessions.Record, error) {
	var raw string
	var principal sql.NullString
	if err := row.Scan(&raw, &principal); err != nil {
		return sessions.Record{}, err
	}
	r, err := sessions.DecodeRecord([]byte(raw))
	r.Principal = principal.String
	return r, err
}

func oneSession(ctx context.Context, q querier, where string, args ...any) (sessions.Record, bool, error) {
	r, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM session_receipts WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return sessions.Record{}, false, nil
	}
	if err != nil {
		return sessions.Record{}, false, fmt.Errorf("store: session receipt: %w", err)
	}
	return r, true, nil
}

func writeSession(ctx context.Context, q querier, r sessions.Record, insert bool) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	rc := r.Receipt
	var sid any
	if rc.SessionID != "" {
		sid = rc.SessionID
	}
	if insert {
		var principal any
		if r.Principal != "" {
			principal = r.Principal
		}
		_, err = q.ExecContext(ctx, `INSERT INTO session_receipts (identity, owner_digest, request_id, session_id, status, cleanup_pending, record, created_at, updated_at, principal)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.Identity, r.OwnerDigest, rc.RequestID, sid, rc.Status, rc.CleanupPending, string(b), rc.CreatedAtMs, rc.UpdatedAtMs, principal)
	} else {
		// The principal is written once, with the receipt: an update
		// never changes who prepared the session.
		_, err = q.ExecContext(ctx, `UPDATE session_receipts SET session_id = ?, status = ?, cleanup_pending = ?, record = ?, updated_at = ? WHERE identity = ?`,
			sid, rc.Status, rc.CleanupPending, string(b), rc.UpdatedAtMs, r.Identity)
	}
	if err != nil {
		return fmt.Errorf("store: write session receipt: %w", err)
	}
	return nil
}

// linkExport links an export identity to a receipt of ownerDigest in the
// caller's transaction. A repeat of the same link is fine; anything else
// that would change one of the owner's links is a mismatch. Another
// owner's links are never read: a prepare id is the owner's own name, so
// two owners may use the same one, and neither can learn of or block the
// other's.
func linkExport(ctx context.Context, q querier, ownerDigest, identity string, e sessions.Export) error {
	var gotID, gotDigest string
	err := q.QueryRowContext(ctx, `SELECT identity, request_digest FROM session_exports WHERE owner_digest = ? AND prepare_id = ?`,
		ownerDigest, e.PrepareID).Scan(&gotID, &gotDigest)
	switch {
	case err == nil:
		if gotID != identity || gotDigest != e.RequestDigest {
			return sessions.ErrExportMismatch
		}
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: session export: %w", err)
	}
	var other string
	err = q.QueryRowContext(ctx, `SELECT prepare_id FROM session_exports WHERE identity = ?`, identity).Scan(&other)
	if err == nil {
		return sessions.ErrExportMismatch // the receipt is exported under another prepare id
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: session export: %w", err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO session_exports (owner_digest, prepare_id, request_digest, identity, created_at) VALUES (?, ?, ?, ?, ?)`,
		ownerDigest, e.PrepareID, e.RequestDigest, identity, e.CreatedAt.UnixMilli()); err != nil {
		return fmt.Errorf("store: link session export: %w", err)
	}
	return nil
}

// CommitSessionReceipt stores r unless a receipt for its identity is
// committed already, in which case that one is returned untouched
// (created false): a concurrent or later caller never replaces it. An
// export, when given, is linked in the same transaction, under the
// stored receipt's owner.
func (db *DB) CommitSessionReceipt(ctx context.Context, r sessions.Record, exp *sessions.Export) (sessions.Record, bool, error) {
	out, created := r, false
	err := db.immediate(ctx, func(q querier) error {
		cur, ok, err := oneSession(ctx, q, `identity = ?`, r.Identity)
		if err != nil {
			return err
		}
		if ok {
			out = cur
		} else {
			if err := writeSession(ctx, q, r, true); err != nil {
				return err
			}
			created = true
		}
		if exp != nil {
			return linkExport(ctx, q, out.OwnerDigest, r.Identity, *exp)
		}
		return nil
	})
	if err != nil {
		return sessions.Record{}, false, err
	}
	return out, created, nil
}

// UpdateSessionReceipt replaces a stored receipt, refusing a change the
// receipt's state machine forbids (sessions.ErrTerminal).
func (db *DB) UpdateSessionReceipt(ctx context.Context, r sessions.Record) error {
	return db.immediate(ctx, func(q querier) error {
		cur, ok, err := oneSession(ctx, q, `identity = ?`, r.Identity)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("store: no session receipt %s", r.Identity)
		}
		if !sessions.CanMove(cur.Receipt.Status, r.Receipt.Status) {
			return fmt.Errorf("%w: %s → %s", sessions.ErrTerminal, cur.Receipt.Status, r.Receipt.Status)
		}
		return writeSession(ctx, q, r, false)
	})
}

// SessionReceipt reads one receipt by identity.
func (db *DB) SessionReceipt(ctx context.Context, identity string) (sessions.Record, bool, error) {
	return oneSession(ctx, db.sql, `identity = ?`, identity)
}

// SessionReceiptByRequest reads the newest receipt of an owner's request
// id, a prepare's own receipt before an abandon's tombstone of the id: the
// abandon ends that receipt and answers with it, and so does a replay of
// the prepare, so status reads the same one.
func (db *DB) SessionReceiptByRequest(ctx context.Context, ownerDigest, requestID string) (sessions.Record, bool, error) {
	return oneSession(ctx, db.sql, `owner_digest = ? AND request_id = ?
		ORDER BY COALESCE(json_extract(record, '$.abandoned'), 0) ASC, updated_at DESC, created_at DESC LIMIT 1`, ownerDigest, requestID)
}

// SessionReceiptsByRequestID reads the newest receipts of a request id
// under any owner that recorded a principal: an admin holding an agent's
// token finds the agent's receipt through them (ADR 0063). At most 64.
func (db *DB) SessionReceiptsByRequestID(ctx context.Context, requestID string) ([]sessions.Record, error) {
	return manySessions(ctx, db.sql, `request_id = ? AND principal IS NOT NULL ORDER BY updated_at DESC, created_at DESC LIMIT 64`, requestID)
}

// SessionReceiptBySession reads the receipt of a session id.
func (db *DB) SessionReceiptBySession(ctx context.Context, sessionID string) (sessions.Record, bool, error) {
	return oneSession(ctx, db.sql, `session_id = ?`, sessionID)
}

func manySessions(ctx context.Context, q querier, query string, args ...any) ([]sessions.Record, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+sessionColumns+` FROM session_receipts WHERE `+query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: session receipts: %w", err)
	}
	defer rows.Close()
	var out []sessions.Record
	for rows.Next() {
		r, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("store: session receipts: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// OpenSessionReceipts lists every receipt that is not settled: live
// sessions and terminal ones whose cleanup is still pending.
func (db *DB) OpenSessionReceipts(ctx context.Context) ([]sessions.Record, error) {
	return manySessions(ctx, db.sql, `status IN ('pending', 'ready') OR cleanup_pending = 1 ORDER BY created_at`)
}

// RecentSessionReceipts reads the newest updated receipts since since, at
// most limit of them, and whether more were there.
func (db *DB) RecentSessionReceipts(ctx context.Context, since time.Time, limit int) ([]sessions.Record, bool, error) {
	out, err := manySessions(ctx, db.sql, `updated_at >= ? ORDER BY updated_at DESC LIMIT ?`, since.UnixMilli(), limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// SessionExport reads one owner's export link by prepare id.
func (db *DB) SessionExport(ctx context.Context, ownerDigest, prepareID string) (sessions.Export, bool, error) {
	var e sessions.Export
	var created int64
	var ack sql.NullInt64
	err := db.sql.QueryRowContext(ctx, `SELECT prepare_id, request_digest, identity, created_at, acknowledged_at FROM session_exports WHERE owner_digest = ? AND prepare_id = ?`,
		ownerDigest, prepareID).Scan(&e.PrepareID, &e.RequestDigest, &e.Identity, &created, &ack)
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("store: session export: %w", err)
	}
	e.CreatedAt, e.AcknowledgedAt = time.UnixMilli(created).UTC(), fromUnixMs(ack)
	return e, true, nil
}

// SessionExportLinked tells whether any owner has linked prepareID. Only
// an admin's refusal reads it, to tell another owner's export from none.
func (db *DB) SessionExportLinked(ctx context.Context, prepareID string) (bool, error) {
	var one int
	err := db.sql.QueryRowContext(ctx, `SELECT 1 FROM session_exports WHERE prepare_id = ? LIMIT 1`, prepareID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: session export: %w", err)
	}
	return true, nil
}

// AcknowledgeSessionExport records the first acknowledgement of one
// owner's export; a repeat keeps the first time.
func (db *DB) AcknowledgeSessionExport(ctx context.Context, ownerDigest, prepareID string, at time.Time) error {
	if _, err := db.sql.ExecContext(ctx, `UPDATE session_exports SET acknowledged_at = ? WHERE owner_digest = ? AND prepare_id = ? AND acknowledged_at IS NULL`,
		at.UnixMilli(), ownerDigest, prepareID); err != nil {
		return fmt.Errorf("store: acknowledge session export: %w", err)
	}
	return nil
}

// pruneBatch bounds the identities one DELETE names, well under SQLite's
// limit on bound parameters.
const pruneBatch = 500

// PruneSessionReceipts deletes the receipts sessions.Prunable allows at
// now (their export links go with them) and reports how many.
func (db *DB) PruneSessionReceipts(ctx context.Context, now time.Time, retention, exportMaxAge time.Duration) (int, error) {
	n := 0
	err := db.immediate(ctx, func(q querier) error {
		var err error
		n, err = pruneSessions(ctx, q, now, retention, exportMaxAge)
		return err
	})
	return n, err
}

// pruneSessions reads every candidate with its export link in one query
// (the hourly prune used to ask for each receipt's export on its own),
// lets sessions.Prunable decide, and deletes in batches of pruneBatch.
// Only the columns the rule reads are fetched; no receipt is decoded.
func pruneSessions(ctx context.Context, q querier, now time.Time, retention, exportMaxAge time.Duration) (int, error) {
	rows, err := q.QueryContext(ctx, `SELECT r.identity, r.status, r.cleanup_pending, r.updated_at, e.created_at, e.acknowledged_at
		FROM session_receipts r LEFT JOIN session_exports e ON e.identity = r.identity
		WHERE r.status IN ('failed', 'released') AND r.cleanup_pending = 0 AND r.updated_at <= ?`, now.Add(-retention).UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("store: prune session receipts: %w", err)
	}
	var doomed []any
	for rows.Next() {
		var r sessions.Record
		var created, ack sql.NullInt64
		if err := rows.Scan(&r.Identity, &r.Receipt.Status, &r.Receipt.CleanupPending, &r.Receipt.UpdatedAtMs, &created, &ack); err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: prune session receipts: %w", err)
		}
		var exp *sessions.Export
		if created.Valid {
			exp = &sessions.Export{CreatedAt: fromUnixMs(created), AcknowledgedAt: fromUnixMs(ack)}
		}
		if sessions.Prunable(r, exp, now, retention, exportMaxAge) {
			doomed = append(doomed, r.Identity)
		}
	}
	// Closed before the deletes: the transaction's one connection serves
	// both.
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("store: prune session receipts: %w", err)
	}
	n := len(doomed)
	for len(doomed) > 0 {
		batch := doomed[:min(len(doomed), pruneBatch)]
		doomed = doomed[len(batch):]
		marks := strings.Repeat(", ?", len(batch))[2:]
		if _, err := q.ExecContext(ctx, `DELETE FROM session_receipts WHERE identity IN (`+marks+`)`, batch...); err != nil {
			return 0, fmt.Errorf("store: prune session receipts: %w", err)
		}
	}
	return n, nil
}
