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
