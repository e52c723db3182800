package hostreg

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// RecordVersion is the layout of one claim row this binary writes. It is
// stored per row so a reader can tell a record it does not understand
// (inconsistent, fail closed) from a corrupt one.
const RecordVersion = 1

// Kind says why a device is claimed.
type Kind string

const (
	KindLease     Kind = "lease"     // held for the life of a lease
	KindTransient Kind = "transient" // held for one command outside a lease
)

// State is the claim's lifecycle state as its owner wrote it.
type State string

const (
	StateClaimed       State = "claimed"
	StateReleasing     State = "releasing"      // teardown under way
	StateReleaseFailed State = "release-failed" // teardown stopped; FailedSteps says where
)

// Owner identifies the process that holds a claim. PID plus Start proves
// liveness: a pid alone may have been reused by an unrelated process.
type Owner struct {
	Home  string // the owning daemon's SIMLOCK_HOME, absolute
	PID   int
	Start string // the process start identity, as the Prober reports it
}

func (o Owner) same(p Owner) bool { return o == p }

// Claim is one device's claim record. It holds no token or secret: every
// simlock process of the user, and `simlock device status`, may read it.
type Claim struct {
	Key         Key
	Kind        Kind
	Command     string // transient claims: the command that holds it
	Owner       Owner
	LeaseID     string // lease claims
	ClaimedAt   time.Time
	State       State
	FailedSteps []string // release-failed only
}

// validate rejects a record that is unparsable or contradictory. It is the
// single judge for both writing (a bad claim is never stored) and reading
// (a bad row is inconsistent).
func (c Claim) validate() error {
	if _, err := ParseKey(string(c.Key)); err != nil {
		return err
	}
	switch c.Kind {
	case KindLease:
		if c.LeaseID == "" {
			return errors.New("lease claim without a lease id")
		}
		if c.Command != "" {
			return errors.New("lease claim with a command")
		}
	case KindTransient:
		if c.Command == "" {
			return errors.New("transient claim without a command")
		}
		if c.LeaseID != "" {
			return errors.New("transient claim with a lease id")
		}
	default:
		return fmt.Errorf("unknown claim kind %q", c.Kind)
	}
	if c.Owner.Home == "" || !filepath.IsAbs(c.Owner.Home) || strings.ContainsRune(c.Owner.Home, 0) {
		return fmt.Errorf("owner home %q is not an absolute path", c.Owner.Home)
	}
	if c.Owner.PID <= 0 {
		return fmt.Errorf("owner pid %d", c.Owner.PID)
	}
	if c.Owner.Start == "" {
		return errors.New("owner start time missing")
	}
	if c.ClaimedAt.IsZero() || c.ClaimedAt.UnixMilli() <= 0 {
		return errors.New("claimedAt missing")
	}
	switch c.State {
	case StateClaimed, StateReleasing:
		if len(c.FailedSteps) > 0 {
			return fmt.Errorf("state %s with failed steps", c.State)
		}
	case StateReleaseFailed:
		if len(c.FailedSteps) == 0 {
			return errors.New("release-failed without failed steps")
		}
		for _, s := range c.FailedSteps {
			if s == "" {
				return errors.New("empty failed step")
			}
		}
	default:
		return fmt.Errorf("unknown claim state %q", c.State)
	}
	return nil
}

// row is a claims row as stored, before judgement.
type row struct {
	Key           string
	RecordVersion int64
	Kind          string
	Command       string
	Home          string
	PID           int64
	Start         string
	LeaseID       string
	ClaimedAtMs   int64
	State         string
	FailedSteps   sql.NullString
}

const selectColumns = `device_key, record_version, kind, command, owner_home, owner_pid, owner_start,
	lease_id, claimed_at, state, failed_steps`

