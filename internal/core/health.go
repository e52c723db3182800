package core

import (
	"context"
	"log/slog"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// healthBook is the leased-device health monitor's state: the debounce of
// each watched device's reads and the timer of the next pass. Its methods
// run inside the decision section; it reaches the engine only through
// healthEngine.
type healthBook struct {
	eng    healthEngine
	reg    *registry // the leases, and the device commits
	policy HealthPolicy
	log    *slog.Logger
	obs    map[string]*observation
	timer  ports.Timer // the next pass (StartHealthMonitor)
	halt   *halt       // a stopping engine arms no pass
	clock  ports.Clock
	// pass runs one health pass and arms the next (set by New: it takes
	// the section itself, as HealthTick does).
	pass func()
}

// healthEngine is what the health monitor needs of the engine, satisfied
// by *Engine: its clock and facts, the device-operation path and the
// lease's end.
type healthEngine interface {
	now() time.Time
	emitLocked(ev events.Event)
	startOpLocked(o *deviceOp) error
	releaseLocked(l LeaseRecord, reason string) error
}

func newHealthBook(eng healthEngine, reg *registry, p HealthPolicy, d Deps) healthBook {
	return healthBook{eng: eng, reg: reg, policy: p, log: d.Logger, obs: map[string]*observation{}, clock: d.Clock}
}

// forgetLocked drops device id's debounce state (its lease ended).
func (b *healthBook) forgetLocked(id string) { delete(b.obs, id) }

// observation is the health monitor's debounce state for one leased device.
type observation struct {
	stopped int // consecutive "stopped" reads
	missing int // consecutive reads where the device was absent from its root
}

// HealthDesk is the health book's counter: the daemon arms the leased-device
// health monitor once it converged, and tests run one pass at a time.
// Engine.Health hands one out; the zero value is not usable.
type HealthDesk struct{ e *Engine }

// Health is the health book's desk (internal/daemon uses it).
func (e *Engine) Health() HealthDesk { return HealthDesk{e} }

// StartHealthMonitor arms the leased-device health monitor. The daemon calls
// it only after convergence, so no crash or recovery fact can be emitted
// while the registry is still being restored.
func (h HealthDesk) StartHealthMonitor() {
	e := h.e
	if e.cfg.Health.Interval < 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.health.armLocked()
}

// armLocked arms the next health pass, unless the engine is stopping.
func (b *healthBook) armLocked() {
	if b.halt.stopping {
		return
	}
	b.timer = b.clock.AfterFunc(b.policy.Interval, b.pass)
}

// HealthTick runs one health pass: one ListManaged per platform that has
// leased devices, then a classification of every leased device against it.
// A "transitioning" read is never crash evidence; only
// StableObservations consecutive "stopped" reads are. Provenance drift is
// trusted only while the device is observed running.
func (h HealthDesk) HealthTick(ctx context.Context) {
	e := h.e
	ctx, done, ok := e.enterPass(ctx, &e.mu, &e.halt)
	if !ok {
		return
	}
	defer done()
	e.mu.Lock()
	platforms := map[string]bool{}
	for _, l := range e.reg.leases {
		for _, id := range l.DeviceIDs() {
			if d, ok := e.reg.devices[id]; ok {
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
		if e.halt.halted() {
			return
		}
		stable := e.cfg.Health.StableObservations
		for _, lid := range sortedLeaseIDs(e.reg.leases) {
			l := *e.reg.leases[lid]
			// Every member of a multi-device lease is watched; losing one
			// ends the whole lease, as a release would.
			for _, id := range l.DeviceIDs() {
				if _, live := e.reg.leases[lid]; !live {
					break
				}
				d, ok := e.reg.devices[id]
				if !ok || e.reg.opLocks[d.ID] != "" || d.Handle == "" {
					continue
				}
				m, ok := seen[d.Platform]
				if !ok {
					continue
				}
				e.health.observeLocked(l, *d, m, stable)
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
func (b *healthBook) startRecoveryLocked(l LeaseRecord, id string) {
	o := &deviceOp{kind: OpKindRecover, lock: "recovery", id: id,
		mark: func(d *DeviceRecord) {
			d.Health.RecoveryAttempts++
			d.Health.RecoveringSince = b.eng.now()
		},
		run: func(ctx context.Context, o *deviceOp) error { return o.drv.MakeReady(ctx, o.rec.Ref()) },
		settle: func(o *deviceOp, err error) error {
			if cur := b.reg.lease(l.ID); cur == nil || !cur.Holds(id) {
				// Released while it rebooted: the release reset the
				// recovery bookkeeping, the purge runs next, and nobody
				// holds a lease to be told it recovered.
				return nil
			}
			if _, uerr := b.reg.update(id, func(r *DeviceRecord) { r.Health.RecoveringSince = time.Time{} }); uerr != nil {
				return uerr
			}
			attempts := o.rec.Health.RecoveryAttempts
			if err != nil {
				// The next ticks observe it stopped again and either retry
				// or give up once the budget is spent.
				b.log.Warn("crash recovery failed", "device", id, "attempt", attempts, "err", err)
				return nil
			}
			delete(b.obs, id)
			b.eng.emitLocked(events.Event{Type: "device.recovered", DeviceID: id, LeaseID: l.ID, RequesterID: l.RequesterID, Platform: o.rec.Platform,
				Data: map[string]any{"ownerId": l.OwnerID, "recoveryAttempts": attempts}})
			return nil
		}}
	if err := b.eng.startOpLocked(o); err != nil {
		b.log.Warn("crash recovery not started", "device", id, "err", err)
	}
}

// giveUpLocked ends a lease whose device cannot be vouched for. It goes
// through the ordinary release path, so lease.released (reason device-lost)
// stays the one place a lease ends.
func (b *healthBook) giveUpLocked(l LeaseRecord, d DeviceRecord, reason string) {
	delete(b.obs, d.ID)
	b.eng.emitLocked(events.Event{Type: "device.recovery-failed", DeviceID: d.ID, LeaseID: l.ID, RequesterID: l.RequesterID,
		Platform: d.Platform, Reason: reason, Data: map[string]any{"ownerId": l.OwnerID}})
	if err := b.eng.releaseLocked(l, ReasonDeviceLost); err != nil {
		b.log.Error("releasing a lost device's lease failed", "lease", l.ID, "err", err)
	}
}

// observeLocked judges leased device d of lease l against m, its
// platform's fresh listing by handle: stable consecutive reads of it
// stopped are a crash (a recovery, or the lease's end once the recovery
// budget is spent); stable reads of it missing, or its provenance mark
// drifted while it runs, end the lease.
func (b *healthBook) observeLocked(l LeaseRecord, d DeviceRecord, m map[string]Observed, stable int) {
	ob := b.obs[d.ID]
	if ob == nil {
		ob = &observation{}
		b.obs[d.ID] = ob
	}
	o, present := m[d.Handle]
	switch {
	case !present:
		ob.missing++
		if ob.missing >= stable {
			b.giveUpLocked(l, d, "device-missing")
		}
	case o.Run == RunRunning:
		ob.stopped, ob.missing = 0, 0
		if o.MarkOK != nil && !*o.MarkOK {
			b.giveUpLocked(l, d, "provenance-drift")
		}
	case o.Run == RunTransitioning:
		// Booting or shutting down looks like "stopped" for a
		// moment on both platforms; it proves nothing.
		ob.missing = 0
	default:
		ob.missing = 0
		ob.stopped++
		if ob.stopped < stable {
			return
		}
		ob.stopped = 0
		b.eng.emitLocked(events.Event{Type: "device.crash-detected", DeviceID: d.ID, LeaseID: l.ID, RequesterID: l.RequesterID,
			Platform: d.Platform, Data: map[string]any{"ownerId": l.OwnerID, "recoveryAttempts": d.Health.RecoveryAttempts}})
		if d.Health.RecoveryAttempts >= b.policy.MaxRecoveryAttempts {
			b.giveUpLocked(l, d, "max-recovery-attempts")
			return
		}
		b.startRecoveryLocked(l, d.ID)
	}
}
