package slots

import (
	"context"
	"errors"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
)

// slot.release's outcomes: the slot is ready for its next execution, or
// its device's released work outlived the settle wait.
const (
	OutcomeReusable = "reusable_for_this_slot"
	OutcomeSettling = "settling"
)

// ended answers a call on an execution that ended for good.
func executionEnded(x *slotExec) error {
	e := x.ended
	return contract.Errorf(contract.CodeExecutionEnded, "this slot execution ended (%s); start a new execution on the same slot", e.Reason).
		WithNext(nextRelaunch).WithDetails("reason", e.Reason, "idle", e.Idle, "slotIndex", x.slot, "assignmentGeneration", x.gen, "nextAction", nextRelaunch)
}

func (m *Manager) owned(leaseID, token string) (*slotExec, error) {
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
func (m *Manager) endIdle(x *slotExec) bool {
	m.mu.Lock()
	if x.ended != nil {
		m.mu.Unlock()
		return true
	}
	if m.clock.Now().Sub(x.lastControl) < x.idle {
		m.mu.Unlock()
		return false
	}
	if !m.endLocked(x, contract.SlotExecutionEnded{Reason: "idle", Idle: true, NextAction: nextRelaunch}) {
		m.mu.Unlock()
		return true
	}
	m.mu.Unlock()
	_ = m.eng.Release(x.leaseID)
	if err := m.reg.ReleaseSlot(context.Background(), x.scope, x.slot, x.token, false, m.clock.Now()); err != nil {
		m.log.Warn("release an idle slot execution", "scope", x.scope, "slot", x.slot, "err", err)
	}
	return true
}

func (m *Manager) Heartbeat(_ context.Context, _ *dispatch.Call, in contract.SlotHeartbeatIn) (contract.SlotHeartbeatOut, error) {
	x, err := m.owned(in.LeaseID, in.OwnerToken)
	if err != nil {
		return contract.SlotHeartbeatOut{}, err
	}
	if m.endIdle(x) {
		return contract.SlotHeartbeatOut{}, executionEnded(x)
	}
	l, err := m.eng.Renew(x.leaseID, slotHeartbeatTTL)
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

// Release ends the execution: the lease ends, the slot keeps its device.
// Released work that outlives slotSettleWait leaves the slot settling
// until it finishes (or this daemon dies, which the registry proves).
func (m *Manager) Release(ctx context.Context, _ *dispatch.Call, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error) {
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
	if err := m.eng.Release(x.leaseID); err != nil && !errors.Is(err, core.ErrUnknownLease) {
		return contract.SlotReleaseOut{}, err
	}
	// The lease is gone: the slot's record must follow even if the caller
	// stops waiting (a proxy past its budget), or the slot would stay held
	// by an execution that no longer exists.
	ctx = context.WithoutCancel(ctx)
	if m.settled(ctx, x.deviceID, slotSettleWait) {
		if err := m.reg.ReleaseSlot(ctx, x.scope, x.slot, x.token, false, m.clock.Now()); err != nil {
			return contract.SlotReleaseOut{}, err
		}
		return contract.SlotReleaseOut{Outcome: OutcomeReusable}, nil
	}
	if err := m.reg.ReleaseSlot(ctx, x.scope, x.slot, x.token, true, m.clock.Now()); err != nil {
		return contract.SlotReleaseOut{}, err
	}
	go func() {
		bg := context.WithoutCancel(ctx)
		m.settled(bg, x.deviceID, slotSettleMax)
		if err := m.reg.SettleSlot(bg, x.scope, x.slot, x.token, m.clock.Now()); err != nil {
			m.log.Warn("settle a released slot", "scope", x.scope, "slot", x.slot, "err", err)
		}
	}()
	return contract.SlotReleaseOut{Outcome: OutcomeSettling}, nil
}

// settled waits up to max for the device to be idle again (its release's
// reclaim done, or the device gone). It wakes only when a device operation
// of the engine settles, not on a timer.
func (m *Manager) settled(ctx context.Context, id string, max time.Duration) bool {
	timeout := m.clock.After(max)
	for {
		done, next := m.named.DeviceSettled(id)
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
