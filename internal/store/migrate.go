package store

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/sqlitedb"
)

// migrations shape the schema. Entry i takes the database from version i to
// version i+1, so the length of the slice is the newest version this binary
// knows. Never edit or reorder a released entry; append a new one.
//
// Tables are STRICT so a wrongly typed value fails loudly instead of being
// stored under SQLite's type affinity rules.
var migrations = []string{
	// 1: registry, tokens, meta.
	`
CREATE TABLE devices (
	id               TEXT PRIMARY KEY NOT NULL,
	platform         TEXT NOT NULL,
	handle           TEXT NOT NULL,
	name             TEXT NOT NULL,
	state            TEXT NOT NULL,
	spec             TEXT NOT NULL,             -- JSON core.Spec
	attrs            TEXT,                      -- JSON object; NULL is a nil map
	simulated        INTEGER NOT NULL CHECK (simulated IN (0, 1)),
	state_since      INTEGER,                   -- unix ms UTC; NULL is the zero time
	created_at       INTEGER,
	last_leased_at   INTEGER,
	last_released_at INTEGER,
	data             TEXT                       -- driver JSON, verbatim; NULL is none
) STRICT;

CREATE TABLE leases (
	id              TEXT PRIMARY KEY NOT NULL,
	-- Deferred, so one change set may add a device and its lease (or drop
	-- both) in any order; only the committed state must be consistent.
	device_id       TEXT NOT NULL REFERENCES devices (id) DEFERRABLE INITIALLY DEFERRED,
	requester_id    TEXT NOT NULL UNIQUE,
	owner_id        TEXT NOT NULL,
	platform        TEXT NOT NULL,
	ttl_ms          INTEGER NOT NULL,
	granted_at      INTEGER,
	expires_at      INTEGER,
	last_renewed_at INTEGER
) STRICT;

-- Without it every device delete scans leases for the foreign key check.
CREATE INDEX leases_device_id ON leases (device_id);

CREATE TABLE tokens (
	id         TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
	name       TEXT NOT NULL DEFAULT '',
	role       TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE CHECK (hash <> ''),
	created_at INTEGER
) STRICT;

-- Names are optional; only non-empty ones must be unique.
CREATE UNIQUE INDEX tokens_name ON tokens (name) WHERE name <> '';

CREATE TABLE meta (
	key   TEXT PRIMARY KEY NOT NULL,
	value TEXT NOT NULL
) STRICT;
`,
	// 2: quarantine and crash-recovery bookkeeping per device.
	`ALTER TABLE devices ADD COLUMN health TEXT; -- JSON core.DeviceHealth; NULL is none`,
	// 3: the device operation in flight, written before its driver call.
	`ALTER TABLE devices ADD COLUMN intent TEXT; -- JSON core.DeviceIntent; NULL is none`,
	// 4: durable lease requests (ADR 0017) and how each lease was served.
	`
CREATE TABLE lease_requests (
	id              TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),   -- req_<hex>
	requester_id    TEXT NOT NULL,
	owner_id        TEXT NOT NULL,
	idempotency_key TEXT CHECK (idempotency_key <> ''),           -- NULL is none
	fingerprint     TEXT NOT NULL,
	platform        TEXT NOT NULL,
	state           TEXT NOT NULL,
	lease_id        TEXT,                                        -- no reference: the receipt outlives its lease
	error_code      TEXT,
	error_message   TEXT,
	error_retryable INTEGER CHECK (error_retryable IN (0, 1)),
	interrupted     INTEGER NOT NULL DEFAULT 0 CHECK (interrupted IN (0, 1)),
	created_at      INTEGER NOT NULL,                            -- unix ms UTC
	updated_at      INTEGER NOT NULL,
	queue_seq       INTEGER NOT NULL,                            -- admission order
	timing          TEXT                                         -- JSON; NULL is none
) STRICT;

-- One request per (requester, key); requests without a key are never matched.
CREATE UNIQUE INDEX lease_requests_key ON lease_requests (requester_id, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
CREATE INDEX lease_requests_updated ON lease_requests (updated_at);

ALTER TABLE leases ADD COLUMN request_id TEXT;   -- the request it was granted to; NULL is none
ALTER TABLE leases ADD COLUMN timing TEXT;       -- JSON; NULL is none
`,
	// 5: the events journal: business facts kept across restarts, bounded
	// by count and age (events.retention), under their bus sequence number.
	`
CREATE TABLE events (
	seq          INTEGER PRIMARY KEY NOT NULL CHECK (seq > 0),
	type         TEXT NOT NULL,
	at           INTEGER NOT NULL,                 -- unix ms UTC
	device_id    TEXT NOT NULL DEFAULT '',
	lease_id     TEXT NOT NULL DEFAULT '',
	requester_id TEXT NOT NULL DEFAULT '',
	platform     TEXT NOT NULL DEFAULT '',
	reason       TEXT NOT NULL DEFAULT '',
	data         TEXT                               -- JSON object; NULL is none
) STRICT;

CREATE INDEX events_at ON events (at);
`,
	// 6: multi-device leases (ADR 0043): the further members of a group
	// lease, a JSON array of device ids; NULL for a lease of one device.
	`
ALTER TABLE leases ADD COLUMN members TEXT;
`,
	// 7: what a lease's release does to its devices (a session's reset,
	// ADR 0045), a JSON core.ReleasePolicy; NULL is the pool's purge.
	`
ALTER TABLE leases ADD COLUMN release_policy TEXT;
`,
	// 8: session receipts (ADR 0047), keyed by the operation identity
	// (SHA-256 over the owner token's digest and the canonical config; the
	// raw token is never stored), and their pinned export links.
	`
CREATE TABLE session_receipts (
	identity        TEXT PRIMARY KEY NOT NULL CHECK (length(identity) = 64),
	owner_digest    TEXT NOT NULL CHECK (length(owner_digest) = 64),
	request_id      TEXT NOT NULL CHECK (request_id <> ''),
	session_id      TEXT CHECK (session_id <> ''),           -- NULL until admitted
	status          TEXT NOT NULL,
	cleanup_pending INTEGER NOT NULL DEFAULT 0 CHECK (cleanup_pending IN (0, 1)),
	record          TEXT NOT NULL,                           -- JSON sessions.Record
	created_at      INTEGER NOT NULL,                        -- unix ms UTC
	updated_at      INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX session_receipts_session ON session_receipts (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX session_receipts_request ON session_receipts (owner_digest, request_id);
CREATE INDEX session_receipts_updated ON session_receipts (updated_at);

CREATE TABLE session_exports (
	prepare_id      TEXT PRIMARY KEY NOT NULL CHECK (prepare_id <> ''),
	request_digest  TEXT NOT NULL CHECK (request_digest <> ''),
	identity        TEXT NOT NULL UNIQUE REFERENCES session_receipts (identity) ON DELETE CASCADE,
	created_at      INTEGER NOT NULL,
	acknowledged_at INTEGER                                  -- NULL until acknowledged
) STRICT;
`,
	// 9: the principal that prepared each session (ADR 0055), so
	// session.info answers only it, also once the session has ended and its
	// lease is gone. Stored as the name it is (a principal is no
	// credential; leases and the journal keep it too). A receipt written
	// before this migration takes the owner of its lease if the lease is
	// still held; the others keep NULL, which only an admin may read.
	`
ALTER TABLE session_receipts ADD COLUMN principal TEXT CHECK (principal <> ''); -- NULL: unknown (before migration 9)

UPDATE session_receipts SET principal = (
	SELECT NULLIF(l.owner_id, '') FROM leases l WHERE l.id = json_extract(session_receipts.record, '$.receipt.leaseId'))
WHERE principal IS NULL;
`,
	// 10: export links scoped by their owner. Keyed by the prepare id
	// alone, one owner's link answered another owner's prepare with a
	// mismatch (an oracle for which ids are taken) and a failed prepare
	// squatted an id its rightful owner could then never link. The key is
	// now (owner digest, prepare id), the owner digest taken from the
	// linked receipt; a link whose receipt is gone (only possible with
	// foreign keys off) has no owner to scope it and is dropped.
	`
CREATE TABLE session_exports_v10 (
	owner_digest    TEXT NOT NULL CHECK (length(owner_digest) = 64),
	prepare_id      TEXT NOT NULL CHECK (prepare_id <> ''),
	request_digest  TEXT NOT NULL CHECK (request_digest <> ''),
	identity        TEXT NOT NULL UNIQUE REFERENCES session_receipts (identity) ON DELETE CASCADE,
	created_at      INTEGER NOT NULL,
	acknowledged_at INTEGER,                                 -- NULL until acknowledged
	PRIMARY KEY (owner_digest, prepare_id)
) STRICT;

INSERT INTO session_exports_v10 (owner_digest, prepare_id, request_digest, identity, created_at, acknowledged_at)
	SELECT r.owner_digest, e.prepare_id, e.request_digest, e.identity, e.created_at, e.acknowledged_at
	FROM session_exports e JOIN session_receipts r ON r.identity = e.identity;

DROP TABLE session_exports;
ALTER TABLE session_exports_v10 RENAME TO session_exports;
-- Only an admin's refusal asks whether anyone linked a prepare id.
CREATE INDEX session_exports_prepare ON session_exports (prepare_id);
`,
	// 11: a gateway's accepted lease requests and its drained set (ADR
	// 0101). A worker never writes them; they sit empty in its file.
	`
CREATE TABLE gateway_requests (
	id          TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
	seq         INTEGER NOT NULL UNIQUE,
	requester   TEXT NOT NULL,
	owner       TEXT NOT NULL,
	idem_key    TEXT,                           -- NULL: no idempotency key
	fingerprint TEXT NOT NULL,
	body        TEXT NOT NULL,                  -- JSON contract.LeaseRequestIn
	state       TEXT NOT NULL,
	worker      TEXT NOT NULL DEFAULT '',
	attempt     INTEGER NOT NULL DEFAULT 0,
	attempt_at  INTEGER,
	lease       TEXT,                           -- JSON contract.Lease; NULL is none
	error       TEXT,                           -- JSON contract.Error; NULL is none
	interrupted INTEGER NOT NULL CHECK (interrupted IN (0, 1)),
	deadline    INTEGER,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX gateway_requests_key ON gateway_requests (requester, idem_key) WHERE idem_key IS NOT NULL;
-- A restart reads the open ones; pruning walks the settled ones by age.
CREATE INDEX gateway_requests_state ON gateway_requests (state, updated_at);

CREATE TABLE gateway_drained (
	worker_id TEXT PRIMARY KEY NOT NULL CHECK (worker_id <> ''),
	label     TEXT NOT NULL DEFAULT ''
) STRICT;
`,
}

// SchemaTooNewError refuses a database written by a newer simlock; the
// file is left alone (see sqlitedb).
type SchemaTooNewError = sqlitedb.SchemaTooNewError

func schema(migs []string) sqlitedb.Schema {
	return sqlitedb.Schema{Label: "store", Noun: "database", Migrations: migs, BusyWait: 5 * time.Second}
}

// init checks the schema version using reads only, then switches to WAL and
// applies pending migrations (sqlitedb.Migrate): a too-new database is
// never written.
func (db *DB) init(ctx context.Context, migs []string) error {
	return sqlitedb.Migrate(ctx, db.sql, schema(migs))
}

// schemaVersion reads the version without creating anything.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	return sqlitedb.SchemaVersion(ctx, q, "store")
}
