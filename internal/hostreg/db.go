// Package hostreg is the host registry: one SQLite file shared by every
// simlock process of an OS user, recording which process owns which device
// (ADR 0020). Homes keep their own databases (internal/store); this one
// holds only what several homes must agree on.
//
// Every decision is one BEGIN IMMEDIATE transaction because several
// processes decide against the same file at once. The file is written only
// on lifecycle transitions (claim, release, reconcile), never per command.
// Inspection (Reader) opens the file read-only and writes nothing.
package hostreg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/sqlitedb"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// FileName is the registry's database file inside the host directory.
const FileName = "host.db"

// busyTimeout bounds how long a transaction waits for another process's
// write lock. Unlike a home's database this file has several writers, but
// each holds the lock for one short read-decide-write.
const busyTimeout = 5 * time.Second

// DB is an open host registry. It is safe for concurrent use.
type DB struct {
	dir    string
	file   string // dir's host.db, absolute
	migs   []string
	sql    *pool // swapped by Reopen
	prober Prober
}

// Open opens (creating if needed) the registry in dir, which is created
// 0700 with host.db 0600, and migrates it. Conflicts are classified with
// the operating system's Prober.
func Open(ctx context.Context, dir string) (*DB, error) {
	return OpenWithProber(ctx, dir, SystemProber{})
}

// OpenWithProber is Open with the liveness checks supplied by the caller,
// so tests decide who is alive.
func OpenWithProber(ctx context.Context, dir string, p Prober) (*DB, error) {
	return open(ctx, dir, p, migrations)
}

func open(ctx context.Context, dir string, p Prober, migs []string) (*DB, error) {
	if dir == "" {
		return nil, errors.New("hostreg: empty host directory")
	}
	if p == nil {
		return nil, errors.New("hostreg: nil prober")
	}
	abs, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("hostreg: %w", err)
	}
	if err := sqlitedb.CreateOwnerOnly(abs); err != nil {
		return nil, fmt.Errorf("hostreg: %w", err)
	}
	sqldb, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("hostreg: open %s: %w", abs, err)
	}
	// One connection: our own transactions queue in database/sql (honouring
	// ctx) and only other processes ever meet busy_timeout.
	sqldb.SetMaxOpenConns(1)
	db := &DB{dir: dir, file: abs, migs: migs, sql: newPool(sqldb), prober: p}
	if err := db.init(ctx, migs); err != nil {
		sqldb.Close()
		return nil, damaged(abs, err)
	}
	return db, nil
}

// Close closes the registry.
func (db *DB) Close() error { return db.sql.Close() }

// dsn builds a file: URI so any byte of the path is escaped. journal_mode
// is absent on purpose: switching to WAL writes the header, which must wait
// for the schema guard. readOnly opens with mode=ro, so SQLite itself
// refuses any write on that connection.
func dsn(abs string, readOnly bool) string {
	q := url.Values{}
	if readOnly {
		q.Set("mode", "ro")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	u := url.URL{Scheme: "file", OmitHost: true, Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// querier is what a *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier = sqlitedb.Querier

// immediate runs fn in a BEGIN IMMEDIATE transaction: the write lock is
// taken before the read, so the decision is made on current data. A
// deferred transaction that reads and then writes would instead fail with
// SQLITE_BUSY_SNAPSHOT when another process committed in between.
// fn must use only q (the pool's one connection).
func (db *DB) immediate(ctx context.Context, fn func(q querier) error) (err error) {
	defer func() { err = damaged(db.file, err) }()
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("hostreg: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("hostreg: BEGIN IMMEDIATE: %w", err)
	}
	done := false
	defer func() {
		if !done {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				// Unknown transaction state: never reuse the connection.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
	}()
	if err := fn(conn); err != nil {
		return err
	}
	// Commit even if ctx expires now, so the caller learns a definite result.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		return fmt.Errorf("hostreg: commit: %w", err)
	}
	done = true
	return nil
}
