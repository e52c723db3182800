package core

// DeviceSettled reports whether device id has no work left: it is gone,
// or it is ready or shut down with no operation in flight and no lease on
// it. When it is not, next is closed the next time any device operation
// settles (every reclaim, reset, boot or destroy ends in one), so a caller
// waiting for the device looks again then instead of polling.
func (dd DeviceDesk) DeviceSettled(id string) (settled bool, next <-chan struct{}) {
	e := dd.e
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.reg.devices[id]
	if !ok {
		return true, nil
	}
	if e.reg.opLocks[id] == "" && (d.State == StateReady || d.State == StateShutdown) && !e.reg.leased(id) {
		return true, nil
	}
	return false, e.reg.opFreed
}
