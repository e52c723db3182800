// Package pgstore is the gateway's store on PostgreSQL (ADR 0101): the
// receipts of accepted lease requests and the drained set, shared by every
// gateway pointed at the same database, plus the leader lease that picks
// the one gateway that dispatches (ADR 0102).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simlock/simlock/internal/gateway"
)

var _ gateway.Store = (*Store)(nil)

// Store is a gateway.Store on one PostgreSQL database, through a pool of
// connections. Safe for concurrent use; every write is committed (and so
// durable, with the server's fsync on) when its method returns.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to the database dsn names (a libpq keyword string or a
// postgres:// URL, as pgx reads them) with at most poolSize connections
// (0: pgx's default), and brings its schema up to date. A database whose
// schema is newer than this binary knows is refused with a
// *SchemaTooNewError and left untouched.
func Open(ctx context.Context, dsn string, poolSize int) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: dsn: %w", err)
	}
	if poolSize < 0 || poolSize > math.MaxInt32 {
		return nil, fmt.Errorf("pgstore: pool size %d out of range", poolSize)
	}
	if poolSize > 0 {
		cfg.MaxConns = int32(poolSize)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Close releases the pool's connections.
func (s *Store) Close() { s.pool.Close() }

const receiptColumns = `id, seq, requester, owner, idem_key, fingerprint, body, state, worker, attempt,
	attempt_at, lease, error, interrupted, deadline, created_at, updated_at`

// PutReceipt inserts or replaces one receipt by id. Another receipt under
// the same (requester, key) is gateway.ErrDuplicateKey.
func (s *Store) PutReceipt(ctx context.Context, r gateway.Receipt) error {
	if r.ID == "" {
		return errors.New("pgstore: put receipt: empty id")
	}
	if r.Seq > math.MaxInt64 {
		return fmt.Errorf("pgstore: receipt %s: seq %d does not fit a bigint", r.ID, r.Seq)
	}
	j, err := r.EncodeJSON()
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO gateway_receipts (`+receiptColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (id) DO UPDATE SET
			seq = excluded.seq, requester = excluded.requester, owner = excluded.owner,
			idem_key = excluded.idem_key, fingerprint = excluded.fingerprint, body = excluded.body,
			state = excluded.state, worker = excluded.worker, attempt = excluded.attempt,
			attempt_at = excluded.attempt_at, lease = excluded.lease, error = excluded.error,
			interrupted = excluded.interrupted, deadline = excluded.deadline,
			created_at = excluded.created_at, updated_at = excluded.updated_at`,
		r.ID, int64(r.Seq), r.Requester, r.Owner, r.Key, r.Fingerprint, j.Body, r.State,
		r.Worker, r.Attempt, timeOrNull(r.AttemptAt), j.Lease, j.Error, r.Interrupted, timeOrNull(r.Deadline),
		toMs(r.CreatedAt), toMs(r.UpdatedAt))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "gateway_receipts_key" {
		return fmt.Errorf("pgstore: receipt %s: %w", r.ID, gateway.ErrDuplicateKey)
	}
	if err != nil {
		return fmt.Errorf("pgstore: put receipt %s: %w", r.ID, err)
	}
	return nil
}

// DeleteReceipt forgets one receipt; an absent id is no error. The
// high-water mark keeps its Seq, so MaxSeq never goes back.
func (s *Store) DeleteReceipt(ctx context.Context, id string) error {
	return s.deleting(ctx, "delete receipt "+id, `WHERE id = $1`, id)
}

// deleting deletes the receipts where selects and raises the Seq
// high-water mark to the highest of them, in one transaction.
func (s *Store) deleting(ctx context.Context, what, where string, args ...any) error {
	_, err := s.deleteCount(ctx, what, where, args...)
	return err
}

func (s *Store) deleteCount(ctx context.Context, what, where string, args ...any) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var top *int64
		err := tx.QueryRow(ctx, `WITH gone AS (DELETE FROM gateway_receipts `+where+` RETURNING seq)
			SELECT count(*), max(seq) FROM gone`, args...).Scan(&n, &top)
		if err != nil || top == nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE gateway_seq SET high = greatest(high, $1)`, *top)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: %s: %w", what, err)
	}
	return n, nil
}

// Receipt reads one receipt by id.
func (s *Store) Receipt(ctx context.Context, id string) (gateway.Receipt, bool, error) {
	return s.oneReceipt(ctx, `WHERE id = $1`, id)
}

// ReceiptByKey reads the receipt a requester's idempotency key names; the
// empty key names none.
func (s *Store) ReceiptByKey(ctx context.Context, requester, key string) (gateway.Receipt, bool, error) {
	if key == "" {
		return gateway.Receipt{}, false, nil
	}
	return s.oneReceipt(ctx, `WHERE requester = $1 AND idem_key = $2`, requester, key)
}

func (s *Store) oneReceipt(ctx context.Context, where string, args ...any) (gateway.Receipt, bool, error) {
	rs, err := s.receipts(ctx, where, args...)
	if err != nil || len(rs) == 0 {
		return gateway.Receipt{}, false, err
	}
	return rs[0], true, nil
}

// OpenReceipts lists the queued and dispatched receipts by Seq.
func (s *Store) OpenReceipts(ctx context.Context) ([]gateway.Receipt, error) {
	return s.receipts(ctx, `WHERE state IN ($1, $2) ORDER BY seq`, gateway.ReceiptQueued, gateway.ReceiptDispatched)
}

// MaxSeq is the highest Seq ever stored, counting deleted receipts, 0 for
// none.
func (s *Store) MaxSeq(ctx context.Context) (uint64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT greatest((SELECT high FROM gateway_seq),
		(SELECT coalesce(max(seq), 0) FROM gateway_receipts))`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgstore: max seq: %w", err)
	}
	return uint64(n), nil
}

