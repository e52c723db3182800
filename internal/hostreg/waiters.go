package hostreg

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Waiters: lease requests a home's queue holds back only because the host
// is at its limit (ADR 0061). A daemon sees other homes' claims but not
// their queues, so without these rows a home keeping warm devices booted
// could starve another home's waiter for good. Each home writes its own
// rows, one per platform, on transitions only (a waiter starts or stops
// being blocked by the host), and every write bumps the claim generation
// so the other daemons' watchers read them at their next poll. Rows are
// judged by the owner proof claims use (ownerLiveness): a dead owner's
// rows are ignored and pruned.

// waiterMigration is schema version 5.
const waiterMigration = `
CREATE TABLE waiters (
	owner_home     TEXT NOT NULL,
	platform       TEXT NOT NULL,
	record_version INTEGER NOT NULL,
	owner_pid      INTEGER NOT NULL,
	owner_start    TEXT NOT NULL,
	limit_name     TEXT NOT NULL,              -- the host limit that binds, as core names it
	count          INTEGER NOT NULL,           -- requests of this platform held back
	since          INTEGER NOT NULL,           -- unix ms UTC: the oldest of them was queued
	PRIMARY KEY (owner_home, platform)
) STRICT;
`

// WaiterRecordVersion is the layout of one waiters row this binary writes.
const WaiterRecordVersion = 1

// Waiter is one home's requests of one platform held back by the host's
// limit.
type Waiter struct {
	Owner    Owner
	Platform string
	Limit    string // the binding host limit (core.LimitHost or host.platforms.<p>.maxRunning)
	Count    int
	Since    time.Time // when the oldest of them was queued
}

// WaiterStatus is a stored waiter with its owner's liveness.
type WaiterStatus struct {
	Waiter
	Liveness Liveness
	Detail   string
}

// Live reports whether the row still stands for a request: only an owner
// proven gone (dead, pid reused, home gone) makes it stale; a probe that
// fails proves nothing, so the row counts (fail closed, as for claims).
func (s WaiterStatus) Live() bool {
	switch s.Liveness {
	case LivenessDead, LivenessReused, LivenessHomeGone:
		return false
	}
	return true
}

func (w Waiter) validate() error {
	switch {
	case w.Owner.Home == "" || w.Owner.PID <= 0 || w.Owner.Start == "":
		return fmt.Errorf("hostreg: waiter without a full owner (%+v)", w.Owner)
	case w.Platform == "":
		return fmt.Errorf("hostreg: waiter without a platform")
	case w.Count < 1:
		return fmt.Errorf("hostreg: waiter of %s with count %d", w.Platform, w.Count)
	case w.Limit == "":
		return fmt.Errorf("hostreg: waiter of %s without a limit", w.Platform)
	}
	return nil
}

// SetWaiters replaces every waiter row of owner's home with ws (none:
// the home waits for nothing). Rows another process of the same home left
// (a daemon that died before clearing them) are replaced too: one home runs
// one daemon. The generation moves only when something changed, so a
// repeated write costs the other daemons nothing.
func (db *DB) SetWaiters(ctx context.Context, owner Owner, ws []Waiter) error {
	for _, w := range ws {
		if w.Owner != owner {
			return fmt.Errorf("hostreg: waiter of %s written by %s", w.Owner.Home, owner.Home)
		}
		if err := w.validate(); err != nil {
			return err
		}
	}
	return db.immediate(ctx, func(q querier) error {
		have, err := readWaiters(ctx, q, `WHERE owner_home = ?`, owner.Home)
		if err != nil {
			return err
		}
		if sameWaiters(have, ws) {
			return nil
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM waiters WHERE owner_home = ?`, owner.Home); err != nil {
			return fmt.Errorf("hostreg: clear waiters of %s: %w", owner.Home, err)
		}
		for _, w := range ws {
			if _, err := q.ExecContext(ctx, `INSERT INTO waiters (owner_home, platform, record_version, owner_pid, owner_start, limit_name, count, since)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, w.Owner.Home, w.Platform, WaiterRecordVersion, w.Owner.PID, w.Owner.Start, w.Limit, w.Count, w.Since.UnixMilli()); err != nil {
				return fmt.Errorf("hostreg: write waiter %s/%s: %w", w.Owner.Home, w.Platform, err)
			}
		}
		return bump(ctx, q)
	})
}

