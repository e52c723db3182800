package core

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// observation is the health monitor's debounce state for one leased device.
type observation struct {
	stopped int // consecutive "stopped" reads
	missing int // consecutive reads where the device was absent from its root
}

// StartHealthMonitor arms the leased-device health monitor. The daemon calls
// it only after convergence, so no crash or recovery fact can be emitted
// while the registry is still being restored.
func (e *Engine) StartHealthMonitor() {
	if e.cfg.Health.Interval < 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.armHealthLocked()
}

func (e *Engine) armHealthLocked() {
	if e.stopping {
		return
	}
	e.healthTimer = e.clock.AfterFunc(e.cfg.Health.Interval, func() {
		e.HealthTick(e.bg)
		e.mu.Lock()
		e.armHealthLocked()
		e.mu.Unlock()
	})
}

// HealthTick runs one health pass: one ListManaged per platform that has
// leased devices, then a classification of every leased device against it.
// A "transitioning" read is never crash evidence; only
// StableObservations consecutive "stopped" reads are. Provenance drift is
// trusted only while the device is observed running.
func (e *Engine) HealthTick(ctx context.Context) {
	ctx, done, ok := e.enterPass(ctx)
	if !ok {
		return
	}
	defer done()
	e.mu.Lock()
	platforms := map[string]bool{}
	for _, l := range e.leases {
		for _, id := range l.DeviceIDs() {
			if d, ok := e.devices[id]; ok {
				platforms[d.Platform] = true
			}
		}
		platforms[l.Platform] = true
	}
	e.mu.Unlock()
	seen := map[string]map[string]Observed{}
	for p := range platforms {
		drv, ok := e.drivers[p]
		if !ok {
			continue
		}
		obs, err := drv.ListManaged(ctx)
		if err != nil {
			// A driver hiccup is no evidence about any device.
			e.log.Warn("health: list devices failed", "platform", p, "err", err)
			continue
		}
		m := map[string]Observed{}
		for _, o := range obs {
			m[o.Handle] = o
		}
		seen[p] = m
	}
	e.section(func() {
		if e.stopping || e.maintenance {
			return
		}
		stable := e.cfg.Health.StableObservations
		for _, lid := range sortedLeaseIDs(e.leases) {
			l := *e.leases[lid]
			// Every member of a multi-device lease is watched; losing one
			// ends the whole lease, as a release would.
			for _, id := range l.DeviceIDs() {
				if _, live := e.leases[lid]; !live {
					break
				}
				d, ok := e.devices[id]
				if !ok || e.opLocks[d.ID] != "" || d.Handle == "" {
					continue
				}
				m, ok := seen[d.Platform]
				if !ok {
					continue
				}
				ob := e.obs[d.ID]
				if ob == nil {
					ob = &observation{}
					e.obs[d.ID] = ob
				}
				o, present := m[d.Handle]
				switch {
				case !present:
					ob.missing++
					if ob.missing >= stable {
						e.giveUpLocked(l, *d, "device-missing")
					}
				case o.Run == RunRunning:
					ob.stopped, ob.missing = 0, 0
					if o.MarkOK != nil && !*o.MarkOK {
						e.giveUpLocked(l, *d, "provenance-drift")
					}
				case o.Run == RunTransitioning:
					// Booting or shutting down looks like "stopped" for a
					// moment on both platforms; it proves nothing.
					ob.missing = 0
				default:
					ob.missing = 0
					ob.stopped++
					if ob.stopped < stable {
						continue
					}
					ob.stopped = 0
					e.emitLocked(events.Event{Type: "device.crash-detected", DeviceID: d.ID, LeaseID: l.ID, RequesterID: l.RequesterID,
						Platform: d.Platform, Data: map[string]any{"ownerId": l.OwnerID, "recoveryAttempts": d.Health.RecoveryAttempts}})
					if d.Health.RecoveryAttempts >= e.cfg.Health.MaxRecoveryAttempts {
						e.giveUpLocked(l, *d, "max-recovery-attempts")
						continue
					}
					e.startRecoveryLocked(l, d.ID)
				}
			}
		}
	})
	e.notifyPositions()
}

// startRecoveryLocked reboots a crashed leased device under the same lease:
// MakeReady, never an erase, because a crash killed a process, not the
// disk, and the agent's apps and data are still there. The device stays
// leased throughout (no new state); the op lock keeps any other operation
// off it, and a release meanwhile queues its purge behind the reboot
// (startReclaimLocked) instead of overlapping it.
func (e *Engine) startRecoveryLocked(l LeaseRecord, id string) {
	o := &deviceOp{kind: OpKindRecover, lock: "recovery", id: id,
		mark: func(d *DeviceRecord) {
			d.Health.RecoveryAttempts++
			d.Health.RecoveringSince = e.now()
		},
		run: func(ctx context.Context, o *deviceOp) error { return o.drv.MakeReady(ctx, o.rec.Ref()) },
		settle: func(o *deviceOp, err error) error {
			if cur, ok := e.leases[l.ID]; !ok || !cur.Holds(id) {
				// Released while it rebooted: the release reset the
				// recovery bookkeeping, the purge runs next, and nobody
				// holds a lease to be told it recovered.
				return nil
			}
			if _, uerr := e.updateLocked(id, func(r *DeviceRecord) { r.Health.RecoveringSince = time.Time{} }); uerr != nil {
				return uerr
			}
			attempts := o.rec.Health.RecoveryAttempts
			if err != nil {
				// The next ticks observe it stopped again and either retry
				// or give up once the budget is spent.
				e.log.Warn("crash recovery failed", "device", id, "attempt", attempts, "err", err)
				return nil
			}
			delete(e.obs, id)
			e.emitLocked(events.Event{Type: "device.recovered", DeviceID: id, LeaseID: l.ID, RequesterID: l.RequesterID, Platform: o.rec.Platform,
				Data: map[string]any{"ownerId": l.OwnerID, "recoveryAttempts": attempts}})
			return nil
		}}
	if err := e.startOpLocked(o); err != nil {
		e.log.Warn("crash recovery not started", "device", id, "err", err)
	}
}

// giveUpLocked ends a lease whose device cannot be vouched for. It goes
// through the ordinary release path, so lease.released (reason device-lost)
// stays the one place a lease ends.
func (e *Engine) giveUpLocked(l LeaseRecord, d DeviceRecord, reason string) {
	delete(e.obs, d.ID)
	e.emitLocked(events.Event{Type: "device.recovery-failed", DeviceID: d.ID, LeaseID: l.ID, RequesterID: l.RequesterID,
		Platform: d.Platform, Reason: reason, Data: map[string]any{"ownerId": l.OwnerID}})
	if err := e.releaseLocked(l, ReasonDeviceLost); err != nil {
		e.log.Error("releasing a lost device's lease failed", "lease", l.ID, "err", err)
	}
}
