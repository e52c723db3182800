package hostreg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Inspect lists every claim in dir's registry with its classification,
// without a daemon and without side effects: the file is opened read-only
// (mode=ro, so SQLite refuses any write), is never created, migrated or
// switched to WAL, and a missing registry means no claims at all.
// Devices without a claim are free and are not listed.
func Inspect(ctx context.Context, dir string, p Prober) ([]Status, error) {
	path, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("hostreg: %w", err)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("hostreg: %w", err)
	}
	sqldb, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("hostreg: open %s read-only: %w", path, err)
	}
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(1)
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("hostreg: %w", err)
	}
	defer conn.Close()
	// One snapshot for the guard and the rows. A deferred read
	// transaction takes no write lock and writes nothing.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, fmt.Errorf("hostreg: %w", err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // read-only: nothing to undo
	have, err := schemaVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	switch {
	case have > len(migrations):
		return nil, &SchemaTooNewError{Have: have, Know: len(migrations)}
	case have == 0:
		return nil, nil // created but never migrated: nothing claimed yet
	case have < len(migrations):
		return nil, &SchemaTooOldError{Have: have, Know: len(migrations)}
	}
	rows, err := conn.QueryContext(ctx, `SELECT `+selectColumns+` FROM claims ORDER BY device_key`)
	if err != nil {
		return nil, fmt.Errorf("hostreg: list claims: %w", err)
	}
	defer rows.Close()
	var raw []row
	var out []Status
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			// A row with wrongly typed columns: report it (its key may be
			// unreadable too), do not stop.
			out = append(out, Status{Class: ClassInconsistent, Detail: errUnscannable{err}.Error()})
			continue
		}
		raw = append(raw, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hostreg: list claims: %w", err)
	}
	// Probe after the rows are read, so the snapshot is not held open
	// while the prober looks at processes.
	for _, r := range raw {
		out = append(out, classify(ctx, p, r))
	}
	return out, nil
}

// Inspect lists the claims of db's own registry; see the package-level
// Inspect, which it uses so that the daemon and `device status` classify
// the same way.
func (db *DB) Inspect(ctx context.Context, dir string) ([]Status, error) {
	return Inspect(ctx, dir, db.prober)
}
