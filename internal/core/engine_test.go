package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// memStore is an in-memory core.Store that can be told to fail.
type memStore struct {
	mu      sync.Mutex
	devices map[string]core.DeviceRecord
	leases  map[string]core.LeaseRecord
	failing bool
	// failIf, when set, refuses the change sets it matches (ops_test.go).
	failIf func(core.Changes) bool
	// closed makes every later Apply a violation: the daemon closed the
	// database.
	closed     bool
	afterClose int
	// hold, when set, parks every commit it matches until release is
	// closed, after signalling held (writer_test.go: a slow fsync).
	hold    func(core.Changes) bool
	held    chan struct{}
	release chan struct{}
	// batchable makes the store a core.BatchStore (group commit).
	batchable bool
	txs       int // transactions committed
}

func newMemStore() *memStore {
	return &memStore{devices: map[string]core.DeviceRecord{}, leases: map[string]core.LeaseRecord{}}
}

func (m *memStore) Load(context.Context) (core.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s core.Snapshot
	for _, d := range m.devices {
		s.Devices = append(s.Devices, d)
	}
	for _, l := range m.leases {
		s.Leases = append(s.Leases, l)
	}
	return s, nil
}

func (m *memStore) Apply(_ context.Context, c core.Changes) error {
	m.park([]core.Changes{c})
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.applyLocked(c); err != nil {
		return err
	}
	m.txs++
	return nil
}

// park waits while a hold matches one of cs (outside the lock, so reads
// still answer).
func (m *memStore) park(cs []core.Changes) {
	m.mu.Lock()
	hold, held, release := m.hold, m.held, m.release
	m.mu.Unlock()
	if hold == nil {
		return
	}
	for _, c := range cs {
		if hold(c) {
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
			return
		}
	}
}

// batchStore is memStore with group commit: all change sets or none.
type batchStore struct{ *memStore }

func (b batchStore) ApplyBatch(_ context.Context, cs []core.Changes) error {
	m := b.memStore
	m.park(cs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		return errors.New("disk full")
	}
	for _, c := range cs {
		if m.failIf != nil && m.failIf(c) {
			return errors.New("disk full")
		}
	}
	for _, c := range cs {
		if err := m.applyLocked(c); err != nil {
			return err
		}
	}
	m.txs++
	return nil
}

func (m *memStore) applyLocked(c core.Changes) error {
	if m.closed {
		m.afterClose++
		return errors.New("sql: database is closed")
	}
	if m.failing || (m.failIf != nil && m.failIf(c)) {
		return errors.New("disk full")
	}
	for _, d := range c.PutDevices {
		m.devices[d.ID] = d
	}
	for _, id := range c.DeleteDevices {
		delete(m.devices, id)
	}
	for _, l := range c.PutLeases {
		m.leases[l.ID] = l
	}
	for _, id := range c.DeleteLeases {
		delete(m.leases, id)
	}
	return nil
}

type harness struct {
	t      *testing.T
	clock  *fake.Clock
	store  *memStore
	drv    *fakedrv.Driver
	droid  *fakedrv.Driver
	bus    *events.Bus
	engine *core.Engine
	limits core.Limits
	cfg    core.Config
	disk   uint64
	// drivers, when set, replaces {drv, droid} (wrapped drivers in tests).
	drivers []core.Driver
	// timings, when set, keeps measured timings across restarts.
	timings core.TimingStore
	ids     int
}

func newHarness(t *testing.T, limits core.Limits) *harness {
	t.Helper()
	h := &harness{t: t, clock: fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), store: newMemStore(),
		drv: fakedrv.New("ios"), droid: fakedrv.New("android"), limits: limits,
		cfg: core.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour}, disk: 100 << 30}
	h.start()
	return h
}

