package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeaderConfig tunes a Leader. Only Holder and TTL are required.
type LeaderConfig struct {
	// Holder names this campaigner in the lease row. It must be unique per
	// process (a gateway id plus something per start): two processes under
	// one name would take the lease from each other.
	Holder string
	// TTL is how long one renewal keeps the lease in the database. A
	// holder renews every TTL/3; a dead holder's lease is taken over
	// within TTL + Poll.
	TTL time.Duration
	// Margin is how long before its lease can expire in the database a
	// holder that could not renew steps down. It absorbs the two clocks'
	// rate difference and the delay between the step-down timer firing and
	// the holder stopping. Default TTL/5; must be below TTL/2.
	Margin time.Duration
	// Poll is how often a campaigner that does not lead tries again.
	// Default TTL/3.
	Poll time.Duration
	// Log receives step-downs and failed renewals; nil discards.
	Log *slog.Logger
}

// Leader campaigns for the single leader lease of a database (ADR 0102):
// a one-row table naming the holder, its epoch and the expiry, computed on
// the database's clock. Every acquisition starts a new epoch, one above
// the last, so epochs are never reused and never go back; renewals keep
// it. A Leader is safe for concurrent use; it holds at most one term at a
// time.
type Leader struct {
	store *Store
	cfg   LeaderConfig

	// campaign serializes Acquire calls; mu guards term only, so Lost and
	// Resign answer while an Acquire waits.
	campaign sync.Mutex
	mu       sync.Mutex
	term     *term // the current or last term; nil before the first
}

// term is one tenure: from an acquisition to the step-down.
type term struct {
	epoch uint64
	lost  chan struct{}
	stop  context.CancelFunc
	done  chan struct{} // closed when the renewal loop has returned

	mu       sync.Mutex
	deadline time.Time // local: past it, the holder no longer leads
	ended    bool
	timer    *time.Timer
}

// NewLeader prepares a campaigner on s; it does not touch the database
// until Acquire.
func (s *Store) NewLeader(cfg LeaderConfig) (*Leader, error) {
	if cfg.Holder == "" {
		return nil, errors.New("pgstore: leader: empty holder")
	}
	if cfg.TTL <= 0 {
		return nil, fmt.Errorf("pgstore: leader: ttl %v must be positive", cfg.TTL)
	}
	if cfg.Margin == 0 {
		cfg.Margin = cfg.TTL / 5
	}
	// The first renewal starts at TTL/3; the local deadline must leave it
	// room to land, or every term would end at its first renewal.
	if cfg.Margin < 0 || cfg.Margin >= cfg.TTL/2 {
		return nil, fmt.Errorf("pgstore: leader: margin %v must be in [0, ttl/2)", cfg.Margin)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = cfg.TTL / 3
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Leader{store: s, cfg: cfg}, nil
}

// closedChan is what Lost returns before any term: not leading.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }

// Acquire blocks until this campaigner leads, then returns its epoch; it
// returns ctx's error if ctx ends first. The lease is renewed in the
// background until Resign or until a renewal cannot be confirmed in time,
// when Lost closes. Called while leading, it returns the current epoch.
func (l *Leader) Acquire(ctx context.Context) (uint64, error) {
	l.campaign.Lock()
	defer l.campaign.Unlock()
	l.mu.Lock()
	t := l.term
	l.mu.Unlock()
	if t != nil && !t.isEnded() {
		return t.epoch, nil
	}
	for {
		start := time.Now()
		deadline := start.Add(l.cfg.TTL - l.cfg.Margin)
		epoch, ok, err := l.tryAcquire(ctx, deadline)
		switch {
		case ok && time.Now().Before(deadline):
			t := l.begin(epoch, deadline)
			l.mu.Lock()
			l.term = t
			l.mu.Unlock()
			return epoch, nil
		case ok:
			// Granted, but the answer came too late to act on: the lease may
			// expire before any renewal; try again for a fresh epoch.
			l.cfg.Log.Warn("leader lease granted too late to use", "holder", l.cfg.Holder, "epoch", epoch)
			continue
		case err != nil && ctx.Err() == nil:
			l.cfg.Log.Debug("leader lease: campaign attempt failed", "holder", l.cfg.Holder, "err", err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("pgstore: leader %s: %w", l.cfg.Holder, ctx.Err())
		case <-time.After(l.cfg.Poll):
		}
	}
}

// tryAcquire takes the lease when it is free (expired) or already this
// holder's, always in a new epoch.
func (l *Leader) tryAcquire(ctx context.Context, deadline time.Time) (uint64, bool, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var epoch int64
	err := l.store.pool.QueryRow(ctx, `INSERT INTO gateway_leader AS l (holder, epoch, expires_at)
		VALUES ($1, 1, now() + $2 * interval '1 microsecond')
		ON CONFLICT (only_row) DO UPDATE
			SET holder = excluded.holder, epoch = l.epoch + 1, expires_at = excluded.expires_at
			WHERE l.expires_at <= now() OR l.holder = excluded.holder
		RETURNING epoch`, l.cfg.Holder, l.cfg.TTL.Microseconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uint64(epoch), true, nil
}

// begin starts a term and its renewal loop. The step-down timer is its
// own: it closes Lost at the local deadline even while a renewal is
// stuck in the network.
func (l *Leader) begin(epoch uint64, deadline time.Time) *term {
	ctx, cancel := context.WithCancel(context.Background())
	t := &term{epoch: epoch, lost: make(chan struct{}), stop: cancel, done: make(chan struct{}), deadline: deadline}
	t.timer = time.AfterFunc(time.Until(deadline), func() {
		if t.endIfPast() {
			l.cfg.Log.Warn("leader lease not renewed in time; stepping down", "holder", l.cfg.Holder, "epoch", epoch)
		}
	})
	go l.renew(ctx, t)
	return t
}

func (l *Leader) renew(ctx context.Context, t *term) {
	defer close(t.done)
	next := time.Now().Add(l.cfg.TTL / 3)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.lost:
			return
		case <-time.After(time.Until(next)):
		}
		start := time.Now()
		ok, err := l.renewOnce(ctx, t)
		switch {
		case ok:
			if !t.extend(start.Add(l.cfg.TTL - l.cfg.Margin)) {
				return // the step-down won the race; the term is over
			}
			next = start.Add(l.cfg.TTL / 3)
		case err == nil:
			// The row is no longer this term's: someone else took it.
			if t.end() {
				l.cfg.Log.Warn("leader lease taken over; stepping down", "holder", l.cfg.Holder, "epoch", t.epoch)
			}
			return
		default:
			l.cfg.Log.Debug("leader lease renewal failed", "holder", l.cfg.Holder, "epoch", t.epoch, "err", err)
			// Retry soon; the step-down timer ends the term if this goes on.
			next = time.Now().Add(max(l.cfg.TTL/10, time.Millisecond))
		}
	}
}

// renewOnce extends the lease if it is still this term's and unexpired,
// bounded by the term's local deadline: an answer after it is useless.
func (l *Leader) renewOnce(ctx context.Context, t *term) (bool, error) {
	t.mu.Lock()
	deadline := t.deadline
	t.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tag, err := l.store.pool.Exec(ctx, `UPDATE gateway_leader
		SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE holder = $1 AND epoch = $2 AND expires_at > now()`,
		l.cfg.Holder, int64(t.epoch), l.cfg.TTL.Microseconds())
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// extend moves the local deadline after a confirmed renewal; it reports
// false if the term had already ended.
func (t *term) extend(deadline time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.deadline = deadline
	t.timer.Reset(time.Until(deadline))
	return true
}

// endIfPast ends the term if its deadline has passed (the timer may fire
// just as a renewal moved it).
func (t *term) endIfPast() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended || time.Now().Before(t.deadline) {
		return false
	}
	t.ended = true
	close(t.lost)
	return true
}

// end ends the term now; it reports whether this call ended it.
func (t *term) end() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.ended = true
	t.timer.Stop()
	close(t.lost)
	return true
}

