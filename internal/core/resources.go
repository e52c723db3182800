package core

import (
	"context"
	"errors"

	"github.com/simlock/simlock/contract"
)

// ResourceController is the optional driver ability to observe and tune a
// running device's resource groups (contract.ResourceGroups). The core
// calls it only on the device-operation path, so a resource change
// serializes with the device's boot, reclaim and teardown, and only for
// the lease that holds the device.
//
// Every answer is evidence: a group is enabled or disabled only when the
// driver observed every native service in it, after the write, by an
// independent read. A driver never reports what was requested as observed.
type ResourceController interface {
	// ObserveResources reads every group of the platform without writing.
	ObserveResources(ctx context.Context, dev DeviceRef) (contract.ResourceResult, error)
	// ApplyResources writes the requested groups (or restores a receipt),
	// then re-reads them; Success only on a full match.
	ApplyResources(ctx context.Context, dev DeviceRef, change ResourceChange) (contract.ResourceResult, error)
}

// ResourceReconciler is the optional driver ability behind
// resources.reconcile: it compares a requested map with an independent
// observation and the overrides simlock recorded for this device
// incarnation, and repairs when asked. A driver that keeps no record of its
// own overrides per incarnation does not implement it, and a reconcile of
// its devices is refused before any command (ErrReconcileUnsupported).
type ResourceReconciler interface {
	ReconcileResources(ctx context.Context, dev DeviceRef, rec ResourceReconcile) (contract.ResourceResult, error)
}

// ErrReconcileUnsupported refuses resources.reconcile on a device whose
// driver is no ResourceReconciler: nothing has run on the device.
var ErrReconcileUnsupported = errors.New("resources.reconcile is not served for this device")

// ResourceChange is one resources.set (or a lease's resources step).
type ResourceChange struct {
	Resources map[string]contract.ResourceState
	Restore   *contract.RestoreReceipt
}

// ResourceReconcile is one resources.reconcile.
type ResourceReconcile struct {
	Resources          map[string]contract.ResourceState
	Repair             bool
	ReleaseOwnedExtras bool
}

// ErrReceiptMismatch: a restore receipt was presented to a device other
// than the serial, boot, user and incarnation it was issued on.
var ErrReceiptMismatch = errors.New("restore receipt does not match this device")