// scanRow reads one row. Values are scanned untyped and converted here, so
// that a wrongly typed value (errUnscannable: the row is inconsistent) is
// told apart from a failed read (any other error: fail closed, retry).
func scanRow(s interface{ Scan(...any) error }) (row, error) {
	v := make([]any, 11)
	p := make([]any, len(v))
	for i := range v {
		p[i] = &v[i]
	}
	if err := s.Scan(p...); err != nil {
		return row{}, err
	}
	var r row
	var bad []string
	str := func(i int, dst *string) {
		switch x := v[i].(type) {
		case string:
			*dst = x
		case []byte:
			*dst = string(x)
		default:
			bad = append(bad, fmt.Sprintf("column %d is %T", i, x))
		}
	}
	num := func(i int, dst *int64) {
		if x, ok := v[i].(int64); ok {
			*dst = x
		} else {
			bad = append(bad, fmt.Sprintf("column %d is %T", i, v[i]))
		}
	}
	str(0, &r.Key)
	num(1, &r.RecordVersion)
	str(2, &r.Kind)
	str(3, &r.Command)
	str(4, &r.Home)
	num(5, &r.PID)
	str(6, &r.Start)
	str(7, &r.LeaseID)
	num(8, &r.ClaimedAtMs)
	str(9, &r.State)
	if v[10] != nil {
		r.FailedSteps.Valid = true
		str(10, &r.FailedSteps.String)
	}
	if len(bad) > 0 {
		return r, errUnscannable{errors.New(strings.Join(bad, ", "))}
	}
	return r, nil
}

// decode judges a stored row. Any error means the row is inconsistent.
func decode(r row) (Claim, error) {
	if r.RecordVersion != RecordVersion {
		return Claim{}, fmt.Errorf("record version %d (this simlock writes %d)", r.RecordVersion, RecordVersion)
	}
	const maxPID = 1 << 31
	if r.PID <= 0 || r.PID >= maxPID {
		return Claim{}, fmt.Errorf("owner pid %d", r.PID)
	}
	c := Claim{
		Key: Key(r.Key), Kind: Kind(r.Kind), Command: r.Command, LeaseID: r.LeaseID,
		Owner:     Owner{Home: r.Home, PID: int(r.PID), Start: r.Start},
		ClaimedAt: time.UnixMilli(r.ClaimedAtMs).UTC(), State: State(r.State),
	}
	if r.FailedSteps.Valid {
		if err := json.Unmarshal([]byte(r.FailedSteps.String), &c.FailedSteps); err != nil {
			return Claim{}, fmt.Errorf("failed steps: %w", err)
		}
		if c.FailedSteps == nil { // "null" is not a way to store none
			return Claim{}, errors.New("failed steps: null")
		}
	}
	if err := c.validate(); err != nil {
		return Claim{}, err
	}
	return c, nil
}

func encode(c Claim) (row, error) {
	if err := c.validate(); err != nil {
		return row{}, fmt.Errorf("hostreg: invalid claim: %w", err)
	}
	r := row{
		Key: string(c.Key), RecordVersion: RecordVersion, Kind: string(c.Kind), Command: c.Command,
		Home: c.Owner.Home, PID: int64(c.Owner.PID), Start: c.Owner.Start, LeaseID: c.LeaseID,
		ClaimedAtMs: c.ClaimedAt.UnixMilli(), State: string(c.State),
	}
	if len(c.FailedSteps) > 0 {
		b, err := json.Marshal(c.FailedSteps)
		if err != nil {
			return row{}, err
		}
		r.FailedSteps = sql.NullString{String: string(b), Valid: true}
	}
	return r, nil
}

func upsert(ctx context.Context, q querier, r row) error {
	_, err := q.ExecContext(ctx, `INSERT INTO claims (`+selectColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (device_key) DO UPDATE SET
			record_version = excluded.record_version, kind = excluded.kind, command = excluded.command,
			owner_home = excluded.owner_home, owner_pid = excluded.owner_pid, owner_start = excluded.owner_start,
			lease_id = excluded.lease_id, claimed_at = excluded.claimed_at, state = excluded.state,
			failed_steps = excluded.failed_steps`,
		r.Key, r.RecordVersion, r.Kind, r.Command, r.Home, r.PID, r.Start, r.LeaseID, r.ClaimedAtMs, r.State, r.FailedSteps)
	if err != nil {
		return fmt.Errorf("hostreg: write claim %s: %w", r.Key, err)
	}
	return bump(ctx, q)
}

func bump(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, `UPDATE generation SET value = value + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("hostreg: bump generation: %w", err)
	}
	return nil
}

