// Package waitq is the platform-agnostic FIFO wait queue that lease
// requests stand in, shared by the fleet gateway and the core:
// arrival order, passes that may pass over an entry nobody can serve yet,
// queue position numbering with change detection for progress pushes, and
// the per-entry timeout bookkeeping (enqueue time, deadline, the timer to
// stop on removal).
//
// It knows nothing of devices, workers or capacity: what may be served,
// which entries count for a position and what a timeout does are the
// owner's decisions, passed in as functions. A Queue is not safe for
// concurrent use; its owner guards it with the lock that guards the rest of
// its scheduling state, which is why it imports only the standard library.
package waitq

import (
	"iter"
	"slices"
	"sort"
	"time"
)

// Timer is the part of a clock timer the queue needs: stopping it when its
// entry leaves. ports.Timer satisfies it.
type Timer interface{ Stop() bool }

// Queue is a FIFO of distinct entries (typically pointers). The zero
// value is empty and ready to use.
type Queue[T comparable] struct {
	order []T
	slots map[T]*slot
	stamp uint64 // orders position decisions across the queue
	seq   uint64 // the last sequence number Push gave
}

type slot struct {
	enqueued time.Time
	deadline time.Time // zero: no timeout
	timer    Timer
	pos      int // position last decided; 0: none yet
	seq      uint64
}

// Position is one entry's place in the queue as numbered by a pass.
type Position[T comparable] struct {
	Entry T
	Pos   int // 1-based among the counted entries
	// Stamp increases with every position decision of the queue. A caller
	// that pushes positions outside its lock drops a push whose stamp is
	// not newer than the last one it sent for that entry, so a slow push
	// can never overwrite a newer position.
	Stamp uint64
}

// Push appends e, which waited since at; a positive timeout sets its
// deadline to at+timeout. It reports false (and changes nothing) when e is
// already queued.
func (q *Queue[T]) Push(e T, at time.Time, timeout time.Duration) bool {
	if q.slots == nil {
		q.slots = map[T]*slot{}
	}
	if _, dup := q.slots[e]; dup {
		return false
	}
	q.seq++
	s := &slot{enqueued: at, seq: q.seq}
	if timeout > 0 {
		s.deadline = at.Add(timeout)
	}
	q.order = append(q.order, e)
	q.slots[e] = s
	return true
}

// SetTimer records the timer that enforces e's deadline; Remove stops it.
// It does nothing when e is not queued.
func (q *Queue[T]) SetTimer(e T, t Timer) {
	if s := q.slots[e]; s != nil {
		s.timer = t
	}
}

// Remove takes e out of the queue, keeping the others' order, and stops
// its timer. It reports whether e was queued.
func (q *Queue[T]) Remove(e T) bool {
	s := q.slots[e]
	if s == nil {
		return false
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	delete(q.slots, e)
	for i, x := range q.order {
		if x == e {
			q.order = append(q.order[:i:i], q.order[i+1:]...)
			break
		}
	}
	return true
}

// Contains reports whether e is queued.
func (q *Queue[T]) Contains(e T) bool { return q.slots[e] != nil }

// Len is the number of queued entries.
func (q *Queue[T]) Len() int { return len(q.order) }

// Entries returns the queue oldest first, as a copy: a pass walks it in
// order, passing over the entries it cannot serve yet, and may Remove
// entries (the one it visits or any other) as it goes.
func (q *Queue[T]) Entries() []T { return append([]T(nil), q.order...) }

// All walks the queue oldest first without copying it, for a reader that
// only looks: the walk must not Push or Remove (Entries is for a pass that
// does). A status read and the end of every decision section walk the
// queue this way, so a long queue costs them no allocation.
func (q *Queue[T]) All() iter.Seq[T] { return slices.Values(q.order) }

// Seq is the sequence number Push gave e: it increases with every Push,
// so it orders the queue and names a place in it that stays put while
// other entries leave. It is 0 when e is not queued.
func (q *Queue[T]) Seq(e T) uint64 {
	if s := q.slots[e]; s != nil {
		return s.seq
	}
	return 0
}

// After returns up to limit entries pushed after sequence number seq
// (0: from the oldest), oldest first, with index, the place in the order
// of the first of them (0-based). It costs O(log n + limit): the order
// is by sequence number, so a binary search finds where to start.
func (q *Queue[T]) After(seq uint64, limit int) (entries []T, index int) {
	index = sort.Search(len(q.order), func(i int) bool { return q.slots[q.order[i]].seq > seq })
	end := min(index+max(limit, 0), len(q.order))
	return append([]T(nil), q.order[index:end]...), index
}

// Find returns the oldest entry match accepts.
func (q *Queue[T]) Find(match func(T) bool) (T, bool) {
	for _, e := range q.order {
		if match(e) {
			return e, true
		}
	}
	var zero T
	return zero, false
}

// EnqueuedAt is when e joined the queue (zero when it is not queued).
func (q *Queue[T]) EnqueuedAt(e T) time.Time {
	if s := q.slots[e]; s != nil {
		return s.enqueued
	}
	return time.Time{}
}

// Deadline is e's timeout deadline; ok is false when e is not queued or
// has no timeout.
func (q *Queue[T]) Deadline(e T) (deadline time.Time, ok bool) {
	if s := q.slots[e]; s != nil && !s.deadline.IsZero() {
		return s.deadline, true
	}
	return time.Time{}, false
}

// Overdue reports whether e is queued with a deadline that now has
// reached.
func (q *Queue[T]) Overdue(e T, now time.Time) bool {
	d, ok := q.Deadline(e)
	return ok && !now.Before(d)
}

// Positions numbers the entries counted accepts, oldest first, from 1.
// Uncounted entries (a request being served, one that never waits) keep
// their place in the order but take no number.
func (q *Queue[T]) Positions(counted func(T) bool) []Position[T] {
	var out []Position[T]
	pos := 0
	for _, e := range q.order {
		if counted != nil && !counted(e) {
			continue
		}
		pos++
		out = append(out, Position[T]{Entry: e, Pos: pos})
	}
	return out
}

// Renumber numbers the counted entries as Positions does and returns
// those whose number changed since it was last decided and that report
// accepts (nil: all), recording the new numbers and stamping each
// decision. An entry report refuses keeps its old number, so it is told
// its position once it is reportable again.
func (q *Queue[T]) Renumber(counted, report func(T) bool) []Position[T] {
	var out []Position[T]
	for _, p := range q.Positions(counted) {
		s := q.slots[p.Entry]
		if s.pos == p.Pos || report != nil && !report(p.Entry) {
			continue
		}
		q.stamp++
		s.pos = p.Pos
		p.Stamp = q.stamp
		out = append(out, p)
	}
	return out
}
