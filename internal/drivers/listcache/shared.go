package listcache

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/ports"
)

// Shared answers an inventory read within a caller's budget
// (docs/adr/0039): one background read runs on the Shared's own lifetime,
// bounded by Cap, whoever started it; callers wait for it at most their
// budget and are told it is still pending otherwise; its successful,
// complete result serves later callers for TTL, so a retry shortly after
// the deadline gets the full answer without starting a new read. A failed,
// partial or superseded read is never kept.
type Shared[T any] struct {
	opts SharedOptions[T]
	base context.Context

	mu   sync.Mutex
	val  T
	have bool
	// at is when the kept read finished: a read slower than TTL (the case
	// Shared exists for) must still serve the retry that follows it.
	// Changes during the read are caught by Invalidate, not by age.
	at     time.Time
	gen    uint64 // bumped by Invalidate
	flight *sharedFlight[T]
	// overtaken is set when Invalidate aborted a read under way, until
	// the read that replaces it starts: callers told to come back for the
	// aborted read must learn it was superseded, not meet a plain timeout.
	overtaken bool
	reads     int // reads started (tests count them)
}

// SharedOptions configures a Shared.
type SharedOptions[T any] struct {
	// TTL bounds how long a finished read serves later callers, counted
	// from when it finished.
	TTL time.Duration
	// Cap bounds one background read, however long callers wait.
	Cap   time.Duration
	Clock ports.Clock
	// Read performs the read. Its ctx ends at Cap, at Invalidate or when
	// the Shared's base context ends, never when a caller gives up.
	Read func(ctx context.Context) (T, error)
	// Keep reports whether a successful read is complete enough to serve
	// later callers (nil: every successful read).
	Keep func(T) bool
}

type sharedFlight[T any] struct {
	gen    uint64
	done   chan struct{}
	cancel context.CancelFunc
	val    T
	err    error
	// superseded is set when Invalidate ran while the read was under way:
	// what it read may describe devices or images that have changed.
	superseded bool
	// replaces is set when this read replaces one Invalidate aborted.
	replaces bool
}

// Outcome is what one caller gets from Within.
type Outcome[T any] struct {
	Val T
	// Done is true when Val is a finished read's result (fresh or kept).
	Done bool
	// Cached is true when no read was started or joined for this call.
	Cached bool
	// Pending is true when the budget ran out before the shared read
	// finished; the read goes on and a later call may get its result.
	Pending bool
	// Superseded is true when the read this call waited for was overtaken
	// by an invalidation (or by the end of the Shared's lifetime). With
	// Pending it means the read a caller was told to come back for was
	// overtaken, and the fresh read that replaces it is still running.
	Superseded bool
	// Err is the shared read's failure, or the caller's own cancellation.
	Err error
}

// ErrSuperseded is Outcome.Err for a superseded read.
var ErrSuperseded = errors.New("listcache: read superseded by an invalidation")

// NewShared returns an empty Shared whose background reads end when base
// does (the daemon's lifetime).
func NewShared[T any](base context.Context, o SharedOptions[T]) *Shared[T] {
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	return &Shared[T]{opts: o, base: base}
}

// Within returns the newest finished read that is younger than TTL, or
// starts (or joins) the shared read and waits for it at most budget.
func (s *Shared[T]) Within(ctx context.Context, budget time.Duration) Outcome[T] {
	s.mu.Lock()
	if s.have && s.opts.Clock.Now().Sub(s.at) < s.opts.TTL {
		v := s.val
		s.mu.Unlock()
		return Outcome[T]{Val: v, Done: true, Cached: true}
	}
	f := s.flight
	if f == nil {
		f = s.startLocked()
	}
	s.mu.Unlock()

	expired := make(chan struct{})
	t := s.opts.Clock.AfterFunc(budget, func() { close(expired) })
	defer t.Stop()
	select {
	case <-f.done:
	case <-expired:
		return Outcome[T]{Pending: true, Superseded: f.replaces}
	case <-ctx.Done():
		return Outcome[T]{Err: ctx.Err()}
	}
	switch {
	case f.superseded:
		return Outcome[T]{Superseded: true, Err: ErrSuperseded}
	case f.err != nil:
		return Outcome[T]{Err: f.err}
	}
	return Outcome[T]{Val: f.val, Done: true}
}

func (s *Shared[T]) startLocked() *sharedFlight[T] {
	ctx, cancel := context.WithCancel(s.base)
	f := &sharedFlight[T]{gen: s.gen, done: make(chan struct{}), cancel: cancel, replaces: s.overtaken}
	s.flight, s.overtaken = f, false
	s.reads++
	capT := s.opts.Clock.AfterFunc(s.opts.Cap, cancel)
	go func() {
		v, err := s.opts.Read(ctx)
		capT.Stop()
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		f.val, f.err = v, err
		// A read cut short by the end of the base lifetime (daemon
		// shutdown) is as obsolete as one an invalidation aborted.
		f.superseded = f.gen != s.gen || (err != nil && s.base.Err() != nil)
		if err == nil && !f.superseded && (s.opts.Keep == nil || s.opts.Keep(v)) {
			s.val, s.have, s.at = v, true, s.opts.Clock.Now()
		}
		if s.flight == f {
			s.flight = nil
		}
		close(f.done)
	}()
	return f
}

// Invalidate drops the kept value and aborts the read under way: its
// waiters are told it was superseded, and the next call reads afresh. Call
// it when what the read lists changed (a device made or removed, an image
// installed).
func (s *Shared[T]) Invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	s.val, s.have = zero, false
	s.gen++
	if f := s.flight; f != nil {
		f.cancel()
		s.flight, s.overtaken = nil, true
	}
}

// Peek returns the kept value when it is younger than TTL, starting
// nothing: for views that show a live observation only when one is at hand.
func (s *Shared[T]) Peek() (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.have && s.opts.Clock.Now().Sub(s.at) < s.opts.TTL {
		return s.val, true
	}
	var zero T
	return zero, false
}

// Reads reports how many reads have started.
func (s *Shared[T]) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}
