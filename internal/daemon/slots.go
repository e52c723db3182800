package daemon

// Managed slots (issue 12, ADR 0049): the handlers of slot.acquire,
// slot.heartbeat, slot.release, slot.resetScope and slot.list, the
// executions this daemon runs, and the assignment map that keeps slot
// devices out of the engine's general pool. The decisions are the
// reconciler's (internal/slots) and the host registry's (hostreg).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/slots"
)

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
	releasedSlot    = "reusable_for_this_slot"
	settlingSlot    = "settling"
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
func (m *slotManager) endLocked(x *slotExec, e contract.SlotExecutionEnded) bool {
	if x.ended != nil {
		return false
	}
	x.ended, x.endedAt = &e, m.d.clock.Now()
	return true
}

// pruneLocked forgets executions that ended long ago; m.mu must be held.
func (m *slotManager) pruneLocked() {
	now := m.d.clock.Now()
	for id, x := range m.byLease {
		if x.ended != nil && now.Sub(x.endedAt) > slotEndedKeep {
			delete(m.byLease, id)
		}
	}
}

// slotManager holds this daemon's executions. Its state is per daemon;
// the assignments are the registry's.
type slotManager struct {
	d   *Daemon
	log *slog.Logger
	// ctx is the daemon's serving context (set by start): watchers end
	// with it, so a stopping daemon leaves its executions to the next one.
	ctx context.Context

	mu      sync.Mutex
	byLease map[string]*slotExec
	// inUse is what the last refresh learnt: some valid scope exists on
	// the host, so the abandonment sweep has something to judge.
	inUse bool
	// refreshes counts registry reads of the slot tables: the idle cost
	// the generation poll keeps at zero (tests read it).
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

func newSlotManager(d *Daemon, log *slog.Logger) *slotManager {
	// Nothing is known of the slots' devices before the first read of the
	// slot tables (start): the engine hands out nothing until one succeeds.
	d.engine.SetAssignedUnknown()
	return &slotManager{d: d, log: log, byLease: map[string]*slotExec{}, principals: map[string]string{}, ctx: context.Background(), acquiring: make(chan struct{}, 1)}
}

func (d *Daemon) registerSlots(disp *dispatch.Dispatcher) {
	dispatch.Handle(disp, contract.SlotAcquire, d.slots.acquire)
	dispatch.Handle(disp, contract.SlotHeartbeat, d.slots.heartbeat)
	dispatch.Handle(disp, contract.SlotRelease, d.slots.release)
	dispatch.Handle(disp, contract.SlotResetScope, d.slots.resetScope)
	dispatch.Handle(disp, contract.SlotList, d.slots.list)
	// capabilities.get is the broker's (sessions_ops.go); slots add theirs.
	d.extraContracts = append(d.extraContracts, contract.ContractManagedSlots)
}

// start runs before the readiness gate opens: the assignment map reaches
// the engine before any request is served, executions whose lease
// survived a restart are re-owned, and the host watcher (watchHost) then
// rereads the slot tables whenever any daemon of the host changed them.
func (m *slotManager) start(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	if err := m.rehydrate(ctx); err != nil {
		m.log.Error("rehydrate slot executions", "err", err)
	}
	m.refresh(ctx)
	m.d.onSlotChange(m.refresh)
	go m.sweep(ctx)
}

// sweep marks abandoned scopes, on a slow timer and only while a valid
// scope exists: a host whose slots were never used does no slot work at
// all. A scope whose every execution died is thus abandoned within
// slotAbandonPoll of its hour without activity.
func (m *slotManager) sweep(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.d.clock.After(slotAbandonPoll):
		}
		m.mu.Lock()
		inUse := m.inUse
		m.mu.Unlock()
		if !inUse {
			continue
		}
		marked, err := m.d.host.MarkAbandoned(ctx, m.d.clock.Now())
		if err != nil {
			m.log.Warn("mark abandoned slot scopes", "err", err)
		}
		if len(marked) > 0 {
			m.log.Info("slot scopes abandoned", "scopes", marked)
		}
	}
}

// refresh hands the engine the devices slots hold: assigned, in the free
// pool, or named by an open journal entry (made before a crash, not yet
// bound). It reports false when a read failed and the last good map
// stands.
func (m *slotManager) refresh(ctx context.Context) bool {
	m.refreshing.Lock()
	defer m.refreshing.Unlock()
	m.refreshes.Add(1)
	inUse, err := m.d.host.SlotsInUse(ctx)
	if err != nil {
		// Sweep while unsure: a sweep with nothing to judge only reads.
		m.log.Warn("read slot scopes", "err", err)
		inUse = true
	}
	ok := err == nil
	m.mu.Lock()
	m.inUse = inUse
	m.mu.Unlock()
	labels, err := m.d.host.ManagedDevices(ctx)
	if err != nil {
		// Keep the last good map: unknown is never free.
		m.readFailed("read slot assignments", err)
		return false
	}
	byID := map[string]string{}
	open, err := m.d.host.OpenIntents(ctx)
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
	for _, dev := range m.d.engine.Devices() {
		if l, ok := labels[dev.Handle]; ok && dev.Handle != "" {
			byID[dev.ID] = l
		}
	}
	m.d.engine.SetAssigned(byID)
	m.mu.Lock()
	m.snapshot, m.readErr = true, nil
	m.mu.Unlock()
	return ok
}

