package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/gateway"
)

// The home store is a gateway's embedded store (ADR 0101).
var _ gateway.Store = (*DB)(nil)

const gatewayColumns = `id, seq, requester, owner, idem_key, fingerprint, body, state, worker, attempt,
	attempt_at, lease, error, interrupted, deadline, created_at, updated_at`

// PutReceipt inserts or replaces one gateway receipt by id. Another
// receipt under the same (requester, key) is gateway.ErrDuplicateKey.
func (db *DB) PutReceipt(ctx context.Context, r gateway.Receipt) error {
	j, err := r.EncodeJSON()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return db.immediate(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO gateway_requests (`+gatewayColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				seq = excluded.seq, requester = excluded.requester, owner = excluded.owner,
				idem_key = excluded.idem_key, fingerprint = excluded.fingerprint, body = excluded.body,
				state = excluded.state, worker = excluded.worker, attempt = excluded.attempt,
				attempt_at = excluded.attempt_at, lease = excluded.lease, error = excluded.error,
				interrupted = excluded.interrupted, deadline = excluded.deadline,
				created_at = excluded.created_at, updated_at = excluded.updated_at`,
			r.ID, int64(r.Seq), r.Requester, r.Owner, nullString(r.Key), r.Fingerprint, j.Body, r.State,
			r.Worker, r.Attempt, unixMs(r.AttemptAt), j.Lease, j.Error, r.Interrupted, unixMs(r.Deadline),
			r.CreatedAt.UnixMilli(), r.UpdatedAt.UnixMilli())
		if err != nil && strings.Contains(err.Error(), "gateway_requests.requester, gateway_requests.idem_key") {
			return fmt.Errorf("store: receipt %s: %w", r.ID, gateway.ErrDuplicateKey)
		}
		if err != nil {
			return fmt.Errorf("store: put receipt %s: %w", r.ID, err)
		}
		// The high-water mark outlives the receipts: a restarted gateway
		// must not number a new request like a deleted one.
		if _, err := q.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = CAST(MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)) AS TEXT)`,
			gatewaySeqKey, fmt.Sprint(r.Seq)); err != nil {
			return fmt.Errorf("store: put receipt %s: %w", r.ID, err)
		}
		return nil
	})
}

// gatewaySeqKey is the meta key of the highest admission number ever stored.
const gatewaySeqKey = "gateway.maxSeq"

// DeleteReceipt forgets one gateway receipt; an absent id is no error.
func (db *DB) DeleteReceipt(ctx context.Context, id string) error {
	return db.immediate(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, `DELETE FROM gateway_requests WHERE id = ?`, id); err != nil {
			return fmt.Errorf("store: delete receipt %s: %w", id, err)
		}
		return nil
	})
}

// Receipt reads one gateway receipt by id.
func (db *DB) Receipt(ctx context.Context, id string) (gateway.Receipt, bool, error) {
	return db.oneReceipt(ctx, `WHERE id = ?`, id)
}

// ReceiptByKey reads the gateway receipt a requester's key names.
func (db *DB) ReceiptByKey(ctx context.Context, requester, key string) (gateway.Receipt, bool, error) {
	return db.oneReceipt(ctx, `WHERE requester = ? AND idem_key = ?`, requester, key)
}

func (db *DB) oneReceipt(ctx context.Context, where string, args ...any) (gateway.Receipt, bool, error) {
	rs, err := db.receipts(ctx, where, args...)
	if err != nil || len(rs) == 0 {
		return gateway.Receipt{}, false, err
	}
	return rs[0], true, nil
}

// OpenReceipts lists the queued and dispatched gateway receipts in
// admission order.
func (db *DB) OpenReceipts(ctx context.Context) ([]gateway.Receipt, error) {
	return db.receipts(ctx, `WHERE state IN (?, ?) ORDER BY seq`, gateway.ReceiptQueued, gateway.ReceiptDispatched)
}

// MaxSeq is the highest admission number stored, 0 for none.
func (db *DB) MaxSeq(ctx context.Context) (uint64, error) {
	var n sql.NullInt64
	if err := db.sql.QueryRowContext(ctx, `SELECT MAX(COALESCE((SELECT MAX(seq) FROM gateway_requests), 0),
		COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), 0))`, gatewaySeqKey).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: gateway receipts: %w", err)
	}
	return uint64(n.Int64), nil
}

// PruneReceipts deletes settled gateway receipts last updated before
// cutoff, then the oldest settled ones beyond keep.
func (db *DB) PruneReceipts(ctx context.Context, cutoff time.Time, keep int) (int, error) {
	var n int64
	err := db.immediate(ctx, func(q querier) error {
		open := []any{gateway.ReceiptQueued, gateway.ReceiptDispatched}
		res, err := q.ExecContext(ctx, `DELETE FROM gateway_requests WHERE state NOT IN (?, ?) AND updated_at < ?`,
			append(open, cutoff.UnixMilli())...)
		if err != nil {
			return fmt.Errorf("store: prune receipts: %w", err)
		}
		a, _ := res.RowsAffected()
		res, err = q.ExecContext(ctx, `DELETE FROM gateway_requests WHERE id IN (
			SELECT id FROM gateway_requests WHERE state NOT IN (?, ?) ORDER BY updated_at DESC, seq DESC LIMIT -1 OFFSET ?)`,
			append(open, max(keep, 0))...)
		if err != nil {
			return fmt.Errorf("store: prune receipts: %w", err)
		}
		b, _ := res.RowsAffected()
		n = a + b
		return nil
	})
	return int(n), err
}

func (db *DB) receipts(ctx context.Context, where string, args ...any) ([]gateway.Receipt, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT `+gatewayColumns+` FROM gateway_requests `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: gateway receipts: %w", err)
	}
	defer rows.Close()
	var out []gateway.Receipt
	for rows.Next() {
		var (
			r                   gateway.Receipt
			seq                 int64
			key                 sql.NullString
			lease, cerr         *string
			body                string
			attemptAt, deadline sql.NullInt64
			created, updated    int64
		)
		if err := rows.Scan(&r.ID, &seq, &r.Requester, &r.Owner, &key, &r.Fingerprint, &body, &r.State, &r.Worker,
			&r.Attempt, &attemptAt, &lease, &cerr, &r.Interrupted, &deadline, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: gateway receipts: %w", err)
		}
		r.Seq, r.Key = uint64(seq), key.String
		r.AttemptAt, r.Deadline = fromUnixMs(attemptAt), fromUnixMs(deadline)
		r.CreatedAt, r.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
		if err := (gateway.ReceiptJSON{Body: body, Lease: lease, Error: cerr}).DecodeInto(&r); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Drained reads a gateway's drained set.
func (db *DB) Drained(ctx context.Context) (map[string]string, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT worker_id, label FROM gateway_drained`)
	if err != nil {
		return nil, fmt.Errorf("store: drained set: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, label string
		if err := rows.Scan(&id, &label); err != nil {
			return nil, fmt.Errorf("store: drained set: %w", err)
		}
		out[id] = label
	}
	return out, rows.Err()
}

// SetDrained adds a worker to the drained set or takes it out.
func (db *DB) SetDrained(ctx context.Context, id, label string, drained bool) error {
	if id == "" {
		return errors.New("store: drained set: empty worker id")
	}
	return db.immediate(ctx, func(q querier) error {
		var err error
		if drained {
			_, err = q.ExecContext(ctx, `INSERT INTO gateway_drained (worker_id, label) VALUES (?, ?)
				ON CONFLICT (worker_id) DO UPDATE SET label = excluded.label`, id, label)
		} else {
			_, err = q.ExecContext(ctx, `DELETE FROM gateway_drained WHERE worker_id = ?`, id)
		}
		if err != nil {
			return fmt.Errorf("store: drained set: %w", err)
		}
		return nil
	})
}
