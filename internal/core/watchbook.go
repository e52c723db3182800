package core

// watchBook holds who waits for a lease to end (LeaseEnded, LeaseEndedWhy):
// a channel per watched lease, closed when the lease leaves the engine,
// and where each LeaseEndedWhy caller reads the reason. Its methods run
// only inside the decision section, as every book's do.
type watchBook struct {
	ended map[string]chan struct{} // lease id -> closed when it ends
	why   map[string][]*string     // lease id -> where its end reason goes
}

// WatchDesk is the watch book's counter: work bound to a lease (the
// daemon's device.exec, the session broker, the slot manager's executions)
// waits on it for the lease to end. Each entry enters the decision section
// as the engine's own entries do. Engine.Watch hands one out; the zero value
// is not usable.
type WatchDesk struct{ e *Engine }

// Watch is the watch book's desk (internal/daemon, internal/sessions and
// internal/slots use it).
func (e *Engine) Watch() WatchDesk { return WatchDesk{e} }

// LeaseEnded returns a channel that is closed once the lease has left the
// engine, whatever ended it: a release, an expiry, a lost device or a
// reset. A lease that is already gone (or never existed) gets a closed
// channel. Work bound to a lease (device.exec) selects on it to stop when
// the lease does, rather than checking the lease once at its start.
func (w WatchDesk) LeaseEnded(leaseID string) <-chan struct{} {
	e := w.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.reg.leases[leaseID]; !ok {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return e.watches.watch(leaseID)
}

// watch is the channel closed when the held lease leaseID ends.
func (b *watchBook) watch(leaseID string) <-chan struct{} {
	if b.ended == nil {
		b.ended = map[string]chan struct{}{}
	}
	ch, ok := b.ended[leaseID]
	if !ok {
		ch = make(chan struct{})
		b.ended[leaseID] = ch
	}
	return ch
}

// gone closes the lease's watch channel, if anyone watches it.
// registry.apply calls it once the deletion is durable, so a watcher never
// stops work for a release that did not land.
func (b *watchBook) gone(leaseID string) {
	if ch, ok := b.ended[leaseID]; ok {
		close(ch)
		delete(b.ended, leaseID)
	}
}

// LeaseEndedWhy is LeaseEnded plus the reason the lease ended, readable
// once the channel is closed: a lease.released reason (released, expired,
// device-lost), or "" for a lease that was already gone when asked.
func (w WatchDesk) LeaseEndedWhy(leaseID string) (<-chan struct{}, func() string) {
	e := w.e
	ch := w.LeaseEnded(leaseID)
	e.mu.Lock()
	defer e.mu.Unlock()
	why := new(string)
	if _, ok := e.reg.leases[leaseID]; ok {
		e.watches.watchWhy(leaseID, why)
	}
	return ch, func() string {
		e.mu.Lock()
		defer e.mu.Unlock()
		return *why
	}
}

// watchWhy has the reason the held lease leaseID ends written to why.
func (b *watchBook) watchWhy(leaseID string, why *string) {
	if b.why == nil {
		b.why = map[string][]*string{}
	}
	b.why[leaseID] = append(b.why[leaseID], why)
}

// tell hands the reason a lease ended to its LeaseEndedWhy watchers;
// releaseLocked calls it once the release is durable, in the same section
// that closed the watch channel.
func (b *watchBook) tell(leaseID, reason string) {
	for _, why := range b.why[leaseID] {
		*why = reason
	}
	delete(b.why, leaseID)
}
