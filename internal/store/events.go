package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// The events journal keeps business facts across restarts under their bus
// sequence numbers, so `simlock events --since 1h` reaches back past the
// daemon's start. The daemon writes it in batches from a bus observer, never
// from inside a decision, and prunes it by count and age (events.retention).

// AppendEvents journals evs in one transaction. A fact already journaled
// (same seq) is left as it is, so a batch retried after a failed commit
// cannot fail on what it already wrote.
func (db *DB) AppendEvents(ctx context.Context, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	return db.immediate(ctx, func(q querier) error {
		for _, e := range evs {
			var data any
			if len(e.Data) > 0 {
				b, err := json.Marshal(e.Data)
				if err != nil {
					// One odd payload must not cost the batch its other
					// facts: keep the envelope and say why the data is not.
					b, _ = json.Marshal(map[string]any{"unencodable": err.Error()})
				}
				data = string(b)
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO events (seq, type, at, device_id, lease_id, requester_id, platform, reason, data)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (seq) DO NOTHING`,
				int64(e.Seq), e.Type, e.At.UnixMilli(), e.DeviceID, e.LeaseID, e.RequesterID, e.Platform, e.Reason, data); err != nil {
				return fmt.Errorf("store: journal event %d: %w", e.Seq, err)
			}
		}
		return nil
	})
}

// EventsBetween returns the journaled facts with from <= seq <= to, oldest
// first.
func (db *DB) EventsBetween(ctx context.Context, from, to uint64) ([]events.Event, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT seq, type, at, device_id, lease_id, requester_id, platform, reason, data
		FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq`, int64(from), int64(min(to, 1<<63-1)))
	if err != nil {
		return nil, fmt.Errorf("store: read events: %w", err)
	}
	defer rows.Close()
	var out []events.Event
	for rows.Next() {
		var e events.Event
		var seq, at int64
		var data sql.NullString
		if err := rows.Scan(&seq, &e.Type, &at, &e.DeviceID, &e.LeaseID, &e.RequesterID, &e.Platform, &e.Reason, &data); err != nil {
			return nil, fmt.Errorf("store: read events: %w", err)
		}
		e.Seq, e.At = uint64(seq), time.UnixMilli(at).UTC()
		if data.Valid {
			// Numbers stay exact (json.Number) rather than turning into
			// float64 on the way back out.
			dec := json.NewDecoder(bytes.NewReader([]byte(data.String)))
			dec.UseNumber()
			if err := dec.Decode(&e.Data); err != nil {
				return nil, fmt.Errorf("store: event %d data: %w", seq, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// FirstSeqAt is the sequence number of the oldest journaled fact at or
// after t; ok is false when there is none.
func (db *DB) FirstSeqAt(ctx context.Context, t time.Time) (uint64, bool, error) {
	var seq sql.NullInt64
	if err := db.sql.QueryRowContext(ctx, `SELECT MIN(seq) FROM events WHERE at >= ?`, t.UnixMilli()).Scan(&seq); err != nil {
		return 0, false, fmt.Errorf("store: read events: %w", err)
	}
	return uint64(seq.Int64), seq.Valid, nil
}

// LastSeq is the newest journaled sequence number (0 when the journal is
// empty): the bus continues from it at start.
func (db *DB) LastSeq(ctx context.Context) (uint64, error) {
	var seq sql.NullInt64
	if err := db.sql.QueryRowContext(ctx, `SELECT MAX(seq) FROM events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("store: read events: %w", err)
	}
	return uint64(seq.Int64), nil
}

// PruneEvents keeps at most keep facts (the newest; keep <= 0: no count
// bound) and drops every fact older than before (zero: no age bound). It
// returns how many it dropped. The newest fact always stays, whatever its
// age: it is what the next start continues the sequence from.
func (db *DB) PruneEvents(ctx context.Context, keep int, before time.Time) (int64, error) {
	var n int64
	err := db.immediate(ctx, func(q querier) error {
		var last sql.NullInt64
		if err := q.QueryRowContext(ctx, `SELECT MAX(seq) FROM events`).Scan(&last); err != nil || !last.Valid {
			return err
		}
		cut := int64(0) // drop seq <= cut
		if keep > 0 {
			cut = max(cut, last.Int64-int64(keep))
		}
		if !before.IsZero() {
			var old sql.NullInt64
			if err := q.QueryRowContext(ctx, `SELECT MAX(seq) FROM events WHERE at < ?`, before.UnixMilli()).Scan(&old); err != nil {
				return err
			}
			if old.Valid {
				cut = max(cut, min(old.Int64, last.Int64-1))
			}
		}
		if cut <= 0 {
			return nil
		}
		res, err := q.ExecContext(ctx, `DELETE FROM events WHERE seq <= ?`, cut)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune events: %w", err)
	}
	return n, nil
}