// Waiters reads every waiter row of the host, oldest first, each judged by
// its owner's liveness. It writes nothing; PruneWaiters removes the stale.
func (db *DB) Waiters(ctx context.Context) ([]WaiterStatus, error) {
	ws, err := readWaiters(ctx, db.sql, "")
	if err != nil {
		return nil, err
	}
	out := make([]WaiterStatus, 0, len(ws))
	for _, w := range ws {
		liv, detail := ownerLiveness(ctx, db.prober, w.Owner)
		out = append(out, WaiterStatus{Waiter: w, Liveness: liv, Detail: detail})
	}
	return out, nil
}

// PruneWaiters deletes the rows among stale whose owner is proven gone,
// each only while it is still exactly that owner's row (a restarted daemon
// of the same home may have written its own meanwhile). It reports how
// many rows went; the generation moves when any did.
func (db *DB) PruneWaiters(ctx context.Context, stale []WaiterStatus) (int, error) {
	var gone []WaiterStatus
	for _, s := range stale {
		if !s.Live() {
			gone = append(gone, s)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	n := 0
	err := db.immediate(ctx, func(q querier) error {
		for _, s := range gone {
			// Proven again under the write lock: the proof read before it
			// may be old.
			if liv, _ := ownerLiveness(ctx, db.prober, s.Owner); liv == LivenessAlive || liv == LivenessUnknown {
				continue
			}
			res, err := q.ExecContext(ctx, `DELETE FROM waiters WHERE owner_home = ? AND platform = ? AND owner_pid = ? AND owner_start = ?`,
				s.Owner.Home, s.Platform, s.Owner.PID, s.Owner.Start)
			if err != nil {
				return fmt.Errorf("hostreg: prune waiter %s/%s: %w", s.Owner.Home, s.Platform, err)
			}
			k, _ := res.RowsAffected()
			n += int(k)
		}
		if n == 0 {
			return nil
		}
		return bump(ctx, q)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

func readWaiters(ctx context.Context, q querier, where string, args ...any) ([]Waiter, error) {
	rows, err := q.QueryContext(ctx, `SELECT owner_home, platform, owner_pid, owner_start, limit_name, count, since FROM waiters `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("hostreg: read waiters: %w", err)
	}
	defer rows.Close()
	var out []Waiter
	for rows.Next() {
		var w Waiter
		var since int64
		if err := rows.Scan(&w.Owner.Home, &w.Platform, &w.Owner.PID, &w.Owner.Start, &w.Limit, &w.Count, &since); err != nil {
			return nil, fmt.Errorf("hostreg: read waiter: %w", err)
		}
		w.Since = time.UnixMilli(since).UTC()
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hostreg: read waiters: %w", err)
	}
	sortWaiters(out)
	return out, nil
}

func sortWaiters(ws []Waiter) {
	sort.Slice(ws, func(i, j int) bool {
		if !ws[i].Since.Equal(ws[j].Since) {
			return ws[i].Since.Before(ws[j].Since)
		}
		if ws[i].Owner.Home != ws[j].Owner.Home {
			return ws[i].Owner.Home < ws[j].Owner.Home
		}
		return ws[i].Platform < ws[j].Platform
	})
}

// sameWaiters compares stored rows with the wanted ones, at the stored
// precision (milliseconds).
func sameWaiters(have, want []Waiter) bool {
	if len(have) != len(want) {
		return false
	}
	w := make([]Waiter, len(want))
	for i, x := range want {
		x.Since = time.UnixMilli(x.Since.UnixMilli()).UTC()
		w[i] = x
	}
	sortWaiters(w)
	for i, h := range have {
		x := w[i]
		if h.Owner != x.Owner || h.Platform != x.Platform || h.Limit != x.Limit || h.Count != x.Count || !h.Since.Equal(x.Since) {
			return false
		}
	}
	return true
}
