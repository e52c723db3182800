// Package sqlitedb is what simlock's two SQLite files (a home's store and
// the host registry) share: owner-only creation, the schema guard and the
// numbered migrations. The guard reads before anything writes, so a file
// written by a newer simlock, or holding somebody else's tables, is refused
// and left byte-for-byte untouched.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Querier is what a *sql.DB, *sql.Conn and *sql.Tx have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Schema describes one kind of file.
type Schema struct {
	// Label prefixes errors ("store", "hostreg"); Noun names the file in
	// the too-new refusal ("database", "host registry").
	Label, Noun string
	// Migrations: entry i takes version i to i+1, so the length is the
	// newest version this binary knows.
	Migrations []string
	// BusyWait bounds the retries of the switch to WAL, which SQLite
	// refuses at once (without its busy handler) while another process
	// reads a fresh file.
	BusyWait time.Duration
}

// SchemaTooNewError refuses a file written by a newer simlock: migrating
// down is impossible and writing a schema we do not understand could
// corrupt it.
type SchemaTooNewError struct {
	Label, Noun string
	Have        int // the file's schema version
	Know        int // the newest this binary knows
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("%s: %s schema version %d is newer than this simlock knows (%d); upgrade simlock", e.Label, e.Noun, e.Have, e.Know)
}

// CreateOwnerOnly creates path's directory (0700) and path itself (0600)
// when they are missing, so SQLite never creates them with umask-derived
// modes (the -wal and -shm files inherit the main file's). Modes are set
// again after creation because the umask may have cleared bits. Existing
// entries are left alone: a refused file must stay untouched.
func CreateOwnerOnly(path string) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

const createVersionTable = `CREATE TABLE IF NOT EXISTS schema_version (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
) STRICT`

// Migrate runs the guard with reads only, then switches the file to WAL
// and applies the pending migrations, each in its own BEGIN IMMEDIATE that
// decides again under the write lock, so several processes opening one file
// at once migrate it once.
func Migrate(ctx context.Context, db *sql.DB, s Schema) error {
	have, err := Guard(ctx, db, s)
	if err != nil {
		return err
	}
	if err := enableWAL(ctx, db, s); err != nil {
		return err
	}
	for v := have; v < len(s.Migrations); {
		if err := immediate(ctx, db, s.Label, func(q Querier) error {
			cur, err := Guard(ctx, q, s)
			if err != nil {
				return err
			}
			v = cur
			if cur == len(s.Migrations) {
				return nil
			}
			if _, err := q.ExecContext(ctx, createVersionTable); err != nil {
				return fmt.Errorf("%s: create schema_version: %w", s.Label, err)
			}
			if _, err := q.ExecContext(ctx, s.Migrations[cur]); err != nil {
				return fmt.Errorf("%s: migration %d: %w", s.Label, cur+1, err)
			}
			if _, err := q.ExecContext(ctx,
				`INSERT INTO schema_version (id, version) VALUES (1, ?)
				 ON CONFLICT (id) DO UPDATE SET version = excluded.version`, cur+1); err != nil {
				return fmt.Errorf("%s: record migration %d: %w", s.Label, cur+1, err)
			}
			v = cur + 1
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// Guard reads the schema version and refuses a newer schema, or a file
// holding somebody else's tables (a directory pointed at the wrong place).
// Both reads must see one snapshot: between two separate reads a concurrent
// opener may commit the first migration and the file would look like
// "tables but no version". Given a *sql.DB, Guard opens its own read
// transaction for that reason.
func Guard(ctx context.Context, q Querier, s Schema) (int, error) {
	if sqldb, ok := q.(*sql.DB); ok {
		conn, err := sqldb.Conn(ctx)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s.Label, err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			return 0, fmt.Errorf("%s: %w", s.Label, err)
		}
		defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // reads only
		q = conn
	}
	have, err := SchemaVersion(ctx, q, s.Label)
	if err != nil {
		return 0, err
	}
	if have > len(s.Migrations) {
		return 0, &SchemaTooNewError{Label: s.Label, Noun: s.Noun, Have: have, Know: len(s.Migrations)}
	}
	if have == 0 {
		var n int
		if err := q.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`).Scan(&n); err != nil {
			return 0, fmt.Errorf("%s: %w", s.Label, err)
		}
		if n > 0 {
			return 0, fmt.Errorf("%s: %s has tables but no simlock schema version; refusing to use it", s.Label, s.Noun)
		}
	}
	return have, nil
}

// SchemaVersion reads the version without creating anything; a file
// without the version table is version 0.
func SchemaVersion(ctx context.Context, q Querier, label string) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: read schema version: %w", label, err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE id = 1`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: read schema version: %w", label, err)
	}
	return v, nil
}

func enableWAL(ctx context.Context, db *sql.DB, s Schema) error {
	deadline := time.Now().Add(s.BusyWait)
	for {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil && mode != "wal" {
			return fmt.Errorf("%s: enable WAL: journal mode is %q", s.Label, mode)
		}
		if err == nil {
			return nil
		}
		if !IsBusy(err) || time.Now().After(deadline) {
			return fmt.Errorf("%s: enable WAL: %w", s.Label, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: enable WAL: %w", s.Label, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// IsBusy reports SQLITE_BUSY (any extended form).
func IsBusy(err error) bool {
	var c interface{ Code() int }
	return errors.As(err, &c) && c.Code()&0xff == 5
}

// IsCorrupt reports SQLITE_CORRUPT ("database disk image is malformed")
// or SQLITE_NOTADB ("file is not a database"), any extended form: the file
// cannot be read as a database, and retrying will not change that.
func IsCorrupt(err error) bool {
	var c interface{ Code() int }
	return errors.As(err, &c) && (c.Code()&0xff == 11 || c.Code()&0xff == 26)
}

// immediate runs fn in a BEGIN IMMEDIATE transaction on one connection.
func immediate(ctx context.Context, db *sql.DB, label string, fn func(Querier) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("%s: BEGIN IMMEDIATE: %w", label, err)
	}
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // the error that got us here matters more
		}
	}()
	if err := fn(conn); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("%s: COMMIT: %w", label, err)
	}
	committed = true
	return nil
}
