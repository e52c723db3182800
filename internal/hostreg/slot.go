package hostreg

// Managed slots (issue 12, ADR 0049). A runner scope (host scope,
// namespace, incarnation) owns numbered slots; each slot is assigned one
// device that stays out of every daemon's general pool. The rows live here
// because every daemon of the host must see the same assignments. Like
// claims, each decision is one BEGIN IMMEDIATE transaction.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

const slotMigration = `
CREATE TABLE slot_scopes (
	scope_key     TEXT PRIMARY KEY NOT NULL,
	host_scope    TEXT NOT NULL,
	namespace     TEXT NOT NULL,
	incarnation   TEXT NOT NULL,
	state         TEXT NOT NULL,              -- valid | invalidating | invalidated | abandoned
	created_at    INTEGER NOT NULL,           -- unix ms
	last_activity INTEGER NOT NULL
) STRICT;
CREATE INDEX slot_scopes_runner ON slot_scopes (host_scope, namespace);

CREATE TABLE slot_assignments (
	scope_key      TEXT NOT NULL,
	slot_index     INTEGER NOT NULL,
	platform       TEXT NOT NULL DEFAULT '',
	stable_id      TEXT NOT NULL DEFAULT '',  -- UDID or AVD name; '' when empty
	name           TEXT NOT NULL DEFAULT '',
	device_home    TEXT NOT NULL DEFAULT '',  -- the daemon home whose inventory holds it
	requested_spec TEXT NOT NULL DEFAULT '{}',
	resolved_spec  TEXT NOT NULL DEFAULT '{}',
	fp_version     INTEGER NOT NULL DEFAULT 0,
	fp_hash        TEXT NOT NULL DEFAULT '',
	state          TEXT NOT NULL,             -- ready | replacing | settling | cleanup_pending | empty
	generation     INTEGER NOT NULL,
	owner_home     TEXT NOT NULL DEFAULT '',  -- the execution's daemon, not its proxy
	owner_pid      INTEGER NOT NULL DEFAULT 0,
	owner_start    TEXT NOT NULL DEFAULT '',
	owner_token    TEXT NOT NULL DEFAULT '',
	lease_id       TEXT NOT NULL DEFAULT '',
	owner_since    INTEGER NOT NULL DEFAULT 0,
	settling_since INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (scope_key, slot_index)
) STRICT;

-- Open intents of device work for a slot: a retry of the same (scope,
-- slot, spec) after a crash finds its own entry and converges.
CREATE TABLE slot_journal (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	scope_key     TEXT NOT NULL,
	slot_index    INTEGER NOT NULL,
	fp_hash       TEXT NOT NULL,
	step          TEXT NOT NULL,              -- create | delete | replace
	platform      TEXT NOT NULL,
	old_stable_id TEXT NOT NULL DEFAULT '',
	new_stable_id TEXT NOT NULL DEFAULT '',
	opened_at     INTEGER NOT NULL,
	closed_at     INTEGER                     -- NULL while open
) STRICT;

-- Devices of invalidated scopes: out of the general pool, adoptable by a slot.
CREATE TABLE slot_free_pool (
	stable_id     TEXT PRIMARY KEY NOT NULL,
	platform      TEXT NOT NULL,
	name          TEXT NOT NULL,
	device_home   TEXT NOT NULL,
	resolved_spec TEXT NOT NULL,
	fp_hash       TEXT NOT NULL,
	from_scope    TEXT NOT NULL,
	freed_at      INTEGER NOT NULL
) STRICT;

-- The assignment generation: one host-wide counter, so a value is never
-- handed out twice even across scopes (it may skip for one slot).
CREATE TABLE slot_fence (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	value INTEGER NOT NULL
) STRICT;
INSERT INTO slot_fence (id, value) VALUES (1, 0);
`

// slotMigration4 lets daemons follow slot changes with the one-row read
// they already make for claims (generation.slots moves on every committed
// slot decision, Generations), and keeps an execution's idle window with
// its owner so a daemon that re-owns the execution after a restart applies
// the window the execution was started with. 0 is "not recorded" (a row
// written before this migration): the default window applies.
const slotMigration4 = `
ALTER TABLE generation ADD COLUMN slots INTEGER NOT NULL DEFAULT 0;
ALTER TABLE slot_assignments ADD COLUMN owner_idle_ms INTEGER NOT NULL DEFAULT 0;
`

// Scope states.
const (
	ScopeValid        = "valid"
	ScopeInvalidating = "invalidating"
	ScopeInvalidated  = "invalidated"
	ScopeAbandoned    = "abandoned"
)

// Assignment states.
const (
	SlotReady          = "ready"
	SlotReplacing      = "replacing"
	SlotSettling       = "settling"
	SlotCleanupPending = "cleanup_pending"
	SlotEmpty          = "empty"
)

// Journal steps.
const (
	StepCreate  = "create"
	StepDelete  = "delete"
	StepReplace = "replace"
)

// ScopeAbandonAfter is how long a scope may sit with no owner before it
// counts as abandoned.
const ScopeAbandonAfter = time.Hour

// SlotRefusal reasons (SlotError.Reason); the daemon maps them to codes.
const (
	RefuseSlotInUse        = "slot_in_use"
	RefuseSlotSettling     = "slot_settling"
	RefuseScopeInvalidated = "scope_invalidated"
	RefuseScopePending     = "scope_transition_pending"
	RefuseStaleGeneration  = "stale_generation"
	RefuseNotOwner         = "not_owner"
	RefuseNoScope          = "no_scope"
)

// SlotError is a refused slot decision.
type SlotError struct {
	Reason  string
	Message string
	// Holder is the live owner for slot_in_use.
	Holder *SlotOwner
}

func (e *SlotError) Error() string { return "hostreg: " + e.Reason + ": " + e.Message }

