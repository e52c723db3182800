package resources

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// slowDriver is the scripted fake driver whose listing waits for a gate
// and may fail, counting each listing it starts (a real driver's process).
type slowDriver struct {
	*fakedrv.Driver
	mu    sync.Mutex
	gate  chan struct{}
	err   error
	lists atomic.Int32
}

func (d *slowDriver) ListManaged(ctx context.Context) ([]core.Observed, error) {
	d.lists.Add(1)
	d.mu.Lock()
	gate, err := d.gate, d.err
	d.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return []core.Observed{{Handle: "h1", Run: core.RunRunning}}, nil
}

func (d *slowDriver) hold() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate = make(chan struct{})
	return d.gate
}

func (d *slowDriver) set(gate chan struct{}, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate, d.err = gate, err
}

// drivers is an engine that only finds drivers: the inventory's shared
// reads ask it for nothing else.
type drivers func(platform string) (core.Driver, bool)

func (f drivers) Driver(p string) (core.Driver, bool) { return f(p) }
func (drivers) Platforms() []string                   { return nil }
func (drivers) Status() core.StatusSnapshot           { return core.StatusSnapshot{} }

func newTestInventory(t *testing.T) (*Inventory, *slowDriver, *fake.Clock) {
	t.Helper()
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	drv := &slowDriver{Driver: fakedrv.New("ios")}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := config.Default().Inventory
	inv := NewInventory(ctx, cfg, clock, drivers(func(p string) (core.Driver, bool) { return drv, p == "ios" }))
	return inv, drv, clock
}

type observed struct {
	runs map[string]map[string]Observation
	e    *contract.Enrichment
}

func observeAsync(inv *Inventory, budget time.Duration) <-chan observed {
	ch := make(chan observed, 1)
	go func() {
		runs, g := inv.observe(context.Background(), []string{"ios"}, budget)
		ch <- observed{runs, g.enrichment()}
	}()
	return ch
}

func spin(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 10_000_000 {
			t.Fatalf("never: %s", what)
		}
		runtime.Gosched()
	}
}

// A listing slower than the list budget (2 s by default) answers at the
// budget with the stage pending and the retry hint; the read goes on and
// a retry after it finished is complete and starts no listing.
func TestInventoryAnswersAtTheBudgetAndTheRetryIsComplete(t *testing.T) {
	inv, drv, clock := newTestInventory(t)
	gate := drv.hold()
	budget := ms(inv.cfg.ListBudgetMs)
	ch := observeAsync(inv, budget)
	spin(t, "budget and cap timers", func() bool { return clock.Pending() == 2 })
	clock.Advance(budget)
	o := <-ch
	want := &contract.Enrichment{Complete: false, Pending: []string{"ios.devices"}, Retryable: true, RetryAfterMs: 1000,
		Code: contract.EnrichmentTimeout, Reason: "ios.devices did not finish within the budget; a shared read continues"}
	if !reflect.DeepEqual(o.e, want) || len(o.runs) != 0 {
		t.Fatalf("at the budget: %+v %v, want %+v", o.e, o.runs, want)
	}
	close(gate)
	spin(t, "background listing kept", func() bool { return inv.known("ios", "h1") != nil })
	runs, g := inv.observe(context.Background(), []string{"ios"}, budget)
	if e := g.enrichment(); !e.Complete || runs["ios"]["h1"].Run != core.RunRunning {
		t.Fatalf("retry: %+v %v", e, runs)
	}
	if n := drv.lists.Load(); n != 1 {
		t.Fatalf("listings started = %d, want 1", n)
	}
}

// A failed listing is reported missing with code failed and is not kept;
// a device fact during a listing supersedes it.
func TestInventoryReportsFailuresAndSupersededReads(t *testing.T) {
	inv, drv, clock := newTestInventory(t)
	drv.set(nil, errors.New("simctl list devices: exit 1"))
	_, g := inv.observe(context.Background(), []string{"ios"}, time.Second)
	if e := g.enrichment(); e.Complete || e.Code != contract.EnrichmentFailed || !reflect.DeepEqual(e.Missing, []string{"ios.devices"}) || !e.Retryable {
		t.Fatalf("failed listing: %+v", e)
	}
	if inv.known("ios", "h1") != nil {
		t.Fatal("a failed listing was kept")
	}

	drv.set(nil, nil)
	gate := drv.hold()
	ch := observeAsync(inv, time.Minute)
	spin(t, "caller waiting", func() bool { return clock.Pending() == 2 })
	inv.Invalidate(events.Event{Type: "device.provisioned", Platform: "ios"})
	o := <-ch
	if o.e.Complete || o.e.Code != contract.EnrichmentSuperseded || !reflect.DeepEqual(o.e.Missing, []string{"ios.devices"}) {
		t.Fatalf("superseded listing: %+v", o.e)
	}
	close(gate)
	if _, g := inv.observe(context.Background(), []string{"ios"}, time.Second); !g.enrichment().Complete {
		t.Fatalf("after the invalidation: %+v", g.enrichment())
	}
	if n := drv.lists.Load(); n != 3 {
		t.Fatalf("listings = %d, want 3 (failed, superseded, fresh)", n)
	}
}

