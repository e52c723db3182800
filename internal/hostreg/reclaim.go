package hostreg

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Automatic reclaim of proven orphans (ADR 0059): every daemon's host
// watcher judges the other homes' orphaned claims with ReclaimDecision and
// acts on them through BeginReclaim and ReleaseStale, so a dead owner's
// claim does not hold a device, or host capacity, until somebody types
// `device release --stale`.

// DeviceRun is what the reclaimer observed of an orphan's device through
// its owner's roots.
type DeviceRun string

const (
	DeviceRunning DeviceRun = "running"
	DeviceStopped DeviceRun = "stopped" // listed in the owner's root, not running
	DeviceAbsent  DeviceRun = "absent"  // not in the owner's root: nothing there can run it
	DeviceUnknown DeviceRun = "unknown" // the listing failed, or the device is booting or stopping
)

// ReclaimAction is what the reclaimer does with one claim.
type ReclaimAction string

const (
	ReclaimNone     ReclaimAction = ""            // not another home's proven orphan: never touched
	ReclaimWait     ReclaimAction = "wait"        // an orphan inside its grace window: its home may be restarting
	ReclaimClear    ReclaimAction = "clear"       // the device is proven not running: clear the claim
	ReclaimShutDown ReclaimAction = "shut-down"   // shut the device down with the owner's roots, then clear
	ReclaimInFlight ReclaimAction = "in-progress" // another daemon's reclaim of it is under way
)

// ReclaimTimeout is how long a reclaim mark (BeginReclaim) protects the
// reclaim of another daemon: past it, that daemon is presumed to have died
// mid-way and the orphan is reclaimed again.
const ReclaimTimeout = 2 * time.Minute

// ReclaimDecision judges one claim for the reclaimer of selfHome. run is
// what the owner's roots say of the device; orphanedFor how long this
// daemon has seen the record orphaned; grace the window a dead owner whose
// home still exists keeps a running device (its home may be restarting,
// and its restarted daemon adopts it). now is the caller's clock, for the
// age of a reclaim mark.
//
// The rules: only another home's positively orphaned claim is reclaimed
// (an inconsistent or unverifiable one never is: that needs --force); a
// device proven not running is cleared at once; a running one is shut down
// at once when its home is gone, and after the grace window otherwise; a
// device whose state is unknown is shut down only when its home is gone
// (the shutdown itself then proves it), and waits otherwise.
func ReclaimDecision(st Status, selfHome string, run DeviceRun, orphanedFor, grace time.Duration, now time.Time) ReclaimAction {
	if !st.Reclaimable() || st.Claim.Owner.Home == selfHome {
		return ReclaimNone
	}
	if st.BeingReclaimed() && now.Sub(st.Claim.ClaimedAt) < ReclaimTimeout {
		return ReclaimInFlight
	}
	homeGone := st.Liveness == LivenessHomeGone
	switch run {
	case DeviceStopped, DeviceAbsent:
		return ReclaimClear
	case DeviceRunning:
		if homeGone || orphanedFor >= grace {
			return ReclaimShutDown
		}
		return ReclaimWait
	default:
		if homeGone {
			return ReclaimShutDown
		}
		return ReclaimWait
	}
}

// reclaimCommand is the command of a record a reclaimer marked: a
// transient claim, releasing, still in the dead owner's name.
const reclaimCommand = "reclaim"

// BeingReclaimed reports whether st is a reclaimer's mark (BeginReclaim):
// its device is being shut down under its dead owner's name, so neither
// that owner's home (Adopt) nor anyone else may take it meanwhile.
func (s Status) BeingReclaimed() bool {
	return s.Class != ClassInconsistent && s.Claim.Kind == KindTransient && s.Claim.Command == reclaimCommand &&
		s.Claim.State == StateReleasing
}

// BeginReclaim marks the orphaned record expected (as the reclaimer
// inspected it) as being reclaimed, inside one BEGIN IMMEDIATE transaction
// that re-reads and re-classifies it: only the same record, still proven
// orphaned, is marked. The mark (a transient claim, command "reclaim",
// releasing, with no lease) keeps the dead owner's identity (its roots
// are what the shutdown uses, and whoever takes over after a reclaimer
// died needs them too) and sets the state to releasing with now as its
// time, so a second daemon sees the reclaim under way (ReclaimInFlight)
// and the dead owner's restarted daemon does not trust its lease on it.
// It returns the marked record, which ReleaseStale then expects.
func (db *DB) BeginReclaim(ctx context.Context, key Key, expected Status, now time.Time) (Status, error) {
	var marked Status
	err := db.immediate(ctx, func(q querier) error {
		cur, held, err := current(ctx, q, key)
		if !held {
			if err == nil {
				err = fmt.Errorf("%w: %s is free", ErrClaimChanged, key)
			}
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
		c := st.Claim
		c.State, c.FailedSteps, c.ClaimedAt = StateReleasing, nil, now
		c.Kind, c.Command, c.LeaseID = KindTransient, reclaimCommand, ""
		r, err := encode(c)
		if err != nil {
			return err
		}
		if err := upsert(ctx, q, r); err != nil {
			return err
		}
		marked = classify(ctx, db.prober, r)
		return nil
	})
	if err != nil {
		return Status{}, err
	}
	if !marked.Reclaimable() {
		return Status{}, errors.New("hostreg: the marked record is no longer orphaned")
	}
	return marked, nil
}

// Orphans lists the registry's claims that are positively orphaned, read
// through db's own connection (no new file handle per poll) and classified
// with db's prober. The reclaimer polls it: an owner's death changes no
// row, so the generation counter never announces it.
func (db *DB) Orphans(ctx context.Context) ([]Status, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT `+selectColumns+` FROM claims ORDER BY device_key`)
	if err != nil {
		return nil, fmt.Errorf("hostreg: list claims: %w", err)
	}
	var raw []row
	for rows.Next() {
		r, err := scanRow(rows)
		var u errUnscannable
		if errors.As(err, &u) {
			continue // inconsistent: never an orphan
		}
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("hostreg: list claims: %w", err)
		}
		raw = append(raw, r)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, fmt.Errorf("hostreg: list claims: %w", err)
	}
	rows.Close()
	// Probe after the read, so no read is held open while the prober looks
	// at processes.
	var out []Status
	for _, r := range raw {
		if st := classify(ctx, db.prober, r); st.Reclaimable() {
			out = append(out, st)
		}
	}
	return out, nil
}