// SlotScope is one runner scope row.
type SlotScope struct {
	Key          string
	HostScope    string
	Namespace    string
	Incarnation  string
	State        string
	CreatedAt    time.Time
	LastActivity time.Time
}

// SlotOwner is the execution holding a slot: the daemon process (so its
// death is provable by the Prober), the caller's token and the lease.
type SlotOwner struct {
	Owner
	Token   string
	LeaseID string // "" while the daemon is still reconciling
	Since   time.Time
	// Idle is the execution's idle window as its launch config set it;
	// zero when not recorded.
	Idle time.Duration
}

// SlotDevice is a device as the slot tables record it.
type SlotDevice struct {
	Platform   string
	StableID   string
	Name       string
	DeviceHome string
	Resolved   json.RawMessage
	FPHash     string
}

// SlotRecord is one assignment row.
type SlotRecord struct {
	ScopeKey      string
	SlotIndex     int
	Device        SlotDevice // StableID "" when empty
	Requested     json.RawMessage
	FPVersion     int
	State         string
	Generation    int64
	Owner         *SlotOwner
	SettlingSince time.Time
}

// SlotIntent is one journal entry.
type SlotIntent struct {
	ID          int64
	ScopeKey    string
	SlotIndex   int
	FPHash      string
	Step        string
	Platform    string
	OldStableID string
	NewStableID string
	OpenedAt    time.Time
}

// FreeDevice is one free-pool row.
type FreeDevice struct {
	SlotDevice
	FromScope string
	FreedAt   time.Time
}

// slotTx is immediate for a slot decision: when fn commits a change to the
// slot tables, the slot counter moves in the same transaction, so every
// daemon of the host learns of it from its generation poll (Generations)
// and rereads the slot tables only then. A transaction whose writes
// changed no row (a repeated bind or re-own, a reset of a scope already
// invalidating) commits without moving it: nobody needs to reread what
// did not change. Every write in fn is therefore change-aware: it affects
// a row only when a value differs (putSlot's guarded upsert, the guarded
// updates), or it goes through touchScope.
func (db *DB) slotTx(ctx context.Context, fn func(q querier) error) error {
	return db.immediate(ctx, func(q querier) error {
		w := &slotWrites{querier: q}
		if err := fn(w); err != nil {
			return err
		}
		if w.rows == 0 {
			return nil
		}
		return bumpSlots(ctx, q)
	})
}

// slotWrites counts the rows a slot transaction's statements changed.
type slotWrites struct {
	querier
	rows int64
}

func (w *slotWrites) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := w.querier.ExecContext(ctx, query, args...)
	if err == nil {
		if n, nerr := res.RowsAffected(); nerr == nil {
			w.rows += n
		}
	}
	return res, err
}

// touchScope records activity on a scope without counting as a slot
// change: no daemon's slot view holds last_activity. The abandonment sweep
// reads it from the table itself, on its own timer, so moving the counter
// for it would only make every daemon reread unchanged slot tables on
// every claim and release.
func touchScope(ctx context.Context, q querier, key string, now time.Time) error {
	if w, ok := q.(*slotWrites); ok {
		q = w.querier
	}
	if _, err := q.ExecContext(ctx, `UPDATE slot_scopes SET last_activity = ? WHERE scope_key = ?`, ms(now), key); err != nil {
		return fmt.Errorf("hostreg: touch scope: %w", err)
	}
	return nil
}

func bumpSlots(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, `UPDATE generation SET slots = slots + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("hostreg: bump slot generation: %w", err)
	}
	return nil
}

// SlotsInUse reports whether any slot state exists that time alone can
// change: a valid scope, which the abandonment sweep may find idle. With
// none, the sweep has nothing to judge.
func (db *DB) SlotsInUse(ctx context.Context) (bool, error) {
	var n int
	if err := db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM slot_scopes WHERE state = ?`, ScopeValid).Scan(&n); err != nil {
		return false, fmt.Errorf("hostreg: count live scopes: %w", err)
	}
	return n > 0, nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }
