package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/core"
)

var _ core.Store = (*DB)(nil)

const deviceColumns = `id, platform, handle, name, state, spec, attrs, simulated,
	state_since, created_at, last_leased_at, last_released_at, data, health, intent`

const leaseColumns = `id, device_id, requester_id, owner_id, platform, ttl_ms,
	granted_at, expires_at, last_renewed_at, request_id, timing, members, release_policy`

// ON CONFLICT DO UPDATE rather than INSERT OR REPLACE: REPLACE would silently
// delete any other row that collides on a UNIQUE column (a second lease for
// the same requester), which must fail the change set instead.
const upsertDevice = `INSERT INTO devices (` + deviceColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET
		platform = excluded.platform, handle = excluded.handle, name = excluded.name,
		state = excluded.state, spec = excluded.spec, attrs = excluded.attrs,
		simulated = excluded.simulated, state_since = excluded.state_since,
		created_at = excluded.created_at, last_leased_at = excluded.last_leased_at,
		last_released_at = excluded.last_released_at, data = excluded.data, health = excluded.health,
		intent = excluded.intent`

const deleteLease = `DELETE FROM leases WHERE id = ?`

const upsertLease = `INSERT INTO leases (` + leaseColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET
		device_id = excluded.device_id, requester_id = excluded.requester_id,
		owner_id = excluded.owner_id, platform = excluded.platform,
		ttl_ms = excluded.ttl_ms, granted_at = excluded.granted_at,
		expires_at = excluded.expires_at, last_renewed_at = excluded.last_renewed_at,
		request_id = excluded.request_id, timing = excluded.timing, members = excluded.members,
		release_policy = excluded.release_policy`

// Load reads the whole registry, devices ordered by creation and leases by
// grant time (ties broken by ID). Times come back in UTC.
func (db *DB) Load(ctx context.Context) (core.Snapshot, error) {
	var snap core.Snapshot
	err := db.view(ctx, func(q querier) error {
		var err error
		if snap.Devices, err = loadDevices(ctx, q); err != nil {
			return err
		}
		snap.Leases, err = loadLeases(ctx, q)
		return err
	})
	return snap, err
}

// Apply commits c atomically: all of it or, on any error, none of it.
// Deletes run before puts because SQLite checks UNIQUE per statement, and a
// change set may drop a lease and grant a new one to the same requester; so
// a put wins over a delete of the same ID. The lease→device reference is
// checked at commit, so the order of devices and leases does not matter.
// Deleting an absent ID is not an error.
func (db *DB) Apply(ctx context.Context, c core.Changes) error {
	return db.ApplyBatch(ctx, []core.Changes{c})
}

var _ core.BatchStore = (*DB)(nil)

// ApplyBatch commits several change sets in one transaction, each applied
// in turn with Apply's rules, so the engine's single writer pays one fsync
// for whatever queued up while the last commit ran (group commit). All of
// them or, on any error, none of them.
func (db *DB) ApplyBatch(ctx context.Context, cs []core.Changes) error {
	// Encode first, so a record that cannot be stored fails before the
	// write lock is taken.
	devArgs := make([][][]any, len(cs))
	empty := true
	for j, c := range cs {
		if !c.Empty() {
			empty = false
		}
		devArgs[j] = make([][]any, len(c.PutDevices))
		for i, d := range c.PutDevices {
			args, err := deviceArgs(d)
			if err != nil {
				return fmt.Errorf("store: device %s: %w", d.ID, err)
			}
			devArgs[j][i] = args
		}
	}
	if empty {
		return nil
	}
	return db.writeTx(ctx, func(q querier) error {
		for j, c := range cs {
			if err := applyIn(ctx, q, c, devArgs[j]); err != nil {
				return err
			}
		}
		return nil
	})
}

func applyIn(ctx context.Context, q querier, c core.Changes, devArgs [][]any) error {
	for _, id := range c.DeleteLeases {
		if _, err := q.ExecContext(ctx, deleteLease, id); err != nil {
			return fmt.Errorf("store: delete lease %s: %w", id, err)
		}
	}
	for _, id := range c.DeleteDevices {
		if _, err := q.ExecContext(ctx, `DELETE FROM devices WHERE id = ?`, id); err != nil {
			return fmt.Errorf("store: delete device %s: %w", id, err)
		}
	}
	for i, args := range devArgs {
		if _, err := q.ExecContext(ctx, upsertDevice, args...); err != nil {
			return fmt.Errorf("store: put device %s: %w", c.PutDevices[i].ID, err)
		}
	}
	for _, r := range c.PutRequests {
		if err := putRequest(ctx, q, r); err != nil {
			return err
		}
	}
	if err := deleteRequests(ctx, q, c.DeleteRequests); err != nil {
		return err
	}
	for _, l := range c.PutLeases {
		args, err := leaseArgs(l)
		if err != nil {
			return fmt.Errorf("store: lease %s: %w", l.ID, err)
		}
		if _, err := q.ExecContext(ctx, upsertLease, args...); err != nil {
			return fmt.Errorf("store: put lease %s: %w", l.ID, err)
		}
	}
	return nil
}

func deviceArgs(d core.DeviceRecord) ([]any, error) {
	// Spec.Data is re-encoded inside the spec JSON, so it reads back
	// compacted; DeviceRecord.Data has its own column and stays verbatim.
	spec, err := json.Marshal(d.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	attrs, err := encodeAttrs(d.Attrs)
	if err != nil {
		return nil, fmt.Errorf("encode attrs: %w", err)
	}
	var health any // NULL when there is nothing to remember
	if d.Health != (core.DeviceHealth{}) || d.ReuseCount != 0 || d.OwnerSystem != "" {
		// The reuse count rides in the health column's JSON: core
		// bookkeeping of the device, with no migration of its own.
		b, err := json.Marshal(healthColumn{DeviceHealth: d.Health, ReuseCount: d.ReuseCount, OwnerSystem: d.OwnerSystem})
		if err != nil {
			return nil, fmt.Errorf("encode health: %w", err)
		}
		health = string(b)
	}
	var intent any
	if d.Intent != (core.DeviceIntent{}) {
		b, err := json.Marshal(d.Intent)
		if err != nil {
			return nil, fmt.Errorf("encode intent: %w", err)
		}
		intent = string(b)
	}
	return []any{
		d.ID, d.Platform, d.Handle, d.Name, string(d.State), string(spec), attrs, d.Simulated,
		unixMs(d.StateSince), unixMs(d.CreatedAt), unixMs(d.LastLeasedAt), unixMs(d.LastReleasedAt),
		encodeRaw(d.Data), health, intent,
	}, nil
}

func leaseArgs(l core.LeaseRecord) ([]any, error) {
	timing, err := encodeTiming(l.Timing)
	if err != nil {
		return nil, err
	}
	var members any // NULL for a lease of one device
	if len(l.Members) > 0 {
		b, err := json.Marshal(l.Members)
		if err != nil {
			return nil, err
		}
		members = string(b)
	}
	var release any // NULL for the pool's own purge
	if !l.Release.IsZero() {
		b, err := json.Marshal(l.Release)
		if err != nil {
			return nil, err
		}
		release = string(b)
	}
	return []any{
		l.ID, l.DeviceID, l.RequesterID, l.OwnerID, l.Platform, l.TTL.Milliseconds(),
		unixMs(l.GrantedAt), unixMs(l.ExpiresAt), unixMs(l.LastRenewedAt), nullString(l.RequestID), timing, members, release,
	}, nil
}

func loadDevices(ctx context.Context, q querier) ([]core.DeviceRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+deviceColumns+` FROM devices ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: load devices: %w", err)
	}
	defer rows.Close()
	var out []core.DeviceRecord
	for rows.Next() {
		var (
			d                                core.DeviceRecord
			state, spec                      string
			attrs, data, health, intent      sql.NullString
			since, created, leased, released sql.NullInt64
		)
		if err := rows.Scan(&d.ID, &d.Platform, &d.Handle, &d.Name, &state, &spec, &attrs, &d.Simulated,
			&since, &created, &leased, &released, &data, &health, &intent); err != nil {
			return nil, fmt.Errorf("store: load devices: %w", err)
		}
		d.State = core.DeviceState(state)
		if err := json.Unmarshal([]byte(spec), &d.Spec); err != nil {
			return nil, fmt.Errorf("store: device %s: decode spec: %w", d.ID, err)
		}
		if d.Attrs, err = decodeAttrs(attrs); err != nil {
			return nil, fmt.Errorf("store: device %s: decode attrs: %w", d.ID, err)
		}
		d.StateSince = fromUnixMs(since)
		d.CreatedAt = fromUnixMs(created)
		d.LastLeasedAt = fromUnixMs(leased)
		d.LastReleasedAt = fromUnixMs(released)
		d.Data = decodeRaw(data)
		if health.Valid {
			var hc healthColumn
			if err := json.Unmarshal([]byte(health.String), &hc); err != nil {
				return nil, fmt.Errorf("store: device %s: decode health: %w", d.ID, err)
			}
			d.Health, d.ReuseCount, d.OwnerSystem = hc.DeviceHealth, hc.ReuseCount, hc.OwnerSystem
			d.Health.NextRetryAt = d.Health.NextRetryAt.UTC()
			d.Health.RecoveringSince = d.Health.RecoveringSince.UTC()
		}
		if intent.Valid {
			if err := json.Unmarshal([]byte(intent.String), &d.Intent); err != nil {
				return nil, fmt.Errorf("store: device %s: decode intent: %w", d.ID, err)
			}
			d.Intent.Since = d.Intent.Since.UTC()
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: load devices: %w", err)
	}
	return out, nil
}

func loadLeases(ctx context.Context, q querier) ([]core.LeaseRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases ORDER BY granted_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: load leases: %w", err)
	}
	defer rows.Close()
	var out []core.LeaseRecord
	for rows.Next() {
		var (
			l                         core.LeaseRecord
			ttl                       int64
			granted, expires, renewed sql.NullInt64
			requestID, timing         sql.NullString
			members, release          sql.NullString
		)
		if err := rows.Scan(&l.ID, &l.DeviceID, &l.RequesterID, &l.OwnerID, &l.Platform, &ttl,
			&granted, &expires, &renewed, &requestID, &timing, &members, &release); err != nil {
			return nil, fmt.Errorf("store: load leases: %w", err)
		}
		l.TTL = time.Duration(ttl) * time.Millisecond
		l.GrantedAt = fromUnixMs(granted)
		l.ExpiresAt = fromUnixMs(expires)
		l.LastRenewedAt = fromUnixMs(renewed)
		l.RequestID = requestID.String
		if l.Timing, err = decodeTiming(timing); err != nil {
			return nil, fmt.Errorf("store: lease %s: %w", l.ID, err)
		}
		if members.Valid {
			if err := json.Unmarshal([]byte(members.String), &l.Members); err != nil {
				return nil, fmt.Errorf("store: lease %s: decode members: %w", l.ID, err)
			}
		}
		if release.Valid {
			if err := json.Unmarshal([]byte(release.String), &l.Release); err != nil {
				return nil, fmt.Errorf("store: lease %s: decode release policy: %w", l.ID, err)
			}
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: load leases: %w", err)
	}
	return out, nil
}

// healthColumn is the devices table's health JSON: the core's health
// bookkeeping and the device's reuse count beside it.
type healthColumn struct {
	core.DeviceHealth
	ReuseCount int `json:"reuseCount,omitempty"`
	// OwnerSystem is the device's owner-system mark (core.DeviceRecord),
	// kept here for the same reason: no migration.
	OwnerSystem string `json:"ownerSystem,omitempty"`
}
