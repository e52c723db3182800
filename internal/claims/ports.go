package claims

import (
	"context"
	"log/slog"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// The system's ports. Each is the slice of a neighbour it calls, declared
// here so that the neighbour (the engine, the host registry) satisfies it
// as it stands and the daemon only hands it over.

// Store is the part of the host registry the claim hooks write; tests
// wrap it (WrapStore) to count or hold writes.
type Store interface {
	Claim(ctx context.Context, c hostreg.Claim) error
	Adopt(ctx context.Context, c hostreg.Claim) (hostreg.Claim, error)
	Release(ctx context.Context, key hostreg.Key, owner hostreg.Owner) error
	MarkReleasing(ctx context.Context, key hostreg.Key, owner hostreg.Owner) error
	MarkReleaseFailed(ctx context.Context, key hostreg.Key, owner hostreg.Owner, steps []string) error
	// Lookup is the fresh read the runtime ownership check confirms a
	// lost claim with (ownership.go).
	Lookup(ctx context.Context, key hostreg.Key) (hostreg.Status, bool, error)
}

// Registry is the host registry as the system uses it (*hostreg.DB): the
// claim tables, the generations the watcher polls, the orphans' reclaim,
// the waiters and starts tables, and the file a repair may replace.
type Registry interface {
	Store
	Inspect(ctx context.Context) ([]hostreg.Status, error)
	Generations(ctx context.Context) (hostreg.Generations, error)
	Orphans(ctx context.Context) ([]hostreg.Status, error)
	BeginReclaim(ctx context.Context, key hostreg.Key, expected hostreg.Status, now time.Time) (hostreg.Status, error)
	FinishReclaim(ctx context.Context, key hostreg.Key, marked hostreg.Status, rec hostreg.Reclaimed) (cleared bool, err error)
	Waiters(ctx context.Context) ([]hostreg.WaiterStatus, error)
	PruneWaiters(ctx context.Context, stale []hostreg.WaiterStatus) (int, error)
	SetWaiters(ctx context.Context, owner hostreg.Owner, ws []hostreg.Waiter) error
	Admit(ctx context.Context, a hostreg.Admission) error
	EndStart(ctx context.Context, owner hostreg.Owner, device string) error
	File() string
	Reopen(ctx context.Context) error
}

// Engine is every operation the system calls on the engine itself
// (*core.Engine).
type Engine interface {
	Devices() []core.DeviceRecord
	Device(id string) (core.DeviceRecord, bool)
	Leases() []core.LeaseRecord
	Release(id string) error
	ReleaseWhere(match func(core.LeaseRecord) bool) []string
}

// IdleShutdown is the engine's desk for one named device as device.release
// uses it (core.DeviceDesk, from Engine.OneDevice): an idle device shut
// down through the op executor.
type IdleShutdown interface {
	ShutdownIdle(ctx context.Context, id, lock string) (stopped bool, err error)
}

// HostDesk is the engine's host book as the system tells and reads it
// (core.HostDesk, from Engine.Host).
type HostDesk interface {
	// SetForeignClaims replaces the devices other owners hold (device id
	// to why), which the engine keeps out of its pool.
	SetForeignClaims(held map[string]string)
	SetHostUsage(u core.HostUsage)
	HostLimits() (int, map[string]int)
	HostWaits() []core.HostWait
	OnHostWaitChange(f func())
}

// ResetDesk is the engine's reset book as the ownership check uses it: a
// lease whose claim was lost ends with its own policy and the loss as the
// reason (core.ResetDesk, from Engine.Resets).
type ResetDesk interface {
	ReleaseWith(leaseID string, p core.ReleasePolicy, reason string) error
}

// Bus is where the system publishes its facts (claim.lost, claim.reclaimed).
type Bus interface {
	Publish(e events.Event) events.Event
}

// Owners reaches another home's devices the way that home's own daemon
// would (the daemon builds the platform driver over the owner's roots:
// Recovery, with its driver wiring). The reclaim of a proven orphan asks
// it whether the device runs and shuts it down.
type Owners interface {
	Reconcile(ctx context.Context, ownerHome string, key hostreg.Key) (notFound bool, err error)
	Observe(ctx context.Context, ownerHome string, key hostreg.Key) (hostreg.DeviceRun, error)
}

// Config is what the daemon hands the system.
type Config struct {
	// Registry is the host registry, open; Self is this daemon as a claim
	// owner there; Roots are the platforms' absolute device roots; HostDir
	// is the registry's directory (absolute).
	Registry Registry
	Self     hostreg.Owner
	Roots    map[string]string
	HostDir  string
	// Host is capacity.host: the limits and the watcher's poll interval.
	Host      config.HostCapacity
	Clock     ports.Clock
	StartedAt time.Time
	// Logger is the daemon's; HooksLogger the claim hooks' own.
	Logger      *slog.Logger
	HooksLogger *slog.Logger
	Bus         Bus
	// Follow calls f with each event published from now on, until ctx
	// ends; EventDevices names the devices an event is about.
	Follow       func(ctx context.Context, f func(events.Event))
	EventDevices func(events.Event) []string
	Owners       Owners
	// GuardDevice refuses a device.release of a device a managed slot
	// holds (the slot manager's rule).
	GuardDevice func(deviceID string) error
}

// The engine, its host and reset desks and the host registry are the
// system's ports as they stand.
var (
	_ Engine       = (*core.Engine)(nil)
	_ HostDesk     = core.HostDesk{}
	_ ResetDesk    = core.ResetDesk{}
	_ IdleShutdown = core.DeviceDesk{}
	_ Registry     = (*hostreg.DB)(nil)
)
