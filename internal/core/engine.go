package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// Errors the engine returns; the daemon maps them to contract codes.
var (
	ErrNoCapacity     = errors.New("no device can be granted right now")
	ErrQueueTimeout   = errors.New("timed out waiting in the queue")
	ErrCancelled      = errors.New("request cancelled")
	ErrUnknownLease   = errors.New("unknown lease")
	ErrNoPending      = errors.New("no pending request for this requester")
	ErrTTLTooLong     = errors.New("ttl exceeds lease.maxTtlMs")
	ErrBadRequest     = errors.New("bad request")
	ErrStopping       = errors.New("daemon is stopping")
	ErrDeviceFailed   = errors.New("device failed to become ready")
	ErrIllegalState   = errors.New("illegal device state transition")
	ErrUnknownDevice  = errors.New("unknown device")
	ErrRequesterQueue = errors.New("requester already has a pending request")
)

// RequesterLeasedError refuses a second lease for one requester and names
// the lease it already holds.
type RequesterLeasedError struct{ LeaseID string }

func (e *RequesterLeasedError) Error() string {
	return "requester already holds lease " + e.LeaseID
}

// DeviceFailedError wraps a driver failure during provisioning or boot.
type DeviceFailedError struct {
	Phase string
	Err   error
}

func (e *DeviceFailedError) Error() string { return e.Phase + ": " + e.Err.Error() }
func (e *DeviceFailedError) Unwrap() []error {
	return []error{ErrDeviceFailed, e.Err}
}

// Config holds the policies the engine enforces.
type Config struct {
	DefaultTTL  time.Duration
	MaxTTL      time.Duration
	Quarantine  QuarantinePolicy
	Health      HealthPolicy
	Cleanup     CleanupPolicy
	WarmTargets []WarmTarget
	// Demand makes the warm pool follow recorded demand (off when zero).
	Demand DemandPolicy
	// RequestRetention keeps settled lease request receipts this long
	// (default DefaultRequestRetention).
	RequestRetention time.Duration
	// RequestMaxReceipts bounds the receipts kept at once, whatever their
	// age (default DefaultMaxReceipts).
	RequestMaxReceipts int
	// MaxGroupSize bounds the devices one multi-device request may ask for
	// (default DefaultMaxGroupSize); GroupBypass is how many times single
	// requests behind a waiting group may be served before it, on its
	// platforms, before capacity is held back for the group as a whole
	// (default DefaultGroupBypass). See group.go.
	MaxGroupSize int
	GroupBypass  int
	// MaxConcurrentResetBoots bounds how many erase resets of session
	// devices boot at once (0: no bound of their own; running capacity
	// still applies). See resetmodes.go.
	MaxConcurrentResetBoots int
	// SlotRebindWindow keeps a managed slot execution's lease (release
	// policy none, which only a slot's execution may hold) at least this
	// long after a restart restores it, even when its deadline passed while
	// the daemon was away, so the execution's proxy can re-bind (ADR 0062).
	// 0 restores it with its persisted deadline, like any lease.
	SlotRebindWindow time.Duration
	// TimingScope names the speed the measured timings belong to (the
	// simulated SDK's speed factor, say), so figures taken at one speed
	// never predict another; "" is the platform's plain figure.
	TimingScope string
}

// Deps are the engine's collaborators.
type Deps struct {
	Clock    ports.Clock
	Store    Store
	Drivers  []Driver
	Strategy CapacityStrategy
	Bus      *events.Bus
	Logger   *slog.Logger
	// NewID returns a random identifier suffix; tests may make it deterministic.
	NewID func() string
	// DiskFree reports free bytes on the volume holding the device roots
	// (nil: unknown, disk pressure never detected).
	DiskFree func() (uint64, error)
	// Hooks observe every device operation (ops.go); nil is NoOpHooks.
	Hooks OpHooks
	// Requests stores lease request receipts (nil: kept in memory only).
	Requests RequestStore
	// Timings keeps measured driver timings across runs (nil: kept in
	// memory only, and every start begins from the drivers' guesses).
	Timings TimingStore
	// Classify names a refusal in the daemon's vocabulary for its receipt,
	// so a replay after a restart answers the same code.
	Classify func(error) RequestError
}

