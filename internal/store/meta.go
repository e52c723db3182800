package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// GetMeta returns the value stored under key, and whether there was one.
func (db *DB) GetMeta(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := db.sql.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: get meta %q: %w", key, err)
	}
	return v, true, nil
}

// SetMeta stores value under key, replacing any previous value. Meta holds
// small facts (install ID, last sweep) that do not deserve a table.
func (db *DB) SetMeta(ctx context.Context, key, value string) error {
	if _, err := db.sql.ExecContext(ctx,
		`INSERT INTO meta (key, value) VALUES (?, ?)
		 ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value); err != nil {
		return fmt.Errorf("store: set meta %q: %w", key, err)
	}
	return nil
}
