package hostreg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrations shape the schema; entry i takes version i to i+1, so the
// slice's length is the newest version this binary knows. Never edit or
// reorder a released entry; append.
//
// The claims table has no CHECKs on its enumerations on purpose: the
// decoder is the one judge of a record, and a row it cannot accept is
// reported as inconsistent (fail closed) rather than being unwritable.
var migrations = []string{
	// 1: claims.
	`
CREATE TABLE claims (
	device_key     TEXT PRIMARY KEY NOT NULL,
	record_version INTEGER NOT NULL,
	kind           TEXT NOT NULL,              -- lease | transient
	command        TEXT NOT NULL DEFAULT '',   -- transient: the command name
	owner_home     TEXT NOT NULL,
	owner_pid      INTEGER NOT NULL,
	owner_start    TEXT NOT NULL,              -- the owner process's start identity (Prober)
	lease_id       TEXT NOT NULL DEFAULT '',
	claimed_at     INTEGER NOT NULL,           -- unix ms UTC
	state          TEXT NOT NULL,              -- claimed | releasing | release-failed
	failed_steps   TEXT                        -- JSON array of strings; NULL is none
) STRICT;

-- Bumped by every change to claims, so other daemons can poll one integer
-- to learn that capacity or ownership changed (ADR 0020's wake-up).
CREATE TABLE generation (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	value INTEGER NOT NULL
) STRICT;
INSERT INTO generation (id, value) VALUES (1, 0);
`,
}

// SchemaTooNewError refuses a registry written by a newer simlock: writing
// a schema we do not understand could corrupt another process's claims, so
// the file is left untouched.
type SchemaTooNewError struct {
	Have int // the file's schema version
	Know int // the newest this binary knows
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("hostreg: host registry schema version %d is newer than this simlock knows (%d); upgrade simlock", e.Have, e.Know)
}

// SchemaTooOldError is returned by a read-only Reader on a registry that a
// writer has not migrated yet: the Reader may not migrate it.
type SchemaTooOldError struct {
	Have int
	Know int
}

func (e *SchemaTooOldError) Error() string {
	return fmt.Sprintf("hostreg: host registry schema version %d is older than this simlock's (%d); start a daemon to migrate it", e.Have, e.Know)
}

const createVersionTable = `CREATE TABLE IF NOT EXISTS schema_version (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
) STRICT`

// init runs the guard with reads only (a refused file is never written),
// then switches to WAL and migrates, each step in its own BEGIN IMMEDIATE
// so concurrent openers (several daemons starting at once) migrate once.
func (db *DB) init(ctx context.Context, migs []string) error {
	have, err := guard(ctx, db.sql, len(migs))
	if err != nil {
		return err
	}
	if err := db.enableWAL(ctx); err != nil {
		return err
	}
	for v := have; v < len(migs); {
		if err := db.immediate(ctx, func(q querier) error {
			// Decide again under the write lock: another process may
			// have migrated (or refused) since the first look.
			cur, err := guard(ctx, q, len(migs))
			if err != nil {
				return err
			}
			v = cur
			if cur == len(migs) {
				return nil
			}
			if _, err := q.ExecContext(ctx, createVersionTable); err != nil {
				return fmt.Errorf("hostreg: create schema_version: %w", err)
			}
			if _, err := q.ExecContext(ctx, migs[cur]); err != nil {
				return fmt.Errorf("hostreg: migration %d: %w", cur+1, err)
			}
			if _, err := q.ExecContext(ctx,
				`INSERT INTO schema_version (id, version) VALUES (1, ?)
				 ON CONFLICT (id) DO UPDATE SET version = excluded.version`, cur+1); err != nil {
				return fmt.Errorf("hostreg: record migration %d: %w", cur+1, err)
			}
			v = cur + 1
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// enableWAL switches the file to WAL. The switch needs an exclusive lock
// and SQLite reports a competing reader as SQLITE_BUSY at once, without
// its busy handler, so several processes opening a fresh registry together
// retry here within the busy timeout.
func (db *DB) enableWAL(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		var mode string
		err := db.sql.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil && mode != "wal" {
			return fmt.Errorf("hostreg: enable WAL: journal mode is %q", mode)
		}
		if err == nil {
			return nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			return fmt.Errorf("hostreg: enable WAL: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hostreg: enable WAL: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// isBusy reports SQLITE_BUSY (any extended form).
func isBusy(err error) bool {
	var c interface{ Code() int }
	return errors.As(err, &c) && c.Code()&0xff == 5
}

// guard reads the schema version and refuses a newer schema, or a file
// holding somebody else's tables (a host directory pointed at the wrong
// place). Both reads must see one snapshot: between two separate reads a
// concurrent opener may commit the first migration, and the file would
// look like "tables but no version". Outside a transaction guard opens
// its own read transaction for that reason.
func guard(ctx context.Context, q querier, know int) (int, error) {
	if sqldb, ok := q.(*sql.DB); ok {
		conn, err := sqldb.Conn(ctx)
		if err != nil {
			return 0, fmt.Errorf("hostreg: %w", err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			return 0, fmt.Errorf("hostreg: %w", err)
		}
		defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // reads only
		q = conn
	}
	have, err := schemaVersion(ctx, q)
	if err != nil {
		return 0, err
	}
	if have > know {
		return 0, &SchemaTooNewError{Have: have, Know: know}
	}
	if have == 0 {
		var n int
		if err := q.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`).Scan(&n); err != nil {
			return 0, fmt.Errorf("hostreg: %w", err)
		}
		if n > 0 {
			return 0, errors.New("hostreg: database has tables but no simlock schema version; refusing to use it")
		}
	}
	return have, nil
}

// schemaVersion reads the version without creating anything; no version
// table is version 0.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("hostreg: read schema version: %w", err)
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
		return 0, fmt.Errorf("hostreg: read schema version: %w", err)
	}
	return v, nil
}
