package slots

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// The manager's ports. Each is the slice of a neighbour the manager calls,
// declared here so that the neighbour (the engine, the host registry)
// satisfies it as it stands and the daemon only hands it over.

// Assignments is the engine's map of the devices slots hold (its slot
// desk, core.SlotDesk): a device in it stays out of the general pool.
type Assignments interface {
	// SetAssignedUnknown says no map was read yet: nothing is handed out.
	SetAssignedUnknown()
	// SetAssigned replaces the map: device id to slot key.
	SetAssigned(held map[string]string)
	AssignedSlot(deviceID string) (slot string, ok bool)
	// PinSlot keeps the slot's device from yielding its room until the
	// returned func runs (ADR 0062).
	PinSlot(slot string) (unpin func())
}

// Inventory is what the engine knows of devices and capacity.
type Inventory interface {
	Devices() []core.DeviceRecord
	Device(id string) (core.DeviceRecord, bool)
	Driver(platform string) (core.Driver, bool)
	Capacity() core.CapacityReport
}

// NamedDevices is the engine's desk for one named device (core.DeviceDesk,
// from Engine.OneDevice): a slot's device found by its handle, and the
// wait for a released one to settle.
type NamedDevices interface {
	FindDevice(platform, handle string) (core.DeviceRecord, bool)
	// DeviceSettled says whether the device's released work is done, and
	// otherwise signals on next when a device operation settles.
	DeviceSettled(id string) (settled bool, next <-chan struct{})
}

// DeviceWork is the engine's device work on slot devices (its slot desk,
// core.SlotDesk).
type DeviceWork interface {
	HandlesPresent(ctx context.Context, platform string) (present map[string]bool, ok bool)
	ProvisionAssigned(ctx context.Context, req core.SpecRequest, slot, name string, recorded func(id string) error) (core.DeviceRecord, error)
	DestroyAssigned(ctx context.Context, id string) error
	ShutdownAssigned(ctx context.Context, id string) error
	// MakeRoom frees running room for a boot of req, counting freeing as
	// gone; it returns the limits that still bind.
	MakeRoom(ctx context.Context, req core.SpecRequest, freeing string) (binding []string, err error)
	BootBlocked(id string) (binding []string)
}

// Leases is the engine's lease book, for an execution's lease.
type Leases interface {
	Request(ctx context.Context, r core.Request, progress func(core.Progress)) (core.Grant, error)
	Renew(id string, ttl time.Duration) (core.LeaseRecord, error)
	Release(id string) error
	Lease(id string) (core.LeaseRecord, bool)
}

// LeaseEnds is the engine's watch on a lease's end (its watch desk,
// core.WatchDesk), for an execution's lease.
type LeaseEnds interface {
	LeaseEndedWhy(id string) (ended <-chan struct{}, why func() string)
}

// Engine is every operation the manager calls on the engine itself
// (*core.Engine).
type Engine interface {
	Inventory
	Leases
}

// Desk is every operation the manager calls on the engine's slot book
// (core.SlotDesk, from Engine.Slots).
type Desk interface {
	Assignments
	DeviceWork
}

// HostRegistry is the host registry's slot tables (*hostreg.DB), as the
// manager and its reconciler use them.
type HostRegistry interface {
	Registry
	AdmitScope(ctx context.Context, key, hostScope, namespace, incarnation string, now time.Time) (hostreg.ScopeAdmission, error)
	BindLease(ctx context.Context, scope string, slot int, token, leaseID string) error
	ReleaseSlot(ctx context.Context, scope string, slot int, token string, settling bool, now time.Time) error
	SettleSlot(ctx context.Context, scope string, slot int, token string, now time.Time) error
	ReownSlot(ctx context.Context, scope string, slot int, leaseID string, owner hostreg.Owner) (hostreg.SlotRecord, error)
	SlotsOwnedBy(ctx context.Context, home string) ([]hostreg.SlotRecord, error)
	SlotsInUse(ctx context.Context) (bool, error)
	ManagedDevices(ctx context.Context) (map[string]string, error)
	OpenIntents(ctx context.Context) ([]hostreg.SlotIntent, error)
	MarkAbandoned(ctx context.Context, now time.Time) ([]string, error)
	ResetScope(ctx context.Context, namespace, incarnation, hostScope string, force bool, now time.Time) ([]hostreg.ScopeReset, error)
	Scopes(ctx context.Context) ([]hostreg.SlotScope, error)
	Slots(ctx context.Context) ([]hostreg.SlotRecord, error)
}

// The engine, its slot and watch desks and the host registry are the
// manager's ports as they stand.
var (
	_ Engine       = (*core.Engine)(nil)
	_ Desk         = core.SlotDesk{}
	_ LeaseEnds    = core.WatchDesk{}
	_ NamedDevices = core.DeviceDesk{}
	_ HostRegistry = (*hostreg.DB)(nil)
)
