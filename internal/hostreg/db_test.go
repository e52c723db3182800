package hostreg

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenCreatesOwnerOnlyDirAndFile(t *testing.T) {
	old := syscallUmask(0o022)
	defer syscallUmask(old)
	dir := filepath.Join(t.TempDir(), "nested", "host")
	db := openTest(t, dir, liveAB())
	if err := db.Claim(context.Background(), leaseClaim(mustKey(t, udid1), ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, FileName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", path, got, want)
		}
	}
	var mode string
	if err := db.sql.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v", mode, err)
	}
}

// setVersion writes a schema version as a newer simlock would.
func setVersion(t *testing.T, path string, v int) {
	t.Helper()
	raw, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE schema_version SET version = ?`, v); err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaIsRefusedAndLeftUntouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	db := openTest(t, dir, liveAB())
	db.Close()
	setVersion(t, path, len(migrations)+1)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenWithProber(context.Background(), dir, liveAB())
	var tooNew *SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Have != len(migrations)+1 || tooNew.Know != len(migrations) {
		t.Fatalf("open of a newer schema: %v", err)
	}
	_, err = Inspect(context.Background(), dir, liveAB())
	if !errors.As(err, &tooNew) {
		t.Fatalf("inspect of a newer schema: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("a refused database was modified")
	}
}

func TestForeignTablesAreRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	raw, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE other (x)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := OpenWithProber(context.Background(), dir, liveAB()); err == nil {
		t.Fatal("opened a database with foreign tables")
	}
}

// Migrations are numbered and applied once: a second binary knowing one
// more migration applies only that one, and reopening is a no-op.
func TestMigrationsApplyInOrderOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := open(ctx, dir, liveAB(), migrations)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Claim(ctx, leaseClaim(mustKey(t, udid1), ownerA, "lse_1")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	next := append(append([]string{}, migrations...), `ALTER TABLE claims ADD COLUMN note TEXT`)
	for i := 0; i < 2; i++ {
		db, err := open(ctx, dir, liveAB(), next)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		v, err := schemaVersion(ctx, db.sql)
		if err != nil || v != len(next) {
			t.Fatalf("version %d, %v; want %d", v, err, len(next))
		}
		var n int
		if err := db.sql.QueryRow(`SELECT count(*) FROM claims WHERE note IS NULL`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("claims after migration: %d, %v", n, err)
		}
		db.Close()
	}
	// The older binary now refuses the file.
	if _, err := open(ctx, dir, liveAB(), migrations); err == nil {
		t.Fatal("older binary opened a newer schema")
	}
}

// Several processes start at once: concurrent opens of a fresh directory
// all succeed and migrate exactly once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	dir := t.TempDir()
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			db, err := OpenWithProber(context.Background(), dir, liveAB())
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
