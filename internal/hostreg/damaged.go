package hostreg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/sqlitedb"
)

// RepairCommand rebuilds a damaged host registry (ADR 0064).
const RepairCommand = "simlock host repair"

// DamagedError refuses to use a host registry SQLite cannot read as a
// database: not a database at all, or "database disk image is malformed".
// No retry can succeed, so it is its own error (HOST_REGISTRY_DAMAGED, not
// retryable), naming the file and the repair.
type DamagedError struct {
	Path string
	Err  error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("hostreg: the host registry %s is damaged (%v); rebuild it with `%s`", e.Path, e.Err, RepairCommand)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// damaged turns err into a *DamagedError when SQLite said the file is not
// a readable database; any other error (busy, I/O, a conflict) is
// returned as it is.
func damaged(path string, err error) error {
	var de *DamagedError
	if err == nil || errors.As(err, &de) || !sqlitedb.IsCorrupt(err) {
		return err
	}
	return &DamagedError{Path: path, Err: err}
}

// pool is the registry's *sql.DB behind a pointer that Reopen swaps, with
// the methods the package calls on it, so a daemon can move to a rebuilt
// file without its users holding a new *DB.
type pool struct{ p atomic.Pointer[sql.DB] }

func newPool(db *sql.DB) *pool {
	p := &pool{}
	p.p.Store(db)
	return p
}

func (p *pool) db() *sql.DB                                 { return p.p.Load() }
func (p *pool) Conn(ctx context.Context) (*sql.Conn, error) { return p.db().Conn(ctx) }
func (p *pool) Close() error                                { return p.db().Close() }
func (p *pool) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return p.db().ExecContext(ctx, q, args...)
}
func (p *pool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return p.db().QueryContext(ctx, q, args...)
}
func (p *pool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return p.db().QueryRowContext(ctx, q, args...)
}
func (p *pool) Exec(q string, args ...any) (sql.Result, error) { return p.db().Exec(q, args...) }
func (p *pool) QueryRow(q string, args ...any) *sql.Row        { return p.db().QueryRow(q, args...) }

// File is the absolute path of the registry's database file.
func (db *DB) File() string { return db.file }

// FileIdentity names the file at path by device and inode, so a reader
// can tell that the file was replaced (moved aside and created again)
// rather than written. A missing file is ("", nil).
func FileIdentity(path string) (string, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", errors.New("hostreg: no inode on this platform")
	}
	return fmt.Sprintf("%d:%d", uint64(sys.Dev), uint64(sys.Ino)), nil
}

// Reopen moves db to the file now at its path, creating and migrating it
// when it is new: `simlock host repair` moved a damaged file aside and
// started a fresh one, and a daemon still writing to the old inode would
// write to the damaged copy. Callers in flight finish on the old
// connection (closed a little later); every call after Reopen uses the
// new file.
func (db *DB) Reopen(ctx context.Context) error {
	if err := sqlitedb.CreateOwnerOnly(db.file); err != nil {
		return fmt.Errorf("hostreg: %w", err)
	}
	sqldb, err := sql.Open("sqlite", dsn(db.file, false))
	if err != nil {
		return fmt.Errorf("hostreg: open %s: %w", db.file, err)
	}
	sqldb.SetMaxOpenConns(1)
	if err := sqlitedb.Migrate(ctx, sqldb, schema(db.migs)); err != nil {
		sqldb.Close()
		return damaged(db.file, err)
	}
	old := db.sql.p.Swap(sqldb)
	// A call that took the old pool just before the swap finishes on it;
	// closing it at once would fail that call for no reason.
	time.AfterFunc(reopenGrace, func() { old.Close() })
	return nil
}

// reopenGrace is how long Reopen leaves the old pool open for calls in
// flight. Registry calls are short transactions bounded by busyTimeout.
const reopenGrace = 4 * busyTimeout
