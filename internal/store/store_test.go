package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// oldDB opens a fresh database at schema version n (its first n
// migrations), for a migration test to fill before openAt upgrades it.
// The test closes it before that upgrade.
func oldDB(t *testing.T, n int) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "simlock.db")
	old, err := open(context.Background(), path, migrations[:n])
	if err != nil {
		t.Fatal(err)
	}
	return old, path
}

// newTestDB opens a fresh database in a temporary directory and closes it
// when the test ends.
func newTestDB(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "simlock.db")
	return openAt(t, path), path
}

func openAt(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawExec runs statements on path without going through Open, the way a
// newer simlock or another program would.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open(driverName, path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, s := range stmts {
		if _, err := raw.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func version(t *testing.T, db *DB) int {
	t.Helper()
	v, err := schemaVersion(context.Background(), db.sql)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpenCreatesOwnerOnlyFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", "simlock")
	path := filepath.Join(dir, "simlock.db")
	db := openAt(t, path)
	// A commit creates the -wal and -shm files, which must be owner-only too.
	if err := db.SetMeta(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		dir:           fs.ModeDir | 0o700,
		path:          0o600,
		path + "-wal": 0o600,
		path + "-shm": 0o600,
	}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), mode)
		}
	}
}

func TestOpenUsesWALAndForeignKeys(t *testing.T) {
	db, _ := newTestDB(t)
	ctx := context.Background()
	var mode string
	var fk, timeout int
	if err := db.sql.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := db.sql.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := db.sql.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 || timeout != int(busyTimeout.Milliseconds()) {
		t.Errorf("journal_mode=%q foreign_keys=%d busy_timeout=%d", mode, fk, timeout)
	}
	if got := version(t, db); got != len(migrations) {
		t.Errorf("schema version %d, want %d", got, len(migrations))
	}
}

// Characters that are syntax in a file: URI must still name the literal path.
func TestOpenPathWithURISyntax(t *testing.T) {
	path := filepath.Join(t.TempDir(), "we?ird #dir %41", "simlock.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetMeta(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the literal path: %v", err)
	}
	v, ok, err := openAt(t, path).GetMeta(context.Background(), "k")
	if err != nil || !ok || v != "v" {
		t.Fatalf("GetMeta after reopen = %q, %v, %v", v, ok, err)
	}
}

func TestReopenPersists(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	dev := fullDevice("d1")
	lease := fullLease("l1", "d1", "r1")
	tok := TokenRecord{ID: "t1", Name: "ci", Role: "admin", Hash: "h1", CreatedAt: ms(1700000000123)}
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{dev}, PutLeases: []core.LeaseRecord{lease}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := db.SetMeta(ctx, "install", "abc"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openAt(t, path)
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, snap, []core.DeviceRecord{dev}, []core.LeaseRecord{lease})
	got, ok, err := db.TokenByHash(ctx, "h1")
	if err != nil || !ok || got != tok {
		t.Errorf("TokenByHash = %+v, %v, %v; want %+v", got, ok, err, tok)
	}
	if v, ok, err := db.GetMeta(ctx, "install"); err != nil || !ok || v != "abc" {
		t.Errorf("GetMeta = %q, %v, %v", v, ok, err)
	}
	if got := version(t, db); got != len(migrations) {
		t.Errorf("schema version %d after reopen, want %d", got, len(migrations))
	}
}

func TestSchemaTooNewIsRefusedUntouched(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetMeta(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	newer := len(migrations) + 1
	// A rollback-journal file, so that switching it to WAL before the guard
	// would show up as a changed header.
	rawExec(t, path, `PRAGMA journal_mode = DELETE`, fmt.Sprintf(`UPDATE schema_version SET version = %d`, newer))

	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fiBefore, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	db, err = Open(ctx, path)
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a newer schema")
	}
	var tooNew *SchemaTooNewError
	if !errors.As(err, &tooNew) {
		t.Fatalf("Open error %T %v, want *SchemaTooNewError", err, err)
	}
	if tooNew.Have != newer || tooNew.Know != len(migrations) {
		t.Errorf("SchemaTooNewError = %+v, want Have=%d Know=%d", tooNew, newer, len(migrations))
	}

	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fiAfter, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("refused database file was modified")
	}
	if !fiAfter.ModTime().Equal(fiBefore.ModTime()) || fiAfter.Mode() != fiBefore.Mode() {
		t.Errorf("refused database metadata changed: %v %v -> %v %v",
			fiBefore.ModTime(), fiBefore.Mode(), fiAfter.ModTime(), fiAfter.Mode())
	}
}

func TestForeignDatabaseIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	rawExec(t, path, `CREATE TABLE notes (body TEXT)`)
	db, err := Open(context.Background(), path)
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a database with foreign tables and no schema version")
	}
	var tooNew *SchemaTooNewError
	if errors.As(err, &tooNew) {
		t.Fatalf("got %v, want a foreign-database error", err)
	}
}

func TestMigrationsApplyStepwise(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	db := openAt(t, path)
	if err := db.SetMeta(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	next := slices.Concat(migrations, []string{
		`CREATE TABLE extra (x INTEGER) STRICT`,
		`INSERT INTO extra (x) VALUES (42)`,
	})
	db, err := open(ctx, path, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := version(t, db); got != len(next) {
		t.Errorf("version %d, want %d", got, len(next))
	}
	var x int
	if err := db.sql.QueryRowContext(ctx, `SELECT x FROM extra`).Scan(&x); err != nil || x != 42 {
		t.Errorf("extra.x = %d, %v", x, err)
	}
	if v, _, _ := db.GetMeta(ctx, "k"); v != "v" {
		t.Errorf("data lost across migration: meta k = %q", v)
	}
	db.Close()

	// The older binary now refuses what the newer one wrote.
	_, err = Open(ctx, path)
	var tooNew *SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Have != len(next) {
		t.Fatalf("Open by older binary: %v", err)
	}
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	openAt(t, path).Close()

	// The second statement fails, so the first must not survive either.
	bad := slices.Concat(migrations, []string{
		`CREATE TABLE half (x INTEGER); CREATE TABLE meta (x INTEGER);`,
	})
	if db, err := open(ctx, path, bad); err == nil {
		db.Close()
		t.Fatal("a failing migration was accepted")
	}
	db := openAt(t, path)
	if got := version(t, db); got != len(migrations) {
		t.Errorf("version %d after failed migration, want %d", got, len(migrations))
	}
	var n int
	if err := db.sql.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'half'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("half-applied migration left table: n=%d err=%v", n, err)
	}
}

func TestImmediateRollsBack(t *testing.T) {
	ctx := context.Background()
	errBoom := errors.New("boom")
	insert := func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('k', 'v')`)
		return err
	}
	tests := []struct {
		name string
		run  func(db *DB) error
	}{
		{"error", func(db *DB) error {
			return db.immediate(ctx, func(q querier) error {
				if err := insert(q); err != nil {
					return err
				}
				return errBoom
			})
		}},
		{"panic", func(db *DB) (err error) {
			defer func() {
				if recover() != nil {
					err = errBoom
				}
			}()
			return db.immediate(ctx, func(q querier) error {
				if err := insert(q); err != nil {
					return err
				}
				panic("boom")
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newTestDB(t)
			if err := tt.run(db); !errors.Is(err, errBoom) {
				t.Fatalf("got %v, want boom", err)
			}
			if _, ok, err := db.GetMeta(ctx, "k"); err != nil || ok {
				t.Fatalf("rolled-back write visible: ok=%v err=%v", ok, err)
			}
			// A connection left inside a transaction would fail the next BEGIN.
			if err := db.immediate(ctx, insert); err != nil {
				t.Fatalf("next transaction: %v", err)
			}
		})
	}
}

func TestApplyWithCancelledContext(t *testing.T) {
	db, _ := newTestDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{fullDevice("d1")}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with cancelled ctx: %v", err)
	}
	snap, err := db.Load(context.Background())
	if err != nil || len(snap.Devices) != 0 {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
}

// Goroutines on one handle queue on its single connection; two handles on
// one file (two processes, in effect) meet at the file lock, where BEGIN
// IMMEDIATE and busy_timeout make them wait rather than fail.
func TestConcurrentApply(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	handles := []*DB{openAt(t, path), openAt(t, path)}
	const perHandle, cycles = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, len(handles)*perHandle)
	for h, db := range handles {
		for g := range perHandle {
			wg.Go(func() {
				id := fmt.Sprintf("h%d-g%d", h, g)
				for i := range cycles {
					lease := fullLease(fmt.Sprintf("%s-l%d", id, i), id, id)
					put := core.Changes{PutDevices: []core.DeviceRecord{fullDevice(id)}, PutLeases: []core.LeaseRecord{lease}}
					if err := db.Apply(ctx, put); err != nil {
						errs <- err
						return
					}
					if err := db.Apply(ctx, core.Changes{DeleteLeases: []string{lease.ID}}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	snap, err := handles[0].Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Devices) != len(handles)*perHandle || len(snap.Leases) != 0 {
		t.Errorf("got %d devices, %d leases; want %d, 0", len(snap.Devices), len(snap.Leases), len(handles)*perHandle)
	}
}

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }
