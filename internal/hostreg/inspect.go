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
// without a daemon and without side effects: the file is never created,
// migrated or switched to WAL, and a missing registry means no claims at
// all. Devices without a claim are free and are not listed.
//
// Even a mode=ro connection creates the -wal and -shm files of a WAL
// database when no writer has them open. So when there is no -wal file
// (no writer has uncheckpointed data) the file is read as immutable, which
// creates and locks nothing; if the main file or the -wal changed during
// that read (a writer came and went), the read is discarded and repeated
// read-only against the writer's files (ADR 0021).
func Inspect(ctx context.Context, dir string, p Prober) ([]Status, error) {
	r, err := InspectReport(ctx, dir, p)
	return r.Claims, err
}

// Report is the registry as `simlock device status` shows it: every claim,
// classified, and the automatic reclaims recorded (newest first).
type Report struct {
	Claims    []Status
	Reclaimed []Reclaimed
}

// InspectReport is Inspect with the reclaims history, read in the same
// snapshot and under the same no-write rules.
func InspectReport(ctx context.Context, dir string, p Prober) (Report, error) {
	path, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return Report{}, fmt.Errorf("hostreg: %w", err)
	}
	for attempt := 0; ; attempt++ {
		before, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return Report{}, nil
		} else if err != nil {
			return Report{}, fmt.Errorf("hostreg: %w", err)
		}
		_, werr := os.Stat(path + "-wal")
		immutable := errors.Is(werr, fs.ErrNotExist) && attempt < 3
		rows, reclaimed, err := readRows(ctx, path, immutable)
		if err != nil {
			return Report{}, damaged(path, err)
		}
		if immutable {
			after, err := os.Stat(path)
			_, werr := os.Stat(path + "-wal")
			if err != nil || !errors.Is(werr, fs.ErrNotExist) || !sameStat(before, after) {
				continue
			}
		}
		// Probe after the read, so no snapshot is held open while the
		// prober looks at processes.
		out := make([]Status, 0, len(rows))
		for _, r := range rows {
			if r.err != nil {
				out = append(out, Status{Key: Key(r.Key), Class: ClassInconsistent, Detail: r.err.Error()})
				continue
			}
			out = append(out, classify(ctx, p, r.row))
		}
		return Report{Claims: out, Reclaimed: reclaimed}, nil
	}
}

func sameStat(a, b fs.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

type readRow struct {
	row
	err error // the row's columns would not scan
}

func readRows(ctx context.Context, path string, immutable bool) ([]readRow, []Reclaimed, error) {
	src := dsn(path, true)
	if immutable {
		src += "&immutable=1"
	}
	sqldb, err := sql.Open("sqlite", src)
	if err != nil {
		return nil, nil, fmt.Errorf("hostreg: open %s read-only: %w", path, err)
	}
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(1)
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("hostreg: %w", err)
	}
	defer conn.Close()
	// One snapshot for the guard and the rows; a read transaction takes
	// no write lock.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, nil, fmt.Errorf("hostreg: %w", err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // read-only: nothing to undo
	have, err := schemaVersion(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case have > len(migrations):
		return nil, nil, &SchemaTooNewError{Label: "hostreg", Noun: "host registry", Have: have, Know: len(migrations)}
	case have == 0:
		return nil, nil, nil // created but never migrated: nothing claimed yet
	case have < len(migrations):
		return nil, nil, &SchemaTooOldError{Have: have, Know: len(migrations)}
	}
	rows, err := conn.QueryContext(ctx, `SELECT `+selectColumns+` FROM claims ORDER BY device_key`)
	if err != nil {
		return nil, nil, fmt.Errorf("hostreg: list claims: %w", err)
	}
	defer rows.Close()
	var out []readRow
	for rows.Next() {
		r, err := scanRow(rows)
		var u errUnscannable
		if errors.As(err, &u) {
			// Wrongly typed columns: report the row, do not stop.
			out = append(out, readRow{row: r, err: err})
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("hostreg: list claims: %w", err)
		}
		out = append(out, readRow{row: r})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("hostreg: list claims: %w", err)
	}
	rows.Close()
	reclaimed, err := readReclaims(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	return out, reclaimed, nil
}

// Inspect lists the claims of db's own registry with db's prober, through
// the package-level Inspect, so that the daemon and `device status`
// classify the same way.
func (db *DB) Inspect(ctx context.Context) ([]Status, error) {
	return Inspect(ctx, db.dir, db.prober)
}
