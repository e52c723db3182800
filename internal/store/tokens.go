package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrTokenNameTaken reports that another token already has the requested
// non-empty name.
var ErrTokenNameTaken = errors.New("store: token name already taken")

// TokenRecord is one API token. Only a hash of the secret is stored: the
// daemon hashes, and the store never sees a secret.
type TokenRecord struct {
	ID        string
	Name      string // optional; unique when non-empty
	Role      string
	Hash      string
	CreatedAt time.Time
}

// CreateToken stores t. It fails with ErrTokenNameTaken when t.Name is
// non-empty and already used.
func (db *DB) CreateToken(ctx context.Context, t TokenRecord) error {
	if t.ID == "" || t.Hash == "" {
		return errors.New("store: a token needs an ID and a hash")
	}
	return db.immediate(ctx, func(q querier) error {
		// Checked explicitly so the caller gets a sentinel instead of
		// having to tell this UNIQUE violation apart from the ID and hash
		// ones; the partial index still backs it up.
		if t.Name != "" {
			var one int
			err := q.QueryRowContext(ctx, `SELECT 1 FROM tokens WHERE name = ?`, t.Name).Scan(&one)
			if err == nil {
				return fmt.Errorf("%w: %q", ErrTokenNameTaken, t.Name)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("store: create token: %w", err)
			}
		}
		if _, err := q.ExecContext(ctx,
			`INSERT INTO tokens (id, name, role, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.ID, t.Name, t.Role, t.Hash, unixMs(t.CreatedAt)); err != nil {
			return fmt.Errorf("store: create token: %w", err)
		}
		return nil
	})
}

// ListTokens returns every token, oldest first.
func (db *DB) ListTokens(ctx context.Context) ([]TokenRecord, error) {
	rows, err := db.sql.QueryContext(ctx,
		`SELECT id, name, role, hash, created_at FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	defer rows.Close()
	var out []TokenRecord
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken deletes the token with id and reports whether it existed.
// Deleting (rather than flagging) frees the name and makes the hash unusable
// in one step.
func (db *DB) RevokeToken(ctx context.Context, id string) (bool, error) {
	res, err := db.sql.ExecContext(ctx, `DELETE FROM tokens WHERE id = ?`, id)
	if err != nil {
		return false, fmt.Errorf("store: revoke token: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: revoke token: %w", err)
	}
	return n > 0, nil
}

// TokenByHash finds the token whose secret hashes to hash.
func (db *DB) TokenByHash(ctx context.Context, hash string) (TokenRecord, bool, error) {
	if hash == "" {
		return TokenRecord{}, false, nil
	}
	row := db.sql.QueryRowContext(ctx,
		`SELECT id, name, role, hash, created_at FROM tokens WHERE hash = ?`, hash)
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenRecord{}, false, nil
	}
	if err != nil {
		return TokenRecord{}, false, fmt.Errorf("store: token by hash: %w", err)
	}
	return t, true, nil
}

func scanToken(s interface{ Scan(...any) error }) (TokenRecord, error) {
	var (
		t       TokenRecord
		created sql.NullInt64
	)
	if err := s.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &created); err != nil {
		return TokenRecord{}, err
	}
	t.CreatedAt = fromUnixMs(created)
	return t, nil
}