func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func nextFence(ctx context.Context, q querier) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, `UPDATE slot_fence SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&v); err != nil {
		return 0, fmt.Errorf("hostreg: slot fence: %w", err)
	}
	return v, nil
}

// ownerLiveness probes a slot owner: alive, dead (proven) or unknown
// (treated as alive by every decision).
func (db *DB) ownerLiveness(ctx context.Context, o *SlotOwner) Liveness {
	if o == nil {
		return LivenessDead
	}
	start, alive, err := db.prober.ProcessStart(ctx, o.PID)
	switch {
	case err != nil:
		return LivenessUnknown
	case !alive:
		return LivenessDead
	case start != o.Start:
		return LivenessReused
	}
	return LivenessAlive
}

func provenGone(l Liveness) bool { return l == LivenessDead || l == LivenessReused }

const slotCols = `scope_key, slot_index, platform, stable_id, name, device_home, requested_spec, resolved_spec,
	fp_version, fp_hash, state, generation, owner_home, owner_pid, owner_start, owner_token, lease_id, owner_since, settling_since, owner_idle_ms`

type rowScanner interface{ Scan(dest ...any) error }

func scanSlot(r rowScanner) (SlotRecord, error) {
	var s SlotRecord
	var req, res string
	var oh, ostart, otok, lease string
	var opid int
	var osince, settling, idle int64
	if err := r.Scan(&s.ScopeKey, &s.SlotIndex, &s.Device.Platform, &s.Device.StableID, &s.Device.Name, &s.Device.DeviceHome,
		&req, &res, &s.FPVersion, &s.Device.FPHash, &s.State, &s.Generation, &oh, &opid, &ostart, &otok, &lease, &osince, &settling, &idle); err != nil {
		return SlotRecord{}, err
	}
	s.Requested, s.Device.Resolved = json.RawMessage(req), json.RawMessage(res)
	if opid != 0 {
		s.Owner = &SlotOwner{Owner: Owner{Home: oh, PID: opid, Start: ostart}, Token: otok, LeaseID: lease, Since: fromMs(osince),
			Idle: time.Duration(idle) * time.Millisecond}
	}
	s.SettlingSince = fromMs(settling)
	return s, nil
}

func getSlot(ctx context.Context, q querier, scope string, slot int) (SlotRecord, bool, error) {
	s, err := scanSlot(q.QueryRowContext(ctx, `SELECT `+slotCols+` FROM slot_assignments WHERE scope_key = ? AND slot_index = ?`, scope, slot))
	if errors.Is(err, sql.ErrNoRows) {
		return SlotRecord{}, false, nil
	}
	if err != nil {
		return SlotRecord{}, false, fmt.Errorf("hostreg: read slot: %w", err)
	}
	return s, true, nil
}

// putSlotSQL writes a slot row only where a value differs: an unchanged
// row is no affected row, so slotTx does not count it as a change.
var putSlotSQL = func() string {
	cols := strings.Split(slotCols, ",")
	var set, was, now []string
	for _, c := range cols {
		c = strings.TrimSpace(c)
		if c == "scope_key" || c == "slot_index" {
			continue
		}
		set = append(set, c+" = excluded."+c)
		was, now = append(was, "slot_assignments."+c), append(now, "excluded."+c)
	}
	return `INSERT INTO slot_assignments (` + slotCols + `) VALUES (` + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + `)
	ON CONFLICT (scope_key, slot_index) DO UPDATE SET ` + strings.Join(set, ", ") + `
	WHERE (` + strings.Join(was, ", ") + `) IS NOT (` + strings.Join(now, ", ") + `)`
}()

func putSlot(ctx context.Context, q querier, s SlotRecord) error {
	var oh, ostart, otok, lease string
	var opid int
	var osince, idle int64
	if o := s.Owner; o != nil {
		oh, opid, ostart, otok, lease, osince, idle = o.Home, o.PID, o.Start, o.Token, o.LeaseID, ms(o.Since), o.Idle.Milliseconds()
	}
	req, res := string(s.Requested), string(s.Device.Resolved)
	if req == "" {
		req = "{}"
	}
	if res == "" {
		res = "{}"
	}
	var settling int64
	if !s.SettlingSince.IsZero() {
		settling = ms(s.SettlingSince)
	}
	_, err := q.ExecContext(ctx, putSlotSQL,
		s.ScopeKey, s.SlotIndex, s.Device.Platform, s.Device.StableID, s.Device.Name, s.Device.DeviceHome, req, res,
		s.FPVersion, s.Device.FPHash, s.State, s.Generation, oh, opid, ostart, otok, lease, osince, settling, idle)
	if err != nil {
		return fmt.Errorf("hostreg: write slot: %w", err)
	}
	return nil
}

func getScope(ctx context.Context, q querier, key string) (SlotScope, bool, error) {
	var s SlotScope
	var created, last int64
	err := q.QueryRowContext(ctx, `SELECT scope_key, host_scope, namespace, incarnation, state, created_at, last_activity FROM slot_scopes WHERE scope_key = ?`, key).
		Scan(&s.Key, &s.HostScope, &s.Namespace, &s.Incarnation, &s.State, &created, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return SlotScope{}, false, nil
	}
	if err != nil {
		return SlotScope{}, false, fmt.Errorf("hostreg: read scope: %w", err)
	}
	s.CreatedAt, s.LastActivity = fromMs(created), fromMs(last)
	return s, true, nil
}

func scopesWhere(ctx context.Context, q querier, where string, args ...any) ([]SlotScope, error) {
	rows, err := q.QueryContext(ctx, `SELECT scope_key, host_scope, namespace, incarnation, state, created_at, last_activity FROM slot_scopes `+where+` ORDER BY created_at, scope_key`, args...)
	if err != nil {
		return nil, fmt.Errorf("hostreg: list scopes: %w", err)
	}
	defer rows.Close()
	var out []SlotScope
	for rows.Next() {
		var s SlotScope
		var created, last int64
		if err := rows.Scan(&s.Key, &s.HostScope, &s.Namespace, &s.Incarnation, &s.State, &created, &last); err != nil {
			return nil, err
		}
		s.CreatedAt, s.LastActivity = fromMs(created), fromMs(last)
		out = append(out, s)
	}
	return out, rows.Err()
}

func slotsOf(ctx context.Context, q querier, scope string) ([]SlotRecord, error) {
	where, args := "", []any{}
	if scope != "" {
		where, args = " WHERE scope_key = ?", []any{scope}
	}
	rows, err := q.QueryContext(ctx, `SELECT `+slotCols+` FROM slot_assignments`+where+` ORDER BY scope_key, slot_index`, args...)
	if err != nil {
		return nil, fmt.Errorf("hostreg: list slots: %w", err)
	}
	defer rows.Close()
	var out []SlotRecord
	for rows.Next() {
		s, err := scanSlot(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func openIntents(ctx context.Context, q querier, scope string, slot int) ([]SlotIntent, error) {
	query := `SELECT id, scope_key, slot_index, fp_hash, step, platform, old_stable_id, new_stable_id, opened_at FROM slot_journal WHERE closed_at IS NULL`
	args := []any{}
	if scope != "" {
		query += ` AND scope_key = ?`
		args = append(args, scope)
		if slot >= 0 {
			query += ` AND slot_index = ?`
			args = append(args, slot)
		}
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("hostreg: read journal: %w", err)
	}
	defer rows.Close()
	var out []SlotIntent
	for rows.Next() {
		var in SlotIntent
		var opened int64
		if err := rows.Scan(&in.ID, &in.ScopeKey, &in.SlotIndex, &in.FPHash, &in.Step, &in.Platform, &in.OldStableID, &in.NewStableID, &opened); err != nil {
			return nil, err
		}
		in.OpenedAt = fromMs(opened)
		out = append(out, in)
	}
	return out, rows.Err()
}

// ScopeAdmission is AdmitScope's answer.
type ScopeAdmission struct {
	Scope   SlotScope
	Revived bool
	// Retired are older incarnations this admission invalidated; their
	// devices are in the free pool now.
	Retired []string
}

// AdmitScope admits a runner incarnation: its scope is created (or found,
// or revived from abandonment); any older incarnation of the same host
// scope and namespace is invalidated first, once nothing of it is still
// running (SCOPE_TRANSITION_PENDING until then). An invalidated
// incarnation is refused forever.
func (db *DB) AdmitScope(ctx context.Context, key, hostScope, namespace, incarnation string, now time.Time) (ScopeAdmission, error) {
	var out ScopeAdmission
	var refusal error
	err := db.slotTx(ctx, func(q querier) error {
		out, refusal = ScopeAdmission{}, nil
		cur, ok, err := getScope(ctx, q, key)
		if err != nil {
			return err
		}
		if ok && cur.State == ScopeInvalidated {
			return &SlotError{Reason: RefuseScopeInvalidated, Message: fmt.Sprintf("runner incarnation %q of namespace %q was reset; it never accepts work again", incarnation, namespace)}
		}
		others, err := scopesWhere(ctx, q, `WHERE host_scope = ? AND namespace = ? AND scope_key != ? AND state != ?`, hostScope, namespace, key, ScopeInvalidated)
		if err != nil {
			return err
		}
		var pending []string
		for _, o := range others {
			// Only a new incarnation retires the others; a returning one
			// found its scope valid, so nothing newer replaced it.
			if ok {
				continue
			}
			rep, err := db.invalidateLocked(ctx, q, o, false, now)
			if err != nil {
				return err
			}
			if rep.State != ScopeInvalidated {
				pending = append(pending, o.Incarnation)
				continue
			}
			out.Retired = append(out.Retired, o.Key)
		}
		if len(pending) > 0 {
			// Committed (the old scopes stay marked invalidating) and
			// refused after the commit.
			refusal = &SlotError{Reason: RefuseScopePending, Message: fmt.Sprintf("older incarnation(s) %q of namespace %q still have owners, settling slots, cleanup or open journal entries", pending, namespace)}
			return nil
		}
		switch {
		case !ok:
			cur = SlotScope{Key: key, HostScope: hostScope, Namespace: namespace, Incarnation: incarnation, State: ScopeValid, CreatedAt: now, LastActivity: now}
			if _, err := q.ExecContext(ctx, `INSERT INTO slot_scopes (scope_key, host_scope, namespace, incarnation, state, created_at, last_activity) VALUES (?,?,?,?,?,?,?)`,
				key, hostScope, namespace, incarnation, ScopeValid, ms(now), ms(now)); err != nil {
				return fmt.Errorf("hostreg: create scope: %w", err)
			}
		default:
			abandoned, err := db.abandonedLocked(ctx, q, cur, now)
			if err != nil {
				return err
			}
			if cur.State == ScopeInvalidating {
				// Admitting it again is a sign of life; a reset in
				// progress is not undone silently.
				return &SlotError{Reason: RefuseScopePending, Message: "this incarnation's scope is being reset"}
			}
			out.Revived = abandoned
			cur.State, cur.LastActivity = ScopeValid, now
			if _, err := q.ExecContext(ctx, `UPDATE slot_scopes SET state = ? WHERE scope_key = ? AND state != ?`, ScopeValid, key, ScopeValid); err != nil {
				return fmt.Errorf("hostreg: revive scope: %w", err)
			}
			if err := touchScope(ctx, q, key, now); err != nil {
				return err
			}
		}
		out.Scope = cur
		return nil
	})
	if err == nil && refusal != nil {
		return ScopeAdmission{}, refusal
	}
	return out, err
}

// abandonedLocked reports whether a scope counts as abandoned at now: idle
// an hour with no owner on any slot (or already marked so).
func (db *DB) abandonedLocked(ctx context.Context, q querier, s SlotScope, now time.Time) (bool, error) {
	if s.State == ScopeAbandoned {
		return true, nil
	}
	if s.State != ScopeValid || now.Sub(s.LastActivity) < ScopeAbandonAfter {
		return false, nil
	}
	slots, err := slotsOf(ctx, q, s.Key)
	if err != nil {
		return false, err
	}
	for i := range slots {
		if slots[i].Owner != nil && !provenGone(db.ownerLiveness(ctx, slots[i].Owner)) {
			return false, nil
		}
	}
	return true, nil
}

// MarkAbandoned marks every valid scope idle past ScopeAbandonAfter with no
// live owner as abandoned, and returns their keys. A returning incarnation
// revives its scope (AdmitScope's Revived).
//
// A sweep with nothing old enough to judge is one read and takes no write
// lock, so a daemon may run it on a timer while scopes exist.
func (db *DB) MarkAbandoned(ctx context.Context, now time.Time) ([]string, error) {
	cutoff := ms(now.Add(-ScopeAbandonAfter))
	var candidates int
	if err := db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM slot_scopes WHERE state = ? AND last_activity <= ?`, ScopeValid, cutoff).Scan(&candidates); err != nil {
		return nil, fmt.Errorf("hostreg: abandonment candidates: %w", err)
	}
	if candidates == 0 {
		return nil, nil
	}
	var out []string
	err := db.slotTx(ctx, func(q querier) error {
		out = nil
		scopes, err := scopesWhere(ctx, q, `WHERE state = ? AND last_activity <= ?`, ScopeValid, cutoff)
		if err != nil {
			return err
		}
		for _, s := range scopes {
			ab, err := db.abandonedLocked(ctx, q, s, now)
			if err != nil {
				return err
			}
			if ab {
				if _, err := q.ExecContext(ctx, `UPDATE slot_scopes SET state = ? WHERE scope_key = ?`, ScopeAbandoned, s.Key); err != nil {
					return fmt.Errorf("hostreg: abandon scope: %w", err)
				}
				out = append(out, s.Key)
			}
		}
		return nil
	})
	return out, err
}

