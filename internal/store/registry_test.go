package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

func fullDevice(id string) core.DeviceRecord {
	return core.DeviceRecord{
		ID:       id,
		Platform: "ios",
		Handle:   "UDID-" + id,
		Name:     "simlock " + id,
		Spec: core.Spec{
			Platform:  "ios",
			Model:     "iPhone 16",
			ModelID:   "com.apple.CoreSimulator.SimDeviceType.iPhone-16",
			OSVersion: "18.0",
			RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-18-0",
			Data:      json.RawMessage(`{"arch":["arm64"]}`),
		},
		Attrs:          map[string]string{core.AttrUDID: "UDID-" + id, "env:FOO": "bar"},
		Simulated:      true,
		State:          core.StateLeased,
		StateSince:     ms(1700000003000),
		CreatedAt:      ms(1700000000001),
		LastLeasedAt:   ms(1700000002999),
		LastReleasedAt: ms(1700000001500),
		// Whitespace and key order are the driver's business: kept verbatim.
		Data: json.RawMessage(" {\"z\": 1,\n \"a\": [true, null]} "),
		Health: core.DeviceHealth{QuarantineReason: "purge-failed", QuarantineOp: core.OpKindDestroy, QuarantineAttempts: 2,
			NextRetryAt: ms(1700000009000), RecoveryAttempts: 1, RecoveringSince: ms(1700000008000)},
		Intent: core.DeviceIntent{Op: core.OpKindReclaim, Since: ms(1700000007000)},
	}
}

func fullLease(id, deviceID, requesterID string) core.LeaseRecord {
	return core.LeaseRecord{
		ID:            id,
		DeviceID:      deviceID,
		RequesterID:   requesterID,
		OwnerID:       "owner-" + requesterID,
		Platform:      "ios",
		TTL:           90*time.Second + 250*time.Millisecond,
		GrantedAt:     ms(1700000003000),
		ExpiresAt:     ms(1700000093250),
		LastRenewedAt: ms(1700000004000),
	}
}

func assertSnapshot(t *testing.T, got core.Snapshot, devs []core.DeviceRecord, leases []core.LeaseRecord) {
	t.Helper()
	if !reflect.DeepEqual(got.Devices, devs) {
		t.Errorf("devices:\n got %#v\nwant %#v", got.Devices, devs)
	}
	if !reflect.DeepEqual(got.Leases, leases) {
		t.Errorf("leases:\n got %#v\nwant %#v", got.Leases, leases)
	}
}

func TestDeviceRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		dev  core.DeviceRecord
	}{
		{"every field", fullDevice("d1")},
		{"zero values", core.DeviceRecord{ID: "d1"}},
		{"empty attrs stay empty, not nil", core.DeviceRecord{ID: "d1", Attrs: map[string]string{}}},
		{"JSON null data", core.DeviceRecord{ID: "d1", Data: json.RawMessage(`null`)}},
		{"unicode", core.DeviceRecord{ID: "d1", Name: "Pixel ☃ 9", Attrs: map[string]string{"ключ": "值"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := newTestDB(t)
			if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{tt.dev}}); err != nil {
				t.Fatal(err)
			}
			snap, err := db.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			assertSnapshot(t, snap, []core.DeviceRecord{tt.dev}, nil)
		})
	}
}

func TestLeaseRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		lease core.LeaseRecord
	}{
		{"every field", fullLease("l1", "d1", "r1")},
		{"zero values", core.LeaseRecord{ID: "l1", DeviceID: "d1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := newTestDB(t)
			dev := core.DeviceRecord{ID: "d1"}
			if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{dev}, PutLeases: []core.LeaseRecord{tt.lease}}); err != nil {
				t.Fatal(err)
			}
			snap, err := db.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			assertSnapshot(t, snap, []core.DeviceRecord{dev}, []core.LeaseRecord{tt.lease})
		})
	}
}

