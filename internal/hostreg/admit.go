package hostreg

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Host admission. Every daemon plans against a view of the other homes that
// is up to one watcher poll old, so two homes deciding within one poll could
// both start a device the host has room for only once, and once those
// devices are leased nothing sheds them. A start is therefore admitted here,
// in one BEGIN IMMEDIATE transaction against what the registry holds now:
// every claim (a claimed device runs or is being changed) and every start
// still in flight, which has no claim yet because a provision's device has
// no key before it exists. A start that fits is recorded, so the next
// admission counts it; its row goes once the device's claim is written or
// the operation ended.

// startsMigration is migration 7: the starts in flight.
const startsMigration = `
CREATE TABLE starts (
	owner_home  TEXT NOT NULL,
	owner_pid   INTEGER NOT NULL,
	owner_start TEXT NOT NULL,
	device_id   TEXT NOT NULL,              -- the owner home's own device id
	platform    TEXT NOT NULL,
	started_at  INTEGER NOT NULL,           -- unix ms UTC
	PRIMARY KEY (owner_home, device_id)
) STRICT;
`

// Admission asks for room to start one device.
type Admission struct {
	Owner    Owner
	DeviceID string
	Platform string
	At       time.Time
	// MaxRunning caps the host's running devices (0: no cap here), and
	// Platforms one platform's (absent or 0: none).
	MaxRunning int
	Platforms  map[string]int
	// External counts devices running outside simlock, by platform, as the
	// caller last counted them: the registry cannot see them.
	External map[string]int
}

// HostFullError refuses a start the host has no room for. Others is what the
// registry counted for the homes other than the asker's, by platform, so the
// asker can plan against it until its watcher reads the registry again.
type HostFullError struct {
	Limit    string // "host" or the platform's name
	Max      int
	Counted  int // running or starting in the limit's scope, the refused start excluded
	Platform string
	Others   map[string]int
}

func (e *HostFullError) Error() string {
	scope := "the host"
	if e.Limit != "host" {
		scope = e.Limit + " devices on the host"
	}
	return fmt.Sprintf("hostreg: %s already run %d of %d; no room to start a %s device", scope, e.Counted, e.Max, e.Platform)
}

// Admit records a's start when the host has room for it, or refuses with a
// *HostFullError. Claims are counted as otherHomesRunning counts them (every
// claim but a dead owner's whose home is gone); starts only while their
// owner lives, and a dead owner's starts are removed on the way.
func (db *DB) Admit(ctx context.Context, a Admission) error {
	if a.Owner.Home == "" || a.DeviceID == "" || a.Platform == "" {
		return errors.New("hostreg: an admission needs its owner, device and platform")
	}
	return db.immediate(ctx, func(q querier) error {
		all, others := map[string]int{}, map[string]int{}
		count := func(home, platform string) {
			all[platform]++
			if home != a.Owner.Home {
				others[platform]++
			}
		}
		rows, err := q.QueryContext(ctx, `SELECT `+selectColumns+` FROM claims`)
		if err != nil {
			return fmt.Errorf("hostreg: read claims: %w", err)
		}
		var claims []row
		for rows.Next() {
			r, err := scanRow(rows)
			var u errUnscannable
			if err != nil && !errors.As(err, &u) {
				rows.Close()
				return fmt.Errorf("hostreg: read claims: %w", err)
			}
			claims = append(claims, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, r := range claims {
			st := classify(ctx, db.prober, r)
			if st.Class == ClassOrphaned && st.Liveness == LivenessHomeGone {
				continue
			}
			count(r.Home, Key(r.Key).Platform())
		}
		type start struct {
			o        Owner
			device   string
			platform string
		}
		srows, err := q.QueryContext(ctx, `SELECT owner_home, owner_pid, owner_start, device_id, platform FROM starts`)
		if err != nil {
			return fmt.Errorf("hostreg: read starts: %w", err)
		}
		var starts []start
		for srows.Next() {
			var s start
			if err := srows.Scan(&s.o.Home, &s.o.PID, &s.o.Start, &s.device, &s.platform); err != nil {
				srows.Close()
				return fmt.Errorf("hostreg: read starts: %w", err)
			}
			starts = append(starts, s)
		}
		if err := srows.Close(); err != nil {
			return err
		}
		for _, s := range starts {
			if s.o.Home == a.Owner.Home && s.device == a.DeviceID {
				continue // this start asking again
			}
			switch liv, _ := ownerLiveness(ctx, db.prober, s.o); liv {
			case LivenessDead, LivenessReused, LivenessHomeGone:
				if _, err := q.ExecContext(ctx, `DELETE FROM starts WHERE owner_home = ? AND device_id = ? AND owner_pid = ? AND owner_start = ?`,
					s.o.Home, s.device, s.o.PID, s.o.Start); err != nil {
					return fmt.Errorf("hostreg: drop a dead owner's start: %w", err)
				}
				continue
			}
			count(s.o.Home, s.platform)
		}
		total, ext := 0, 0
		for _, n := range all {
			total += n
		}
		for _, n := range a.External {
			ext += n
		}
		if a.MaxRunning > 0 && total+ext+1 > a.MaxRunning {
			return &HostFullError{Limit: "host", Max: a.MaxRunning, Counted: total + ext, Platform: a.Platform, Others: others}
		}
		if m := a.Platforms[a.Platform]; m > 0 && all[a.Platform]+a.External[a.Platform]+1 > m {
			return &HostFullError{Limit: a.Platform, Max: m, Counted: all[a.Platform] + a.External[a.Platform], Platform: a.Platform, Others: others}
		}
		_, err = q.ExecContext(ctx, `INSERT INTO starts (owner_home, owner_pid, owner_start, device_id, platform, started_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (owner_home, device_id) DO UPDATE SET owner_pid = excluded.owner_pid,
				owner_start = excluded.owner_start, platform = excluded.platform, started_at = excluded.started_at`,
			a.Owner.Home, a.Owner.PID, a.Owner.Start, a.DeviceID, a.Platform, a.At.UnixMilli())
		if err != nil {
			return fmt.Errorf("hostreg: record a start: %w", err)
		}
		return nil
	})
}

// EndStart drops owner's start of device: its claim now counts it, or the
// operation ended. Ending a start that is not recorded succeeds.
func (db *DB) EndStart(ctx context.Context, owner Owner, device string) error {
	return db.immediate(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM starts WHERE owner_home = ? AND device_id = ?`, owner.Home, device)
		if err != nil {
			return fmt.Errorf("hostreg: end a start: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			// A start that ended without a claim freed its room: the
			// generation tells the homes a refused start holds back.
			return bump(ctx, q)
		}
		return nil
	})
}
