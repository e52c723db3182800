package core

import (
	"context"
	"fmt"
	"sort"

	"github.com/simlock/simlock/internal/core/events"
)

// targetBook serves the requests that name one device (lease.request's
// device selector). It keeps no state of its own: the waiters are the
// queue's, the devices the registry's. Its methods run only inside the
// decision section; it reaches the engine only through targetEngine.
type targetBook struct {
	reg  *registry
	pool *pool
	eng  targetEngine
}

// targetEngine is the engine as the targeted book sees it: the plan's
// input and a device's footprint, and the grant, boot, eviction and drop
// of a waiter (request.go), satisfied by *Engine.
type targetEngine interface {
	planInputLocked(queue []*waiter, warm bool) PlanInput
	footprintLocked(s Spec) uint64
	grantLocked(w *waiter, id string)
	startBootLocked(w *waiter, id string)
	startEvictLocked(w *waiter, id string, destroy bool)
	dropWaiterLocked(w *waiter, err error)
}

// specLocked is the spec of the one device a targeted request names: the
// device's own, so nothing is resolved through the driver.
func (b *targetBook) specLocked(id, platform string) (Spec, error) {
	d, ok := b.reg.devices[id]
	if !ok {
		return Spec{}, fmt.Errorf("%w: %s", ErrUnknownDevice, id)
	}
	if platform != "" && d.Platform != platform {
		return Spec{}, fmt.Errorf("%w: device %s is %s, not %s", ErrBadRequest, id, d.Platform, platform)
	}
	return d.Spec, nil
}

// serveLocked serves the waiters that named one device, in queue
// order: a warm device is granted, a shut-down one booted when a start
// fits the limits (after evicting an idle warm device if that makes it
// fit); anything else (leased, busy, held elsewhere on the
// host, over a limit) leaves the waiter queued until the device frees.
// The planner never serves these waiters (planInputLocked shows them in
// flight), so they take nothing but their device.
func (b *targetBook) serveLocked(queue []*waiter) {
	e := b.eng
	for _, w := range queue {
		if w.device == "" || w.working || w.evicting {
			continue
		}
		d, ok := b.reg.devices[w.device]
		if !ok {
			e.dropWaiterLocked(w, fmt.Errorf("%w: %s is gone", ErrUnknownDevice, w.device))
			continue
		}
		if !b.pool.of(d, w.system) && !b.pool.slotMayUse(w, d) {
			continue
		}
		switch d.State {
		case StateReady:
			e.grantLocked(w, d.ID)
		case StateShutdown:
			in := e.planInputLocked(nil, false)
			if len(newLedger(in).blocks(d.Platform, e.footprintLocked(d.Spec), false)) == 0 {
				e.startBootLocked(w, d.ID)
			} else if victim := targetVictim(in, d, e.footprintLocked(d.Spec)); victim != "" {
				e.startEvictLocked(w, victim, false)
			}
		}
	}
}

// targetVictim picks the least recently used idle warm device (or idle
// slot device, which yields its running room the same way) whose
// shutdown lets target boot, or "" when none does: a targeted request
// evicts like any other, but only for its own device.
func targetVictim(in PlanInput, target *DeviceRecord, ram uint64) string {
	return roomVictim(in, target.Platform, ram, target.ID)
}

// roomVictim picks the least recently used idle warm or slot device, other
// than exclude, whose shutdown leaves running room for one more device of
// platform costing ram; "" when none does.
func roomVictim(in PlanInput, platform string, ram uint64, exclude string) string {
	var cands []int
	for i, d := range in.Devices {
		if d.ID != exclude && (d.Usable || d.Yields) && d.State == StateReady && !d.Leaving && !d.Reserved {
			cands = append(cands, i)
		}
	}
	sort.Slice(cands, func(a, b int) bool { return in.Devices[cands[a]].LastUse.Before(in.Devices[cands[b]].LastUse) })
	for _, i := range cands {
		trial := in
		trial.Devices = append([]PlanDevice(nil), in.Devices...)
		trial.Devices[i].State = StateShutdown
		if len(newLedger(trial).blocks(platform, ram, false)) == 0 {
			return in.Devices[i].ID
		}
	}
	return ""
}

// Describer is an optional driver ability: describe one device of the
// driver's root that this daemon has no record of (another home sharing
// the root made it), so the daemon can take it into its registry.
type Describer interface {
	Describe(ctx context.Context, handle string) (Described, error)
}

// Described is a device as its driver reads it from the root.
type Described struct {
	Spec Spec
	Provisioned
	Run RunState
}

// DeviceDesk is the counter for one named device outside any lease: the
// managed slots find a device by its handle and wait for one to settle,
// a targeted request adopts a device of the driver's root, and a
// device.release shuts an idle one down (device_release.go, settled.go).
type DeviceDesk struct{ e *Engine }

// OneDevice is the desk for one named device.
func (e *Engine) OneDevice() DeviceDesk { return DeviceDesk{e} }

// FindDevice returns the device whose platform and handle these are.
func (dd DeviceDesk) FindDevice(platform, handle string) (DeviceRecord, bool) {
	e := dd.e
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.reg.devices {
		if d.Platform == platform && d.Handle == handle {
			return *d, true
		}
	}
	return DeviceRecord{}, false
}

// AdoptDevice takes a shut-down device of the driver's root into the
// registry, as a shut-down idle device of this daemon's pool. The caller
// claims it on the host first: the device was some other home's. A device
// that runs is refused, since nothing proves who runs it.
func (desk DeviceDesk) AdoptDevice(ctx context.Context, platform, handle string) (DeviceRecord, error) {
	e := desk.e
	drv, ok := e.drivers[platform]
	if !ok {
		return DeviceRecord{}, NewSpecError(ErrUnsupportedPlatform, fmt.Sprintf("no driver serves platform %q", platform), "platforms", e.Platforms())
	}
	desc, ok := drv.(Describer)
	if !ok {
		return DeviceRecord{}, fmt.Errorf("%w: the %s driver cannot take in a device it did not make", ErrBadRequest, platform)
	}
	dd, err := desc.Describe(ctx, handle)
	if err != nil {
		return DeviceRecord{}, err
	}
	if dd.Run != RunStopped {
		return DeviceRecord{}, fmt.Errorf("%w: device %s is %s outside this daemon; shut it down first", ErrBadRequest, handle, dd.Run)
	}
	var rec DeviceRecord
	e.section(func() {
		for _, d := range e.reg.devices {
			if d.Platform == platform && d.Handle == handle {
				rec = *d
				return
			}
		}
		if e.halt.stopping {
			err = ErrStopping
			return
		}
		now := e.now()
		rec = DeviceRecord{ID: "dev_" + e.newID(), Platform: platform, Spec: dd.Spec, State: StateShutdown, StateSince: now, CreatedAt: now,
			Handle: dd.Handle, Name: dd.Name, Attrs: dd.Attrs, Simulated: dd.Simulated, Data: dd.Data}
		if err = e.commitLocked(Changes{PutDevices: []DeviceRecord{rec}}); err != nil {
			return
		}
		e.emitLocked(events.Event{Type: "device.adopted", DeviceID: rec.ID, Platform: platform,
			Data: map[string]any{"model": rec.Spec.Model, "osVersion": rec.Spec.OSVersion}})
		e.scheduleLocked()
	})
	return rec, err
}