// ForceRefusal is why a forced reset left one slot alone.
type ForceRefusal struct {
	SlotIndex   int
	Reason      string
	RemainingMs int64 // within_settlement_cap
	Message     string
}

// ScopeReset is one scope's state after an invalidation attempt.
type ScopeReset struct {
	Scope          SlotScope
	State          string
	LiveOwners     []int
	Settling       []int
	CleanupPending []int
	OpenJournal    int
	ForceRefusals  []ForceRefusal
	FreedDevices   []string
}

// SettlementCap bounds how long a settling slot blocks a forced reset:
// inside it, force waits (within_settlement_cap); past it, a settling slot
// whose daemon is proven dead is abandoned.
const SettlementCap = 5 * time.Minute

// invalidateLocked retires scope s if nothing of it still runs: its
// assigned devices move to the free pool and the scope is invalidated for
// good. Otherwise it is marked invalidating and the report lists what is
// still running. force clears what is provably safe to clear (owners
// proven dead, settling past the cap with a dead daemon) and lists typed
// refusals for the rest.
func (db *DB) invalidateLocked(ctx context.Context, q querier, s SlotScope, force bool, now time.Time) (ScopeReset, error) {
	rep := ScopeReset{Scope: s, State: s.State}
	if s.State == ScopeInvalidated {
		return rep, nil
	}
	slots, err := slotsOf(ctx, q, s.Key)
	if err != nil {
		return rep, err
	}
	journal, err := openIntents(ctx, q, s.Key, -1)
	if err != nil {
		return rep, err
	}
	rep.OpenJournal = len(journal)
	blocked := len(journal) > 0
	if force && len(journal) > 0 {
		for _, j := range journal {
			rep.ForceRefusals = append(rep.ForceRefusals, ForceRefusal{SlotIndex: j.SlotIndex, Reason: "other_open_journal",
				Message: fmt.Sprintf("a %s of slot %d is still open in the journal; its daemon converges it on the next acquire or start", j.Step, j.SlotIndex)})
		}
	}
	for i := range slots {
		sl := &slots[i]
		live := db.ownerLiveness(ctx, sl.Owner)
		if sl.Owner != nil && provenGone(live) && sl.State != SlotSettling {
			sl.Owner = nil // a dead execution holds nothing
			if err := putSlot(ctx, q, *sl); err != nil {
				return rep, err
			}
		}
		switch {
		case sl.State == SlotSettling:
			age := now.Sub(sl.SettlingSince)
			if force && provenGone(live) && age >= SettlementCap {
				sl.State, sl.Owner, sl.SettlingSince = SlotReady, nil, time.Time{}
				if err := putSlot(ctx, q, *sl); err != nil {
					return rep, err
				}
				break
			}
			rep.Settling = append(rep.Settling, sl.SlotIndex)
			blocked = true
			if force {
				switch {
				case age < SettlementCap:
					rem := (SettlementCap - age).Milliseconds()
					rep.ForceRefusals = append(rep.ForceRefusals, ForceRefusal{SlotIndex: sl.SlotIndex, Reason: "within_settlement_cap", RemainingMs: rem,
						Message: "the released work is still inside its settlement window"})
				case live == LivenessUnknown:
					rep.ForceRefusals = append(rep.ForceRefusals, ForceRefusal{SlotIndex: sl.SlotIndex, Reason: "owner_liveness_unknown", Message: "the settling daemon's liveness cannot be proven"})
				default:
					rep.ForceRefusals = append(rep.ForceRefusals, ForceRefusal{SlotIndex: sl.SlotIndex, Reason: "live_owner", Message: "the settling daemon still runs"})
				}
			}
			continue
		case sl.State == SlotCleanupPending:
			rep.CleanupPending = append(rep.CleanupPending, sl.SlotIndex)
			blocked = true
			if force {
				rep.ForceRefusals = append(rep.ForceRefusals, ForceRefusal{SlotIndex: sl.SlotIndex, Reason: "no_release_entry",
					Message: "the old device's deletion is unconfirmed; nothing proves it safe to drop"})
			}
			continue
		}
		if sl.Owner != nil {
			rep.LiveOwners = append(rep.LiveOwners, sl.SlotIndex)
			blocked = true
			if force {
				reason, msg := "live_owner", "a live execution holds the slot"
				if live == LivenessUnknown {
					reason, msg = "owner_liveness_unknown", "the slot owner's liveness cannot be proven"
				}
				rep.ForceRefusals = append(rep.ForceRefusals, ForceRefusal{SlotIndex: sl.SlotIndex, Reason: reason, Message: msg})
			}
		}
	}
	if blocked {
		rep.State = ScopeInvalidating
		if _, err := q.ExecContext(ctx, `UPDATE slot_scopes SET state = ? WHERE scope_key = ? AND state != ?`, ScopeInvalidating, s.Key, ScopeInvalidating); err != nil {
			return rep, fmt.Errorf("hostreg: mark scope invalidating: %w", err)
		}
		return rep, nil
	}
	for _, sl := range slots {
		if sl.Device.StableID == "" {
			continue
		}
		if _, err := q.ExecContext(ctx, `INSERT OR REPLACE INTO slot_free_pool (stable_id, platform, name, device_home, resolved_spec, fp_hash, from_scope, freed_at) VALUES (?,?,?,?,?,?,?,?)`,
			sl.Device.StableID, sl.Device.Platform, sl.Device.Name, sl.Device.DeviceHome, nonEmptyJSON(sl.Device.Resolved), sl.Device.FPHash, s.Key, ms(now)); err != nil {
			return rep, fmt.Errorf("hostreg: free pool: %w", err)
		}
		rep.FreedDevices = append(rep.FreedDevices, sl.Device.StableID)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM slot_assignments WHERE scope_key = ?`, s.Key); err != nil {
		return rep, fmt.Errorf("hostreg: drop assignments: %w", err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE slot_scopes SET state = ? WHERE scope_key = ?`, ScopeInvalidated, s.Key); err != nil {
		return rep, fmt.Errorf("hostreg: invalidate scope: %w", err)
	}
	rep.State = ScopeInvalidated
	rep.LiveOwners, rep.Settling, rep.CleanupPending = nil, nil, nil
	return rep, nil
}

func nonEmptyJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// ResetScope invalidates every scope of namespace/incarnation (and
// hostScope, when given) that nothing still runs in. It is idempotent: an
// invalidated scope reports invalidated again.
func (db *DB) ResetScope(ctx context.Context, namespace, incarnation, hostScope string, force bool, now time.Time) ([]ScopeReset, error) {
	var out []ScopeReset
	err := db.slotTx(ctx, func(q querier) error {
		out = nil
		where, args := `WHERE namespace = ? AND incarnation = ?`, []any{namespace, incarnation}
		if hostScope != "" {
			where += ` AND host_scope = ?`
			args = append(args, hostScope)
		}
		scopes, err := scopesWhere(ctx, q, where, args...)
		if err != nil {
			return err
		}
		for _, s := range scopes {
			rep, err := db.invalidateLocked(ctx, q, s, force, now)
			if err != nil {
				return err
			}
			out = append(out, rep)
		}
		return nil
	})
	return out, err
}

// SlotClaim is ClaimSlot's answer: the slot as it was before this
// execution took it, and its open journal entries.
type SlotClaim struct {
	Slot    SlotRecord
	Exists  bool
	Journal []SlotIntent
}

// ClaimSlot makes owner the slot's execution, before any device work, so
// a second execution through any daemon of the host is refused
// (slot_in_use, or slot_settling while released work still runs). An
// owner proven dead is replaced; one whose liveness is unknown is not.
func (db *DB) ClaimSlot(ctx context.Context, scope string, slot int, owner SlotOwner, now time.Time) (SlotClaim, error) {
	var out SlotClaim
	err := db.slotTx(ctx, func(q querier) error {
		out = SlotClaim{}
		sc, ok, err := getScope(ctx, q, scope)
		if err != nil {
			return err
		}
		if !ok {
			return &SlotError{Reason: RefuseNoScope, Message: "the scope was never admitted"}
		}
		switch sc.State {
		case ScopeInvalidated:
			return &SlotError{Reason: RefuseScopeInvalidated, Message: "this runner incarnation was reset"}
		case ScopeInvalidating:
			return &SlotError{Reason: RefuseScopePending, Message: "this runner incarnation's scope is being reset"}
		}
		cur, exists, err := getSlot(ctx, q, scope, slot)
		if err != nil {
			return err
		}
		if exists {
			live := db.ownerLiveness(ctx, cur.Owner)
			if cur.State == SlotSettling {
				if !provenGone(live) {
					return &SlotError{Reason: RefuseSlotSettling, Message: fmt.Sprintf("slot %d's previous execution is still settling", slot), Holder: cur.Owner}
				}
				cur.State, cur.SettlingSince = SlotReady, time.Time{} // its daemon is proven dead
				if cur.Device.StableID == "" {
					cur.State = SlotEmpty
				}
			}
			if cur.Owner != nil && !provenGone(live) && cur.Owner.Token != owner.Token {
				return &SlotError{Reason: RefuseSlotInUse, Message: fmt.Sprintf("slot %d is held by a live execution (daemon pid %d)", slot, cur.Owner.PID), Holder: cur.Owner}
			}
		} else {
			cur = SlotRecord{ScopeKey: scope, SlotIndex: slot, State: SlotEmpty}
		}
		out.Slot, out.Exists = cur, exists
		if out.Journal, err = openIntents(ctx, q, scope, slot); err != nil {
			return err
		}
		owner.Since = now
		if cur.Owner != nil && cur.Owner.Token == owner.Token && cur.Owner.Owner == owner.Owner {
			// The same execution claiming again has held the slot since
			// its first claim: a repeat that changes nothing else is no
			// slot change.
			owner.Since = cur.Owner.Since
		}
		cur.Owner = &owner
		if err := putSlot(ctx, q, cur); err != nil {
			return err
		}
		return touchScope(ctx, q, scope, now)
	})
	return out, err
}