func (t *term) isEnded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// Lost is closed when the current term ends: resigned, taken over, or not
// renewed before the local deadline. Before the first Acquire it is
// closed. A holder stops acting as leader as soon as it closes.
func (l *Leader) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term == nil {
		return closedChan()
	}
	return l.term.lost
}

// Resign ends the current term: first locally (Lost closes and renewals
// stop), then in the database, where the lease is marked expired so that
// another campaigner takes over at its next poll instead of after the
// TTL. Not leading is no error.
func (l *Leader) Resign(ctx context.Context) error {
	l.mu.Lock()
	t := l.term
	l.mu.Unlock()
	if t == nil {
		return nil
	}
	t.end()
	t.stop()
	<-t.done
	_, err := l.store.pool.Exec(ctx, `UPDATE gateway_leader SET expires_at = now()
		WHERE holder = $1 AND epoch = $2 AND expires_at > now()`, l.cfg.Holder, int64(t.epoch))
	if err != nil {
		// The lease then expires on its own, within the TTL.
		return fmt.Errorf("pgstore: leader %s resign: %w", l.cfg.Holder, err)
	}
	return nil
}

// Current reads the lease row for status displays: who holds or last
// held the lease, in which epoch, until when (database clock, UTC). An
// expiry in the past means nobody leads now. No row yet: "", 0, zero.
func (l *Leader) Current(ctx context.Context) (holder string, epoch uint64, expiresAt time.Time, err error) {
	return l.store.CurrentLeader(ctx)
}

// CurrentLeader is Leader.Current for a store that does not campaign.
func (s *Store) CurrentLeader(ctx context.Context) (holder string, epoch uint64, expiresAt time.Time, err error) {
	var e int64
	err = s.pool.QueryRow(ctx, `SELECT holder, epoch, expires_at FROM gateway_leader`).Scan(&holder, &e, &expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, time.Time{}, nil
	}
	if err != nil {
		return "", 0, time.Time{}, fmt.Errorf("pgstore: current leader: %w", err)
	}
	return holder, uint64(e), expiresAt.UTC(), nil
}