// start builds an engine over the harness's store (again, for restarts).
func (h *harness) start() {
	h.bus = events.New(100, h.clock.Now)
	drivers := h.drivers
	if drivers == nil {
		drivers = []core.Driver{h.drv, h.droid}
	}
	var st core.Store = h.store
	if h.store.batchable {
		st = batchStore{h.store}
	}
	h.engine = core.New(h.cfg, core.Deps{
		DiskFree: func() (uint64, error) { return h.disk, nil },
		Clock:    h.clock, Store: st, Drivers: drivers,
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus,
		// Counted across restarts, so a restarted engine never reuses an id.
		NewID:   func() string { h.ids++; return fmt.Sprintf("%04d", h.ids) },
		Timings: h.timings,
	})
	if err := h.engine.Converge(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.engine.WaitIdle()
}

func (h *harness) lease(req string, model string) (core.Grant, error) {
	return h.engine.Request(context.Background(), core.Request{
		Spec: core.SpecRequest{Platform: "ios", Model: model}, RequesterID: req, OwnerID: req}, nil)
}

// async starts a request in the background and returns once it is queued
// (or already finished), read from the event bus rather than by sleeping.
func (h *harness) async(r core.Request) <-chan result {
	return h.asyncCtx(context.Background(), r)
}

// asyncCtx is async with the caller's context, whose end abandons the
// request.
func (h *harness) asyncCtx(ctx context.Context, r core.Request) <-chan result {
	ch, cancel := h.bus.Subscribe(64)
	out := make(chan result, 1)
	go func() {
		g, err := h.engine.Request(ctx, r, nil)
		out <- result{g, err}
	}()
	defer cancel()
	for ev := range ch {
		if ev.RequesterID == r.RequesterID && (ev.Type == "request.queued" || ev.Type == "lease.granted" || ev.Type == "request.refused") {
			break
		}
	}
	return out
}

type result struct {
	g   core.Grant
	err error
}

func one(limit int) core.Limits { return core.Limits{MaxRunning: limit, MaxManaged: limit * 2} }

func TestFirstRequestProvisionsBootsAndGrants(t *testing.T) {
	h := newHarness(t, one(1))
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	if g.Device.State != core.StateLeased || g.Lease.TTL != time.Minute {
		t.Fatalf("grant %+v", g)
	}
	if !g.Lease.ExpiresAt.Equal(h.clock.Now().Add(time.Minute)) {
		t.Fatalf("expiresAt %v", g.Lease.ExpiresAt)
	}
	if got := h.drv.Calls(); len(got) != 2 || got[0] != "provision Phone" || got[1] != "boot ios-1" {
		t.Fatalf("driver calls %v", got)
	}
	if c := h.engine.Capacity(); c.Global.Running != 1 || c.Global.Reserved != 0 {
		t.Fatalf("capacity %+v", c)
	}
}

func TestNoWaitRefusesWhenFullAndWaiterGetsReleasedDevice(t *testing.T) {
	h := newHarness(t, one(1))
	first, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", NoWait: true}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("noWait: %v", err)
	}
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "c", OwnerID: "c", Timeout: time.Minute})
	if q := h.engine.Queue(); len(q) != 1 || q[0].RequesterID != "c" {
		t.Fatalf("queue %+v", q)
	}
	if err := h.engine.Release(first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.g.Device.ID != first.Device.ID {
		t.Fatalf("waiter got %s, want the released device %s", r.g.Device.ID, first.Device.ID)
	}
	calls := h.drv.Calls()
	if calls[len(calls)-1] != "reclaim ios-1" {
		t.Fatalf("device was not purged before the second grant: %v", calls)
	}
}

func TestQueueTimeout(t *testing.T) {
	h := newHarness(t, one(1))
	if _, err := h.lease("a", ""); err != nil {
		t.Fatal(err)
	}
	pending := h.clock.Pending()
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", Timeout: 10 * time.Second})
	// The request arms its timeout just after it is queued: advancing the
	// clock before that would move time under a timer not yet set.
	for h.clock.Pending() == pending {
		runtime.Gosched()
	}
	h.clock.Advance(9 * time.Second)
	select {
	case r := <-waiting:
		t.Fatalf("returned early: %v", r.err)
	default:
	}
	h.clock.Advance(2 * time.Second)
	if r := <-waiting; !errors.Is(r.err, core.ErrQueueTimeout) {
		t.Fatalf("want queue timeout, got %v", r.err)
	}
	if len(h.engine.Queue()) != 0 {
		t.Fatal("timed-out request still queued")
	}
}

func TestLeaseExpiresAndDeviceReturnsToPool(t *testing.T) {
	h := newHarness(t, one(1))
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a", TTL: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(1999 * time.Millisecond)
	if _, ok := h.engine.Lease(g.Lease.ID); !ok {
		t.Fatal("lease ended before its deadline")
	}
	h.clock.Advance(time.Millisecond)
	h.engine.WaitIdle()
	if _, ok := h.engine.Lease(g.Lease.ID); ok {
		t.Fatal("lease outlived its deadline")
	}
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateReady {
		t.Fatalf("device %s after expiry, want ready", d.State)
	}
	evs, _ := h.bus.Since(0)
	var sawExpired bool
	for _, e := range evs {
		sawExpired = sawExpired || (e.Type == "lease.expired" && e.LeaseID == g.Lease.ID)
	}
	if !sawExpired {
		t.Fatal("no lease.expired event")
	}
}