// fenced loads the slot and checks that owner still holds it at generation
// gen (gen < 0 skips the generation check): a stale reconciler (a daemon
// that lost the slot while it worked) can never commit.
func fenced(ctx context.Context, q querier, scope string, slot int, token string, gen int64) (SlotRecord, error) {
	cur, ok, err := getSlot(ctx, q, scope, slot)
	if err != nil {
		return SlotRecord{}, err
	}
	if !ok || cur.Owner == nil || cur.Owner.Token != token {
		return SlotRecord{}, &SlotError{Reason: RefuseNotOwner, Message: fmt.Sprintf("slot %d is no longer held by this execution", slot)}
	}
	if gen >= 0 && cur.Generation != gen {
		return SlotRecord{}, &SlotError{Reason: RefuseStaleGeneration, Message: fmt.Sprintf("slot %d moved to generation %d (expected %d)", slot, cur.Generation, gen)}
	}
	return cur, nil
}

// OpenIntent journals a device step for the slot before it runs and
// consumes a generation; a delete or replace marks the slot replacing. It
// returns the entry and the slot's new generation.
func (db *DB) OpenIntent(ctx context.Context, in SlotIntent, token string, gen int64, now time.Time) (SlotIntent, int64, error) {
	var newGen int64
	err := db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, in.ScopeKey, in.SlotIndex, token, gen)
		if err != nil {
			return err
		}
		res, err := q.ExecContext(ctx, `INSERT INTO slot_journal (scope_key, slot_index, fp_hash, step, platform, old_stable_id, new_stable_id, opened_at) VALUES (?,?,?,?,?,?,?,?)`,
			in.ScopeKey, in.SlotIndex, in.FPHash, in.Step, in.Platform, in.OldStableID, in.NewStableID, ms(now))
		if err != nil {
			return fmt.Errorf("hostreg: journal: %w", err)
		}
		if in.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		in.OpenedAt = now
		if in.Step != StepCreate {
			if cur.Generation, err = nextFence(ctx, q); err != nil {
				return err
			}
			cur.State = SlotReplacing
			if err := putSlot(ctx, q, cur); err != nil {
				return err
			}
		}
		newGen = cur.Generation
		return nil
	})
	return in, newGen, err
}

