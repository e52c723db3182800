package resources

import (
	"context"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// The system's ports. Each is the slice of the engine it calls, declared
// here so that *core.Engine satisfies it as it stands and the daemon only
// hands it over.

// Engine is what the inventory reads: the platforms' drivers, for the
// shared listings and catalogs, and the registry at one instant, for
// list.get.
type Engine interface {
	Driver(platform string) (core.Driver, bool)
	Platforms() []string
	Status() core.StatusSnapshot
}

// Leases is the engine's lease book, as the resources.* operations read
// it.
type Leases interface {
	Lease(id string) (core.LeaseRecord, bool)
	Device(id string) (core.DeviceRecord, bool)
}

// Path is the engine's resource path (core.ResourceDesk, from
// Engine.Resources), as the resources.* operations call it.
type Path interface {
	// LeaseResources runs the call on the lease's device's operation path,
	// so it serializes with the device's lifecycle.
	LeaseResources(ctx context.Context, leaseID string, call core.ResourceCall) (contract.ResourceResult, error)
}

// The engine and its resource desk are the system's ports as they stand.
var (
	_ Engine = (*core.Engine)(nil)
	_ Leases = (*core.Engine)(nil)
	_ Path   = core.ResourceDesk{}
)
