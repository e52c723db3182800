// Package events is simlock's in-process bus for past-tense business facts
// (lease.granted, device.reclaimed, ...). Facts are published only after the
// change they describe has been committed; observers can never block or fail
// an emitter. The bus keeps the most recent facts in a ring buffer so a late
// or slow subscriber can catch up.
//
// Every fact gets the next sequence number when it is published, and every
// subscriber receives facts in that order. There are two kinds of
// subscription, because the two kinds of consumer want different failure
// modes:
//
//   - A follower (Follow) is a cursor into the ring, for frontends serving
//     clients that may read slowly. It costs the bus nothing per fact. When
//     the ring overwrites facts a follower has not read yet, the follower is
//     handed one Gap naming exactly the missed range and then continues with
//     the oldest fact still buffered.
//   - An observer (Observe, Subscribe) is for in-process consumers whose
//     facts must never be lost (the lease-lost relay, the cleanup reaper):
//     the bus appends every fact to the observer's own unbounded queue, so
//     it sees every fact however far it falls behind.
//
// Publishing only appends under the bus's own short lock and wakes
// subscribers without waiting for them. A follower reads the ring on its
// reader's goroutine; an observer's queue is drained by a goroutine the
// observer owns.
package events

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Event is one business fact.
type Event struct {
	Seq         uint64
	Type        string
	At          time.Time
	DeviceID    string
	LeaseID     string
	RequesterID string
	Platform    string
	Reason      string
	Data        map[string]any
}

// Gap says the facts FromSeq through ToSeq (inclusive) will never reach a
// subscriber: they left the ring before it read them.
type Gap struct {
	FromSeq, ToSeq uint64
}

// Item is one delivery: a fact, or a gap marker when Gap is non-nil.
type Item struct {
	Event Event
	Gap   *Gap
}

// Bus is a ring-buffered publish/subscribe hub. The zero value is not usable;
// call New.
type Bus struct {
	now func() time.Time

	mu        sync.Mutex
	seq       uint64  // the newest fact's sequence number
	base      uint64  // facts up to base are from earlier runs (ContinueFrom); the ring never held them
	ring      []Event // fact n lives in ring[(n-1)%len(ring)]
	followers map[*Follower]struct{}
	observers map[*Observer]struct{}
}

// New returns a bus buffering the last size events, stamping them with now.
func New(size int, now func() time.Time) *Bus {
	if size <= 0 {
		size = 1000
	}
	return &Bus{now: now, ring: make([]Event, size),
		followers: map[*Follower]struct{}{}, observers: map[*Observer]struct{}{}}
}

// ContinueFrom makes the bus number its facts after seq, so a daemon whose
// journal already holds facts up to seq from earlier runs keeps sequence
// numbers unique across restarts. Those earlier facts were never in this
// ring: a reader that wants them reads the journal (see Base). It has
// effect only before the first Publish.
func (b *Bus) ContinueFrom(seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seq == b.base {
		b.seq, b.base = seq, seq
	}
}

// Base is the sequence number the bus continued from (0 for a bus that
// did not): every fact at or below it belongs to an earlier run.
func (b *Bus) Base() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.base
}

// Publish stamps e with the next sequence number (and the time, when e has
// none), buffers it and wakes every subscriber. It never waits for a
// subscriber.
func (b *Bus) Publish(e Event) Event {
	out := b.PublishBatch([]Event{e})
	return out[0]
}

// PublishBatch publishes evs in order under one acquisition of the bus's
// lock, so they get consecutive sequence numbers with nothing else in
// between: the engine hands over everything one decision section committed
// in a single call. It returns the stamped events.
func (b *Bus) PublishBatch(evs []Event) []Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]Event, len(evs))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, e := range evs {
		b.seq++
		e.Seq = b.seq
		if e.At.IsZero() {
			e.At = b.now().UTC().Truncate(time.Millisecond)
		}
		b.ring[(e.Seq-1)%uint64(len(b.ring))] = e
		out[i] = e
	}
	for o := range b.observers {
		o.queue = append(o.queue, out...)
		poke(o.wake)
	}
	for f := range b.followers {
		poke(f.wake)
	}
	return out
}

// oldestLocked is the sequence number of the oldest buffered fact (seq+1
// when nothing is buffered).
func (b *Bus) oldestLocked() uint64 {
	if n := uint64(len(b.ring)); b.seq-b.base > n {
		return b.seq - n + 1
	}
	return b.base + 1
}

// sinceLocked normalizes a caller's since: a value above the newest fact
// comes from another daemon run (without a journal sequence numbers start
// again at 1 on each start), so everything this run has buffered is newer
// than it. A since below Base yields a gap down to it, which a reader with
// the journal fills from there.
func (b *Bus) sinceLocked(since uint64) uint64 {
	if since > b.seq {
		return b.base
	}
	return since
}

// readLocked returns up to max buffered facts after since (max <= 0: all of
// them), and the gap between since and the oldest buffered fact, if any.
func (b *Bus) readLocked(since uint64, max int) ([]Event, *Gap) {
	var gap *Gap
	from := since + 1
	if oldest := b.oldestLocked(); from < oldest {
		gap = &Gap{FromSeq: from, ToSeq: oldest - 1}
		from = oldest
	}
	if from > b.seq {
		return nil, gap
	}
	n := b.seq - from + 1
	if max > 0 && n > uint64(max) {
		n = uint64(max)
	}
	evs := make([]Event, 0, n)
	for q := from; q < from+n; q++ {
		evs = append(evs, b.ring[(q-1)%uint64(len(b.ring))])
	}
	return evs, gap
}

