package slots

import (
	"context"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// GuardLease is the enforcement on lease-addressed calls (exec): a slot
// execution's lease answers only to that execution (its principal and
// requester; an admin is no exception, since no force overrides a slot),
// and an ended execution answers MANAGED_EXECUTION_ENDED. A control call
// by the execution restarts its idle window.
func (m *Manager) GuardLease(l core.LeaseRecord, principal, requester string, control bool) error {
	x, ok := m.exec(l.ID)
	if !ok {
		if slot, assigned := m.desk.AssignedSlot(l.DeviceID); assigned && l.RequesterID != requester {
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
		x.lastControl = m.clock.Now()
		m.mu.Unlock()
	}
	return nil
}

// GuardRelease refuses lease.release of a slot execution's lease: the
// execution ends through slot.release, which keeps the slot consistent.
func (m *Manager) GuardRelease(leaseID string) error {
	x, ok := m.exec(leaseID)
	if !ok {
		return nil
	}
	return assignedRefusal(x.deviceID, hostreg.SlotKey(x.scope, x.slot))
}

// GuardDevice refuses generic lifecycle on a device a slot holds.
func (m *Manager) GuardDevice(deviceID string) error {
	if slot, ok := m.desk.AssignedSlot(deviceID); ok {
		return assignedRefusal(deviceID, slot)
	}
	return nil
}

// GuardHandle refuses to take a device of a shared root into this daemon
// when a managed slot of the host holds its handle. Such a device, shut
// down while idle, holds no host claim, so the slot tables are the only
// proof it is a slot's. An unreadable registry refuses too: unknown is
// never free.
func (m *Manager) GuardHandle(ctx context.Context, handle string) error {
	labels, err := m.reg.ManagedDevices(ctx)
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

// GuardArgs refuses a passthrough whose arguments name a slot's device.
func (m *Manager) GuardArgs(args []string) error {
	for _, dev := range m.eng.Devices() {
		if dev.Handle == "" {
			continue
		}
		slot, ok := m.desk.AssignedSlot(dev.ID)
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