// readFailed logs a failed read of the slot tables and what stands in its
// place: the last good map, or (before any) nothing, so that allocation
// is refused.
func (m *slotManager) readFailed(what string, err error) {
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
func (m *slotManager) known(ctx context.Context) error {
	m.mu.Lock()
	ok := m.snapshot
	m.mu.Unlock()
	if ok {
		return nil
	}
	m.refresh(ctx)
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
func (m *slotManager) rehydrate(ctx context.Context) error {
	recs, err := m.d.host.SlotsOwnedBy(ctx, m.d.self.Home)
	if err != nil {
		return err
	}
	now := m.d.clock.Now()
	for _, r := range recs {
		o := r.Owner
		if o.Owner == m.d.self {
			continue
		}
		l, live := m.d.engine.Lease(o.LeaseID)
		if o.LeaseID == "" || !live {
			if err := m.d.host.ReleaseSlot(ctx, r.ScopeKey, r.SlotIndex, o.Token, false, now); err != nil {
				m.log.Warn("release a slot whose execution ended with the previous daemon", "scope", r.ScopeKey, "slot", r.SlotIndex, "err", err)
			}
			continue
		}
		if _, err := m.d.host.ReownSlot(ctx, r.ScopeKey, r.SlotIndex, o.LeaseID, m.d.self); err != nil {
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
func (m *slotManager) track(x *slotExec) {
	ended, why := m.d.engine.LeaseEndedWhy(x.leaseID)
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
			if err := m.d.host.ReleaseSlot(context.WithoutCancel(ctx), x.scope, x.slot, x.token, false, m.d.clock.Now()); err != nil {
				m.log.Warn("release an ended slot execution", "scope", x.scope, "slot", x.slot, "err", err)
			}
		}
	}()
}

func (m *slotManager) exec(leaseID string) (*slotExec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, ok := m.byLease[leaseID]
	return x, ok
}

// acquire admits the scope, reconciles the slot and leases its device.
// A refusal is an answer, not an error: the result carries outcome failed
// with the typed failure and the decision trail, as the MCP side shows it.
func (m *slotManager) acquire(ctx context.Context, call *dispatch.Call, in contract.SlotAcquireIn) (contract.ManagedSlotsResult, error) {
	cfg := in.Config
	if err := cfg.Validate(); err != nil {
		return contract.ManagedSlotsResult{}, err
	}
	if in.OwnerToken == "" {
		return contract.ManagedSlotsResult{}, contract.Errorf(contract.CodeBadRequest, "ownerToken is required").WithNext("name the execution with a fresh ownerToken")
	}
	if _, ok := m.d.engine.Driver(cfg.Requests[0].Platform); !ok {
		return contract.ManagedSlotsResult{}, contract.Errorf(contract.CodeSpecUnsupported, "this daemon serves no %s devices", cfg.Requests[0].Platform)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.EffectivePreparationTimeoutMs())*time.Millisecond)
	defer cancel()
	req := cfg.Requests[0]
	key := contract.ScopeKey(cfg.ManagedHostScope, cfg.RunnerNamespace, cfg.RunnerIncarnation)
	res := contract.ManagedSlotsResult{ContractVersion: contract.SlotContractVersion, IdleTimeoutMs: cfg.EffectiveIdleTimeoutMs(),
		Scope: contract.SlotScope{ManagedHostScope: cfg.ManagedHostScope, RunnerNamespace: cfg.RunnerNamespace, RunnerIncarnation: cfg.RunnerIncarnation}}
	sr := contract.SlotResult{SlotIndex: req.SlotIndex, Role: req.Role, Platform: req.Platform, RequestedSpec: req.RequestedSpec}
	failed := func(err error, decisions []contract.SlotDecision) (contract.ManagedSlotsResult, error) {
		f := slotFailure(err)
		sr.Failure, sr.Decisions = f, decisions
		res.Outcome, res.Failure, res.Slots = contract.SlotOutcomeFailed, f, []contract.SlotResult{sr}
		return res, nil
	}
	// A malformed spec is answered before the scope is admitted: nothing
	// is read, written or run for it (and the scope never resolved).
	if err := slots.CheckSpecForm(req.Platform, req.RequestedSpec); err != nil {
		return failed(err, []contract.SlotDecision{{Step: "spec", Detail: "refused: " + err.Error()}})
	}
	// Nor is it admitted before this daemon ever read which devices the
	// slots hold: it could not tell another slot's device from a free one.
	if err := m.known(ctx); err != nil {
		return failed(err, []contract.SlotDecision{{Step: "discovery", Detail: "refused: " + err.Error()}})
	}
	now := m.d.clock.Now()
	adm, err := m.d.host.AdmitScope(ctx, key, cfg.ManagedHostScope, cfg.RunnerNamespace, cfg.RunnerIncarnation, now)
	if err != nil {
		return failed(err, nil)
	}
	res.Scope.ScopeKey, res.Scope.Revived = &key, adm.Revived
	call.Push(contract.NotifyProgress, contract.Progress{Phase: contract.SlotPhaseScopeResolved, ScopeKey: key})
	if len(adm.Retired) > 0 {
		m.refresh(ctx)
	}

	select {
	case m.acquiring <- struct{}{}:
		defer func() { <-m.acquiring }()
	case <-ctx.Done():
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, ctx.Err())
		return failed(contract.Errorf(contract.CodePreparationTimeout, "another acquisition on this daemon was still reconciling when this one's deadline passed").
			WithNext("relaunch the execution; acquisitions of one daemon run one at a time"), nil)
	}
	slotKey := hostreg.SlotKey(key, req.SlotIndex)
	// From the decision to the grant, the slot's device must not yield
	// its room to someone else's start (ADR 0062).
	unpin := m.d.engine.PinSlot(slotKey)
	defer unpin()
	if err := m.boundPrincipal(ctx, call.Session.Principal, slotKey, req.Platform); err != nil {
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, nil)
	}
	rc := &slots.Reconciler{Reg: m.d.host, Devs: slotDevices{m.d}, Clock: m.d.clock}
	idle := time.Duration(cfg.EffectiveIdleTimeoutMs()) * time.Millisecond
	owner := hostreg.SlotOwner{Owner: m.d.self, Token: in.OwnerToken, Idle: idle}
	out, err := rc.Acquire(ctx, key, req, owner)
	sr.Decisions = out.Decisions
	sr.SpecFingerprint = &out.Fingerprint
	if err != nil {
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, out.Decisions)
	}
	m.refresh(ctx)
	requester := contract.ScopeRequester(call.Session, fmt.Sprintf("slot-%.12s-%d", key, req.SlotIndex))
	g, err := m.d.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: req.Platform}, DeviceID: out.Device.ID,
		Slot: hostreg.SlotKey(key, req.SlotIndex), TTL: slotHeartbeatTTL, RequesterID: requester, OwnerID: call.Session.Principal,
		// The slot's next execution gets the device as this one left it:
		// booted, caches warm (no one else is ever given it).
		Release: core.ReleasePolicy{Mode: contract.ResetNone}}, nil)
	if err != nil {
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, out.Decisions)
	}
	if err := m.d.host.BindLease(ctx, key, req.SlotIndex, in.OwnerToken, g.Lease.ID); err != nil {
		_ = m.d.engine.Release(g.Lease.ID)
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, out.Decisions)
	}
	x := &slotExec{scope: key, slot: req.SlotIndex, gen: out.Record.Generation, token: in.OwnerToken, leaseID: g.Lease.ID, requester: requester,
		principal: call.Session.Principal, deviceID: g.Device.ID, idle: idle, lastControl: m.d.clock.Now()}
	m.track(x)
	unpin() // leased now: the lease keeps it

	resolved := out.Device.Resolved
	sr.AssignmentGeneration, sr.LeaseID, sr.RequesterID = out.Record.Generation, g.Lease.ID, requester
	sr.Device = &contract.SlotDevice{StableID: g.Device.Handle, TransportID: transportID(g.Device), Name: g.Device.Name, DeviceID: g.Device.ID}
	sr.ResolvedSpec, sr.Disposition, sr.Readiness = &resolved, out.Disposition, "ready"
	res.Outcome, res.Slots = contract.SlotOutcomeReady, []contract.SlotResult{sr}
	return res, nil
}