// The documented lossy edges: times come back in UTC at millisecond
// precision, and Spec.Data comes back compacted.
func TestRoundTripNormalisation(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	zone := time.FixedZone("X", 5*3600)
	at := time.Date(2025, 6, 1, 12, 0, 0, 123_456_789, zone)
	dev := core.DeviceRecord{ID: "d1", CreatedAt: at, Spec: core.Spec{Data: json.RawMessage(`{ "a" : 1 }`)}}
	lease := core.LeaseRecord{ID: "l1", DeviceID: "d1", TTL: 1500*time.Microsecond + 3*time.Second}
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{dev}, PutLeases: []core.LeaseRecord{lease}}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Devices[0]
	if want := at.Truncate(time.Millisecond).UTC(); got.CreatedAt != want {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want)
	}
	if string(got.Spec.Data) != `{"a":1}` {
		t.Errorf("Spec.Data = %s", got.Spec.Data)
	}
	if snap.Leases[0].TTL != 3001*time.Millisecond {
		t.Errorf("TTL = %v", snap.Leases[0].TTL)
	}
}

func TestApplyUpsertsAndDeletes(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	d1, d2 := fullDevice("d1"), fullDevice("d2")
	d2.CreatedAt = d1.CreatedAt.Add(time.Second)
	l1 := fullLease("l1", "d1", "r1")
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{d2, d1}, PutLeases: []core.LeaseRecord{l1}}); err != nil {
		t.Fatal(err)
	}

	// Update in place; release l1 and grant l2 to the same requester in one
	// change set, which relies on deletes running before puts.
	d1.State, d1.Attrs, d1.Data = core.StateReady, nil, nil
	l2 := fullLease("l2", "d2", "r1")
	if err := db.Apply(ctx, core.Changes{
		PutDevices:   []core.DeviceRecord{d1},
		PutLeases:    []core.LeaseRecord{l2},
		DeleteLeases: []string{"l1", "never-existed"},
	}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, snap, []core.DeviceRecord{d1, d2}, []core.LeaseRecord{l2})

	// A device and its lease go together, listed in either order.
	if err := db.Apply(ctx, core.Changes{DeleteDevices: []string{"d2"}, DeleteLeases: []string{"l2"}}); err != nil {
		t.Fatal(err)
	}
	if snap, err = db.Load(ctx); err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, snap, []core.DeviceRecord{d1}, nil)
}

