package hostreg

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/sqlitedb"
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
	// 2: port leases (ports.go). One row per leased port; a console lease
	// covers its port and the adb port after it. Like claims, no CHECKs:
	// the decoder judges a row, and one it cannot read holds its port.
	`
CREATE TABLE ports (
	port           INTEGER PRIMARY KEY NOT NULL,
	record_version INTEGER NOT NULL,
	purpose        TEXT NOT NULL,              -- adb-server | console
	owner_home     TEXT NOT NULL,
	owner_pid      INTEGER NOT NULL,
	owner_start    TEXT NOT NULL,
	serves         TEXT NOT NULL,              -- console: the AVD; adb-server: the home
	allocated_at   INTEGER NOT NULL            -- unix ms UTC
) STRICT;
`,
	// 3: managed slots (slot.go).
	slotMigration,
	// 4: a slot counter beside the claim generation, and the execution's
	// idle window on its owner record (slot.go).
	slotMigration4,
	// 5: waiters held back by the host's limit (waiters.go, ADR 0061).
	waiterMigration,
	// 6: the reclaims history (reclaim_log.go).
	reclaimMigration,
	// 7: starts in flight, for host admission (admit.go).
	startsMigration,
}

// SchemaTooNewError refuses a registry written by a newer simlock: writing
// a schema we do not understand could corrupt another process's claims, so
// the file is left untouched (see sqlitedb).
type SchemaTooNewError = sqlitedb.SchemaTooNewError

func schema(migs []string) sqlitedb.Schema {
	return sqlitedb.Schema{Label: "hostreg", Noun: "host registry", Migrations: migs, BusyWait: busyTimeout}
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

// init runs the guard with reads only (a refused file is never written),
// then switches to WAL and migrates, each step in its own BEGIN IMMEDIATE
// so concurrent openers (several daemons starting at once) migrate once.
func (db *DB) init(ctx context.Context, migs []string) error {
	return sqlitedb.Migrate(ctx, db.sql.db(), schema(migs))
}

// schemaVersion reads the version without creating anything.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	return sqlitedb.SchemaVersion(ctx, q, "hostreg")
}
