package core

import (
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/waitq"
)

// queue is the engine's pending requests in FIFO order (a waitq.Queue,
// the same queue the gateway keeps) and what a request leaving it sets
// off. Its methods run only inside the decision section.
type queue struct {
	waitq.Queue[*waiter]
	// left is told when a request leaves the queue: a refused golden build
	// may wait for that request only (goldenBook.recheckLocked).
	left func()
	// emit and replan are the engine's (emitLocked, scheduleLocked), for
	// withdraw.
	emit   func(events.Event)
	replan func()
	// byPlatform counts the queued requests of each platform (a
	// multi-device request under its first device's), kept by Push and
	// remove so status.get reads the counts without walking the queue.
	byPlatform map[string]int
	// bySpec counts the devices the queued requests ask for, per spec key
	// (every member of a multi-device request under its own), kept the same
	// way, so the warm book's demand count reads one entry per spec instead
	// of walking the queue on every plan and status.get.
	bySpec map[string]*specDemand
}

// specDemand is one spec's count in queue.bySpec.
type specDemand struct {
	spec Spec
	n    int
}

// countSpecs adds d (1 or -1) to every spec w asks for.
func (q *queue) countSpecs(w *waiter, d int) {
	add := func(k string, sp Spec) {
		c := q.bySpec[k]
		if c == nil {
			c = &specDemand{spec: sp}
			q.bySpec[k] = c
		}
		if c.n += d; c.n <= 0 {
			delete(q.bySpec, k)
		}
	}
	if q.bySpec == nil {
		q.bySpec = map[string]*specDemand{}
	}
	if len(w.group) == 0 {
		add(w.key, w.spec)
		return
	}
	for _, sp := range w.group {
		add(sp.Key(), sp)
	}
}

// Push queues w as waitq's Push does and counts it under its platform.
// It stands in for the embedded method, so every push is counted.
func (q *queue) Push(w *waiter, at time.Time, timeout time.Duration) bool {
	if !q.Queue.Push(w, at, timeout) {
		return false
	}
	if q.byPlatform == nil {
		q.byPlatform = map[string]int{}
	}
	q.byPlatform[w.spec.Platform]++
	q.countSpecs(w, 1)
	return true
}

// remove takes w out of the queue. withdraw also plans again; a caller of
// remove alone schedules later on its own (a reset when
// it ends, a grant in the planner) or need not (a noWait refusal: nothing
// stands behind a request queued a moment ago).
func (q *queue) remove(w *waiter) {
	if q.Remove(w) {
		if q.byPlatform[w.spec.Platform]--; q.byPlatform[w.spec.Platform] <= 0 {
			delete(q.byPlatform, w.spec.Platform)
		}
		q.countSpecs(w, -1)
	}
	q.left()
}

// withdraw ends a request that leaves the queue without a grant (a queue
// timeout, a cancel, an abandon): it is removed, ev says why, and the
// queue is planned again at once. The leaving request may have held
// capacity back (a group with its bypass budget spent) or a golden build
// (ADR 0057), and the requests behind it must not wait for an unrelated
// event.
func (q *queue) withdraw(w *waiter, ev events.Event) {
	q.remove(w)
	q.emit(ev)
	q.replan()
}

// list is the queue oldest first; Position is the place in the FIFO,
// counting requests whose device work is already running.
func (q *queue) list() []QueueEntry {
	return q.page(0, q.Len()).Entries
}

// page is up to limit entries queued after cursor (0: from the head),
// oldest first, with the queue's depth and per-platform counts: O(log n
// + limit + platforms), whatever the queue's length.
func (q *queue) page(cursor uint64, limit int) QueuePage {
	ws, index := q.After(cursor, limit)
	out := QueuePage{Entries: make([]QueueEntry, 0, len(ws)), Depth: q.Len(), ByPlatform: make(map[string]int, len(q.byPlatform))}
	for i, w := range ws {
		out.Entries = append(out.Entries, QueueEntry{Position: index + i + 1, RequesterID: w.requester, OwnerID: w.owner, Spec: w.spec, Phase: w.phase, EnqueuedAt: w.enqueuedAt})
	}
	for p, n := range q.byPlatform {
		out.ByPlatform[p] = n
	}
	if n := len(ws); n > 0 && index+n < q.Len() {
		out.Next = q.Seq(ws[n-1])
	}
	return out
}

// pendingOf is requester's request in the queue, nil when it has none. A
// cancelled or abandoned request whose device work is still finishing is
// no longer the requester's: it only leaves a warm device behind.
func (q *queue) pendingOf(requester string) *waiter {
	for _, w := range q.Entries() {
		if w.requester == requester && !w.abandoned {
			return w
		}
	}
	return nil
}

// admits refuses a request from a requester who already holds a lease in
// reg or has a request pending here.
func (q *queue) admits(reg *registry, requester string) error {
	if lid, ok := reg.byRequester[requester]; ok {
		return &RequesterLeasedError{LeaseID: lid}
	}
	if q.pendingOf(requester) != nil {
		return ErrRequesterQueue
	}
	return nil
}