// boundPrincipal keeps one principal's booted slot devices on this daemon
// within slots.maxDevicesPerPrincipal, counting the device of slot (the
// one being acquired) as the one that will run. Beyond it, the
// principal's own idle slot devices are shut down, least recently used
// first (never deleted: each keeps its assignment and boots again at its
// slot's next execution); when every one has a live execution the
// acquisition is refused CAPACITY_EXHAUSTED naming the bound.
func (m *slotManager) boundPrincipal(ctx context.Context, principal, slot, platform string) error {
	max := m.d.cfg.Slots.MaxDevicesPerPrincipal
	if max <= 0 {
		return nil
	}
	m.mu.Lock()
	owners := maps.Clone(m.principals)
	m.mu.Unlock()
	var booted, idle []core.DeviceRecord
	for _, dev := range m.d.engine.Devices() {
		held, ok := m.d.engine.AssignedSlot(dev.ID)
		if !ok || held == slot || owners[held] != principal || !slotBooted(dev.State) {
			continue
		}
		booted = append(booted, dev)
		if dev.State == core.StateReady {
			idle = append(idle, dev)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].LastReleasedAt.Before(idle[j].LastReleasedAt) })
	n := len(booted)
	for _, dev := range idle {
		if n < max {
			break
		}
		if err := m.d.engine.ShutdownAssigned(ctx, dev.ID); err != nil {
			m.log.Info("an idle slot device of the principal could not be shut down for its next one", "device", dev.ID, "principal", principal, "err", err)
			continue
		}
		m.log.Info("slot device shut down: its principal is at slots.maxDevicesPerPrincipal", "device", dev.ID, "principal", principal, "max", max)
		n--
	}
	if n < max {
		return nil
	}
	return contract.Errorf(contract.CodeCapacityExhausted, "principal %q already runs %d slot devices with live executions on this daemon (slots.maxDevicesPerPrincipal is %d)", principal, n, max).
		WithRetryAfter(slotRetryAfterMs).
		WithNext("end one of this principal's slot executions and retry, or raise slots.maxDevicesPerPrincipal in the daemon's config").
		WithDetails("limit", max, "booted", n, "retryAfterMs", int64(slotRetryAfterMs), "externalDevices", 0, "platform", platform,
			"binding", "slots.maxDevicesPerPrincipal", "principal", principal)
}

