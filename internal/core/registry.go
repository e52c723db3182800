package core

import (
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// registry is the engine's ledger in memory: the devices, the leases (and
// which requester holds which), the lease timers and the per-device
// operation locks, with the operations deferred behind a lock and the
// retries of a refused settlement. (The planner's ledger, planner.go, is
// its per-plan capacity accounting.) It is what a commit changes: the
// single writer persists a change set first (writer.go, ADR 0044) and the
// registry applies it after, so memory never holds what the disk refused.
//
// Its methods run only inside the decision section. The engine holds one
// registry and hands books a pointer to it for their record lookups; the
// registry reaches back only through the funcs it is built with.
type registry struct {
	devices     map[string]*DeviceRecord
	leases      map[string]*LeaseRecord
	byRequester map[string]string // requester id -> lease id
	timers      map[string]ports.Timer
	opLocks     map[string]string      // device id -> the operation holding it (a per-device operation lock; "claims" are host-wide, see the claims issue)
	opFreed     chan struct{}          // closed and replaced whenever an op lock is dropped (resources_op.go waits on it)
	deferred    map[string]*deviceOp   // operations waiting for the one holding their device (startOrDeferOpLocked)
	stimers     map[string]ports.Timer // settlement retries the store refused, by device id (settleOpLocked)

	now    func() time.Time
	emit   func(events.Event)   // a fact apply derives (a state change)
	commit func(Changes) error  // the engine's synchronous commit (commitLocked)
	gone   func(leaseID string) // a lease left the registry (its watchers are told)
}

func newRegistry(now func() time.Time, emit func(events.Event), commit func(Changes) error, gone func(string)) registry {
	return registry{
		devices: map[string]*DeviceRecord{}, leases: map[string]*LeaseRecord{}, byRequester: map[string]string{},
		timers: map[string]ports.Timer{}, opLocks: map[string]string{}, opFreed: make(chan struct{}),
		deferred: map[string]*deviceOp{}, stimers: map[string]ports.Timer{},
		now: now, emit: emit, commit: commit, gone: gone,
	}
}

// device is device id's record, nil when there is none.
func (l *registry) device(id string) *DeviceRecord { return l.devices[id] }

// lease is lease id's record, nil when there is none.
func (l *registry) lease(id string) *LeaseRecord { return l.leases[id] }

// opLock names the operation holding device id ("" when none).
func (l *registry) opLock(id string) string { return l.opLocks[id] }

// leased reports whether any lease holds device id.
func (l *registry) leased(deviceID string) bool {
	for _, ls := range l.leases {
		if ls.Holds(deviceID) {
			return true
		}
	}
	return false
}

// untouched refuses an idle-device operation on a device that is unknown,
// busy with another operation, or leased.
func (l *registry) untouched(id string) error {
	switch {
	case l.devices[id] == nil:
		return ErrUnknownDevice
	case l.opLocks[id] != "":
		return fmt.Errorf("%w: %s is busy with %s", ErrDeviceBusy, id, l.opLocks[id])
	case l.leased(id):
		return fmt.Errorf("%w: %s is leased", ErrDeviceBusy, id)
	}
	return nil
}

// holdsReservation reports whether device work in flight holds a running
// reservation for d: a provision or a boot of a shut-down device counts as
// running from the moment it is decided until its outcome is committed,
// so nothing else can take the slot meanwhile.
func (l *registry) holdsReservation(d *DeviceRecord) bool {
	if isRunningState(d.State) {
		return false
	}
	switch l.opLocks[d.ID] {
	case "boot", "provision", "warm":
		return true
	}
	return false
}

// warmest is the ready device of spec key that usable accepts and the
// most recently used of them (ties to the lowest id): the device the
// planner's first rule would grant (planner.pick), found without building
// the whole plan input. A device holding a running reservation is in
// somebody's work and is never offered.
func (l *registry) warmest(key string, usable func(*DeviceRecord) bool) (*DeviceRecord, bool) {
	var best *DeviceRecord
	for _, d := range l.devices {
		if d.State != StateReady || d.Spec.Key() != key || l.holdsReservation(d) || !usable(d) {
			continue
		}
		if best == nil {
			best = d
			continue
		}
		du, bu := lastUse(d), lastUse(best)
		if du.After(bu) || (du.Equal(bu) && d.ID < best.ID) {
			best = d
		}
	}
	return best, best != nil
}

// grantOf is the grant a lease stands for, every member included.
func (l *registry) grantOf(ls LeaseRecord) Grant {
	g := Grant{Lease: ls}
	for i, id := range ls.DeviceIDs() {
		var d DeviceRecord
		if dp, ok := l.devices[id]; ok {
			d = *dp
		}
		if i == 0 {
			g.Device = d
		}
		if len(ls.Members) > 0 {
			g.Members = append(g.Members, d)
		}
	}
	return g
}

// signalFreed wakes every resource call waiting for an op lock.
func (l *registry) signalFreed() {
	close(l.opFreed)
	l.opFreed = make(chan struct{})
}

// check refuses a change set whose device transitions the shared state
// machine forbids, before anything is written.
func (l *registry) check(c Changes) error {
	for _, d := range c.PutDevices {
		if cur, ok := l.devices[d.ID]; ok && !LegalTransition(cur.State, d.State) {
			return fmt.Errorf("%w: device %s %s -> %s", ErrIllegalState, d.ID, cur.State, d.State)
		}
	}
	return nil
}

// apply changes memory to what c committed, emitting each device's state
// change as it goes.
func (l *registry) apply(c Changes) {
	for _, d := range c.PutDevices {
		if cur, ok := l.devices[d.ID]; ok && cur.State != d.State {
			l.emit(events.Event{Type: "device.state-changed", DeviceID: d.ID, Platform: d.Platform,
				Data: map[string]any{"from": string(cur.State), "to": string(d.State)}})
		}
		d := d
		l.devices[d.ID] = &d
	}
	for _, id := range c.DeleteDevices {
		delete(l.devices, id)
	}
	for _, ls := range c.PutLeases {
		ls := ls
		l.leases[ls.ID] = &ls
		l.byRequester[ls.RequesterID] = ls.ID
	}
	for _, id := range c.DeleteLeases {
		if ls, ok := l.leases[id]; ok {
			delete(l.byRequester, ls.RequesterID)
			delete(l.leases, id)
			l.gone(id)
		}
	}
}

// reload replaces the devices and leases with snap's (the disk's state,
// after a failed commit fenced the engine).
func (l *registry) reload(snap Snapshot) {
	l.devices = map[string]*DeviceRecord{}
	for _, d := range snap.Devices {
		d := d
		l.devices[d.ID] = &d
	}
	l.leases, l.byRequester = map[string]*LeaseRecord{}, map[string]string{}
	for _, ls := range snap.Leases {
		ls := ls
		l.leases[ls.ID] = &ls
		l.byRequester[ls.RequesterID] = ls.ID
	}
}

// setState moves one device to state and persists it.
func (l *registry) setState(id string, st DeviceState) (DeviceRecord, error) {
	return l.update(id, func(d *DeviceRecord) { d.State = st })
}

// update applies f to a copy of device id and commits it. Leaving the
// quarantined state clears the quarantine bookkeeping, so no code path can
// forget to.
func (l *registry) update(id string, f func(d *DeviceRecord)) (DeviceRecord, error) {
	cur, ok := l.devices[id]
	if !ok {
		return DeviceRecord{}, ErrUnknownDevice
	}
	d := *cur
	f(&d)
	if d.State != cur.State {
		d.StateSince = l.now()
	}
	if d.State != StateQuarantined {
		d.Health.QuarantineReason, d.Health.QuarantineAttempts = "", 0
		d.Health.QuarantineOp = ""
		d.Health.NextRetryAt = time.Time{}
	}
	if l.opLocks[id] == "" {
		// No operation holds the device, so none is in flight: any commit
		// made now is a settlement (or a plain registry change) and the
		// intent is over.
		d.Intent = DeviceIntent{}
	}
	if err := l.commit(Changes{PutDevices: []DeviceRecord{d}}); err != nil {
		return DeviceRecord{}, err
	}
	return d, nil
}

// stopTimers stops every lease timer (Stop).
func (l *registry) stopTimers() { stopAll(l.timers) }

// stopSettleTimers stops the settlement retries (Stop).
func (l *registry) stopSettleTimers() { stopAll(l.stimers) }

func stopAll(timers map[string]ports.Timer) {
	for id, t := range timers {
		t.Stop()
		delete(timers, id)
	}
}
