// Package listcache keeps the last good result of one expensive read (a
// driver's listing of installed runtimes or system images), so that
// resolving a lease request's spec usually starts no process. It follows
// the caching rule of docs/adr/0026: serve a fresh value; re-read when the
// value is older than the bound, after an invalidation, or when the caller
// asks for a read that began after a moment it names (a miss); let a burst
// of callers share one read; never keep a failed or partial read.
package listcache

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/ports"
)

// Ticket names a moment in the cache's history: a read started after it
// sees every change made before it.
type Ticket uint64

// Options configures a Cache.
type Options[T any] struct {
	// TTL bounds how old a served value may be.
	TTL   time.Duration
	Clock ports.Clock
	// Read performs the expensive read. ctx is the caller's that started
	// it.
	Read func(ctx context.Context) (T, error)
	// Keep reports whether a successful read is complete enough to serve
	// to later callers; a read it refuses is still returned to the callers
	// that waited for it. Nil keeps every successful read.
	Keep func(T) bool
	// Stamp, when set, fingerprints what the read lists without starting
	// a process (the modification times of the SDK's or Xcode's
	// directories, see DirStamp). A kept value is served only while the
	// stamp is what it was when its read began, so an install made behind
	// the driver's back is seen on the next request. It is checked at most
	// once per StampEvery (default one second): a few stat calls per
	// second, never per request.
	Stamp      func() string
	StampEvery time.Duration
}

// Cache is safe for concurrent use.
type Cache[T any] struct {
	opts Options[T]

	mu      sync.Mutex
	val     T
	have    bool
	at      time.Time // when the read that produced val started
	valID   uint64    // that read's number
	started uint64    // reads started so far (the newest read's number)
	floor   uint64    // reads numbered at or below floor may not be kept
	flight  *flight[T]
	waiting int // callers parked on a flight (tests observe it)

	stamp     string    // Stamp when val's read began
	stampedAt time.Time // when Stamp was last checked
}

type flight[T any] struct {
	id   uint64
	done chan struct{}
	val  T
	err  error
	// abandoned is set when the read failed because the caller that ran
	// it went away, which says nothing about the others waiting.
	abandoned bool
}

// New returns an empty cache.
func New[T any](o Options[T]) *Cache[T] {
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	if o.StampEvery <= 0 {
		o.StampEvery = time.Second
	}
	return &Cache[T]{opts: o}
}

// Now returns a ticket for this moment.
func (c *Cache[T]) Now() Ticket {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Ticket(c.started)
}

// Get returns a value no older than the TTL, reading when there is none.
// cached reports that no read started for this call, so the value may
// predate a change made just before it: a caller that cannot serve a
// request from a cached value should ask Fetch for a newer one before
// refusing.
func (c *Cache[T]) Get(ctx context.Context) (val T, cached bool, err error) {
	c.mu.Lock()
	c.checkStampLocked()
	if c.have && c.opts.Clock.Now().Sub(c.at) < c.opts.TTL {
		v := c.val
		c.mu.Unlock()
		return v, true, nil
	}
	// Any read newer than the value (and than the last invalidation) will
	// do, so a burst arriving during a refresh shares it.
	t := Ticket(max(c.valID, c.floor))
	c.mu.Unlock()
	v, err := c.Fetch(ctx, t)
	return v, false, err
}

// Fetch returns the result of a read that started after t, joining one in
// flight if there is such a read and starting one otherwise. A read started
// at or before t is waited for (it may be the one about to be kept) but its
// result is not used.
func (c *Cache[T]) Fetch(ctx context.Context, t Ticket) (T, error) {
	var zero T
	for {
		c.mu.Lock()
		if c.have && c.valID > uint64(t) {
			// A read that began after t has already finished.
			v := c.val
			c.mu.Unlock()
			return v, nil
		}
		if f := c.flight; f != nil {
			c.waiting++
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				c.mu.Lock()
				c.waiting--
				c.mu.Unlock()
				return zero, ctx.Err()
			}
			c.mu.Lock()
			c.waiting--
			c.mu.Unlock()
			if f.id > uint64(t) && !f.abandoned {
				return f.val, f.err
			}
			continue
		}
		c.started++
		f := &flight[T]{id: c.started, done: make(chan struct{})}
		c.flight = f
		start := c.opts.Clock.Now()
		c.mu.Unlock()

		stamp := ""
		if c.opts.Stamp != nil {
			stamp = c.opts.Stamp() // before the read: a change during it re-reads next time
		}
		v, err := c.opts.Read(ctx)

		c.mu.Lock()
		if err == nil && f.id > c.floor && f.id > c.valID && (c.opts.Keep == nil || c.opts.Keep(v)) {
			c.stamp, c.stampedAt = stamp, start
		}
		f.val, f.err = v, err
		f.abandoned = err != nil && ctx.Err() != nil
		if err == nil && f.id > c.floor && f.id > c.valID && (c.opts.Keep == nil || c.opts.Keep(v)) {
			c.val, c.have, c.at, c.valID = v, true, start, f.id
		}
		c.flight = nil
		close(f.done)
		c.mu.Unlock()
		return v, err
	}
}

// Last returns the last value kept, however old, starting no read: for
// facts that do not change while the value ages (a device type's product
// family), read where a process would cost more than the fact is worth.
func (c *Cache[T]) Last() (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val, c.have
}

// checkStampLocked drops the value when the stamp moved since its read.
// The stat calls run under the cache's lock, which is held only for them:
// they are cheap and bounded to one round per StampEvery.
func (c *Cache[T]) checkStampLocked() {
	if c.opts.Stamp == nil || !c.have {
		return
	}
	now := c.opts.Clock.Now()
	if now.Sub(c.stampedAt) < c.opts.StampEvery {
		return
	}
	c.stampedAt = now
	if c.opts.Stamp() != c.stamp {
		c.invalidateLocked()
	}
}

// Invalidate drops the value, and the result of any read in flight, so the
// next Get reads again. Call it after changing what the read lists.
func (c *Cache[T]) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked()
}

func (c *Cache[T]) invalidateLocked() {
	var zero T
	c.val, c.have, c.valID = zero, false, 0
	c.floor = c.started
}

// DirStamp fingerprints directories by their modification times (a missing
// one reads as absent): installing or removing a runtime, a system image
// or an Xcode changes an entry of the directory that holds them, which
// moves its mtime. It stats; it never starts a process.
func DirStamp(dirs ...string) func() string {
	return func() string {
		var b strings.Builder
		for _, d := range dirs {
			if d == "" {
				continue
			}
			b.WriteString(d)
			if fi, err := os.Stat(d); err == nil {
				fmt.Fprintf(&b, "=%d;", fi.ModTime().UnixNano())
			} else {
				b.WriteString("=absent;")
			}
		}
		return b.String()
	}
}