// Generation is a counter every claim change increments. Polling it is
// one read of one row; a daemon refreshes its view of foreign claims only
// when it moved.
func (db *DB) Generation(ctx context.Context) (int64, error) {
	var g int64
	if err := db.sql.QueryRowContext(ctx, `SELECT value FROM generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, damaged(db.file, fmt.Errorf("hostreg: read generation: %w", err))
	}
	return g, nil
}

// Generations are the registry's two change counters: Claims moves with
// every claim change, Slots with every committed slot decision.
type Generations struct {
	Claims int64
	Slots  int64
}

// Generations reads both counters in one single-row read, so a daemon
// polls one row to follow claims and slots alike.
func (db *DB) Generations(ctx context.Context) (Generations, error) {
	var g Generations
	if err := db.sql.QueryRowContext(ctx, `SELECT value, slots FROM generation WHERE id = 1`).Scan(&g.Claims, &g.Slots); err != nil {
		return Generations{}, damaged(db.file, fmt.Errorf("hostreg: read generations: %w", err))
	}
	return g, nil
}

// current reads key's row under the caller's transaction. ok is false when
// the device is free.
func current(ctx context.Context, q querier, key Key) (r row, ok bool, err error) {
	r, err = scanRow(q.QueryRowContext(ctx, `SELECT `+selectColumns+` FROM claims WHERE device_key = ?`, string(key)))
	var u errUnscannable
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return row{}, false, nil
	case errors.As(err, &u):
		// Wrongly typed columns: as inconsistent as a row that does not
		// validate, and held all the same.
		r.Key = string(key)
		return r, true, err
	case err != nil:
		// Not a verdict on the row: the caller fails without deciding.
		return row{}, false, fmt.Errorf("hostreg: read claim %s: %w", key, err)
	}
	return r, true, nil
}

type errUnscannable struct{ err error }

func (e errUnscannable) Error() string { return "unreadable claim row: " + e.err.Error() }

// Claim records c for its device, or refuses with *ConflictError when
// another owner holds it, whatever that owner's state: an orphaned claim
// is cleared only by explicit recovery (Adopt, or `device release --stale`),
// because the device may still be in the state the dead owner left it in.
// The same owner (home, pid and start) claiming again replaces its record,
// so a lease may take over its own transient claim and vice versa.
// c.State must be StateClaimed (or empty). c.ClaimedAt is the caller's
// clock reading: the registry reads no clock, so tests stay deterministic.
func (db *DB) Claim(ctx context.Context, c Claim) error {
	if c.State == "" {
		c.State = StateClaimed
	}
	if c.State != StateClaimed {
		return fmt.Errorf("hostreg: a new claim must be %s, not %s", StateClaimed, c.State)
	}
	r, err := encode(c)
	if err != nil {
		return err
	}
	return db.immediate(ctx, func(q querier) error {
		cur, held, err := current(ctx, q, c.Key)
		if held {
			if err == nil {
				if prev, derr := decode(cur); derr == nil && prev.Owner.same(c.Owner) {
					return upsert(ctx, q, r)
				}
			}
			return db.conflict(ctx, ReasonHeld, c.Key, cur, err)
		}
		if err != nil {
			return err
		}
		return upsert(ctx, q, r)
	})
}

// Adopt lets a daemon take over the claims its own home's previous,
// now-dead daemon left behind: it replaces the record only when the
// current owner has c's home and is proven orphaned now, inside the
// transaction. It returns the record it replaced (with any failed steps,
// so the adopter knows what teardown is left). The home's own store and
// crash recovery know the device's platform state, which is why only the
// same home may adopt; another home must use `device release --stale`.
func (db *DB) Adopt(ctx context.Context, c Claim) (Claim, error) {
	if c.State == "" {
		c.State = StateClaimed
	}
	r, err := encode(c)
	if err != nil {
		return Claim{}, err
	}
	var prev Claim
	err = db.immediate(ctx, func(q querier) error {
		cur, held, err := current(ctx, q, c.Key)
		if !held {
			if err != nil {
				return err
			}
			return upsert(ctx, q, r)
		}
		if err != nil {
			return db.conflict(ctx, ReasonHeld, c.Key, cur, err)
		}
		old, derr := decode(cur)
		if derr != nil {
			return db.conflict(ctx, ReasonHeld, c.Key, cur, derr)
		}
		if old.Owner.same(c.Owner) {
			prev = old
			return upsert(ctx, q, r)
		}
		st := classify(ctx, db.prober, cur)
		// Another daemon's reclaim of the device is under way (ADR 0059):
		// the device is being shut down under this home's dead owner.
		if old.Owner.Home != c.Owner.Home || st.Class != ClassOrphaned || st.BeingReclaimed() {
			return conflictFrom(ReasonHeld, st)
		}
		prev = old
		return upsert(ctx, q, r)
	})
	return prev, err
}

// Release clears key's claim when owner holds it; it is the last step of a
// teardown. Releasing a free device succeeds (the claim is already gone).
func (db *DB) Release(ctx context.Context, key Key, owner Owner) error {
	return db.immediate(ctx, func(q querier) error {
		cur, err := db.owned(ctx, q, key, owner)
		if err != nil || cur == nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM claims WHERE device_key = ?`, string(key)); err != nil {
			return fmt.Errorf("hostreg: release %s: %w", key, err)
		}
		return bump(ctx, q)
	})
}

