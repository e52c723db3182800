package claims

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// System is one home's claims and host capacity: the claim hooks, the host
// watcher and its subscribers, host usage, waiters and admission, the
// orphan reclaimer and the records outside the databases. The daemon
// builds it once the host registry is open (New), binds the engine built
// over its hooks (Bind), and starts its loops in the order startup needs
// (FollowLeases, Restore, StartLoops).
type System struct {
	host      Registry
	self      hostreg.Owner
	roots     map[string]string
	hostCfg   config.HostCapacity
	clock     ports.Clock
	startedAt time.Time
	log       *slog.Logger
	bus       Bus
	follow    func(ctx context.Context, f func(events.Event))
	devicesOf func(events.Event) []string
	owners    Owners
	guard     func(deviceID string) error
	engine    Engine       // set by Bind
	hostDesk  HostDesk     // set by Bind
	resets    ResetDesk    // set by Bind
	idle      IdleShutdown // set by Bind

	hostSubs []hostSub
	slotSubs []func(context.Context) bool
	hostKick chan struct{}
	hostDir  string // the host registry's directory (absolute)
	hostFile string // identity of the host.db file the registry has open (records.go)
	claims   *claims
	hostUse  *hostUsage   // other homes' and external devices, for the host limit (hostusage.go)
	waiters  *hostWaiters // host-limited waiters of every home (hostwaiters.go)
	// writing: the lease writer was started (FollowLeases), so Wait waits
	// for it.
	writing atomic.Bool
}

// New builds the system over the open registry and records this home in
// the host directory.
func New(cfg Config) *System {
	s := &System{host: cfg.Registry, self: cfg.Self, roots: cfg.Roots, hostCfg: cfg.Host, clock: cfg.Clock,
		startedAt: cfg.StartedAt, log: cfg.Logger, bus: cfg.Bus, follow: cfg.Follow, devicesOf: cfg.EventDevices,
		owners: cfg.Owners, guard: cfg.GuardDevice}
	s.hostKick = make(chan struct{}, 1)
	s.recordHome(cfg.HostDir)
	s.claims = newClaims(s.host, s.self, s.clock, s.DeviceKey, s.Kick, cfg.HooksLogger)
	return s
}

// Hooks are the engine's operation hooks (core.OpHooks): this home's
// waiters are published, then the device is claimed.
func (s *System) Hooks() core.OpHooks { return waitFirstHooks{OpHooks: s.claims, s: s} }

// Bind gives the system the engine built over its hooks, with the engine's
// host, reset and one-device desks, and sets up host waiters, host usage (over the
// drivers that count external devices) and host admission, in that order
// (see hostwaiters.go).
func (s *System) Bind(engine Engine, host HostDesk, resets ResetDesk, idle IdleShutdown, drivers []core.Driver) {
	s.engine, s.hostDesk, s.resets, s.idle = engine, host, resets, idle
	s.setupHostWaiters() // before setupHostUsage: see hostwaiters.go
	s.setupHostUsage(drivers)
	s.setupHostAdmission() // hostadmit.go
}

// FollowLeases starts the lease writer and the host watcher's claim
// subscribers. It runs before convergence: the writer follows the bus so a
// restored or early lease reaches its claim record.
func (s *System) FollowLeases(ctx context.Context) {
	s.claims.followLeases(ctx, s.follow, s.devicesOf)
	s.writing.Store(true)
	go s.claims.writeLeases(ctx)
	// Other owners' claims keep this home's devices out of its pool; the
	// watcher refreshes the engine's in-memory copy when they change.
	s.OnHostChange(func(st []hostreg.Status) {
		s.hostDesk.SetForeignClaims(s.claims.foreignFrom(s.engine.Devices(), st))
	})
	// A claim another daemon took or cleared ends this home's lease on it.
	s.OnHostChange(s.watchOwnership(ctx))
}

// Restore runs once convergence is done, before the readiness gate opens:
// this home's previous daemon's claims are taken back, every device it
// runs is claimed, and devices other owners hold leave the pool, so no
// request is served on a device whose ownership is not yet known.
func (s *System) Restore(ctx context.Context) {
	st, ierr := s.host.Inspect(ctx)
	if ierr != nil {
		s.log.Error("read the host registry after convergence; claims are taken on first use", "err", ierr)
		return
	}
	lost := s.claims.reconcile(ctx, s.engine.Devices(), s.engine.Leases(), st)
	s.hostDesk.SetForeignClaims(s.claims.foreignFrom(s.engine.Devices(), st))
	// The invariant (ADR 0059): a restored lease whose claim is not this
	// home's ends now, before anyone is let in.
	s.endLost(lost)
}

// StartLoops starts the host watcher, the waiters' publisher, the orphan
// reclaimer and the external-device probe, once the daemon is ready.
func (s *System) StartLoops(ctx context.Context) {
	go s.watchHost(ctx)
	s.waiters.started.Store(true)
	go s.publishWaiters(ctx)
	go s.reclaimOrphans(ctx)
	go s.probeExternal(ctx)
}

// Wait returns once the loops that write to the host registry have: the
// lease writer, and the publisher that clears this home's waiters at stop.
// Call it after cancelling their context.
func (s *System) Wait() {
	if s.writing.Load() {
		<-s.claims.done // the lease writer is done with the host registry
	}
	if s.waiters != nil && s.waiters.started.Load() {
		<-s.waiters.done // this home's waiters are cleared from the host registry
	}
}

// WrapStore puts wrap's store in front of the one the claim hooks write
// (tests count or hold the writes). It swaps under the hooks' lock, which
// every write holds.
func (s *System) WrapStore(wrap func(Store) Store) {
	c := s.claims
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store = wrap(c.store)
}

// Holds reports whether this daemon holds key's claim.
func (s *System) Holds(key hostreg.Key) bool { return s.claims.holds(key) }

// ClaimAdopted claims key for taking a device of the shared root into this
// daemon's registry, so no other home takes it meanwhile.
func (s *System) ClaimAdopted(ctx context.Context, key hostreg.Key) error {
	return s.claims.claimAdopted(ctx, key)
}

// ReleaseAdopted drops this daemon's claim on key (a device it took in
// shut down).
func (s *System) ReleaseAdopted(ctx context.Context, key hostreg.Key) error {
	return s.claims.release(ctx, key)
}