// Engine is the lease engine: registry, leases, queue, capacity and the
// acquisition planner behind one serialized decision section. Driver work
// always runs outside that section, in goroutines the engine owns.
type Engine struct {
	cfg      Config
	clock    ports.Clock
	store    Store
	drivers  map[string]Driver
	strategy CapacityStrategy
	bus      *events.Bus
	log      *slog.Logger
	newID    func() string

	hooks OpHooks
	est   estimates // measured driver timings, for progress ETAs

	running // the background work Stop cancels and waits for

	mu           sync.Mutex // the decision section
	reg          registry   // devices, leases, lease timers and op locks (registry.go)
	queue        queue      // pending requests, FIFO (queue.go)
	sectionState            // what the running section has decided and not yet told
	halt         halt       // Stop or a reset (nuke) has begun: nothing is granted or started

	books // every feature's state and rules, one book each (ADR 0091)

	// The single writer (writer.go, ADR 0044): the section hands it its
	// change sets and facts; nobody is told a fact before it is durable.
	wr *writer
	fence
}

// running is the engine's background work: what Stop cancels, and the
// goroutines it waits for.
type running struct {
	bg       context.Context // cancelled on Stop: aborts background driver work
	bgCancel context.CancelFunc
	wg       sync.WaitGroup // device operations in flight (ops.go)
	loops    sync.WaitGroup // the reaper loop, health ticks, cleanup and doctor passes
	quit     chan struct{}  // closed when Stop begins: long-lived loops return
}

// sectionState is what the decision section in progress holds back: its
// facts wait to be published as one batch, its pushes to callers run after
// unlock (a slow client must never stall a decision), and its ticket says
// which writer batch makes them durable.
type sectionState struct {
	pending     []events.Event // facts committed in this section, published as one batch before unlock
	inSection   bool           // f of section is running: emitLocked batches into pending
	afterUnlock []func()       // pushes to callers, run after unlock
	secTicket   uint64         // newest ticket the running section handed over
}

// fence stops every decision once the writer has failed: nothing more is
// decided on a state the store may not hold.
type fence struct {
	broken   error         // set when the writer failed
	failOnce sync.Once     // storeFailed runs once
	failed   chan struct{} // closed once the engine is fenced (Failed)
	reach    fenceReach    // what storeFailed reloads and answers (writer.go)
}

// books are the features' books (ADR 0091): each owns one feature's state
// and the rules that change it, and runs only inside the decision section.
type books struct {
	quarantine quarantineBook  // devices out of service and their retries (quarantine.go)
	health     healthBook      // the leased devices' health monitor (health.go)
	cleanup    cleanupBook     // the cleanup rules' disk reading and pressure edge (cleanup.go)
	slots      slotBook        // the devices managed slots hold (slotbook.go)
	warm       warmBook        // the warm pool's targets and the demand they follow (warmbook.go)
	watches    watchBook       // who waits for a lease to end (watchbook.go)
	reqs       *durableBook    // durable lease requests (durablereq.go)
	rs         resetBook       // session resets and the reset kind figures (resetbook.go)
	goldens    goldenBook      // golden removals and refused builds (golden.go)
	host       hostBook        // the rest of the host, foreign claims and host waits (hostbook.go)
	groups     groupBook       // multi-device requests' bounds, plans and preparation (group.go)
	pool       pool            // which devices each pool may use (pool.go)
	owners     ownerSystemBook // the owner-system devices' retirement rules (ownersystem.go)
	doctor     doctorBook      // doctor's repairs (doctor.go)
	converge   convergeBook    // the startup rules (converge.go)
	targets    targetBook      // the requests that name one device (targeted.go)
	tune       tuneBook        // a lease request's resource step (resources_op.go)
	capacity   capacityBook    // the capacity accounting over the registry (capacity.go)
}

