// Package store persists simlock's state in SQLite through modernc.org/sqlite,
// which is pure Go so the macOS build needs no cgo toolchain.
//
// The file is owner-only, runs in WAL mode, and is shaped by numbered
// migrations (migrate.go). Every read-decide-write transaction starts with
// BEGIN IMMEDIATE (see immediate). Times are stored as integer unix
// milliseconds in UTC and durations as integer milliseconds: integers sort and
// compare in SQL without parsing, and a millisecond value survives the round
// trip exactly, which a formatted string or a float would not guarantee.
// Sub-millisecond precision is dropped on write.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/sqlitedb"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

const driverName = "sqlite"

// busyTimeout bounds how long a statement waits for another process's
// write lock before failing with SQLITE_BUSY. One daemon owns a database, so
// contention comes only from short-lived helpers (CLI repairs, tests).
const busyTimeout = 5 * time.Second

// DB is an open simlock database. It is safe for concurrent use.
type DB struct {
	sql *sql.DB
	// hot holds the registry commit's statements, prepared once: parsing
	// them again for every commit cost about a sixth of a warm grant's
	// processor time (issue 25's profile). A transaction reuses them on
	// its connection (writeTx). Prepared at the first commit, once the
	// schema is the one they are written for.
	hotMu sync.Mutex
	hot   map[string]*sql.Stmt
}

// Open opens the database at path, creating it (and its parent directory)
// owner-only if it does not exist, and migrates it to the newest schema this
// binary knows. A database whose schema is newer is refused with
// *SchemaTooNewError and left byte-for-byte untouched.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, migrations)
}

func open(ctx context.Context, path string, migs []string) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := sqlitedb.CreateOwnerOnly(abs); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	sqldb, err := sql.Open(driverName, dsn(abs))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	// One connection for everything. SQLite admits one writer at a time
	// anyway, and with a single in-process connection our own transactions
	// queue in database/sql (honouring ctx) instead of contending for the
	// file lock; busy_timeout is then only ever exercised by other
	// processes. Reads queue behind writes too, which is cheap here: the
	// core keeps the registry in memory and reads the store at startup.
	sqldb.SetMaxOpenConns(1)
	db := &DB{sql: sqldb}
	if err := db.init(ctx, migs); err != nil {
		sqldb.Close()
		return nil, err
	}
	return db, nil
}

// prepared is the statements every registry commit runs, prepared on
// first use. It must run outside a transaction: preparing takes the
// pool's one connection.
func (db *DB) prepared(ctx context.Context) (map[string]*sql.Stmt, error) {
	db.hotMu.Lock()
	defer db.hotMu.Unlock()
	if db.hot != nil {
		return db.hot, nil
	}
	hot := map[string]*sql.Stmt{}
	for _, q := range []string{upsertDevice, upsertLease, upsertRequest, deleteLease} {
		st, err := db.sql.PrepareContext(ctx, q)
		if err != nil {
			for _, s := range hot {
				s.Close()
			}
			return nil, fmt.Errorf("store: prepare: %w", err)
		}
		hot[q] = st
	}
	db.hot = hot
	return hot, nil
}

// writeTx runs fn in one immediate transaction (the DSN's _txlock) whose
// querier runs the prepared hot statements on the transaction's
// connection. Like inTx it commits once fn succeeded, whatever ctx does
// then.
func (db *DB) writeTx(ctx context.Context, fn func(q querier) error) error {
	hot, err := db.prepared(ctx)
	if err != nil {
		return err
	}
	tx, err := db.sql.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := fn(hotTx{tx: tx, hot: hot}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// hotTx is a transaction as a querier: a statement prepared by prepareHot
// runs prepared, anything else as text.
type hotTx struct {
	tx  *sql.Tx
	hot map[string]*sql.Stmt
}

func (h hotTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st, ok := h.hot[query]; ok {
		return h.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return h.tx.ExecContext(ctx, query, args...)
}

func (h hotTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return h.tx.QueryContext(ctx, query, args...)
}

func (h hotTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return h.tx.QueryRowContext(ctx, query, args...)
}

// Close closes the database.
func (db *DB) Close() error { return db.sql.Close() }

// dsn builds a file: URI so that any byte in the path ('?', '#', '%') is
// escaped rather than read as URI syntax. The pragmas ride in the DSN
// because the driver re-applies them to every new connection, including one
// that replaces a connection discarded after a failed rollback. journal_mode
// is deliberately absent: switching to WAL writes the file header, which
// must not happen before the schema guard has passed.
func dsn(abs string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	// database/sql's own transactions (writeTx) take the write lock at
	// once, as inTx's BEGIN IMMEDIATE does.
	q.Add("_txlock", "immediate")
	u := url.URL{Scheme: "file", OmitHost: true, Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// querier is what a transaction body may use. *sql.Conn satisfies it.
type querier = sqlitedb.Querier

// immediate runs fn in a BEGIN IMMEDIATE transaction. Taking the write lock
// up front matters in WAL mode: a deferred transaction that reads and then
// writes fails with SQLITE_BUSY_SNAPSHOT, without waiting, if another
// connection committed in between, whereas BEGIN IMMEDIATE waits for the lock
// under busy_timeout and then decides on current data.
//
// fn must use only q: the pool has a single connection, which q holds, so
// calling back into db from fn would deadlock.
func (db *DB) immediate(ctx context.Context, fn func(q querier) error) error {
	return db.inTx(ctx, "BEGIN IMMEDIATE", fn)
}

// view runs a read-only fn in a deferred transaction, so that several
// SELECTs see one consistent snapshot.
func (db *DB) view(ctx context.Context, fn func(q querier) error) error {
	return db.inTx(ctx, "BEGIN", fn)
}

func (db *DB) inTx(ctx context.Context, begin string, fn func(q querier) error) (err error) {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		return fmt.Errorf("store: %s: %w", begin, err)
	}
	done := false
	defer func() {
		// Also reached when fn panics, so the connection never goes back
		// to the pool with a transaction open.
		if !done {
			rollback(conn)
		}
	}()
	if err := fn(conn); err != nil {
		return err
	}
	// Once fn has succeeded the outcome should not depend on whether the
	// caller's ctx expires in the last microseconds: commit regardless, so
	// the caller learns a definite result.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	done = true
	return nil
}

// rollback ends the transaction on conn. If that fails the connection's
// transaction state is unknown, so it is discarded rather than reused.
func rollback(conn *sql.Conn) {
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// NULL stands for the zero time, so "never" is distinguishable in SQL and
// reads back as time.Time{} rather than as year 1 in UTC.
func unixMs(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func fromUnixMs(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// NULL stands for a nil map so that nil and empty both round-trip.
func encodeAttrs(m map[string]string) (any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func decodeAttrs(v sql.NullString) (map[string]string, error) {
	if !v.Valid {
		return nil, nil
	}
	m := map[string]string{}
	if err := json.Unmarshal([]byte(v.String), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Raw driver data is stored verbatim (not re-encoded) because the core
// promises to hand it back unread; empty is stored as NULL and reads as nil.
func encodeRaw(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func decodeRaw(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return json.RawMessage(v.String)
}
