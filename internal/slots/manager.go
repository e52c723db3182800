package slots

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// Config is what a Manager is built from: its dependencies, each one an
// interface of this package, and the daemon's settings it applies.
type Config struct {
	Engine Engine
	// Desk is the engine's slot desk (Engine.Slots); Ends its watch desk
	// (Engine.Watch); Named its desk for one named device
	// (Engine.OneDevice).
	Desk     Desk
	Ends     LeaseEnds
	Named    NamedDevices
	Registry HostRegistry
	// Self is this daemon as an owner in the host registry.
	Self   hostreg.Owner
	Clock  WaitClock
	Logger *slog.Logger
	// MaxDevicesPerPrincipal is slots.maxDevicesPerPrincipal (0: no bound).
	MaxDevicesPerPrincipal int
	// ToContract is the daemon's one mapping of internal errors to contract
	// codes: a failed acquisition's typed failure is what it says.
	ToContract func(error) *contract.Error
	// OnSlotChange subscribes a reread of the slot tables to the host
	// watcher's slot counter (Start subscribes Refresh); nil: no watcher.
	OnSlotChange func(refresh func(context.Context) bool)
}

// WaitClock is the manager's time source: the reconciler's Clock, and
// timers for the manager's waits.
type WaitClock interface {
	Clock
	After(d time.Duration) <-chan time.Time
}

const (
	// slotHeartbeatTTL is an execution lease's TTL: without a heartbeat
	// the execution ends about this long after the last one.
	slotHeartbeatTTL = 10 * time.Second
	// slotSettleWait bounds how long slot.release waits for the device's
	// released work before it reports the slot settling. The MCP proxy's
	// release budget is derived from the same contract constant.
	slotSettleWait = time.Duration(contract.SlotReleaseSettleWaitMs) * time.Millisecond
	// slotSettleMax bounds the background wait of a settling slot.
	slotSettleMax = 10 * time.Minute
	// slotAbandonPoll is how often the daemon sweeps for abandoned scopes,
	// and only while some valid scope exists (hostreg.SlotsInUse): time
	// alone never changes anything else in the slot tables, and their
	// changes reach the daemon through the host watcher's generation poll.
	slotAbandonPoll = time.Minute
	defaultResetMs  = 10_000
	maxResetMs      = 60_000
	nextRelaunch    = "relaunch_execution"
)

// slotExec is one live execution of a slot on this daemon.
type slotExec struct {
	scope       string
	slot        int
	gen         int64
	token       string
	leaseID     string
	requester   string
	principal   string // the execution's connection principal (the lease's owner)
	deviceID    string
	idle        time.Duration
	lastControl time.Time
	ended       *contract.SlotExecutionEnded
	endedAt     time.Time
	// why is the engine's reason the execution's lease ended (set by track).
	why func() string
}

// leaseEndReason is the execution's end reason when its lease left the
// engine on its own: the engine's release reason (expired, device-lost,
// released), so the proxy reports what the daemon decided.
func (x *slotExec) leaseEndReason() string {
	if x.why != nil {
		if r := x.why(); r != "" {
			return r
		}
	}
	return "lease_ended"
}

// slotEndedKeep is how long an ended execution still answers
// MANAGED_EXECUTION_ENDED (rather than UNKNOWN_LEASE) before it is forgotten.
const slotEndedKeep = time.Hour

// end marks x ended for good (first reason wins); m.mu must be held.
func (m *Manager) endLocked(x *slotExec, e contract.SlotExecutionEnded) bool {
	if x.ended != nil {
		return false
	}
	x.ended, x.endedAt = &e, m.clock.Now()
	return true
}

// pruneLocked forgets executions that ended long ago; m.mu must be held.
func (m *Manager) pruneLocked() {
	now := m.clock.Now()
	for id, x := range m.byLease {
		if x.ended != nil && now.Sub(x.endedAt) > slotEndedKeep {
			delete(m.byLease, id)
		}
	}
}

// Manager holds this daemon's executions. Its state is per daemon;
// the assignments are the registry's.
type Manager struct {
	eng             Engine
	desk            Desk
	ends            LeaseEnds
	named           NamedDevices
	reg             HostRegistry
	self            hostreg.Owner
	clock           WaitClock
	log             *slog.Logger
	maxPerPrincipal int
	toContract      func(error) *contract.Error
	onChange        func(func(context.Context) bool)
	// ctx is the daemon's serving context (set by Start): watchers end
	// with it, so a stopping daemon leaves its executions to the next one.
	ctx context.Context

	mu      sync.Mutex
	byLease map[string]*slotExec
	// inUse is what the last refresh learnt: some valid scope exists on
	// the host, so the abandonment sweep has something to judge.
	inUse bool
	// refreshes counts registry reads of the slot tables: the idle cost
	// the generation poll keeps at zero (Refreshes reads it).
	refreshes atomic.Int64
	// snapshot says a read of the slot tables reached the engine once;
	// until then readErr is why the last read failed. Guarded by mu.
	snapshot bool
	readErr  error
	// refreshing orders refreshes (the host watcher's and an acquisition's):
	// the map handed to the engine last is always from the latest read, so
	// a slower stale read never undoes a newer assignment.
	refreshing sync.Mutex
	// principals names, by slot key, the principal of the slot's latest
	// execution on this daemon: whose slot devices the per-principal
	// bound (slots.maxDevicesPerPrincipal) counts. Guarded by mu.
	principals map[string]string
	// acquiring serialises this daemon's reconciliations (each one makes
	// device decisions against the inventory it read). A channel, not a
	// mutex, so a waiting acquisition gives up at its own deadline.
	acquiring chan struct{}
}

