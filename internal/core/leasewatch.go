package core

// LeaseEnded returns a channel that is closed once the lease has left the
// engine, whatever ended it: a release, an expiry, a lost device or a
// reset. A lease that is already gone (or never existed) gets a closed
// channel. Work bound to a lease (device.exec) selects on it to stop when
// the lease does, rather than checking the lease once at its start.
func (e *Engine) LeaseEnded(leaseID string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.leases[leaseID]; !ok {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if e.leaseWatch == nil {
		e.leaseWatch = map[string]chan struct{}{}
	}
	ch, ok := e.leaseWatch[leaseID]
	if !ok {
		ch = make(chan struct{})
		e.leaseWatch[leaseID] = ch
	}
	return ch
}

// leaseGoneLocked closes the lease's watch channel, if anyone watches it.
// commitLocked calls it once the deletion is durable, so a watcher never
// stops work for a release that did not land.
func (e *Engine) leaseGoneLocked(leaseID string) {
	if ch, ok := e.leaseWatch[leaseID]; ok {
		close(ch)
		delete(e.leaseWatch, leaseID)
	}
}

// LeaseEndedWhy is LeaseEnded plus the reason the lease ended, readable
// once the channel is closed: a lease.released reason (released, expired,
// device-lost), or "" for a lease that was already gone when asked.
func (e *Engine) LeaseEndedWhy(leaseID string) (<-chan struct{}, func() string) {
	ch := e.LeaseEnded(leaseID)
	e.mu.Lock()
	defer e.mu.Unlock()
	why := new(string)
	if _, ok := e.leases[leaseID]; ok {
		if e.whyWatch == nil {
			e.whyWatch = map[string][]*string{}
		}
		e.whyWatch[leaseID] = append(e.whyWatch[leaseID], why)
	}
	return ch, func() string {
		e.mu.Lock()
		defer e.mu.Unlock()
		return *why
	}
}

// leaseWhyLocked hands the reason a lease ended to its LeaseEndedWhy
// watchers; releaseLocked calls it once the release is durable, in the
// same section that closed the watch channel.
func (e *Engine) leaseWhyLocked(leaseID, reason string) {
	for _, why := range e.whyWatch[leaseID] {
		*why = reason
	}
	delete(e.whyWatch, leaseID)
}