// PruneReceipts deletes settled receipts updated before cutoff, then the
// oldest settled ones beyond the newest keep (keep < 0 counts as 0). Open
// receipts are never pruned.
func (s *Store) PruneReceipts(ctx context.Context, cutoff time.Time, keep int) (int, error) {
	var total int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n1, n2 int
		var top1, top2 *int64
		err := tx.QueryRow(ctx, `WITH gone AS (DELETE FROM gateway_receipts
				WHERE state NOT IN ($1, $2) AND updated_at < $3 RETURNING seq)
			SELECT count(*), max(seq) FROM gone`,
			gateway.ReceiptQueued, gateway.ReceiptDispatched, toMs(cutoff)).Scan(&n1, &top1)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `WITH gone AS (DELETE FROM gateway_receipts WHERE id IN (
				SELECT id FROM gateway_receipts WHERE state NOT IN ($1, $2)
				ORDER BY updated_at DESC, seq DESC OFFSET $3) RETURNING seq)
			SELECT count(*), max(seq) FROM gone`,
			gateway.ReceiptQueued, gateway.ReceiptDispatched, max(keep, 0)).Scan(&n2, &top2)
		if err != nil {
			return err
		}
		for _, top := range []*int64{top1, top2} {
			if top == nil {
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE gateway_seq SET high = greatest(high, $1)`, *top); err != nil {
				return err
			}
		}
		total = n1 + n2
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: prune receipts: %w", err)
	}
	return total, nil
}

func (s *Store) receipts(ctx context.Context, where string, args ...any) ([]gateway.Receipt, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+receiptColumns+` FROM gateway_receipts `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: receipts: %w", err)
	}
	defer rows.Close()
	var out []gateway.Receipt
	for rows.Next() {
		var (
			r                   gateway.Receipt
			seq                 int64
			body                string
			lease, rerr         *string
			attemptAt, deadline *time.Time
		)
		if err := rows.Scan(&r.ID, &seq, &r.Requester, &r.Owner, &r.Key, &r.Fingerprint, &body, &r.State,
			&r.Worker, &r.Attempt, &attemptAt, &lease, &rerr, &r.Interrupted, &deadline,
			&r.CreatedAt, &r.UpdatedAt); err != nil {
			return nil, fmt.Errorf("pgstore: receipts: %w", err)
		}
		r.Seq = uint64(seq)
		r.AttemptAt, r.Deadline = fromNull(attemptAt), fromNull(deadline)
		r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		if err := (gateway.ReceiptJSON{Body: body, Lease: lease, Error: rerr}).DecodeInto(&r); err != nil {
			return nil, fmt.Errorf("pgstore: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: receipts: %w", err)
	}
	return out, nil
}

// Drained reads the drained set (worker id → label).
func (s *Store) Drained(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT worker_id, label FROM gateway_drained`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: drained set: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, label string
		if err := rows.Scan(&id, &label); err != nil {
			return nil, fmt.Errorf("pgstore: drained set: %w", err)
		}
		out[id] = label
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: drained set: %w", err)
	}
	return out, nil
}

// SetDrained adds a worker to the drained set or takes it out.
func (s *Store) SetDrained(ctx context.Context, id, label string, drained bool) error {
	if id == "" {
		return errors.New("pgstore: drained set: empty worker id")
	}
	var err error
	if drained {
		_, err = s.pool.Exec(ctx, `INSERT INTO gateway_drained (worker_id, label) VALUES ($1, $2)
			ON CONFLICT (worker_id) DO UPDATE SET label = excluded.label`, id, label)
	} else {
		_, err = s.pool.Exec(ctx, `DELETE FROM gateway_drained WHERE worker_id = $1`, id)
	}
	if err != nil {
		return fmt.Errorf("pgstore: drained set: %w", err)
	}
	return nil
}

// toMs cuts t to the millisecond in UTC: the precision every gateway store
// keeps (the SQLite one stores milliseconds), so both round-trip alike.
func toMs(t time.Time) time.Time { return t.Truncate(time.Millisecond).UTC() }

// timeOrNull stores the zero time (no deadline, no attempt) as NULL.
func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	ms := toMs(t)
	return &ms
}

func fromNull(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
