package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/simlock/simlock/internal/core/events"
)

// ErrStoreFailed fences an engine whose single writer could not make a
// change durable (ADR 0044): memory was reloaded from the disk and nothing
// more is decided until the daemon restarts.
var ErrStoreFailed = errors.New("the registry store failed a commit")

// BatchStore is an optional Store capability: apply several change sets in
// order, atomically, in one transaction (one fsync for all of them). The
// writer falls back to one Apply per change set without it.
type BatchStore interface {
	ApplyBatch(ctx context.Context, cs []Changes) error
}

// wentry is one hand-off from the decision section to the writer: a change
// set and/or the facts to publish once it and everything before it is
// durable. An async entry is already applied to memory; a sync one is
// applied by its caller, who holds the decision mutex until it is settled,
// so a sync entry is always the newest one queued.
type wentry struct {
	ticket  uint64
	changes *Changes
	events  []events.Event
	sync    bool
	err     error         // a sync entry's own failure (not fatal)
	done    chan struct{} // sync entries: closed when settled
}

// writer commits the decision section's change sets in the order the
// section handed them over, off the decision mutex. Whatever queued up while
// one transaction was committing goes into the next one (group commit). It
// runs only while there is work, so it needs no lifecycle of its own.
type writer struct {
	store Store
	bus   *events.Bus
	fatal func(error) // called on its own goroutine when an async commit fails

	mu      sync.Mutex
	queue   []*wentry
	running bool
	last    uint64        // newest ticket handed out
	durable uint64        // every ticket at or below is settled (and its facts published)
	err     error         // sticky: the first failed async commit
	changed chan struct{} // closed and replaced when durable or err moves

	// groups counts transactions, batches the change sets they carried
	// (tests and the ADR's figures read them).
	groups, batches int
}

func newWriter(st Store, bus *events.Bus, fatal func(error)) *writer {
	return &writer{store: st, bus: bus, fatal: fatal, changed: make(chan struct{})}
}

// enqueue hands over one entry. The caller holds the decision mutex, so
// tickets follow decision order.
func (w *writer) enqueue(c *Changes, evs []events.Event, sync bool) (*wentry, error) {
	return w.enqueueKick(c, evs, sync, true)
}

// enqueueKick with kick false leaves the entry for the next commit to
// carry: a lease request's receipt then shares one transaction (one fsync)
// with the grant decided right after it. Anything that tells a caller or a
// subscriber about it (a later entry, or a wait on its ticket) starts the
// commit.
func (w *writer) enqueueKick(c *Changes, evs []events.Event, sync, kick bool) (*wentry, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	w.last++
	en := &wentry{ticket: w.last, changes: c, events: evs, sync: sync}
	if sync {
		en.done = make(chan struct{})
	}
	w.queue = append(w.queue, en)
	if kick {
		w.kickLocked()
	}
	return en, nil
}

func (w *writer) kickLocked() {
	if !w.running && len(w.queue) > 0 {
		w.running = true
		go w.run()
	}
}

// flush commits whatever is queued and waits for it.
func (w *writer) flush() error {
	w.mu.Lock()
	t := w.last
	w.kickLocked()
	w.mu.Unlock()
	return w.wait(t)
}

// idle reports whether nothing handed over is still waiting to be
// committed or published; facts may then be published directly, in order.
func (w *writer) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durable == w.last && w.err == nil
}

// wait blocks until ticket t is durable, or the writer has failed.
func (w *writer) wait(t uint64) error {
	if t == 0 {
		return nil
	}
	for {
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return err
		}
		if w.durable >= t {
			w.mu.Unlock()
			return nil
		}
		w.kickLocked()
		ch := w.changed
		w.mu.Unlock()
		<-ch
	}
}

func (w *writer) run() {
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		if len(batch) == 0 || w.err != nil {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()

		failed, err := w.commit(batch)
		// The sync entry (always last) may fail on its own: its caller
		// still holds memory unchanged, so that is no reason to fence.
		fatal := err != nil && !batch[failed].sync
		if w.bus != nil {
			// Published before durable moves, so anything decided after
			// this batch (which waits for idle or a later ticket)
			// publishes after these facts.
			for i, en := range batch {
				if (err == nil || i < failed) && len(en.events) > 0 {
					w.bus.PublishBatch(en.events)
				}
			}
		}
		w.mu.Lock()
		if fatal {
			w.err = fmt.Errorf("%w: %w", ErrStoreFailed, err)
			w.queue = nil
		} else {
			w.durable = batch[len(batch)-1].ticket
		}
		if err != nil && !fatal {
			batch[failed].err = err
		}
		close(w.changed)
		w.changed = make(chan struct{})
		ferr := w.err
		w.mu.Unlock()
		for _, en := range batch {
			if en.done != nil {
				if fatal && en.err == nil {
					en.err = ferr
				}
				close(en.done)
			}
		}
		if fatal {
			go w.fatal(ferr)
		}
	}
}

