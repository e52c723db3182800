package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's steps; migration i+1 is migrations[i]. A
// step is only ever appended, never edited once released.
var migrations = []string{
	// 1: receipts (ADR 0101), the Seq high-water mark, the drained set and
	// the leader lease (ADR 0102).
	`
CREATE TABLE gateway_receipts (
	id          text PRIMARY KEY CHECK (id <> ''),
	seq         bigint NOT NULL UNIQUE CHECK (seq >= 0),
	requester   text NOT NULL,
	owner       text NOT NULL,
	idem_key    text NOT NULL,       -- '' is no idempotency key
	fingerprint text NOT NULL,
	-- JSON kept as json, not jsonb: it is only read back whole, and json
	-- accepts every string encoding/json writes (jsonb refuses \u0000).
	body        json NOT NULL,       -- contract.LeaseRequestIn
	state       text NOT NULL,
	worker      text NOT NULL,
	attempt     integer NOT NULL,
	attempt_at  timestamptz,
	lease       json,                -- contract.Lease; NULL is none
	error       json,                -- contract.Error; NULL is none
	interrupted boolean NOT NULL,
	deadline    timestamptz,         -- NULL: waits without a timeout
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL
);
CREATE UNIQUE INDEX gateway_receipts_key ON gateway_receipts (requester, idem_key) WHERE idem_key <> '';
-- A restart reads the open ones by seq; pruning walks the settled ones by age.
CREATE INDEX gateway_receipts_open ON gateway_receipts (seq) WHERE state IN ('queued', 'dispatched');
CREATE INDEX gateway_receipts_settled ON gateway_receipts (updated_at) WHERE state NOT IN ('queued', 'dispatched');

-- The highest seq of a deleted receipt, so that MaxSeq never goes back.
CREATE TABLE gateway_seq (high bigint NOT NULL);
INSERT INTO gateway_seq VALUES (0);

CREATE TABLE gateway_drained (
	worker_id text PRIMARY KEY CHECK (worker_id <> ''),
	label     text NOT NULL
);

-- One row at most: who leads, in which epoch, until when (database clock).
CREATE TABLE gateway_leader (
	only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
	holder     text NOT NULL,
	epoch      bigint NOT NULL CHECK (epoch > 0),
	expires_at timestamptz NOT NULL
);
`,
}

// migrateLock is the advisory lock key gateways starting together take so
// that one of them migrates and the others then find the work done.
const migrateLock int64 = 0x73696d6c6f636b01 // "simlock" + 1

// SchemaTooNewError refuses a database a newer simlock has migrated:
// running older code on it could misread or damage what it does not know.
type SchemaTooNewError struct {
	Have int // the database's schema version
	Know int // the newest this binary knows
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("pgstore: database schema version %d is newer than this simlock knows (%d); upgrade simlock", e.Have, e.Know)
}

// migrate applies the missing migrations in one transaction under the
// advisory lock. A refused (too new) database is rolled back untouched:
// even the CREATE TABLE IF NOT EXISTS below is undone.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrateTo(ctx, pool, migrations)
}

func migrateTo(ctx context.Context, pool *pgxpool.Pool, migs []string) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version    integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(migs) {
			return &SchemaTooNewError{Have: have, Know: len(migs)}
		}
		for v := have + 1; v <= len(migs); v++ {
			if _, err := tx.Exec(ctx, migs[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, v); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
		}
		return nil
	})
	if err != nil {
		if tooNew := (*SchemaTooNewError)(nil); errors.As(err, &tooNew) {
			return err
		}
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}