func TestRenewReappliesStoredWidthAndCapsTTL(t *testing.T) {
	h := newHarness(t, one(1))
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a", TTL: 10 * time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(4 * time.Minute)
	l, err := h.engine.Renew(g.Lease.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !l.ExpiresAt.Equal(h.clock.Now().Add(10*time.Minute)) || !l.LastRenewedAt.Equal(h.clock.Now()) {
		t.Fatalf("renewed lease %+v", l)
	}
	if _, err := h.engine.Renew(g.Lease.ID, 2*time.Hour); !errors.Is(err, core.ErrTTLTooLong) {
		t.Fatalf("over-max renew: %v", err)
	}
	if _, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", TTL: 2 * time.Hour}, nil); !errors.Is(err, core.ErrTTLTooLong) {
		t.Fatalf("over-max request: %v", err)
	}
	// The renewed deadline, not the grant-time one, governs expiry.
	h.clock.Advance(7 * time.Minute)
	if _, ok := h.engine.Lease(g.Lease.ID); !ok {
		t.Fatal("expired at the grant-time deadline despite the renew")
	}
}

func TestOneLeasePerRequesterNamesExistingLease(t *testing.T) {
	h := newHarness(t, one(2))
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.lease("a", "")
	var rl *core.RequesterLeasedError
	if !errors.As(err, &rl) || rl.LeaseID != g.Lease.ID {
		t.Fatalf("got %v", err)
	}
}

func TestRestartRestoresLeaseWithRenewedDeadline(t *testing.T) {
	h := newHarness(t, one(1))
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(30 * time.Second)
	renewed, err := h.engine.Renew(g.Lease.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A crash: the old engine simply goes away without Stop.
	h.start()
	l, ok := h.engine.Lease(g.Lease.ID)
	if !ok || !l.ExpiresAt.Equal(renewed.ExpiresAt) {
		t.Fatalf("after restart lease=%+v ok=%v, want expiresAt %v", l, ok, renewed.ExpiresAt)
	}
	h.clock.Advance(time.Minute)
	h.engine.WaitIdle()
	if _, ok := h.engine.Lease(g.Lease.ID); ok {
		t.Fatal("restored timer did not expire the lease")
	}
}

func TestRequestNoDeviceCanServeIsPassedOver(t *testing.T) {
	limits := core.Limits{MaxRunning: 2, MaxManaged: 4, Platforms: map[string]core.PlatformLimits{"ios": {MaxRunning: 1}}}
	h := newHarness(t, limits)
	if _, err := h.lease("a", ""); err != nil {
		t.Fatal(err)
	}
	blocked := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b"})
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "android"}, RequesterID: "c", NoWait: true}, nil)
	if err != nil {
		t.Fatalf("android request behind a blocked ios one: %v", err)
	}
	if g.Device.Platform != "android" {
		t.Fatal("wrong platform")
	}
	select {
	case r := <-blocked:
		t.Fatalf("blocked ios request returned: %v", r.err)
	default:
	}
	h.engine.Cancel("b")
	if r := <-blocked; !errors.Is(r.err, core.ErrCancelled) {
		t.Fatalf("cancel: %v", r.err)
	}
}

func TestWarmDeviceOfOtherSpecIsEvictedLRU(t *testing.T) {
	h := newHarness(t, one(1))
	g, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	g2, err := h.lease("b", "Tablet")
	if err != nil {
		t.Fatal(err)
	}
	old, _ := h.engine.Device(g.Device.ID)
	if old.State != core.StateShutdown || g2.Device.ID == g.Device.ID {
		t.Fatalf("old device %s, new %s", old.State, g2.Device.ID)
	}
	if h.drv.Running(old.Handle) {
		t.Fatal("evicted device still running in the driver")
	}
}

func TestShutdownDeviceIsBootedBeforeProvisioningANewOne(t *testing.T) {
	h := newHarness(t, one(1))
	g, _ := h.lease("a", "Phone")
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.lease("b", "Tablet") // evicts the Phone
	h.engine.ReleaseWhere(func(core.LeaseRecord) bool { return true })
	h.engine.WaitIdle()
	g3, err := h.lease("c", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if g3.Device.ID != g.Device.ID {
		t.Fatalf("provisioned a new Phone instead of booting the shut-down one")
	}
	if exist, _ := h.drv.Count(); exist != 2 {
		t.Fatalf("%d devices exist, want 2", exist)
	}
}

func TestPurgeFailureQuarantines(t *testing.T) {
	h := newHarness(t, one(1))
	g, _ := h.lease("a", "")
	h.drv.SetFail("reclaim", 1)
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateQuarantined {
		t.Fatalf("state %s", d.State)
	}
	// A quarantined device counts against capacity and is never granted.
	if _, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", NoWait: true}, nil); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("got %v", err)
	}
}

