// Package outbox decouples the daemon from the clients it writes to. Every
// frontend stream (a socket connection, an NDJSON response, an SSE stream)
// gets one Box: a bounded queue drained by one writer goroutine that gives
// each write a deadline. Sending never blocks, so no engine goroutine, no
// notice relay and no other client ever waits on a client that stopped
// reading. The one exception is a stream of the caller's own data (exec
// output), sent with SendPaced: it waits for room, so a slow reader slows
// only its own command. A client that falls too far behind (the queue overflows) or
// stops reading (a write outlives its deadline) fails the box, and its
// owner disconnects it. See docs/adr/0014-a-slow-client-is-disconnected.md.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults sized for a local client: generous enough that a live reader
// never overflows, small enough that a stopped one costs little memory.
const (
	DefaultMaxItems = 4096
	DefaultMaxBytes = 8 << 20
	DefaultStall    = 10 * time.Second
)

// ErrOverflow fails a box whose reader fell further behind than its bounds.
var ErrOverflow = errors.New("outbound queue overflow: the client is not reading")

// ErrClosed is what sending to a closed box reports through Err.
var ErrClosed = errors.New("outbound queue closed")

// Sink writes one message completely, or fails, before deadline.
type Sink interface {
	Write(b []byte, deadline time.Time) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(b []byte, deadline time.Time) error

// Write calls f.
func (f SinkFunc) Write(b []byte, deadline time.Time) error { return f(b, deadline) }

// Options bound a box; zero values take the defaults.
type Options struct {
	MaxItems int
	MaxBytes int
	// Stall bounds one write: a client that accepts no bytes for this long
	// is treated as gone.
	Stall time.Duration
	// OnFail runs once, on the writer goroutine, when the box fails
	// (overflow or a failed write). The owner disconnects the client here.
	OnFail func(error)
}

// Box is one client's outbound queue. The zero value is not usable; build
// it with New.
type Box struct {
	sink Sink
	o    Options

	mu     sync.Mutex
	queue  []*item
	keyed  map[string]*item // queued, not yet written, by coalescing key
	bytes  int
	err    error // set once: the box failed or was aborted
	closed bool  // no more sends; the writer exits once the queue is empty
	wake   chan struct{}
	room   chan struct{} // closed (and replaced) whenever the writer takes a message or the box stops
	done   chan struct{}
}

type item struct {
	key     string
	b       []byte
	written chan struct{} // closed once written or discarded; may be nil
}

// New starts a box writing to sink.
func New(sink Sink, o Options) *Box {
	if o.MaxItems <= 0 {
		o.MaxItems = DefaultMaxItems
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Stall <= 0 {
		o.Stall = DefaultStall
	}
	b := &Box{sink: sink, o: o, keyed: map[string]*item{}, wake: make(chan struct{}, 1), room: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// Send queues msg. It never blocks; false means the message was not
// queued because the box has failed or closed (an overflow fails it).
func (b *Box) Send(msg []byte) bool { return b.enqueue(&item{b: msg}) }

// SendLatest queues msg under key, replacing a message with the same key
// that is still waiting: only the newest progress of a request matters.
// The replaced message keeps its place in the order.
func (b *Box) SendLatest(key string, msg []byte) bool {
	return b.enqueue(&item{key: key, b: msg})
}

// SendNotify queues msg and returns a channel closed once it has been
// written, or discarded because the box failed. The channel is closed at
// once when the message could not be queued.
func (b *Box) SendNotify(msg []byte) <-chan struct{} {
	it := &item{b: msg, written: make(chan struct{})}
	if !b.enqueue(it) {
		close(it.written)
	}
	return it.written
}

// SendPaced queues msg once the queue is at most half full, waiting for
// the writer to make room. It is for data the caller produces at its own
// pace (a command's output): a slow reader then slows only that producer,
// while a reader that stops altogether still fails the box at the write
// deadline, which ends the wait. False means the box failed or closed, or
// ctx ended, before msg was queued.
func (b *Box) SendPaced(ctx context.Context, msg []byte) bool {
	for {
		b.mu.Lock()
		if b.err != nil || b.closed {
			b.mu.Unlock()
			return false
		}
		if len(b.queue) == 0 || (len(b.queue) < b.o.MaxItems/2 && b.bytes+len(msg) <= b.o.MaxBytes/2) {
			b.mu.Unlock()
			return b.enqueue(&item{b: msg})
		}
		room := b.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return false
		}
	}
}

// roomLocked wakes paced senders.
func (b *Box) roomLocked() {
	close(b.room)
	b.room = make(chan struct{})
}

func (b *Box) enqueue(it *item) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.closed {
		return false
	}
	if it.key != "" {
		if old, ok := b.keyed[it.key]; ok {
			b.bytes += len(it.b) - len(old.b)
			old.b = it.b
			return true
		}
	}
	if len(b.queue) >= b.o.MaxItems || (b.bytes+len(it.b) > b.o.MaxBytes && len(b.queue) > 0) {
		b.failLocked(fmt.Errorf("%w (%d messages, %d bytes waiting)", ErrOverflow, len(b.queue), b.bytes))
		return false
	}
	b.queue = append(b.queue, it)
	b.bytes += len(it.b)
	if it.key != "" {
		b.keyed[it.key] = it
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

// failLocked records err and discards what is queued. OnFail runs on the
// writer goroutine, never under a sender's call.
func (b *Box) failLocked(err error) {
	if b.err != nil {
		return
	}
	b.err = err
	for _, it := range b.queue {
		if it.written != nil {
			close(it.written)
		}
	}
	b.queue, b.bytes = nil, 0
	clear(b.keyed)
	b.roomLocked()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Close accepts no more messages; the writer exits once what is queued has
// been written (each write still bounded by Stall). Done closes then.
func (b *Box) Close() {
	b.mu.Lock()
	b.closed = true
	b.roomLocked()
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Abort discards what is queued and stops the writer. It does not run
// OnFail: the owner is already tearing the client down.
func (b *Box) Abort() {
	b.mu.Lock()
	b.failLocked(ErrClosed)
	b.mu.Unlock()
}

// Done is closed when the writer has exited.
func (b *Box) Done() <-chan struct{} { return b.done }

// Err is why the box stopped: nil while it runs or after a clean Close.
func (b *Box) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *Box) run() {
	defer close(b.done)
	for {
		b.mu.Lock()
		for len(b.queue) == 0 && b.err == nil && !b.closed {
			b.mu.Unlock()
			<-b.wake
			b.mu.Lock()
		}
		if err := b.err; err != nil {
			b.mu.Unlock()
			if !errors.Is(err, ErrClosed) && b.o.OnFail != nil {
				b.o.OnFail(err)
			}
			return
		}
		if len(b.queue) == 0 { // closed and drained
			b.mu.Unlock()
			return
		}
		it := b.queue[0]
		b.queue = b.queue[1:]
		b.bytes -= len(it.b)
		if it.key != "" {
			delete(b.keyed, it.key)
		}
		b.roomLocked()
		b.mu.Unlock()

		// The deadline is kernel I/O plumbing, so it reads the wall clock.
		err := b.sink.Write(it.b, time.Now().Add(b.o.Stall))
		if it.written != nil {
			close(it.written)
		}
		if err != nil {
			b.mu.Lock()
			b.failLocked(fmt.Errorf("write to client: %w", err))
			b.mu.Unlock()
		}
	}
}
