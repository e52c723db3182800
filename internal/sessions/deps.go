package sessions

import (
	"context"
	"log/slog"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// What the broker needs of the rest of the daemon, each declared here,
// where it is used, as narrowly as the broker calls it. The daemon builds
// the Broker with its engine, its store, its bus and an adapter of its
// own for the rest (internal/daemon/sessions.go).

// Engine is the part of the core's lease engine a session rides on: a
// session is an ordinary lease, so the broker requests, renews and
// releases one and reads the registry around it.
type Engine interface {
	Request(ctx context.Context, r core.Request, progress func(core.Progress)) (core.Grant, error)
	Renew(leaseID string, ttl time.Duration) (core.LeaseRecord, error)
	Release(leaseID string) error
	Lease(id string) (core.LeaseRecord, bool)
	Leases() []core.LeaseRecord
	Device(id string) (core.DeviceRecord, bool)
	Devices() []core.DeviceRecord
	// DestroyExhausted reports whether a device's destruction failed for
	// good, after the quarantine's retries.
	DestroyExhausted(id string) bool
	// Platforms lists the platforms a driver serves on this host.
	Platforms() []string
}

// LeaseWatch is the engine's watch on a lease's end (core.WatchDesk, from
// Engine.Watch): a ready session's keeper stops with its lease.
type LeaseWatch interface {
	// LeaseEnded closes once the lease has ended, however it ended.
	LeaseEnded(leaseID string) <-chan struct{}
}

// Resets is the engine's reset book as the broker sees it (core.ResetDesk,
// from Engine.Resets). ResetOf is the core's reset record of a released
// lease; without Resets the broker tells the reset's outcome from the
// device's fate. ReleaseWith ends a lease with a policy other than its own
// (owner exit and abandonment destroy whatever the session's reset was);
// without Resets such a lease ends with its own.
type Resets interface {
	ResetOf(leaseID string) (rec contract.SessionReset, done <-chan struct{}, ok bool)
	ReleaseWith(leaseID string, p core.ReleasePolicy, reason string) error
}

// Retirer is the engine's owner-system desk as the broker sees it
// (core.OwnerSystemDesk, from Engine.OwnerSystems): RetireIdle destroys an
// idle device of owner system sys (ADR 0063), for the session cap.
type Retirer interface {
	RetireIdle(id, sys string) error
}

var _ Retirer = core.OwnerSystemDesk{}

// Bus is the daemon's event bus: the broker publishes its facts on it and
// follows it to see a device's teardown confirmed.
type Bus interface {
	Publish(e events.Event) events.Event
	Subscribe(buffer int) (<-chan events.Event, func())
}

// Meta is the home database's key/value metadata, where a graceful stop
// leaves its handoff mark.
type Meta interface {
	GetMeta(ctx context.Context, key string) (string, bool, error)
	SetMeta(ctx context.Context, key, value string) error
}

// Host is what the broker asks of the daemon that runs it.
type Host interface {
	// StopBegun reports whether the daemon's graceful stop has begun.
	StopBegun() bool
	// DeviceOut describes a registry record as the contract shows it.
	DeviceOut(d core.DeviceRecord, leaseID string) contract.Device
	// CatalogWithin reads one platform's driver catalog within the
	// operator's catalog budget: done is false when the budget ran out.
	CatalogWithin(ctx context.Context, platform string) (cat core.Catalog, done bool, err error)
}

// Config is what a Broker is built from.
type Config struct {
	Sessions *config.Sessions // nil: sessions are not configured
	Store    Store
	Meta     Meta
	Engine   Engine
	Watch    LeaseWatch
	Resets   Resets  // nil: the engine keeps no reset record
	Retirer  Retirer // the engine's owner-system desk: the totalDeviceCap evicts through it
	Bus      Bus
	Host     Host
	Clock    ports.Clock
	Log      *slog.Logger
	// Instance is the daemon's instance id, recorded on every receipt and
	// on the handoff mark.
	Instance string
	// MapError maps an internal error to its contract error, as the
	// dispatcher does (the daemon's one mapping): a failed preparation's
	// receipt carries the code its caller would have got.
	MapError func(error) *contract.Error
}