func TestStoreFailureLeavesNoHalfGrant(t *testing.T) {
	h := newHarness(t, one(1))
	h.store.failing = true
	_, err := h.lease("a", "")
	if err == nil {
		t.Fatal("grant succeeded without persisting")
	}
	if len(h.engine.Leases()) != 0 {
		t.Fatal("lease exists in memory but not on disk")
	}
}

func TestIllegalTransitions(t *testing.T) {
	if core.LegalTransition(core.StateLeased, core.StateReady) {
		t.Fatal("leased -> ready must go through reclaiming")
	}
	if core.LegalTransition(core.StateDeleted, core.StateReady) {
		t.Fatal("deleted is terminal")
	}
	if !core.LegalTransition(core.StateReclaiming, core.StateQuarantined) {
		t.Fatal("purge failure must be able to quarantine")
	}
}

func TestUnsupportedPlatformAndUnknownModel(t *testing.T) {
	h := newHarness(t, one(1))
	h.drv.Models = []string{"Phone"}
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "tvos"}, RequesterID: "a"}, nil)
	if !errors.Is(err, core.ErrUnsupportedPlatform) {
		t.Fatalf("got %v", err)
	}
	if _, err := h.lease("a", "Watch"); !errors.Is(err, core.ErrUnknownModel) {
		t.Fatalf("got %v", err)
	}
}

// Many requesters contending for two devices: no device is ever leased
// twice, and capacity is never exceeded.
func TestNoDoubleGrantUnderContention(t *testing.T) {
	h := newHarness(t, one(2))
	var mu sync.Mutex
	holders := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req := fmt.Sprintf("r%d", i)
			for j := 0; j < 5; j++ {
				g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: req}, nil)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if other, busy := holders[g.Device.ID]; busy {
					errs <- fmt.Errorf("device %s granted to %s while held by %s", g.Device.ID, req, other)
				}
				holders[g.Device.ID] = req
				mu.Unlock()
				if c := h.engine.Capacity(); c.Global.Running+c.Global.Reserved > 2 {
					errs <- fmt.Errorf("capacity exceeded: %+v", c.Global)
				}
				mu.Lock()
				delete(holders, g.Device.ID)
				mu.Unlock()
				if err := h.engine.Release(g.Lease.ID); err != nil {
					errs <- err
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h.engine.WaitIdle()
	if exist, _ := h.drv.Count(); exist > 4 {
		t.Fatalf("%d devices exist, managed limit is 4", exist)
	}
}

func TestResourceStrategyUsesTheDriversFootprints(t *testing.T) {
	stats := &fake.Stats{CPUs: 16, TotalRAM: 32 << 30}
	s, err := core.NewStrategy("resource", core.StrategyInputs{Stats: stats, Drivers: []core.Driver{fakedrv.New("ios")}})
	if err != nil {
		t.Fatal(err)
	}
	l := s.Limits()
	// 16 CPUs at 2 a device bound the count at 8; RAM is one shared budget
	// of 60% of 32 GiB (20615843020 bytes) that each device draws from by its own footprint, so
	// no per-platform count is derived from a platform-wide figure.
	if l.MaxRunning != 8 || l.RAMBudget != 20615843020 || len(l.Platforms) != 0 {
		t.Fatalf("%+v", l)
	}
	if _, err := core.NewStrategy("psychic", core.StrategyInputs{}); err == nil {
		t.Fatal("unknown strategy accepted")
	}
}

// A cancelled request whose device work is still running no longer counts
// as its requester's: the requester may ask again at once, and the new
// request is the one a second cancel withdraws.
func TestCancelledRequestInFlightFreesItsRequester(t *testing.T) {
	h := newHarness(t, one(2))
	h.drv.Gate = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a"}, nil)
		first <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := h.engine.Queue()
		if len(q) == 1 && q[0].Phase == "booting" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first request never reached its boot: %+v", q)
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.engine.Cancel("a"); err != nil {
		t.Fatal(err)
	}
	if err := <-first; !errors.Is(err, core.ErrCancelled) {
		t.Fatalf("first request: %v", err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a"}, nil)
		second <- err
	}()
	deadline = time.Now().Add(10 * time.Second)
	for len(h.engine.Queue()) < 2 {
		select {
		case err := <-second:
			t.Fatalf("the requester is still blocked by its cancelled request: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second request never queued")
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.engine.Cancel("a"); err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, core.ErrCancelled) {
		t.Fatalf("second request: %v", err)
	}
	close(h.drv.Gate)
	h.engine.WaitIdle()
}