// New builds the manager and tells the engine that nothing is known of
// the slots' devices yet: until Start's first read of the slot tables the
// engine hands out nothing.
func New(cfg Config) *Manager {
	cfg.Desk.SetAssignedUnknown()
	return &Manager{eng: cfg.Engine, desk: cfg.Desk, ends: cfg.Ends, named: cfg.Named, reg: cfg.Registry, self: cfg.Self, clock: cfg.Clock, log: cfg.Logger,
		maxPerPrincipal: cfg.MaxDevicesPerPrincipal, toContract: cfg.ToContract, onChange: cfg.OnSlotChange,
		byLease: map[string]*slotExec{}, principals: map[string]string{}, ctx: context.Background(), acquiring: make(chan struct{}, 1)}
}

// Start runs before the readiness gate opens: the assignment map reaches
// the engine before any request is served, executions whose lease
// survived a restart are re-owned, and the host watcher (OnSlotChange) then
// rereads the slot tables whenever any daemon of the host changed them.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	if err := m.rehydrate(ctx); err != nil {
		m.log.Error("rehydrate slot executions", "err", err)
	}
	m.Refresh(ctx)
	if m.onChange != nil {
		m.onChange(m.Refresh)
	}
	go m.sweep(ctx)
}

// sweep marks abandoned scopes, on a slow timer and only while a valid
// scope exists: a host whose slots were never used does no slot work at
// all. A scope whose every execution died is thus abandoned within
// slotAbandonPoll of its hour without activity.
func (m *Manager) sweep(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(slotAbandonPoll):
		}
		m.mu.Lock()
		inUse := m.inUse
		m.mu.Unlock()
		if !inUse {
			continue
		}
		marked, err := m.reg.MarkAbandoned(ctx, m.clock.Now())
		if err != nil {
			m.log.Warn("mark abandoned slot scopes", "err", err)
		}
		if len(marked) > 0 {
			m.log.Info("slot scopes abandoned", "scopes", marked)
		}
	}
}

// Refresh hands the engine the devices slots hold: assigned, in the free
// pool, or named by an open journal entry (made before a crash, not yet
// bound). It reports false when a read failed and the last good map
// stands.
func (m *Manager) Refresh(ctx context.Context) bool {
	m.refreshing.Lock()
	defer m.refreshing.Unlock()
	m.refreshes.Add(1)
	inUse, err := m.reg.SlotsInUse(ctx)
	if err != nil {
		// Sweep while unsure: a sweep with nothing to judge only reads.
		m.log.Warn("read slot scopes", "err", err)
		inUse = true
	}
	ok := err == nil
	m.mu.Lock()
	m.inUse = inUse
	m.mu.Unlock()
	labels, err := m.reg.ManagedDevices(ctx)
	if err != nil {
		// Keep the last good map: unknown is never free.
		m.readFailed("read slot assignments", err)
		return false
	}
	byID := map[string]string{}
	open, err := m.reg.OpenIntents(ctx)
	if err != nil {
		// A device named only by an open journal entry must not look
		// free either: keep the last good map.
		m.readFailed("read slot journal", err)
		return false
	}
	for _, in := range open {
		if id, ok := strings.CutPrefix(in.NewStableID, "device:"); ok {
			byID[id] = hostreg.SlotKey(in.ScopeKey, in.SlotIndex)
		} else if in.NewStableID != "" {
			labels[in.NewStableID] = hostreg.SlotKey(in.ScopeKey, in.SlotIndex)
		}
	}
	for _, dev := range m.eng.Devices() {
		if l, ok := labels[dev.Handle]; ok && dev.Handle != "" {
			byID[dev.ID] = l
		}
	}
	m.desk.SetAssigned(byID)
	m.mu.Lock()
	m.snapshot, m.readErr = true, nil
	m.mu.Unlock()
	return ok
}

// readFailed logs a failed read of the slot tables and what stands in its
// place: the last good map, or (before any) nothing, so that allocation
// is refused.
func (m *Manager) readFailed(what string, err error) {
	m.mu.Lock()
	kept := m.snapshot
	if !kept {
		m.readErr = err
	}
	m.mu.Unlock()
	if kept {
		m.log.Warn(what, "err", err, "snapshot", "the last good map stands")
		return
	}
	m.log.Warn(what, "err", err, "snapshot", "none yet: allocation is refused until a read succeeds")
}

