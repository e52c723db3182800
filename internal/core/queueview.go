package core

import "github.com/simlock/simlock/contract"

// QueuePage is a window on the queue, read in one decision section: a
// reader of a long queue pays for the entries it asks for, not for the
// queue's length.
type QueuePage struct {
	// Entries are oldest first; Position is each one's place in the whole
	// FIFO, counting requests whose device work is already running.
	Entries []QueueEntry
	// Depth counts every queued request; ByPlatform counts them per
	// platform (a multi-device request under its first device's).
	Depth      int
	ByPlatform map[string]int
	// Next is the cursor that reads the entries after Entries; 0 when
	// there are none. A cursor names a place in the queue's arrival order,
	// so it stays valid while requests before it leave: a walk page by
	// page sees every request that stays queued once, in order.
	Next uint64
}

// QueuePage reads up to limit queued requests after cursor (0: from the
// head; limit is capped at contract.QueueListMaxLimit, and 0 means
// contract.QueueListDefaultLimit).
func (d RequestDesk) QueuePage(cursor uint64, limit int) QueuePage {
	if limit <= 0 {
		limit = contract.QueueListDefaultLimit
	}
	limit = min(limit, contract.QueueListMaxLimit)
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	return d.e.queue.page(cursor, limit)
}

// WireQueue is queued requests as status.get and queue.list answer them.
func WireQueue(qs []QueueEntry) []contract.QueueEntry {
	out := make([]contract.QueueEntry, 0, len(qs))
	for _, q := range qs {
		out = append(out, contract.QueueEntry{Position: q.Position, RequesterID: q.RequesterID, Platform: q.Spec.Platform,
			Model: q.Spec.Model, OSVersion: q.Spec.OSVersion, Phase: q.Phase, EnqueuedAt: q.EnqueuedAt})
	}
	return out
}
