package slots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/hostreg"
)

func (m *Manager) Acquire(ctx context.Context, call *dispatch.Call, in contract.SlotAcquireIn) (contract.ManagedSlotsResult, error) {
	cfg := in.Config
	if err := cfg.Validate(); err != nil {
		return contract.ManagedSlotsResult{}, err
	}
	if in.OwnerToken == "" {
		return contract.ManagedSlotsResult{}, contract.Errorf(contract.CodeBadRequest, "ownerToken is required").WithNext("name the execution with a fresh ownerToken")
	}
	if _, ok := m.eng.Driver(cfg.Requests[0].Platform); !ok {
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
		f := m.failure(err)
		sr.Failure, sr.Decisions = f, decisions
		res.Outcome, res.Failure, res.Slots = contract.SlotOutcomeFailed, f, []contract.SlotResult{sr}
		return res, nil
	}
	// A malformed spec is answered before the scope is admitted: nothing
	// is read, written or run for it (and the scope never resolved).
	if err := CheckSpecForm(req.Platform, req.RequestedSpec); err != nil {
		return failed(err, []contract.SlotDecision{{Step: "spec", Detail: "refused: " + err.Error()}})
	}
	// Nor is it admitted before this daemon ever read which devices the
	// slots hold: it could not tell another slot's device from a free one.
	if err := m.known(ctx); err != nil {
		return failed(err, []contract.SlotDecision{{Step: "discovery", Detail: "refused: " + err.Error()}})
	}
	now := m.clock.Now()
	adm, err := m.reg.AdmitScope(ctx, key, cfg.ManagedHostScope, cfg.RunnerNamespace, cfg.RunnerIncarnation, now)
	if err != nil {
		return failed(err, nil)
	}
	res.Scope.ScopeKey, res.Scope.Revived = &key, adm.Revived
	call.Push(contract.NotifyProgress, contract.Progress{Phase: contract.SlotPhaseScopeResolved, ScopeKey: key})
	if len(adm.Retired) > 0 {
		m.Refresh(ctx)
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
	unpin := m.desk.PinSlot(slotKey)
	defer unpin()
	if err := m.boundPrincipal(ctx, call.Session.Principal, slotKey, req.Platform); err != nil {
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, nil)
	}
	rc := &Reconciler{Reg: m.reg, Devs: engineDevices{m}, Clock: m.clock}
	idle := time.Duration(cfg.EffectiveIdleTimeoutMs()) * time.Millisecond
	owner := hostreg.SlotOwner{Owner: m.self, Token: in.OwnerToken, Idle: idle}
	out, err := rc.Acquire(ctx, key, req, owner)
	sr.Decisions = out.Decisions
	sr.SpecFingerprint = &out.Fingerprint
	if err != nil {
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, out.Decisions)
	}
	m.Refresh(ctx)
	requester := contract.ScopeRequester(call.Session, fmt.Sprintf("slot-%.12s-%d", key, req.SlotIndex))
	g, err := m.eng.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: req.Platform}, DeviceID: out.Device.ID,
		Slot: hostreg.SlotKey(key, req.SlotIndex), TTL: slotHeartbeatTTL, RequesterID: requester, OwnerID: call.Session.Principal,
		// The slot's next execution gets the device as this one left it:
		// booted, caches warm (no one else is ever given it).
		Release: core.ReleasePolicy{Mode: contract.ResetNone}}, nil)
	if err != nil {
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, out.Decisions)
	}
	if err := m.reg.BindLease(ctx, key, req.SlotIndex, in.OwnerToken, g.Lease.ID); err != nil {
		_ = m.eng.Release(g.Lease.ID)
		m.releaseClaim(key, req.SlotIndex, in.OwnerToken, err)
		return failed(err, out.Decisions)
	}
	x := &slotExec{scope: key, slot: req.SlotIndex, gen: out.Record.Generation, token: in.OwnerToken, leaseID: g.Lease.ID, requester: requester,
		principal: call.Session.Principal, deviceID: g.Device.ID, idle: idle, lastControl: m.clock.Now()}
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
func (m *Manager) boundPrincipal(ctx context.Context, principal, slot, platform string) error {
	max := m.maxPerPrincipal
	if max <= 0 {
		return nil
	}
	m.mu.Lock()
	owners := maps.Clone(m.principals)
	m.mu.Unlock()
	var booted, idle []core.DeviceRecord
	for _, dev := range m.eng.Devices() {
		held, ok := m.desk.AssignedSlot(dev.ID)
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
		if err := m.desk.ShutdownAssigned(ctx, dev.ID); err != nil {
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

func (m *Manager) releaseClaim(scope string, slot int, token string, cause error) {
	if err := m.reg.ReleaseSlot(context.Background(), scope, slot, token, false, m.clock.Now()); err != nil {
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

// failure turns an acquisition error into the result's typed failure.
func (m *Manager) failure(err error) *contract.SlotFailure {
	ce := m.toContract(err)
	if ce == nil {
		ce = contract.Errorf(contract.CodeInternal, "%v", err)
	}
	return &contract.SlotFailure{Code: ce.Code, Retryable: ce.Retryable, Message: ce.Message, NextAction: ce.NextAction,
		RetryAfterMs: ce.RetryAfterMs, Details: ce.Details}
}
