package core

import "fmt"

// targetSpec is the spec of the one device a targeted request names: the
// device's own, so nothing is resolved through the driver.
func (e *Engine) targetSpec(id, platform string) (Spec, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.devices[id]
	if !ok {
		return Spec{}, fmt.Errorf("%w: %s", ErrUnknownDevice, id)
	}
	if platform != "" && d.Platform != platform {
		return Spec{}, fmt.Errorf("%w: device %s is %s, not %s", ErrBadRequest, id, d.Platform, platform)
	}
	return d.Spec, nil
}

// serveTargetedLocked serves the waiters that named one device, in queue
// order: a warm device is granted, a shut-down one booted when a start
// fits the limits; anything else (leased, busy, held elsewhere on the
// host, over a limit) leaves the waiter queued until the device frees.
// The planner never serves these waiters (planInputLocked shows them in
// flight), so they take nothing but their device.
func (e *Engine) serveTargetedLocked(queue []*waiter) {
	for _, w := range queue {
		if w.device == "" || w.working || w.evicting {
			continue
		}
		d, ok := e.devices[w.device]
		if !ok {
			e.dropWaiterLocked(w, fmt.Errorf("%w: %s is gone", ErrUnknownDevice, w.device))
			continue
		}
		if !e.generalPoolMayUseLocked(d) {
			continue
		}
		switch d.State {
		case StateReady:
			e.grantLocked(w, d.ID)
		case StateShutdown:
			if len(newLedger(e.planInputLocked(nil, false)).blocks(d.Platform, e.footprintLocked(d.Spec), false)) == 0 {
				e.startBootLocked(w, d.ID)
			}
		}
	}
}
