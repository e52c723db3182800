package hostreg

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Reasons a recovery is refused.
const (
	ReasonNotOrphaned = "not-orphaned"  // --stale: the owner is not proven gone
	ReasonChanged     = "claim-changed" // the record moved since it was inspected
)

// ErrClaimChanged is wrapped when a recovery finds a different record from
// the one it inspected and reconciled: someone claimed, adopted or released
// the device meanwhile, so the cleanup that was done proves nothing about
// the record that is there now.
var ErrClaimChanged = errors.New("hostreg: the claim changed since it was inspected")

// ReleaseStale clears key's claim for `device release --stale`, after the
// caller has shut the device down. expected is the Status the caller
// inspected and reconciled. Inside one BEGIN IMMEDIATE transaction the
// record is re-read and re-classified; it is cleared only if it is the
// same record and still positively orphaned. A live or unverifiable owner
// is refused with a *ConflictError (ReasonNotOrphaned), and so is an
// inconsistent record: corruption is never proof that nobody owns the
// device. A device that is already free succeeds with cleared=false.
func (db *DB) ReleaseStale(ctx context.Context, key Key, expected Status) (cleared bool, err error) {
	err = db.immediate(ctx, func(q querier) error {
		cur, held, err := current(ctx, q, key)
		if !held {
			return err
		}
		if err != nil {
			return db.conflict(ctx, ReasonNotOrphaned, key, cur, err)
		}
		st := classify(ctx, db.prober, cur)
		if !sameRecord(st, expected) {
			return fmt.Errorf("%w: %s", ErrClaimChanged, key)
		}
		if !st.Reclaimable() {
			return conflictFrom(ReasonNotOrphaned, st)
		}
		cleared = true
		return clear(ctx, q, key)
	})
	return cleared, err
}

// ForceRelease clears key's claim for `device release --force`, whatever
// its classification, inconsistent records included, but only if it is the
// record the caller inspected (expected): a claim taken after the caller
// looked is never cleared by a force aimed at its predecessor. A device
// that is already free succeeds with cleared=false.
func (db *DB) ForceRelease(ctx context.Context, key Key, expected Status) (cleared bool, err error) {
	err = db.immediate(ctx, func(q querier) error {
		cur, held, err := current(ctx, q, key)
		if !held {
			return err
		}
		var st Status
		var u errUnscannable
		if errors.As(err, &u) {
			st = Status{Key: key, Class: ClassInconsistent, Detail: u.Error()}
		} else {
			st = classify(ctx, db.prober, cur)
		}
		if !sameRecord(st, expected) {
			return fmt.Errorf("%w: %s", ErrClaimChanged, key)
		}
		cleared = true
		return clear(ctx, q, key)
	})
	return cleared, err
}

func clear(ctx context.Context, q querier, key Key) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM claims WHERE device_key = ?`, string(key)); err != nil {
		return fmt.Errorf("hostreg: clear %s: %w", key, err)
	}
	return bump(ctx, q)
}

// sameRecord reports whether two inspections saw the same stored record.
// An inconsistent record is compared by its verbatim fields; a consistent
// one by every field of its claim (the classification may differ: that is
// what the caller re-checks).
func sameRecord(a, b Status) bool {
	if (a.Class == ClassInconsistent) != (b.Class == ClassInconsistent) || a.Key != b.Key {
		return false
	}
	x, y := a.Claim, b.Claim
	return x.Key == y.Key && x.Kind == y.Kind && x.Command == y.Command && x.Owner == y.Owner &&
		x.LeaseID == y.LeaseID && x.ClaimedAt.Equal(y.ClaimedAt) && x.State == y.State &&
		slices.Equal(x.FailedSteps, y.FailedSteps)
}
