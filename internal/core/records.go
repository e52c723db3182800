package core

import (
	"context"
	"encoding/json"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// DeviceState is a state of the shared device lifecycle.
type DeviceState string

const (
	StateProvisioning DeviceState = "provisioning"
	StateReady        DeviceState = "ready"
	StateLeased       DeviceState = "leased"
	StateReclaiming   DeviceState = "reclaiming"
	StateShutdown     DeviceState = "shutdown"
	StateQuarantined  DeviceState = "quarantined"
	StateDeleted      DeviceState = "deleted"
)

// DeviceRecord is the registry's record of one managed device.
type DeviceRecord struct {
	ID             string
	Platform       string
	Handle         string
	Name           string
	Spec           Spec
	Attrs          map[string]string
	Simulated      bool
	State          DeviceState
	StateSince     time.Time
	CreatedAt      time.Time
	LastLeasedAt   time.Time // zero: never leased
	LastReleasedAt time.Time
	Data           json.RawMessage
	// Health is the engine's bookkeeping for quarantine retries and crash
	// recovery; persisted so both survive a restart.
	Health DeviceHealth
	// Intent is the device operation in flight, written before its driver
	// call and cleared by its settlement (ops.go). Found set at startup, it
	// names an operation a crash cut off, and Converge recovers it by kind.
	Intent DeviceIntent
	// ReuseCount counts the clean session resets (release policies) the
	// device came through since it was created: 0 for a new device.
	// Persisted with the device.
	ReuseCount int
	// OwnerSystem marks a device that belongs to one system beside the
	// general pool (the session broker's devices): set from the request
	// that made it, it keeps the device out of the general pool for its
	// whole life (pool.general), and only requests carrying the
	// same mark are served it. The core forwards it and knows no system
	// by name (ADR 0063).
	OwnerSystem string
}

// DeviceIntent records an operation that has begun on a device. The zero
// value means none.
type DeviceIntent struct {
	Op    OpKind    `json:"op"`
	Since time.Time `json:"since"`
	// Release is the release policy of the lease whose release began this
	// operation (zero: the pool's purge or no release at all). It is
	// written in the release's own commit, so a restart that finds it
	// knows the device was a session's, mid-reset, and destroys it.
	Release ReleasePolicy `json:"release,omitzero"`
	// LeaseID names that released lease, so the reset a restart finishes
	// is still reported under it (ResetOf).
	LeaseID string `json:"leaseId,omitempty"`
}

// DeviceHealth tracks a device the core cannot fully vouch for.
type DeviceHealth struct {
	// QuarantineReason says why the device is quarantined ("purge-failed",
	// "stalled-provisioning", ...); empty when it is not.
	QuarantineReason string `json:"quarantineReason,omitempty"`
	// QuarantineOp is the operation that failed and that a retry runs
	// again; empty (a record from before it was kept) retries a reclaim.
	QuarantineOp OpKind `json:"quarantineOp,omitempty"`
	// QuarantineAttempts counts failed retries of the triggering operation.
	QuarantineAttempts int `json:"quarantineAttempts,omitempty"`
	// NextRetryAt is when the quarantine retry fires.
	NextRetryAt time.Time `json:"nextRetryAt,omitzero"`
	// RecoveryAttempts counts crash-recovery reboots under the current lease.
	RecoveryAttempts int `json:"recoveryAttempts,omitempty"`
	// RecoveringSince is set while a crash recovery reboot is in flight.
	RecoveringSince time.Time `json:"recoveringSince,omitzero"`
}

// Ref is how the driver sees this device.
func (d DeviceRecord) Ref() DeviceRef {
	return DeviceRef{ID: d.ID, Handle: d.Handle, Name: d.Name, Spec: d.Spec, Attrs: d.Attrs, Data: d.Data}
}

// LeaseRecord is one persisted lease.
type LeaseRecord struct {
	ID            string
	DeviceID      string
	RequesterID   string
	OwnerID       string
	Platform      string
	TTL           time.Duration
	GrantedAt     time.Time
	ExpiresAt     time.Time
	LastRenewedAt time.Time
	// RequestID names the lease request this lease was granted to; Timing
	// records how it was served (both empty for leases older than them).
	RequestID string
	Timing    *Timing
	// Resources is the result of the request's resource step (nil without
	// one). It lives in memory only: a restart forgets it, the device's
	// spec keeps the profile itself.
	Resources *contract.ResourceResult
	// Members are the further devices of a multi-device lease (ADR 0043),
	// in the order asked for; DeviceID is the first member. Empty for a
	// lease of one device.
	Members []string
	// Release is what the release does to the devices (the request's
	// ReleasePolicy).
	Release ReleasePolicy
}

// DeviceIDs lists every device the lease holds, DeviceID first.
func (l LeaseRecord) DeviceIDs() []string {
	return append([]string{l.DeviceID}, l.Members...)
}

// Holds reports whether the lease holds device id.
func (l LeaseRecord) Holds(id string) bool {
	if l.DeviceID == id {
		return true
	}
	for _, m := range l.Members {
		if m == id {
			return true
		}
	}
	return false
}

// Snapshot is the whole persisted registry.
type Snapshot struct {
	Devices []DeviceRecord
	Leases  []LeaseRecord
}

// Changes is one atomic registry commit.
type Changes struct {
	PutDevices    []DeviceRecord
	DeleteDevices []string
	PutLeases     []LeaseRecord
	DeleteLeases  []string
	// PutRequests settles lease request receipts in the same transaction
	// (a grant and its receipt), when the registry store also keeps them.
	PutRequests []RequestRecord
	// DeleteRequests forgets receipts the count bound let go
	// (durableBook.trimLocked), riding with the next commit.
	DeleteRequests []string
}

// Empty reports whether c changes nothing.
func (c Changes) Empty() bool {
	return len(c.PutDevices) == 0 && len(c.DeleteDevices) == 0 && len(c.PutLeases) == 0 && len(c.DeleteLeases) == 0 && len(c.PutRequests) == 0 && len(c.DeleteRequests) == 0
}

// Store persists the registry. Apply must be atomic: all of c or nothing.
type Store interface {
	Load(ctx context.Context) (Snapshot, error)
	Apply(ctx context.Context, c Changes) error
}

// disposeLocked settles a device that has just been purged or booted
// outside any lease: back to ready when running capacity permits, shut down
// (as a follow-up operation under lock) otherwise. fact is emitted with the
// disposition. The planner runs again either way, so a waiter for exactly
// this device is granted the moment it settles.
func (e *Engine) disposeLocked(id, fact, lock string, extra map[string]any) error {
	d, ok := e.reg.devices[id]
	if !ok {
		return nil
	}
	p := d.Platform
	if e.capacity.runningOverLocked(p) {
		o := e.shutdownOp(id, lock, "shutdown-failed", func(d DeviceRecord) {
			e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: p, Data: withData(extra, "disposition", string(StateShutdown))})
		})
		if err := e.startOpLocked(o); err == nil {
			return nil
		}
		// Stopping: nothing new begins, so keep the device warm instead.
	}
	if _, err := e.reg.update(id, func(r *DeviceRecord) { r.State = StateReady }); err != nil {
		return err
	}
	e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: p, Data: withData(extra, "disposition", string(StateReady))})
	e.scheduleLocked()
	return nil
}

// withData is a copy of extra with key set, for a fact's data.
func withData(extra map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(extra)+1)
	for k, x := range extra {
		out[k] = x
	}
	out[key] = v
	return out
}
