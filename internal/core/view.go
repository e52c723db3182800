package core

// registryView is what a book reads of the engine's registry: the books
// own their feature's state, the engine owns the devices, leases, queue
// and operation locks, and hands a book this view inside the decision
// section rather than the engine itself.
type registryView struct {
	devices map[string]*DeviceRecord
	leases  map[string]*LeaseRecord
	opLocks map[string]string // device id -> the operation holding it
	queue   *queue
	// pool reports whether the general pool may use a device
	// (pool.general).
	pool func(*DeviceRecord) bool
}

// viewLocked is the registry as the books read it, inside the section.
func (e *Engine) viewLocked() registryView {
	return registryView{devices: e.reg.devices, leases: e.reg.leases, opLocks: e.reg.opLocks, queue: &e.queue, pool: e.pool.general}
}