// NoteIntentDevice records the stable id a create step made, as soon as
// the device exists, so a crash after it leaves a journal that names it.
func (db *DB) NoteIntentDevice(ctx context.Context, id int64, stableID string) error {
	return db.slotTx(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `UPDATE slot_journal SET new_stable_id = ? WHERE id = ? AND closed_at IS NULL AND new_stable_id != ?`, stableID, id, stableID)
		return err
	})
}

// CloseIntent closes a journal entry without a binding (a step that
// converged to nothing, or a retry that takes over the old entry).
func (db *DB) CloseIntent(ctx context.Context, id int64, now time.Time) error {
	return db.slotTx(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `UPDATE slot_journal SET closed_at = ? WHERE id = ? AND closed_at IS NULL`, ms(now), id)
		return err
	})
}

// Binding is what a reconciliation commits for a slot.
type Binding struct {
	Device    SlotDevice
	Requested json.RawMessage
	FPVersion int
	// Intents are the journal entries this binding completes.
	Intents []int64
	// FromFreePool is set when the device was adopted from the free pool.
	FromFreePool bool
}

// CommitBinding records the slot's device (ready) and consumes a new
// generation, closing its journal entries in the same transaction. It is
// fenced on the owner token and the generation the caller last saw.
func (db *DB) CommitBinding(ctx context.Context, scope string, slot int, token string, gen int64, b Binding, now time.Time) (SlotRecord, error) {
	var out SlotRecord
	err := db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, scope, slot, token, gen)
		if err != nil {
			return err
		}
		if b.FromFreePool {
			res, err := q.ExecContext(ctx, `DELETE FROM slot_free_pool WHERE stable_id = ?`, b.Device.StableID)
			if err != nil {
				return fmt.Errorf("hostreg: adopt: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return &SlotError{Reason: RefuseStaleGeneration, Message: "the free-pool device was adopted by another slot"}
			}
		}
		for _, id := range b.Intents {
			if _, err := q.ExecContext(ctx, `UPDATE slot_journal SET closed_at = ? WHERE id = ? AND closed_at IS NULL`, ms(now), id); err != nil {
				return fmt.Errorf("hostreg: close intent: %w", err)
			}
		}
		if cur.Generation, err = nextFence(ctx, q); err != nil {
			return err
		}
		cur.Device, cur.Requested, cur.FPVersion, cur.State = b.Device, b.Requested, b.FPVersion, SlotReady
		if err := putSlot(ctx, q, cur); err != nil {
			return err
		}
		out = cur
		return nil
	})
	return out, err
}

// MarkCleanupPending records that the slot's old device could not be
// proven deleted: the assignment keeps it (so nothing else takes it) and
// consumes a generation.
func (db *DB) MarkCleanupPending(ctx context.Context, scope string, slot int, token string) (SlotRecord, error) {
	var out SlotRecord
	err := db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, scope, slot, token, -1)
		if err != nil {
			return err
		}
		if cur.Generation, err = nextFence(ctx, q); err != nil {
			return err
		}
		cur.State = SlotCleanupPending
		if err := putSlot(ctx, q, cur); err != nil {
			return err
		}
		out = cur
		return nil
	})
	return out, err
}

// ClearSlotDevice empties the slot (its device was proven deleted and no
// replacement was made), consuming a generation.
func (db *DB) ClearSlotDevice(ctx context.Context, scope string, slot int, token string, intents []int64, now time.Time) (SlotRecord, error) {
	var out SlotRecord
	err := db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, scope, slot, token, -1)
		if err != nil {
			return err
		}
		for _, id := range intents {
			if _, err := q.ExecContext(ctx, `UPDATE slot_journal SET closed_at = ? WHERE id = ? AND closed_at IS NULL`, ms(now), id); err != nil {
				return err
			}
		}
		if cur.Generation, err = nextFence(ctx, q); err != nil {
			return err
		}
		cur.Device, cur.State = SlotDevice{}, SlotEmpty
		if err := putSlot(ctx, q, cur); err != nil {
			return err
		}
		out = cur
		return nil
	})
	return out, err
}

// BindLease records the execution's lease on the slot.
func (db *DB) BindLease(ctx context.Context, scope string, slot int, token, leaseID string) error {
	return db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, scope, slot, token, -1)
		if err != nil {
			return err
		}
		cur.Owner.LeaseID = leaseID
		return putSlot(ctx, q, cur)
	})
}