// MarkReleasing records that owner has started tearing key's device down.
func (db *DB) MarkReleasing(ctx context.Context, key Key, owner Owner) error {
	return db.setState(ctx, key, owner, StateReleasing, nil)
}

// MarkReleaseFailed records that owner's teardown stopped at steps; the
// claim stays, so nobody else takes a device in an unknown state.
func (db *DB) MarkReleaseFailed(ctx context.Context, key Key, owner Owner, steps []string) error {
	if len(steps) == 0 {
		return errors.New("hostreg: release-failed needs the failed steps")
	}
	return db.setState(ctx, key, owner, StateReleaseFailed, steps)
}

func (db *DB) setState(ctx context.Context, key Key, owner Owner, s State, steps []string) error {
	return db.immediate(ctx, func(q querier) error {
		cur, err := db.owned(ctx, q, key, owner)
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("hostreg: %s is not claimed: %w", key, ErrNotClaimed)
		}
		cur.State, cur.FailedSteps = s, steps
		r, err := encode(*cur)
		if err != nil {
			return err
		}
		return upsert(ctx, q, r)
	})
}

// ErrNotClaimed is wrapped when a state change names a free device.
var ErrNotClaimed = errors.New("device not claimed")

// owned returns key's claim if owner holds it, nil if the device is free,
// and a *ConflictError if anyone else (or an unreadable record) holds it.
func (db *DB) owned(ctx context.Context, q querier, key Key, owner Owner) (*Claim, error) {
	cur, held, err := current(ctx, q, key)
	if !held {
		return nil, err
	}
	if err != nil {
		return nil, db.conflict(ctx, ReasonNotOwner, key, cur, err)
	}
	c, derr := decode(cur)
	if derr != nil || !c.Owner.same(owner) {
		return nil, db.conflict(ctx, ReasonNotOwner, key, cur, derr)
	}
	return &c, nil
}

// conflict classifies the holder for the error. A row that could not be
// scanned is inconsistent without asking the prober.
func (db *DB) conflict(ctx context.Context, reason string, key Key, cur row, scanErr error) error {
	var st Status
	var u errUnscannable
	if errors.As(scanErr, &u) {
		st = Status{Key: key, Class: ClassInconsistent, Detail: u.Error()}
	} else {
		st = classify(ctx, db.prober, cur)
	}
	return conflictFrom(reason, st)
}