// New builds an engine. Call Converge before serving requests.
func New(cfg Config, d Deps) *Engine {
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = 30 * time.Minute
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = 24 * time.Hour
	}
	if cfg.MaxGroupSize <= 0 {
		cfg.MaxGroupSize = DefaultMaxGroupSize
	}
	if cfg.GroupBypass <= 0 {
		cfg.GroupBypass = DefaultGroupBypass
	}
	if d.NewID == nil {
		d.NewID = randomID
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Hooks == nil {
		d.Hooks = NoOpHooks{}
	}
	cfg.Quarantine = cfg.Quarantine.withDefaults()
	cfg.Health = cfg.Health.withDefaults()
	cfg.Cleanup = cfg.Cleanup.withDefaults()
	cfg.Demand = cfg.Demand.withDefaults()
	e := &Engine{
		cfg: cfg, clock: d.Clock, store: d.Store, strategy: d.Strategy, bus: d.Bus,
		log: d.Logger, newID: d.NewID, hooks: d.Hooks, running: running{quit: make(chan struct{})},
		drivers: map[string]Driver{},
		books:   books{slots: newSlotBook(), warm: warmBook{pol: cfg.Demand, clock: d.Clock}, host: hostBook{log: d.Logger}},
	}
	e.reg = newRegistry(e.now, e.emitLocked, e.commitLocked, e.watches.gone)
	e.queue.left, e.queue.emit, e.queue.replan = e.goldens.recheckLocked, e.emitLocked, e.scheduleLocked
	e.pool = pool{reg: &e.reg, host: &e.host, slots: &e.slots}
	e.targets = targetBook{reg: &e.reg, pool: &e.pool, eng: e}
	e.tune = tuneBook{reg: &e.reg, queue: &e.queue, clock: d.Clock, log: d.Logger, eng: e}
	e.groups = groupBook{maxSize: cfg.MaxGroupSize, bypass: cfg.GroupBypass, limits: func() Limits { return e.strategy.Limits() },
		footprint: e.footprintLocked, reg: &e.reg, ops: e, log: d.Logger}
	for _, drv := range d.Drivers {
		e.drivers[drv.Platform()] = drv
	}
	e.capacity = capacityBook{reg: &e.reg, host: &e.host, drivers: e.drivers, strategy: d.Strategy,
		plan: func() PlanInput { return e.planInputLocked(nil, false) }, footprint: e.footprintLocked, goldens: func(r *CapacityReport) { e.goldens.addGoldensLocked(r) }}
	attachGoldenGate(e.drivers, e.Goldens())
	e.goldens = newGoldenBook(e, &e.queue, &e.halt, e.drivers, d)
	e.rs = newResetBook(e, &e.reg, &e.queue, cfg, d, func(id, reason string, op OpKind, causes ...events.Event) error {
		return e.quarantine.enterLocked(id, reason, op, causes...)
	})
	e.health = newHealthBook(e, &e.reg, cfg.Health, d)
	e.health.halt = &e.halt
	e.health.pass = func() {
		e.Health().HealthTick(e.bg)
		e.mu.Lock()
		e.health.armLocked()
		e.mu.Unlock()
	}
	e.cleanup = newCleanupBook(cfg.Cleanup, d, e, &e.reg, &e.pool, e.drivers)
	e.quarantine = newQuarantineBook(e, &e.reg, &e.halt, cfg.Quarantine, d, e.rs.resetDeviceGoneLocked)
	e.reqs = newDurableBook(cfg, d, &e.reg)
	e.converge = convergeBook{eng: e, reg: &e.reg, rs: &e.rs, quarantine: &e.quarantine, drivers: e.drivers, log: d.Logger}
	e.doctor = doctorBook{eng: e, reg: &e.reg, health: &e.health, quarantine: &e.quarantine}
	e.owners = ownerSystemBook{eng: e, reg: &e.reg, pool: &e.pool, log: d.Logger}
	e.warm.eng, e.warm.halt, e.warm.targets, e.warm.drivers, e.warm.log = e, &e.halt, cfg.WarmTargets, e.drivers, d.Logger
	e.est.scope = cfg.TimingScope
	if d.Timings != nil {
		e.est.attach(d.Timings, d.Logger)
	}
	e.failed = make(chan struct{})
	e.wr = newWriter(d.Store, d.Bus, e.storeFailed)
	e.reach = fenceReach{store: d.Store, log: d.Logger, mu: &e.mu, reg: &e.reg, queue: &e.queue, wr: e.wr}
	e.reqs.mu, e.reqs.reg, e.reqs.registry, e.reqs.halt, e.reqs.now = &e.mu, &e.reg, d.Store, &e.halt, e.now
	e.reqs.wr, e.reqs.fence, e.reqs.sec = e.wr, &e.fence, &e.sectionState
	e.bg, e.bgCancel = context.WithCancel(context.Background())
	return e
}