func TestApplyIsAtomic(t *testing.T) {
	ctx := context.Background()
	base := core.Changes{PutDevices: []core.DeviceRecord{fullDevice("d0")}, PutLeases: []core.LeaseRecord{fullLease("l0", "d0", "r0")}}
	tests := []struct {
		name string
		c    core.Changes
	}{
		{"requester_id UNIQUE within the set", core.Changes{
			PutDevices:    []core.DeviceRecord{fullDevice("d1"), fullDevice("d2")},
			PutLeases:     []core.LeaseRecord{fullLease("l1", "d1", "r1"), fullLease("l2", "d2", "r1")},
			DeleteDevices: []string{"d0"},
			DeleteLeases:  []string{"l0"},
		}},
		{"requester_id UNIQUE against stored lease", core.Changes{
			PutDevices: []core.DeviceRecord{fullDevice("d1")},
			PutLeases:  []core.LeaseRecord{fullLease("l1", "d1", "r0")},
		}},
		{"lease for a missing device", core.Changes{
			PutDevices: []core.DeviceRecord{fullDevice("d1")},
			PutLeases:  []core.LeaseRecord{fullLease("l1", "nope", "r1")},
		}},
		{"device deleted under its lease", core.Changes{
			PutDevices:    []core.DeviceRecord{fullDevice("d1")},
			DeleteDevices: []string{"d0"},
		}},
		{"unencodable spec data", core.Changes{
			PutDevices: []core.DeviceRecord{func() core.DeviceRecord {
				d := fullDevice("d1")
				d.Spec.Data = json.RawMessage(`{not json`)
				return d
			}()},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newTestDB(t)
			if err := db.Apply(ctx, base); err != nil {
				t.Fatal(err)
			}
			if err := db.Apply(ctx, tt.c); err == nil {
				t.Fatal("Apply succeeded, want an error")
			}
			snap, err := db.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			assertSnapshot(t, snap, base.PutDevices, base.PutLeases)
			// And the store still works.
			if err := db.Apply(ctx, core.Changes{DeleteLeases: []string{"l0"}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestApplyEmptyIsNoop(t *testing.T) {
	db, _ := newTestDB(t)
	if err := db.Apply(context.Background(), core.Changes{}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(context.Background())
	if err != nil || snap.Devices != nil || snap.Leases != nil {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
}

func TestUniqueViolationIsSQLiteConstraint(t *testing.T) {
	// Guards the assumption that a duplicate requester is rejected by the
	// database itself rather than by luck of ordering.
	ctx := context.Background()
	db, _ := newTestDB(t)
	err := db.Apply(ctx, core.Changes{
		PutDevices: []core.DeviceRecord{{ID: "d1"}},
		PutLeases:  []core.LeaseRecord{{ID: "a", DeviceID: "d1", RequesterID: "r"}, {ID: "b", DeviceID: "d1", RequesterID: "r"}},
	})
	var coded interface{ Code() int }
	if !errors.As(err, &coded) || coded.Code() != 2067 { // SQLITE_CONSTRAINT_UNIQUE
		t.Fatalf("got %v, want SQLITE_CONSTRAINT_UNIQUE", err)
	}
}

func BenchmarkApplyLeaseCycle(b *testing.B) {
	ctx := context.Background()
	db, _ := newTestDB(b)
	dev := fullDevice("d1")
	lease := fullLease("l1", "d1", "r1")
	put := core.Changes{PutDevices: []core.DeviceRecord{dev}, PutLeases: []core.LeaseRecord{lease}}
	release := core.Changes{DeleteLeases: []string{lease.ID}}
	b.ReportAllocs()
	for b.Loop() {
		if err := db.Apply(ctx, put); err != nil {
			b.Fatal(err)
		}
		if err := db.Apply(ctx, release); err != nil {
			b.Fatal(err)
		}
	}
}

// A database written before intents were kept (schema 2) upgrades in place:
// its devices load with no intent, and an intent written afterwards round
// trips.
func TestIntentMigrationUpgradesOldDatabase(t *testing.T) {
	ctx := context.Background()
	old, path := oldDB(t, 2)
	if _, err := old.sql.ExecContext(ctx, `INSERT INTO devices (id, platform, handle, name, state, spec, simulated)
		VALUES ('d1', 'ios', 'U1', 'n', 'ready', '{}', 0)`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Devices) != 1 || snap.Devices[0].Intent != (core.DeviceIntent{}) {
		t.Fatalf("old device after upgrade: %+v", snap.Devices)
	}
	d := snap.Devices[0]
	d.Intent = core.DeviceIntent{Op: core.OpKindDestroy, Since: ms(1700000000123)}
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{d}}); err != nil {
		t.Fatal(err)
	}
	if snap, err = db.Load(ctx); err != nil || snap.Devices[0].Intent != d.Intent {
		t.Fatalf("intent after round trip: %+v, %v", snap.Devices, err)
	}
	d.Intent = core.DeviceIntent{}
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{d}}); err != nil {
		t.Fatal(err)
	}
	var raw sql.NullString
	if err := db.sql.QueryRowContext(ctx, `SELECT intent FROM devices WHERE id = 'd1'`).Scan(&raw); err != nil || raw.Valid {
		t.Fatalf("a cleared intent is stored as %v (%v), want NULL", raw, err)
	}
}

// A group lease keeps its further members across a restart (ADR 0043).
func TestGroupLeaseMembersRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	devs := []core.DeviceRecord{{ID: "d1"}, {ID: "d2"}, {ID: "d3"}}
	l := fullLease("l1", "d1", "r1")
	l.Members = []string{"d3", "d2"}
	if err := db.Apply(ctx, core.Changes{PutDevices: devs, PutLeases: []core.LeaseRecord{l}}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, snap, devs, []core.LeaseRecord{l})
}

// A lease's release policy (a session's reset, ADR 0045) survives a
// restart; the pool's own purge is stored as NULL.
func TestLeaseReleasePolicyRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	devs := []core.DeviceRecord{{ID: "d1"}, {ID: "d2"}}
	session := fullLease("l1", "d1", "r1")
	session.Release = core.ReleasePolicy{Mode: "keep-booted", Fallback: "snapshot", MaxUses: 5, Timeout: 90 * time.Second}
	pool := fullLease("l2", "d2", "r2")
	if err := db.Apply(ctx, core.Changes{PutDevices: devs, PutLeases: []core.LeaseRecord{session, pool}}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, snap, devs, []core.LeaseRecord{session, pool})
	var raw sql.NullString
	if err := db.sql.QueryRowContext(ctx, `SELECT release_policy FROM leases WHERE id = 'l2'`).Scan(&raw); err != nil || raw.Valid {
		t.Fatalf("the pool's purge is stored as %v (%v), want NULL", raw, err)
	}
}