// slotBooted says a slot device in state st holds a running slot.
func slotBooted(st core.DeviceState) bool {
	switch st {
	case core.StateShutdown, core.StateDeleted:
		return false
	}
	return true
}

func (m *slotManager) releaseClaim(scope string, slot int, token string, cause error) {
	if err := m.d.host.ReleaseSlot(context.Background(), scope, slot, token, false, m.d.clock.Now()); err != nil {
		var se *hostreg.SlotError
		if !errors.As(err, &se) {
			m.log.Warn("release a slot after a failed acquisition", "scope", scope, "slot", slot, "cause", cause, "err", err)
		}
	}
}

func decodeSlotSpec(raw []byte) contract.SlotSpec {
	var s contract.SlotSpec
	_ = json.Unmarshal(raw, &s) // rows this build wrote; a bad one shows as empty
	return s
}

func transportID(d core.DeviceRecord) string {
	if s := d.Attrs[core.AttrSerial]; s != "" {
		return s
	}
	return d.Handle
}

// slotFailure turns an acquisition error into the result's typed failure.
func slotFailure(err error) *contract.SlotFailure {
	ce := toContractError(err)
	if ce == nil {
		ce = contract.Errorf(contract.CodeInternal, "%v", err)
	}
	return &contract.SlotFailure{Code: ce.Code, Retryable: ce.Retryable, Message: ce.Message, NextAction: ce.NextAction,
		RetryAfterMs: ce.RetryAfterMs, Details: ce.Details}
}

// ended answers a call on an execution that ended for good.
func executionEnded(x *slotExec) error {
	e := x.ended
	return contract.Errorf(contract.CodeExecutionEnded, "this slot execution ended (%s); start a new execution on the same slot", e.Reason).
		WithNext(nextRelaunch).WithDetails("reason", e.Reason, "idle", e.Idle, "slotIndex", x.slot, "assignmentGeneration", x.gen, "nextAction", nextRelaunch)
}

func (m *slotManager) owned(leaseID, token string) (*slotExec, error) {
	x, ok := m.exec(leaseID)
	if !ok {
		return nil, contract.Errorf(contract.CodeUnknownLease, "no slot execution holds lease %s on this daemon", leaseID)
	}
	if x.token != token {
		return nil, contract.Errorf(contract.CodeForbidden, "lease %s belongs to another slot execution", leaseID)
	}
	return x, nil
}

// endIdle ends x if its idle window passed; reports whether it ended.
func (m *slotManager) endIdle(x *slotExec) bool {
	m.mu.Lock()
	if x.ended != nil {
		m.mu.Unlock()
		return true
	}
	if m.d.clock.Now().Sub(x.lastControl) < x.idle {
		m.mu.Unlock()
		return false
	}
	if !m.endLocked(x, contract.SlotExecutionEnded{Reason: "idle", Idle: true, NextAction: nextRelaunch}) {
		m.mu.Unlock()
		return true
	}
	m.mu.Unlock()
	_ = m.d.engine.Release(x.leaseID)
	if err := m.d.host.ReleaseSlot(context.Background(), x.scope, x.slot, x.token, false, m.d.clock.Now()); err != nil {
		m.log.Warn("release an idle slot execution", "scope", x.scope, "slot", x.slot, "err", err)
	}
	return true
}

