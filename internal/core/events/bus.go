// Package events is simlock's in-process bus for past-tense business facts
// (lease.granted, device.reclaimed, ...). Facts are published only after the
// change they describe has been committed; observers can never block or fail
// an emitter. The bus keeps the most recent facts in a ring buffer so a late
// subscriber can catch up.
package events

import (
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

// Bus is a ring-buffered publish/subscribe hub. The zero value is not usable;
// call New.
type Bus struct {
	now func() time.Time

	mu   sync.Mutex
	seq  uint64
	ring []Event
	next int // index of the slot the next event goes into
	full bool
	subs map[int]chan Event
	nsub int
}

// New returns a bus buffering the last size events, stamping them with now.
func New(size int, now func() time.Time) *Bus {
	if size <= 0 {
		size = 1000
	}
	return &Bus{now: now, ring: make([]Event, size), subs: map[int]chan Event{}}
}

// Publish stamps e with a sequence number and time, buffers it and hands it
// to every subscriber. A subscriber whose channel is full misses the event
// (it can re-read the ring with Since) rather than stalling the emitter.
func (b *Bus) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.At.IsZero() {
		e.At = b.now().UTC().Truncate(time.Millisecond)
	}
	b.ring[b.next] = e
	b.next = (b.next + 1) % len(b.ring)
	if b.next == 0 {
		b.full = true
	}
	for _, ch := range b.subs {
		select {
		case ch <- e:
		default:
		}
	}
	return e
}

// Since returns buffered events with Seq > seq, oldest first, and whether
// some events after seq were already evicted from the ring.
func (b *Bus) Since(seq uint64) (evs []Event, dropped bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.next
	start := 0
	if b.full {
		n = len(b.ring)
		start = b.next
	}
	for i := 0; i < n; i++ {
		e := b.ring[(start+i)%len(b.ring)]
		if e.Seq > seq {
			evs = append(evs, e)
		}
	}
	if len(evs) > 0 && evs[0].Seq > seq+1 {
		dropped = true
	}
	return evs, dropped
}

// Subscribe returns a channel receiving every event published from now on,
// and a function that ends the subscription.
func (b *Bus) Subscribe(buffer int) (<-chan Event, func()) {
	if buffer <= 0 {
		buffer = 256
	}
	ch := make(chan Event, buffer)
	b.mu.Lock()
	id := b.nsub
	b.nsub++
	b.subs[id] = ch
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, id)
			b.mu.Unlock()
		})
	}
}

// LastSeq is the sequence number of the newest event.
func (b *Bus) LastSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}