// Device resources reference, inventory invalidation: a listing a caller
// was told to come back for, then overtaken by a device fact, answers the
// retry with code superseded (the fresh read's stage pending), not timeout.
func TestInventoryRetryOfAnOvertakenListingIsSuperseded(t *testing.T) {
	inv, drv, clock := newTestInventory(t)
	gate := drv.hold()
	ch := observeAsync(inv, time.Second)
	spin(t, "caller waiting", func() bool { return clock.Pending() == 2 })
	clock.Advance(time.Second)
	if o := <-ch; o.e.Code != contract.EnrichmentTimeout || !reflect.DeepEqual(o.e.Pending, []string{"ios.devices"}) {
		t.Fatalf("first listing: %+v", o.e)
	}
	inv.Invalidate(events.Event{Type: "device.provisioned", Platform: "ios"})
	spin(t, "the aborted listing ended", func() bool { return clock.Pending() == 0 })
	ch = observeAsync(inv, time.Second)
	spin(t, "retry waiting", func() bool { return clock.Pending() == 2 })
	clock.Advance(time.Second)
	o := <-ch
	if o.e.Complete || o.e.Code != contract.EnrichmentSuperseded || !reflect.DeepEqual(o.e.Pending, []string{"ios.devices"}) || !o.e.Retryable || o.e.RetryAfterMs != 1000 {
		t.Fatalf("retry after the change: %+v", o.e)
	}
	close(gate)
}

// liveDriver lists three devices, two running, and reads the live facts of
// one of the running ones; the other's read fails.
type liveDriver struct {
	*fakedrv.Driver
	mu     sync.Mutex
	probed []string
}

func (d *liveDriver) ListManaged(context.Context) ([]core.Observed, error) {
	return []core.Observed{{Handle: "h1", Run: core.RunRunning}, {Handle: "h2", Run: core.RunStopped}, {Handle: "h3", Run: core.RunRunning}}, nil
}

func (d *liveDriver) ObserveLive(_ context.Context, handle string) (core.LiveState, error) {
	d.mu.Lock()
	d.probed = append(d.probed, handle)
	d.mu.Unlock()
	if handle == "h3" {
		return core.LiveState{Locked: new(bool), Orientation: contract.OrientationPortrait}, errors.New("adb shell dumpsys window: context deadline exceeded")
	}
	locked := true
	return core.LiveState{Locked: &locked, Orientation: contract.OrientationLandscape}, nil
}

// Device resources, statements 1.6 and 1.7: the shared listing reads the
// live facts of the devices it saw running, and only of those; a read
// that fails leaves that device's facts unknown (whatever it returned
// with the error) and the listing complete.
func TestInventoryReadsLiveFactsOfRunningDevicesOnly(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	drv := &liveDriver{Driver: fakedrv.New("android")}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inv := NewInventory(ctx, config.Default().Inventory, clock, drivers(func(p string) (core.Driver, bool) { return drv, p == "android" }))

	runs, g := inv.observe(context.Background(), []string{"android"}, time.Minute)
	if e := g.enrichment(); !e.Complete {
		t.Fatalf("enrichment %+v", e)
	}
	h1, h2, h3 := runs["android"]["h1"], runs["android"]["h2"], runs["android"]["h3"]
	if h1.Run != core.RunRunning || h1.Live.Locked == nil || !*h1.Live.Locked || h1.Live.Orientation != contract.OrientationLandscape {
		t.Errorf("h1 %+v", h1)
	}
	if h2.Run != core.RunStopped || h2.Live != (core.LiveState{}) {
		t.Errorf("the stopped h2 has live facts: %+v", h2)
	}
	if h3.Run != core.RunRunning || h3.Live != (core.LiveState{}) {
		t.Errorf("h3's failed read left facts: %+v", h3)
	}
	drv.mu.Lock()
	probed := append([]string(nil), drv.probed...)
	drv.mu.Unlock()
	slices.Sort(probed)
	if !slices.Equal(probed, []string{"h1", "h3"}) {
		t.Errorf("probed %v, want the running h1 and h3", probed)
	}

	// The description carries them; status reads them from the kept listing.
	r := core.DeviceRecord{ID: "dev_1", Platform: "android", Handle: "h1", State: core.StateLeased}
	rt := encode(t, Describe(r, "lease_1", inv.known("android", "h1")))["runtime"].(map[string]any)
	if rt["locked"] != true || rt["orientation"] != "landscape" || rt["readiness"] != "running" {
		t.Errorf("h1's runtime %v", rt)
	}
	r.Handle = "h3"
	rt = encode(t, Describe(r, "lease_1", inv.known("android", "h3")))["runtime"].(map[string]any)
	requireNull(t, rt, "locked", "orientation")
	if rt["readiness"] != "running" {
		t.Errorf("h3's runtime %v", rt)
	}
}
