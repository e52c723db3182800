package sessions

import "time"

// Seams for the daemon's whole-stack tests (internal/daemon), which drive
// a real broker behind a real dispatcher and must reach a few of its
// internals the operations do not show. Nothing in the daemon's own code
// calls them.

// Memory is a count of what the broker holds in memory.
type Memory struct {
	Inflight, Live, Releases int
	Stopping                 bool // the broker's own stop has run
}

// Memory reports what the broker holds in memory now.
func (b *Broker) Memory() Memory {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Memory{Inflight: len(b.inflight), Live: len(b.live), Releases: len(b.releases), Stopping: b.stopping}
}

// SwapStore replaces the receipt store by what wrap makes of it. The
// broker reads its store without a lock, so a test swaps it only while no
// broker goroutine reads it.
func (b *Broker) SwapStore(wrap func(Store) Store) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st = wrap(b.st)
}

// ExpireHeartbeat sets a live session's last heartbeat to at and runs the
// heartbeat check at once.
func (b *Broker) ExpireHeartbeat(sid string, at time.Time) {
	b.mu.Lock()
	if s, ok := b.live[sid]; ok {
		s.lastBeat = at
	}
	b.mu.Unlock()
	b.beatCheck(sid)
}
