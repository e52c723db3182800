package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/core"
)

var _ core.RequestStore = (*DB)(nil)

const requestColumns = `id, requester_id, owner_id, idempotency_key, fingerprint, platform, state,
	lease_id, error_code, error_message, error_retryable, interrupted, created_at, updated_at, queue_seq, timing`

const upsertRequest = `INSERT INTO lease_requests (` + requestColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET
		requester_id = excluded.requester_id, owner_id = excluded.owner_id,
		idempotency_key = excluded.idempotency_key, fingerprint = excluded.fingerprint,
		platform = excluded.platform, state = excluded.state, lease_id = excluded.lease_id,
		error_code = excluded.error_code, error_message = excluded.error_message,
		error_retryable = excluded.error_retryable, interrupted = excluded.interrupted,
		created_at = excluded.created_at, updated_at = excluded.updated_at,
		queue_seq = excluded.queue_seq, timing = excluded.timing`

// PutRequest stores one lease request receipt (insert or replace by id). A
// second request under the same (requester, key) fails on the unique index:
// the engine never makes one, and the store refuses to either.
func (db *DB) PutRequest(ctx context.Context, r core.RequestRecord) error {
	return db.immediate(ctx, func(q querier) error { return putRequest(ctx, q, r) })
}

func putRequest(ctx context.Context, q querier, r core.RequestRecord) error {
	timing, err := encodeTiming(r.Timing)
	if err != nil {
		return fmt.Errorf("store: request %s: %w", r.ID, err)
	}
	var code, msg, retry any
	if r.Error != nil {
		code, msg, retry = r.Error.Code, r.Error.Message, r.Error.Retryable
	}
	_, err = q.ExecContext(ctx, upsertRequest, r.ID, r.RequesterID, r.OwnerID, nullString(r.IdempotencyKey),
		r.Fingerprint, r.Platform, string(r.State), nullString(r.LeaseID), code, msg, retry, r.Interrupted,
		r.CreatedAt.UnixMilli(), r.UpdatedAt.UnixMilli(), r.Seq, timing)
	if err != nil {
		return fmt.Errorf("store: put request %s: %w", r.ID, err)
	}
	return nil
}

// LoadRequests reads every receipt in admission order.
func (db *DB) LoadRequests(ctx context.Context) ([]core.RequestRecord, error) {
	var out []core.RequestRecord
	err := db.view(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, `SELECT `+requestColumns+` FROM lease_requests ORDER BY queue_seq, id`)
		if err != nil {
			return fmt.Errorf("store: load requests: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r                          core.RequestRecord
				state                      string
				key, lease, code, msg, tim sql.NullString
				retry                      sql.NullBool
				created, updated           int64
			)
			if err := rows.Scan(&r.ID, &r.RequesterID, &r.OwnerID, &key, &r.Fingerprint, &r.Platform, &state,
				&lease, &code, &msg, &retry, &r.Interrupted, &created, &updated, &r.Seq, &tim); err != nil {
				return fmt.Errorf("store: load requests: %w", err)
			}
			r.State = core.RequestState(state)
			r.IdempotencyKey, r.LeaseID = key.String, lease.String
			if code.Valid {
				r.Error = &core.RequestError{Code: code.String, Message: msg.String, Retryable: retry.Bool}
			}
			r.CreatedAt, r.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
			if r.Timing, err = decodeTiming(tim); err != nil {
				return fmt.Errorf("store: request %s: %w", r.ID, err)
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// DeleteRequests forgets receipts (pruning); absent ids are not an error.
func (db *DB) DeleteRequests(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return db.immediate(ctx, func(q querier) error { return deleteRequests(ctx, q, ids) })
}

// deleteRequests deletes receipts ids inside the transaction q, in
// chunks that stay under SQLite's bound-parameter limit.
func deleteRequests(ctx context.Context, q querier, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		stmt := `DELETE FROM lease_requests WHERE id IN (?` + strings.Repeat(", ?", n-1) + `)`
		if _, err := q.ExecContext(ctx, stmt, args...); err != nil {
			return fmt.Errorf("store: delete requests: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// storedTiming is core.Timing on disk: integer milliseconds, measured
// phases only.
type storedTiming struct {
	Path        string           `json:"path"`
	QueueWaitMs int64            `json:"queueWaitMs"`
	TotalMs     int64            `json:"totalMs"`
	PhasesMs    map[string]int64 `json:"phasesMs,omitempty"`
}

func encodeTiming(t *core.Timing) (any, error) {
	if t == nil {
		return nil, nil
	}
	st := storedTiming{Path: t.Path, QueueWaitMs: t.QueueWait.Milliseconds(), TotalMs: t.Total.Milliseconds()}
	if len(t.Phases) > 0 {
		st.PhasesMs = map[string]int64{}
		for k, v := range t.Phases {
			st.PhasesMs[k] = v.Milliseconds()
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode timing: %w", err)
	}
	return string(b), nil
}

func decodeTiming(v sql.NullString) (*core.Timing, error) {
	if !v.Valid {
		return nil, nil
	}
	var st storedTiming
	if err := json.Unmarshal([]byte(v.String), &st); err != nil {
		return nil, fmt.Errorf("decode timing: %w", err)
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	t := &core.Timing{Path: st.Path, QueueWait: ms(st.QueueWaitMs), Total: ms(st.TotalMs), Phases: map[string]time.Duration{}}
	for k, n := range st.PhasesMs {
		t.Phases[k] = ms(n)
	}
	return t, nil
}

// NULL stands for an empty string where empty means "none".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