// commit makes batch durable: in one transaction when the store can, else
// (or when that transaction fails, to find the one change set at fault)
// one change set at a time. It returns the index of the entry that failed.
func (w *writer) commit(batch []*wentry) (int, error) {
	var cs []Changes
	for _, en := range batch {
		if en.changes != nil && !en.changes.Empty() {
			cs = append(cs, *en.changes)
		}
	}
	if len(cs) == 0 {
		return 0, nil
	}
	if bs, ok := w.store.(BatchStore); ok {
		if err := bs.ApplyBatch(context.Background(), cs); err == nil {
			w.count(len(cs), 1)
			return 0, nil
		} else if len(cs) == 1 {
			for i, en := range batch {
				if en.changes != nil && !en.changes.Empty() {
					return i, err
				}
			}
		}
	}
	for i, en := range batch {
		if en.changes == nil || en.changes.Empty() {
			continue
		}
		if err := w.store.Apply(context.Background(), *en.changes); err != nil {
			return i, err
		}
		w.count(1, 1)
	}
	return 0, nil
}

func (w *writer) count(batches, groups int) {
	w.mu.Lock()
	w.batches += batches
	w.groups += groups
	w.mu.Unlock()
}

// WriterDesk is the single writer's counter: the daemon watches it for
// the fence (Failed), tests read its figures. Its entries take the
// writer's own lock, never the decision section.
type WriterDesk struct{ e *Engine }

// Writer is the single writer's desk.
func (e *Engine) Writer() WriterDesk { return WriterDesk{e} }

// CommitStats reports how many transactions the writer has made and how
// many change sets they carried (group commit shows as batches > groups).
func (wd WriterDesk) CommitStats() (groups, batches int) {
	e := wd.e
	e.wr.mu.Lock()
	defer e.wr.mu.Unlock()
	return e.wr.groups, e.wr.batches
}

// Failed is closed when the writer has failed a commit and the engine is
// fenced (ADR 0044); the daemon exits and restarts from the disk.
func (wd WriterDesk) Failed() <-chan struct{} { return wd.e.failed }

// CommitPending reports how many handed-over entries are not yet durable
// (tests wait on it instead of sleeping).
func (wd WriterDesk) CommitPending() int {
	e := wd.e
	e.wr.mu.Lock()
	defer e.wr.mu.Unlock()
	return int(e.wr.last - e.wr.durable)
}

// fenceReach is what fencing reaches: the disk memory is reloaded from,
// the decision section's lock, the registry and queue it resets, and the
// writer whose failure fences (set by New).
type fenceReach struct {
	store Store
	log   *slog.Logger
	mu    *sync.Mutex
	reg   *registry
	queue *queue
	wr    *writer
}

// storeFailed fences the engine after a failed commit: memory is reloaded
// from what the disk holds, so no read claims a fact that was never made
// durable, every queued request is answered with the failure, and nothing
// more is decided.
func (f *fence) storeFailed(err error) {
	f.failOnce.Do(func() {
		r := f.reach
		r.log.Error("registry commit failed; the engine stops deciding until restart", "err", err)
		snap, lerr := r.store.Load(context.Background())
		var waiters []*waiter
		r.mu.Lock()
		f.broken = err
		if lerr != nil {
			snap = Snapshot{}
		}
		r.reg.reload(snap)
		waiters = append(waiters, r.queue.Entries()...)
		for _, w := range waiters {
			r.queue.remove(w)
		}
		r.mu.Unlock()
		for _, w := range waiters {
			w.deliver(result{err: err})
		}
		close(f.failed)
	})
}

// awaitDurable waits for ticket t; on failure it also waits until the
// engine is fenced, so the caller's next read sees the disk's state.
func (f *fence) awaitDurable(t uint64) error {
	if err := f.reach.wr.wait(t); err != nil {
		f.storeFailed(err)
		return err
	}
	return nil
}