func (m *slotManager) heartbeat(_ context.Context, _ *dispatch.Call, in contract.SlotHeartbeatIn) (contract.SlotHeartbeatOut, error) {
	x, err := m.owned(in.LeaseID, in.OwnerToken)
	if err != nil {
		return contract.SlotHeartbeatOut{}, err
	}
	if m.endIdle(x) {
		return contract.SlotHeartbeatOut{}, executionEnded(x)
	}
	l, err := m.d.engine.Renew(x.leaseID, slotHeartbeatTTL)
	if errors.Is(err, core.ErrUnknownLease) {
		// Expired just now: its watcher is about to say so; answer the same.
		reason := x.leaseEndReason()
		m.mu.Lock()
		first := m.endLocked(x, contract.SlotExecutionEnded{Reason: reason, NextAction: nextRelaunch})
		m.mu.Unlock()
		if first {
			m.releaseClaim(x.scope, x.slot, x.token, err)
		}
		return contract.SlotHeartbeatOut{}, executionEnded(x)
	}
	if err != nil {
		return contract.SlotHeartbeatOut{}, err
	}
	return contract.SlotHeartbeatOut{ExpiresAtMs: l.ExpiresAt.UnixMilli()}, nil
}

// release ends the execution: the lease ends, the slot keeps its device.
// Released work that outlives slotSettleWait leaves the slot settling
// until it finishes (or this daemon dies, which the registry proves).
func (m *slotManager) release(ctx context.Context, _ *dispatch.Call, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error) {
	x, err := m.owned(in.LeaseID, in.OwnerToken)
	if err != nil {
		return contract.SlotReleaseOut{}, err
	}
	reason := in.Reason
	if reason == "" {
		reason = "released"
	}
	m.mu.Lock()
	first := m.endLocked(x, contract.SlotExecutionEnded{Reason: reason, NextAction: nextRelaunch})
	m.mu.Unlock()
	if !first {
		// Released already, or its lease ended on its own: terminal.
		return contract.SlotReleaseOut{}, executionEnded(x)
	}
	if err := m.d.engine.Release(x.leaseID); err != nil && !errors.Is(err, core.ErrUnknownLease) {
		return contract.SlotReleaseOut{}, err
	}
	// The lease is gone: the slot's record must follow even if the caller
	// stops waiting (a proxy past its budget), or the slot would stay held
	// by an execution that no longer exists.
	ctx = context.WithoutCancel(ctx)
	if m.settled(ctx, x.deviceID, slotSettleWait) {
		if err := m.d.host.ReleaseSlot(ctx, x.scope, x.slot, x.token, false, m.d.clock.Now()); err != nil {
			return contract.SlotReleaseOut{}, err
		}
		return contract.SlotReleaseOut{Outcome: releasedSlot}, nil
	}
	if err := m.d.host.ReleaseSlot(ctx, x.scope, x.slot, x.token, true, m.d.clock.Now()); err != nil {
		return contract.SlotReleaseOut{}, err
	}
	go func() {
		bg := context.WithoutCancel(ctx)
		m.settled(bg, x.deviceID, slotSettleMax)
		if err := m.d.host.SettleSlot(bg, x.scope, x.slot, x.token, m.d.clock.Now()); err != nil {
			m.log.Warn("settle a released slot", "scope", x.scope, "slot", x.slot, "err", err)
		}
	}()
	return contract.SlotReleaseOut{Outcome: settlingSlot}, nil
}