// ReleaseSlot ends the slot's execution (token must hold it). settling
// keeps the owner recorded and marks the slot settling: released work
// still runs, and the slot refuses a new execution until SettleSlot or the
// daemon's proven death. The device stays assigned either way.
func (db *DB) ReleaseSlot(ctx context.Context, scope string, slot int, token string, settling bool, now time.Time) error {
	return db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, scope, slot, token, -1)
		if err != nil {
			return err
		}
		if settling {
			if cur.Generation, err = nextFence(ctx, q); err != nil {
				return err
			}
			cur.State, cur.SettlingSince = SlotSettling, now
		} else {
			cur.Owner = nil
			if cur.State == SlotReplacing {
				// The reconciler gave up mid-way. While the journal still
				// holds its replace step the slot stays replacing, at the
				// generation that fenced it: the old device may be gone,
				// and the next acquisition converges the step.
				open, err := openIntents(ctx, q, scope, slot)
				if err != nil {
					return err
				}
				if !fencingStep(open) {
					cur.State = SlotReady
				}
			}
		}
		if err := putSlot(ctx, q, cur); err != nil {
			return err
		}
		return touchScope(ctx, q, scope, now)
	})
}

// fencingStep says an open journal entry is a replace or a delete: a step
// that put the slot in replacing.
func fencingStep(open []SlotIntent) bool {
	for _, in := range open {
		if in.Step != StepCreate {
			return true
		}
	}
	return false
}

// SettleSlot ends a settling slot (its released work finished).
func (db *DB) SettleSlot(ctx context.Context, scope string, slot int, token string, now time.Time) error {
	return db.slotTx(ctx, func(q querier) error {
		cur, err := fenced(ctx, q, scope, slot, token, -1)
		if err != nil {
			return err
		}
		cur.Owner, cur.State, cur.SettlingSince = nil, SlotReady, time.Time{}
		if cur.Device.StableID == "" {
			cur.State = SlotEmpty
		}
		return putSlot(ctx, q, cur)
	})
}

// ReownSlot moves a slot's execution to owner (a restarted daemon
// rehydrating its lease): allowed only when the recorded owner is proven
// gone and the lease is the same.
func (db *DB) ReownSlot(ctx context.Context, scope string, slot int, leaseID string, owner Owner) (SlotRecord, error) {
	var out SlotRecord
	err := db.slotTx(ctx, func(q querier) error {
		cur, ok, err := getSlot(ctx, q, scope, slot)
		if err != nil {
			return err
		}
		if !ok || cur.Owner == nil || cur.Owner.LeaseID != leaseID {
			return &SlotError{Reason: RefuseNotOwner, Message: "the slot is not held by this lease"}
		}
		if cur.Owner.Owner != owner && !provenGone(db.ownerLiveness(ctx, cur.Owner)) {
			return &SlotError{Reason: RefuseSlotInUse, Message: "another live daemon owns the slot", Holder: cur.Owner}
		}
		cur.Owner.Owner = owner
		if err := putSlot(ctx, q, cur); err != nil {
			return err
		}
		out = cur
		return nil
	})
	return out, err
}

// SlotsOwnedBy lists the slots whose execution daemon is owner.
func (db *DB) SlotsOwnedBy(ctx context.Context, home string) ([]SlotRecord, error) {
	all, err := db.Slots(ctx)
	if err != nil {
		return nil, err
	}
	var out []SlotRecord
	for _, s := range all {
		if s.Owner != nil && s.Owner.Home == home {
			out = append(out, s)
		}
	}
	return out, nil
}

// Slots lists every assignment.
func (db *DB) Slots(ctx context.Context) ([]SlotRecord, error) {
	return slotsOf(ctx, db.sql, "")
}

// Slot reads one assignment.
func (db *DB) Slot(ctx context.Context, scope string, slot int) (SlotRecord, bool, error) {
	return getSlot(ctx, db.sql, scope, slot)
}

// Scopes lists every scope.
func (db *DB) Scopes(ctx context.Context) ([]SlotScope, error) {
	return scopesWhere(ctx, db.sql, "")
}

// Scope reads one scope.
func (db *DB) Scope(ctx context.Context, key string) (SlotScope, bool, error) {
	return getScope(ctx, db.sql, key)
}

// OpenIntents lists every open journal entry.
func (db *DB) OpenIntents(ctx context.Context) ([]SlotIntent, error) {
	return openIntents(ctx, db.sql, "", -1)
}

// FreePool lists the free pool.
func (db *DB) FreePool(ctx context.Context) ([]FreeDevice, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT stable_id, platform, name, device_home, resolved_spec, fp_hash, from_scope, freed_at FROM slot_free_pool ORDER BY freed_at, stable_id`)
	if err != nil {
		return nil, fmt.Errorf("hostreg: free pool: %w", err)
	}
	defer rows.Close()
	var out []FreeDevice
	for rows.Next() {
		var f FreeDevice
		var res string
		var freed int64
		if err := rows.Scan(&f.StableID, &f.Platform, &f.Name, &f.DeviceHome, &res, &f.FPHash, &f.FromScope, &freed); err != nil {
			return nil, err
		}
		f.Resolved, f.FreedAt = json.RawMessage(res), fromMs(freed)
		out = append(out, f)
	}
	return out, rows.Err()
}

// DropFreeDevice forgets a free-pool device (it was deleted).
func (db *DB) DropFreeDevice(ctx context.Context, stableID string) error {
	return db.slotTx(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `DELETE FROM slot_free_pool WHERE stable_id = ?`, stableID)
		return err
	})
}

// FreePoolLabel is ManagedDevices' label of a free-pool device.
const FreePoolLabel = "free-pool"

// ManagedDevices maps every device the slots hold (assigned or in the
// free pool) to its slot key (SlotKey) or FreePoolLabel, for the engines'
// general-pool predicate.
func (db *DB) ManagedDevices(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	slots, err := db.Slots(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range slots {
		if s.Device.StableID != "" {
			out[s.Device.StableID] = SlotKey(s.ScopeKey, s.SlotIndex)
		}
	}
	free, err := db.FreePool(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range free {
		out[f.StableID] = FreePoolLabel
	}
	return out, nil
}

// SlotKey names a scoped slot in one string (the engines' assignment label).
func SlotKey(scope string, slot int) string { return fmt.Sprintf("%s/%d", scope, slot) }
