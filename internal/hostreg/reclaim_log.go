package hostreg

import (
	"context"
	"fmt"
	"time"
)

// reclaimMigration is migration 6 (issue 22; 5 is the waiters table, the other
// parts of that issue): the reclaims table, the last automatic reclaims,
// so `simlock device status` can say what was taken back and why with
// every daemon stopped. It is history for people, never an input to a
// decision.
const reclaimMigration = `
CREATE TABLE reclaims (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	device_key  TEXT NOT NULL,
	owner_home  TEXT NOT NULL,              -- the dead owner's
	owner_pid   INTEGER NOT NULL,
	lease_id    TEXT NOT NULL DEFAULT '',   -- the dead owner's lease, when its claim named one
	reason      TEXT NOT NULL,              -- the owner's liveness: dead | reused | home-gone
	action      TEXT NOT NULL,              -- cleared | shut-down
	by_home     TEXT NOT NULL,              -- the reclaiming daemon's
	by_pid      INTEGER NOT NULL,
	at          INTEGER NOT NULL            -- unix ms UTC
) STRICT;
`

// reclaimsKept bounds the history: older rows go as new ones come.
const reclaimsKept = 50

// Reclaimed is one automatic reclaim as recorded.
type Reclaimed struct {
	Key     Key
	Owner   Owner // the dead owner (Start is not recorded)
	LeaseID string
	Reason  Liveness
	Action  string // "cleared" (proven not running) or "shut-down"
	By      Owner  // the reclaiming daemon (Start is not recorded)
	At      time.Time
}

// FinishReclaim is the last step of an automatic reclaim: ReleaseStale's
// clear of the marked record, and the history row, in one transaction.
// cleared is false (and nothing is recorded) when the device is free.
func (db *DB) FinishReclaim(ctx context.Context, key Key, marked Status, rec Reclaimed) (cleared bool, err error) {
	err = db.immediate(ctx, func(q querier) error {
		cur, held, err := current(ctx, q, key)
		if !held {
			return err
		}
		if err != nil {
			return db.conflict(ctx, ReasonNotOrphaned, key, cur, err)
		}
		st := classify(ctx, db.prober, cur)
		if !sameRecord(st, marked) {
			return fmt.Errorf("%w: %s", ErrClaimChanged, key)
		}
		if !st.Reclaimable() {
			return conflictFrom(ReasonNotOrphaned, st)
		}
		if err := clear(ctx, q, key); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO reclaims
			(device_key, owner_home, owner_pid, lease_id, reason, action, by_home, by_pid, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(key), rec.Owner.Home, rec.Owner.PID, rec.LeaseID, string(rec.Reason), rec.Action, rec.By.Home, rec.By.PID,
			rec.At.UnixMilli()); err != nil {
			return fmt.Errorf("hostreg: record the reclaim of %s: %w", key, err)
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM reclaims WHERE id <= (SELECT MAX(id) FROM reclaims) - ?`, reclaimsKept); err != nil {
			return fmt.Errorf("hostreg: prune reclaims: %w", err)
		}
		cleared = true
		return nil
	})
	return cleared, err
}

// readReclaims lists the recorded reclaims, newest first, under the
// caller's read transaction.
func readReclaims(ctx context.Context, q querier) ([]Reclaimed, error) {
	rows, err := q.QueryContext(ctx, `SELECT device_key, owner_home, owner_pid, lease_id, reason, action, by_home, by_pid, at
		FROM reclaims ORDER BY id DESC`)
	if err != nil {
		return nil, fmt.Errorf("hostreg: list reclaims: %w", err)
	}
	defer rows.Close()
	var out []Reclaimed
	for rows.Next() {
		var r Reclaimed
		var key, reason string
		var at int64
		if err := rows.Scan(&key, &r.Owner.Home, &r.Owner.PID, &r.LeaseID, &reason, &r.Action, &r.By.Home, &r.By.PID, &at); err != nil {
			return nil, fmt.Errorf("hostreg: list reclaims: %w", err)
		}
		r.Key, r.Reason, r.At = Key(key), Liveness(reason), time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