// settled waits up to max for the device to be idle again (its release's
// reclaim done, or the device gone). It wakes only when a device operation
// of the engine settles, not on a timer.
func (m *slotManager) settled(ctx context.Context, id string, max time.Duration) bool {
	timeout := m.d.clock.After(max)
	for {
		done, next := m.d.engine.DeviceSettled(id)
		if done {
			return true
		}
		select {
		case <-next:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (m *slotManager) resetScope(ctx context.Context, _ *dispatch.Call, in contract.SlotResetScopeIn) (contract.SlotResetScopeOut, error) {
	if in.RunnerNamespace == "" || in.RunnerIncarnation == "" {
		return contract.SlotResetScopeOut{}, contract.Errorf(contract.CodeBadRequest, "runnerNamespace and runnerIncarnation are required")
	}
	wait := int64(defaultResetMs)
	if in.WaitMs != nil {
		wait = *in.WaitMs
	}
	if wait < 0 || wait > maxResetMs {
		return contract.SlotResetScopeOut{}, contract.Errorf(contract.CodeBadRequest, "waitMs %d is outside 0..%d", wait, maxResetMs)
	}
	deadline := m.d.clock.Now().Add(time.Duration(wait) * time.Millisecond)
	for {
		reps, err := m.d.host.ResetScope(ctx, in.RunnerNamespace, in.RunnerIncarnation, in.ManagedHostScope, in.Force, m.d.clock.Now())
		if err != nil {
			return contract.SlotResetScopeOut{}, err
		}
		out := contract.SlotResetScopeOut{Outcome: "invalidated", Scopes: []contract.SlotScopeReset{}}
		if len(reps) == 0 {
			out.Outcome = "no_match"
			return out, nil
		}
		freed := false
		for _, r := range reps {
			s := contract.SlotScopeReset{ScopeKey: r.Scope.Key, ManagedHostScope: r.Scope.HostScope, State: r.State, LiveOwners: r.LiveOwners,
				Settling: r.Settling, CleanupPending: r.CleanupPending, OpenJournal: r.OpenJournal, DevicesToFreePool: r.FreedDevices}
			for _, f := range r.ForceRefusals {
				fr := contract.SlotForceRefusal{SlotIndex: f.SlotIndex, Reason: f.Reason, Message: f.Message}
				if f.Reason == "within_settlement_cap" {
					rem := f.RemainingMs
					fr.RemainingMs = &rem
				}
				s.ForceRefusals = append(s.ForceRefusals, fr)
			}
			if r.State != hostreg.ScopeInvalidated {
				out.Outcome = "waiting"
			}
			freed = freed || len(r.FreedDevices) > 0
			out.Scopes = append(out.Scopes, s)
		}
		if freed {
			m.refresh(ctx)
		}
		if out.Outcome == "invalidated" || !m.d.clock.Now().Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-m.d.clock.After(250 * time.Millisecond):
		}
	}
}

func (m *slotManager) list(ctx context.Context, _ *dispatch.Call, _ contract.SlotListIn) (contract.SlotListOut, error) {
	scopes, err := m.d.host.Scopes(ctx)
	if err != nil {
		return contract.SlotListOut{}, err
	}
	byKey := map[string]hostreg.SlotScope{}
	for _, s := range scopes {
		byKey[s.Key] = s
	}
	recs, err := m.d.host.Slots(ctx)
	if err != nil {
		return contract.SlotListOut{}, err
	}
	out := contract.SlotListOut{Assignments: []contract.SlotAssignment{}, FreePool: []contract.SlotDevice{}}
	for _, r := range recs {
		s := byKey[r.ScopeKey]
		a := contract.SlotAssignment{ScopeKey: r.ScopeKey, ManagedHostScope: s.HostScope, RunnerNamespace: s.Namespace, RunnerIncarnation: s.Incarnation,
			ScopeState: s.State, SlotIndex: r.SlotIndex, State: r.State, AssignmentGeneration: r.Generation, Platform: r.Device.Platform}
		if r.Device.StableID != "" {
			a.Device = &contract.SlotDevice{StableID: r.Device.StableID, Name: r.Device.Name}
			if dev, ok := m.d.engine.FindDevice(r.Device.Platform, r.Device.StableID); ok {
				a.Device.DeviceID, a.Device.TransportID = dev.ID, transportID(dev)
			}
			req, res := decodeSlotSpec(r.Requested), decodeSlotSpec(r.Device.Resolved)
			a.RequestedSpec, a.ResolvedSpec = &req, &res
			a.SpecFingerprint = &contract.SpecFingerprint{Version: r.FPVersion, Hash: r.Device.FPHash}
		}
		if r.Owner != nil {
			a.LeaseID = r.Owner.LeaseID
		}
		out.Assignments = append(out.Assignments, a)
	}
	free, err := m.d.host.FreePool(ctx)
	if err != nil {
		return contract.SlotListOut{}, err
	}
	for _, f := range free {
		out.FreePool = append(out.FreePool, contract.SlotDevice{StableID: f.StableID, Name: f.Name})
	}
	sort.SliceStable(out.Assignments, func(i, j int) bool { return out.Assignments[i].ScopeKey < out.Assignments[j].ScopeKey })
	return out, nil
}

// guardLease is the enforcement on lease-addressed calls (exec): a slot
// execution's lease answers only to that execution (its principal and
// requester; an admin is no exception, since no force overrides a slot),
// and an ended execution answers MANAGED_EXECUTION_ENDED. A control call
// by the execution restarts its idle window.
func (m *slotManager) guardLease(l core.LeaseRecord, principal, requester string, control bool) error {
	x, ok := m.exec(l.ID)
	if !ok {
		if slot, assigned := m.d.engine.AssignedSlot(l.DeviceID); assigned && l.RequesterID != requester {
			return assignedRefusal(l.DeviceID, slot)
		}
		return nil
	}
	if requester != x.requester || principal != x.principal {
		return assignedRefusal(l.DeviceID, hostreg.SlotKey(x.scope, x.slot))
	}
	if m.endIdle(x) {
		return executionEnded(x)
	}
	if control {
		m.mu.Lock()
		x.lastControl = m.d.clock.Now()
		m.mu.Unlock()
	}
	return nil
}

// guardRelease refuses lease.release of a slot execution's lease: the
// execution ends through slot.release, which keeps the slot consistent.
func (m *slotManager) guardRelease(leaseID string) error {
	x, ok := m.exec(leaseID)
	if !ok {
		return nil
	}
	return assignedRefusal(x.deviceID, hostreg.SlotKey(x.scope, x.slot))
}

// guardDevice refuses generic lifecycle on a device a slot holds.
func (m *slotManager) guardDevice(deviceID string) error {
	if slot, ok := m.d.engine.AssignedSlot(deviceID); ok {
		return assignedRefusal(deviceID, slot)
	}
	return nil
}

// guardHandle refuses to take a device of a shared root into this daemon
// when a managed slot of the host holds its handle. Such a device, shut
// down while idle, holds no host claim, so the slot tables are the only
// proof it is a slot's. An unreadable registry refuses too: unknown is
// never free.
func (m *slotManager) guardHandle(ctx context.Context, handle string) error {
	labels, err := m.d.host.ManagedDevices(ctx)
	if err != nil {
		return contract.Errorf(contract.CodeDiscoveryIncomplete, "the host registry's slot assignments could not be read, so %s is not proven free of a managed slot: %v", handle, err)
	}
	for stable, slot := range labels {
		// UDIDs are compared as the host keys compare them: without case.
		if strings.EqualFold(stable, handle) {
			return assignedRefusal(handle, slot)
		}
	}
	return nil
}

// guardArgs refuses a passthrough whose arguments name a slot's device.
func (m *slotManager) guardArgs(args []string) error {
	for _, dev := range m.d.engine.Devices() {
		if dev.Handle == "" {
			continue
		}
		slot, ok := m.d.engine.AssignedSlot(dev.ID)
		if !ok {
			continue
		}
		for _, a := range args {
			if strings.Contains(a, dev.Handle) {
				return assignedRefusal(dev.ID, slot)
			}
		}
	}
	return nil
}

func assignedRefusal(deviceID, slot string) error {
	what := "a managed slot"
	if slot == core.FreePoolSlot {
		what = "the managed free pool"
	}
	return contract.Errorf(contract.CodeDeviceAssignedToSlot, "device %s belongs to %s; only that slot's execution may control it", deviceID, what).
		WithDetails("deviceId", deviceID)
}

// slotDevices is the reconciler's Devices port over this daemon's engine.
type slotDevices struct{ d *Daemon }

func (s slotDevices) Home() string { return s.d.self.Home }

func slotDevice(r core.DeviceRecord) slots.Device {
	res := contract.SlotSpec{Runtime: r.Spec.RuntimeID, DeviceType: r.Spec.ModelID}
	if res.Runtime == "" {
		res.Runtime = r.Spec.OSVersion
	}
	if res.DeviceType == "" {
		res.DeviceType = r.Spec.Model
	}
	return slots.Device{ID: r.ID, StableID: r.Handle, Name: r.Name, Platform: r.Platform, Resolved: res,
		Running: r.State != core.StateShutdown && r.State != core.StateProvisioning}
}

func (s slotDevices) List(ctx context.Context, platform string) (map[string]bool, bool) {
	return s.d.engine.HandlesPresent(ctx, platform)
}

func (s slotDevices) Find(ctx context.Context, platform, stable string, present bool) (slots.Device, bool) {
	rec, found := s.d.engine.FindDevice(platform, stable)
	if found && !present {
		// Deleted out of band: the record names nothing; drop it so it
		// never reaches the general pool as a ghost.
		if err := s.d.engine.DestroyAssigned(ctx, rec.ID); err != nil {
			s.d.log.Warn("drop the record of a slot device deleted out of band", "device", rec.ID, "err", err)
		}
		return slots.Device{}, false
	}
	if !found {
		return slots.Device{}, false
	}
	return slotDevice(rec), true
}

func (s slotDevices) ByID(id string) (slots.Device, bool) {
	rec, ok := s.d.engine.Device(id)
	if !ok || rec.Handle == "" {
		return slots.Device{}, false
	}
	return slotDevice(rec), true
}

func (s slotDevices) CheckSpec(ctx context.Context, platform string, spec contract.SlotSpec) error {
	if len(spec.Configuration) > 0 {
		return contract.Errorf(contract.CodeSpecUnsupported, "this daemon does not apply an Android configuration to a slot device yet").
			WithNext("omit requestedSpec.configuration")
	}
	if spec.DisplayCutout != "" {
		return contract.Errorf(contract.CodeSpecUnsupported, "this daemon does not apply a display cutout to a slot device yet").
			WithNext("omit requestedSpec.displayCutout")
	}
	drv, ok := s.d.engine.Driver(platform)
	if !ok {
		return contract.Errorf(contract.CodeSpecUnsupported, "this daemon serves no %s devices", platform)
	}
	if _, err := drv.ResolveSpec(ctx, slotSpecRequest(platform, spec)); err != nil {
		ce := toContractError(err)
		switch ce.Code {
		case contract.CodeUnknownModel, contract.CodeRuntimeMissing, contract.CodeOSOutOfRange, contract.CodeUnsupportedPlatform, contract.CodeBadRequest:
			// What this host has not installed, or a spec it cannot read:
			// nothing was changed, and a retry cannot help.
			return contract.Errorf(contract.CodeSpecUnsupported, "requestedSpec %+v cannot be served on this host: %s", spec, ce.Message).
				WithNext("name an installed runtime and device type (`simlock catalog`)").WithDetails("cause", string(ce.Code))
		}
		return ce
	}
	return nil
}

func (s slotDevices) Create(ctx context.Context, platform string, spec contract.SlotSpec, key, namePrefix string, recorded func(string) error) (slots.Device, error) {
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return slots.Device{}, err
	}
	name := namePrefix + "-" + hex.EncodeToString(suffix[:])
	rec, err := s.d.engine.ProvisionAssigned(ctx, slotSpecRequest(platform, spec), key, name, recorded)
	if err != nil {
		if rec.ID != "" {
			return slotDevice(rec), err
		}
		return slots.Device{}, err
	}
	return slotDevice(rec), nil
}

func (s slotDevices) Destroy(ctx context.Context, dev slots.Device) error {
	return s.d.engine.DestroyAssigned(ctx, dev.ID)
}

// MayBoot makes running room for a new slot device (a create or a
// replacement) the way a waiting request gets it: an idle warm device, or
// another slot's idle device, is shut down when a running limit binds. With
// nothing to shut down it refuses at once, counting a device about to be
// deleted as already gone.
func (s slotDevices) MayBoot(ctx context.Context, platform string, spec contract.SlotSpec, freeing *slots.Device) error {
	id := ""
	if freeing != nil {
		id = freeing.ID
	}
	binding, err := s.d.engine.MakeRoom(ctx, slotSpecRequest(platform, spec), id)
	if err != nil {
		return err
	}
	if len(binding) == 0 {
		return nil
	}
	limit, booted, ext := s.running(platform)
	if freeing != nil && freeing.Running {
		booted--
	}
	return slotCapacityRefusal(platform, limit, booted, ext, "a slot device cannot boot now").WithDetails("binding", binding[0])
}

// MayRestart refuses the boot of the slot's own shut-down device when a
// running limit binds and no idle device (warm, or another slot's with no
// live execution) could yield its room: the targeted boot would only wait,
// and the acquisition would end at its deadline instead of at once.
func (s slotDevices) MayRestart(d slots.Device) error {
	binding := s.d.engine.BootBlocked(d.ID)
	if len(binding) == 0 {
		return nil
	}
	limit, booted, ext := s.running(d.Platform)
	return slotCapacityRefusal(d.Platform, limit, booted, ext, "the slot's shut-down device cannot boot again now").WithDetails("binding", binding[0])
}

// running is the limit that binds platform's boots, what it counts now and
// how many of those devices simlock did not start.
func (s slotDevices) running(platform string) (limit, booted, external int) {
	c := s.d.engine.Capacity()
	limit = c.Limits.MaxRunning
	if pl, ok := c.Limits.Platforms[platform]; ok && pl.MaxRunning > 0 {
		limit = pl.MaxRunning
	}
	booted = c.Platforms[platform].Running
	if limit == 0 {
		limit, booted = c.Limits.MaxRunning, c.Global.Running
	}
	return limit, booted, c.Host.External
}

// slotRetryAfterMs is the retry hint of a slot boot refused at a limit:
// about one device shutdown, the soonest room can free.
const slotRetryAfterMs = 5000

// slotDiscoveryRetryMs is the retry hint of an allocation refused because
// the slot tables were never read: a couple of host polls (1 s by default),
// each of which reads them again.
const slotDiscoveryRetryMs = 2000

func slotCapacityRefusal(platform string, limit, booted, external int, what string) *contract.Error {
	return contract.Errorf(contract.CodeCapacityExhausted, "%s already runs %d of %d devices; %s", platform, booted, limit, what).
		WithRetryAfter(slotRetryAfterMs).WithNext("retry after retryAfterMs, or end another execution or lease of "+platform).
		WithDetails("limit", limit, "booted", booted, "retryAfterMs", int64(slotRetryAfterMs), "externalDevices", external, "platform", platform)
}

// slotSpecRequest maps a slot spec to a core spec request: deviceType is
// the model, and the runtime's version part the OS (an iOS runtime id
// "...SimRuntime.iOS-27-0" or "iOS 27.0" is 27.0; an Android system image
// "system-images;android-36;..." is API 36).
func slotSpecRequest(platform string, spec contract.SlotSpec) core.SpecRequest {
	return core.SpecRequest{Platform: platform, Model: spec.DeviceType, OSVersion: slotOS(platform, spec.Runtime)}
}

func slotOS(platform, runtime string) string {
	os, _ := slots.RuntimeOS(platform, runtime)
	return os
}