func randomID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Platforms lists the platforms with a driver, sorted.
func (e *Engine) Platforms() []string { return platformsOf(e.drivers) }

// platformsOf lists the platforms drivers serve, sorted.
func platformsOf(drivers map[string]Driver) []string {
	var ps []string
	for p := range drivers {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Driver returns the driver for platform.
func (e *Engine) Driver(platform string) (Driver, bool) {
	d, ok := e.drivers[platform]
	return d, ok
}

// section runs f inside the decision section. The facts f committed are
// handed over in one batch, after the section's change sets: to the bus at
// once when the single writer has nothing in flight, else to the writer,
// which publishes them right after the commit before them. Either way they
// get consecutive sequence numbers in commit order, and no subscriber can
// see a lease released before it was granted. The section returns, and its
// pushes to callers run, only once everything it handed over is durable
// (ADR 0044): the decision mutex is free while the commit is fsynced.
func (e *Engine) section(f func()) { _ = e.sectionDurable(f) }

// sectionDurable is section, reporting a commit the writer failed after
// the section had decided (the engine is then fenced).
func (e *Engine) sectionDurable(f func()) error {
	e.mu.Lock()
	e.inSection = true
	e.secTicket = 0
	f()
	if told := e.host.noteWaits(&e.queue.Queue); told != nil {
		e.afterUnlock = append(e.afterUnlock, told)
	}
	e.inSection = false
	evs, pushes := e.pending, e.afterUnlock
	e.pending, e.afterUnlock = nil, nil
	t := e.secTicket
	if et := e.publishLocked(evs); et > t {
		t = et
	}
	e.mu.Unlock()
	if err := e.awaitDurable(t); err != nil {
		return err // the pushes would report facts the disk does not hold
	}
	for _, push := range pushes {
		push()
	}
	return nil
}

// publishLocked hands facts to the bus in commit order: directly when the
// writer has nothing unpublished, else behind what it has. It returns the
// ticket to wait for (0: published already).
func (e *Engine) publishLocked(evs []events.Event) uint64 {
	if len(evs) == 0 || e.bus == nil {
		return 0
	}
	if e.wr.idle() {
		e.bus.PublishBatch(evs)
		return 0
	}
	en, err := e.wr.enqueue(nil, evs, false)
	if err != nil {
		return 0 // fenced: these facts were never made durable
	}
	return en.ticket
}

// pushLocked schedules a progress push to w for after the section.
func (e *Engine) pushLocked(w *waiter, p Progress) {
	e.afterUnlock = append(e.afterUnlock, func() { w.progress(p) })
}

// emitLocked records a fact the caller (holding the decision lock) has just
// committed. Inside section it joins the section's batch. A caller holding
// the lock outside section publishes it at once, still under the lock:
// left in pending it would wait for the next section and could follow
// facts committed after it.
func (e *Engine) emitLocked(ev events.Event) {
	ev.At = e.now()
	if !e.inSection {
		e.publishLocked([]events.Event{ev})
		return
	}
	e.pending = append(e.pending, ev)
}

var legal = map[DeviceState][]DeviceState{
	StateProvisioning: {StateReady, StateShutdown, StateQuarantined, StateDeleted},
	StateReady:        {StateLeased, StateShutdown, StateQuarantined, StateDeleted, StateReclaiming},
	StateLeased:       {StateReclaiming},
	StateReclaiming:   {StateReady, StateShutdown, StateQuarantined, StateDeleted},
	StateShutdown:     {StateReady, StateDeleted, StateQuarantined},
	StateQuarantined:  {StateReady, StateShutdown, StateDeleted},
}

// LegalTransition reports whether the shared state machine allows from -> to.
func LegalTransition(from, to DeviceState) bool {
	if from == to {
		return true
	}
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// commitLocked persists c and then applies it to memory. If the store
// refuses, memory is untouched. Illegal transitions are refused before
// anything is written. It holds the decision mutex across the commit, so it
// is for the paths that must handle a refusal (device operations and their
// settlement); the hot paths use commitAsyncLocked.
func (e *Engine) commitLocked(c Changes) error {
	if err := checkCommit(e.broken, &e.reg, c); err != nil {
		return err
	}
	en, err := e.wr.enqueue(&c, nil, true)
	if err == nil {
		<-en.done
		err = en.err
	}
	if err != nil {
		return fmt.Errorf("persist registry change: %w", err)
	}
	e.reg.apply(c)
	return nil
}

// checkCommit refuses c before anything is written: on a fenced engine
// (broken, storeFailed) or for a transition the state machine forbids.
func checkCommit(broken error, reg *registry, c Changes) error {
	if broken != nil {
		return broken
	}
	return reg.check(c)
}

// commitAsyncLocked applies c to memory at once and hands it to the single
// writer; the section's caller is answered only once it is durable
// (sectionDurable, or the ticket a grant's result carries). A failure
// there fences the engine (storeFailed), because later decisions may
// already have built on c. Outside a section it commits synchronously.
func (e *Engine) commitAsyncLocked(c Changes) (uint64, error) {
	if !e.inSection {
		return 0, e.commitLocked(c)
	}
	if err := checkCommit(e.broken, &e.reg, c); err != nil {
		return 0, err
	}
	en, err := e.wr.enqueue(&c, nil, false)
	if err != nil {
		return 0, fmt.Errorf("persist registry change: %w", err)
	}
	e.secTicket = en.ticket
	e.reg.apply(c)
	return en.ticket, nil
}

// ---- reads ----

// Devices returns a copy of every device record, sorted by id.
func (e *Engine) Devices() []DeviceRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]DeviceRecord, 0, len(e.reg.devices))
	for _, d := range e.reg.devices {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Device returns one device record.
func (e *Engine) Device(id string) (DeviceRecord, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.reg.devices[id]
	if !ok {
		return DeviceRecord{}, false
	}
	return *d, true
}

// Leases returns a copy of every lease, sorted by grant time.
func (e *Engine) Leases() []LeaseRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]LeaseRecord, 0, len(e.reg.leases))
	for _, l := range e.reg.leases {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GrantedAt.Before(out[j].GrantedAt) })
	return out
}

// Lease returns one lease.
func (e *Engine) Lease(id string) (LeaseRecord, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.reg.leases[id]
	if !ok {
		return LeaseRecord{}, false
	}
	return *l, true
}

// QueueEntry describes one pending request.
type QueueEntry struct {
	Position    int
	RequesterID string
	OwnerID     string
	Spec        Spec
	Phase       string
	EnqueuedAt  time.Time
}

// Queue lists pending requests in FIFO order.
func (e *Engine) Queue() []QueueEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queue.list()
}

func sortDevices(ds []DeviceRecord) {
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
}

// halt says whether the engine starts new work: not once Stop has begun
// (stopping) nor while an operator reset (Nuke) runs (maintenance). It is
// read and set inside the decision section; books that must start nothing
// then are handed it.
type halt struct{ stopping, maintenance bool }

// halted reports that Stop or a reset has begun: nothing new is started.
func (h *halt) halted() bool { return h.stopping || h.maintenance }

// now is the engine's notion of the current instant: UTC, truncated to the
// millisecond the store keeps, so memory and disk never disagree about a
// deadline.
func (e *Engine) now() time.Time { return e.clock.Now().UTC().Truncate(time.Millisecond) }