// known returns nil once the slot tables were read into the engine; before
// that it reads them now (an acquisition need not wait for the host
// watcher's next pass), and refuses with core.ErrAssignedUnknown while
// they still cannot be read.
func (m *Manager) known(ctx context.Context) error {
	m.mu.Lock()
	ok := m.snapshot
	m.mu.Unlock()
	if ok {
		return nil
	}
	m.Refresh(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snapshot {
		return nil
	}
	return fmt.Errorf("%w: the host registry's slot tables could not be read: %v", core.ErrAssignedUnknown, m.readErr)
}

// rehydrate re-owns the executions whose lease this home's engine
// restored, and releases the slots whose execution died with the previous
// daemon.
func (m *Manager) rehydrate(ctx context.Context) error {
	recs, err := m.reg.SlotsOwnedBy(ctx, m.self.Home)
	if err != nil {
		return err
	}
	now := m.clock.Now()
	for _, r := range recs {
		o := r.Owner
		if o.Owner == m.self {
			continue
		}
		l, live := m.eng.Lease(o.LeaseID)
		if o.LeaseID == "" || !live {
			if err := m.reg.ReleaseSlot(ctx, r.ScopeKey, r.SlotIndex, o.Token, false, now); err != nil {
				m.log.Warn("release a slot whose execution ended with the previous daemon", "scope", r.ScopeKey, "slot", r.SlotIndex, "err", err)
			}
			continue
		}
		if _, err := m.reg.ReownSlot(ctx, r.ScopeKey, r.SlotIndex, o.LeaseID, m.self); err != nil {
			m.log.Warn("re-own a slot execution", "scope", r.ScopeKey, "slot", r.SlotIndex, "err", err)
			continue
		}
		idle := o.Idle
		if idle <= 0 {
			// Recorded before the window was kept (hostreg migration 4).
			idle = time.Duration(contract.DefaultSlotIdleTimeoutMs) * time.Millisecond
		}
		x := &slotExec{scope: r.ScopeKey, slot: r.SlotIndex, gen: r.Generation, token: o.Token, leaseID: l.ID, requester: l.RequesterID,
			principal: l.OwnerID, deviceID: l.DeviceID, idle: idle, lastControl: now}
		m.track(x)
		m.log.Info("slot execution rehydrated", "scope", r.ScopeKey, "slot", r.SlotIndex, "lease", l.ID)
	}
	return nil
}

// track registers x and ends it when its lease ends (an expired heartbeat
// TTL, an idle release, a restart that lost it).
func (m *Manager) track(x *slotExec) {
	ended, why := m.ends.LeaseEndedWhy(x.leaseID)
	x.why = why // before x is shared
	m.mu.Lock()
	ctx := m.ctx
	m.pruneLocked()
	m.byLease[x.leaseID] = x
	m.principals[hostreg.SlotKey(x.scope, x.slot)] = x.principal
	m.mu.Unlock()
	go func() {
		select {
		case <-ended:
		case <-ctx.Done():
			return
		}
		reason := x.leaseEndReason()
		m.mu.Lock()
		first := m.endLocked(x, contract.SlotExecutionEnded{Reason: reason, NextAction: nextRelaunch})
		m.mu.Unlock()
		if first {
			if err := m.reg.ReleaseSlot(context.WithoutCancel(ctx), x.scope, x.slot, x.token, false, m.clock.Now()); err != nil {
				m.log.Warn("release an ended slot execution", "scope", x.scope, "slot", x.slot, "err", err)
			}
		}
	}()
}

func (m *Manager) exec(leaseID string) (*slotExec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, ok := m.byLease[leaseID]
	return x, ok
}

// Acquire admits the scope, reconciles the slot and leases its device.
// A refusal is an answer, not an error: the result carries outcome failed

// Execution is what the manager knows of one of its executions: what the
// daemon's tests and diagnostics read.
type Execution struct {
	ScopeKey   string
	SlotIndex  int
	Generation int64
	LeaseID    string
	// Idle is the execution's idle window.
	Idle time.Duration
	// Ended is why it ended for good; nil while it runs.
	Ended *contract.SlotExecutionEnded
}

// Execution is the execution that holds leaseID on this daemon.
func (m *Manager) Execution(leaseID string) (Execution, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, ok := m.byLease[leaseID]
	if !ok {
		return Execution{}, false
	}
	return Execution{ScopeKey: x.scope, SlotIndex: x.slot, Generation: x.gen, LeaseID: x.leaseID, Idle: x.idle, Ended: x.ended}, true
}

// Refreshes counts the reads of the slot tables: the idle cost the host
// watcher's generation poll keeps at zero.
func (m *Manager) Refreshes() int64 { return m.refreshes.Load() }

// InUse is what the last read learnt: some valid scope exists on the host,
// so the abandonment sweep has something to judge.
func (m *Manager) InUse() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inUse
}