// Since returns the buffered events with Seq > since, oldest first, and the
// range of events after since that have already left the ring (nil when
// none have). A since above the newest sequence number is from an earlier
// daemon run and reads the whole ring.
func (b *Bus) Since(since uint64) ([]Event, *Gap) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.readLocked(b.sinceLocked(since), 0)
}

// LastSeq is the sequence number of the newest event.
func (b *Bus) LastSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Follow returns, in one step, the buffered events after since (and the
// gap before them, as Since does) and a follower positioned right after the
// last one returned. Close it when done.
func (b *Bus) Follow(since uint64) ([]Event, *Gap, *Follower) {
	f := &Follower{b: b, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	backlog, gap := b.readLocked(b.sinceLocked(since), 0)
	f.next = b.seq + 1
	b.followers[f] = struct{}{}
	return backlog, gap, f
}

// Follower is a cursor into the ring. It holds no copy of any fact and no
// goroutine: Next reads the ring at the cursor, so how far behind a
// follower may fall is exactly the ring's size, and what it missed when it
// fell further is exactly the Gap Next returns.
type Follower struct {
	b    *Bus
	wake chan struct{} // capacity 1: "something may have been published"

	// Guarded by b.mu.
	next   uint64 // the sequence number read next
	closed bool
}

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("events: subscription closed")

// Next returns the next item: the fact at the cursor, or, when the ring has
// already overwritten it, a Gap covering everything up to the oldest
// buffered fact (which the following call returns). It blocks until there
// is something to return, ctx ends, or the follower is closed.
func (f *Follower) Next(ctx context.Context) (Item, error) {
	for {
		f.b.mu.Lock()
		if f.closed {
			f.b.mu.Unlock()
			return Item{}, ErrClosed
		}
		evs, gap := f.b.readLocked(f.next-1, 1)
		switch {
		case gap != nil:
			f.next = gap.ToSeq + 1
			f.b.mu.Unlock()
			return Item{Gap: gap}, nil
		case len(evs) == 1:
			f.next++
			f.b.mu.Unlock()
			return Item{Event: evs[0]}, nil
		}
		f.b.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			return Item{}, ctx.Err()
		}
	}
}

// Close ends the follower; a blocked Next returns ErrClosed.
func (f *Follower) Close() {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if !f.closed {
		f.closed = true
		delete(f.b.followers, f)
		poke(f.wake)
	}
}

// Observe returns an observer that delivers every event after since, the
// buffered ones first, and never loses one published after the call: the
// bus queues them for it without bound. The gap, when non-nil, names facts
// after since that had already left the ring when Observe was called; it
// is the only loss an observer can see. It is for in-process consumers
// that keep draining their channel; Close it when done.
func (b *Bus) Observe(since uint64) (*Gap, *Observer) {
	o := newObserver(b, 0)
	b.mu.Lock()
	backlog, gap := b.readLocked(b.sinceLocked(since), 0)
	o.queue = backlog
	b.observers[o] = struct{}{}
	b.mu.Unlock()
	poke(o.wake)
	go o.pump()
	return gap, o
}

// Subscribe returns a channel receiving every event published from now on,
// without loss (an observer, see Observe), and a function that ends the
// subscription. buffer sizes the channel; the observer's own queue absorbs
// any burst beyond it.
func (b *Bus) Subscribe(buffer int) (<-chan Event, func()) {
	o := newObserver(b, max(buffer, 0))
	b.mu.Lock()
	b.observers[o] = struct{}{}
	b.mu.Unlock()
	go o.pump()
	return o.out, o.Close
}

// Observer is a lossless in-process subscription: the bus appends every
// fact to its queue and its own goroutine hands them to C in order. Its
// channel is closed once the observer has ended.
type Observer struct {
	b      *Bus
	out    chan Event
	wake   chan struct{}
	done   chan struct{}
	exited chan struct{}
	once   sync.Once

	queue []Event // guarded by b.mu: queued, not yet taken by the pump
}

func newObserver(b *Bus, buffer int) *Observer {
	return &Observer{b: b, out: make(chan Event, buffer),
		wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
}

// C delivers every fact in sequence order.
func (o *Observer) C() <-chan Event { return o.out }

// Close ends the observer and waits until its goroutine has stopped. It is
// safe to call more than once and from any goroutine.
func (o *Observer) Close() {
	o.once.Do(func() {
		o.b.mu.Lock()
		delete(o.b.observers, o)
		o.queue = nil
		o.b.mu.Unlock()
		close(o.done)
	})
	<-o.exited
}

func (o *Observer) take() []Event {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	q := o.queue
	o.queue = nil
	return q
}

// pump is the observer's delivery goroutine.
func (o *Observer) pump() {
	defer close(o.exited)
	defer close(o.out)
	for {
		q := o.take()
		if len(q) == 0 {
			select {
			case <-o.wake:
				continue
			case <-o.done:
				return
			}
		}
		for _, e := range q {
			select {
			case o.out <- e:
			case <-o.done:
				return
			}
		}
	}
}

func poke(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
