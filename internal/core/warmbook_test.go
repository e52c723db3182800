package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// resolveCounter counts the driver's spec resolutions and any that would
// allow a download.
type resolveCounter struct {
	*fakedrv.Driver
	mu        sync.Mutex
	resolves  int
	downloads int
}

func (r *resolveCounter) ResolveSpec(ctx context.Context, req core.SpecRequest) (core.Spec, error) {
	r.mu.Lock()
	r.resolves++
	if req.AllowDownload {
		r.downloads++
	}
	r.mu.Unlock()
	return r.Driver.ResolveSpec(ctx, req)
}

func (r *resolveCounter) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolves, r.downloads
}

// demandHarness is an engine with demand on over a 10 min window sampled
// every minute, idle cleanup after a minute (run by hand), and a counting
// iOS driver.
func demandHarness(t *testing.T, limits core.Limits, spare bool, floors ...core.WarmTarget) (*harness, *resolveCounter) {
	t.Helper()
	h := newHarness(t, limits)
	rc := &resolveCounter{Driver: h.drv}
	h.drivers = []core.Driver{rc, h.droid}
	h.cfg.Demand = core.DemandPolicy{Enabled: true, Window: 10 * time.Minute, Sample: time.Minute, Spare: spare}
	h.cfg.Cleanup = core.CleanupPolicy{Interval: -1, IdleShutdown: time.Minute, IdleDestroy: time.Hour}
	h.cfg.WarmTargets = floors
	h.start()
	return h, rc
}

func countState(h *harness, st core.DeviceState) int {
	n := 0
	for _, d := range h.engine.Devices() {
		if d.State == st {
			n++
		}
	}
	return n
}

func target(t *testing.T, h *harness) (core.WarmTargetStatus, bool) {
	t.Helper()
	ts := h.engine.Warm().WarmPool().Targets
	if len(ts) > 1 {
		t.Fatalf("targets %+v, want at most one", ts)
	}
	if len(ts) == 0 {
		return core.WarmTargetStatus{}, false
	}
	return ts[0], true
}

// A burst of three concurrent leases makes the pool keep the burst's p90
// ready, less what is still leased, and the idle rule leaves those devices
// alone; as periods of lower demand fill the window the p90 decays and the
// idle rule takes what the target no longer counts, and once a window has
// passed without a lease there is no target at all.
func TestDemandKeepsP90ReadyAndDecaysWhenIdle(t *testing.T) {
	h, rc := demandHarness(t, one(4), false)
	if n := len(h.engine.Devices()); n != 0 {
		t.Fatalf("a daemon without demand history provisioned %d devices", n)
	}
	var gs []core.Grant
	for _, r := range []string{"a", "b", "c"} {
		// Held past the quieter minutes below (the default TTL is 1 min).
		g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
			RequesterID: r, OwnerID: r, TTL: 30 * time.Minute}, nil)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	for _, g := range gs[1:] {
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
	}
	h.engine.WaitIdle()
	tg, ok := target(t, h)
	if !ok || tg.Count != 2 || tg.Reason != core.WarmReasonDemand || tg.DemandP90 != 3 || tg.Leased != 1 || tg.Ready != 2 {
		t.Fatalf("target %+v, want p90 3 less 1 leased: 2 ready", tg)
	}
	h.clock.Advance(2 * time.Minute)
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, ""); len(res) != 0 {
		t.Fatalf("idle rules took devices the demand keeps: %+v", res)
	}
	// Nine periods with only "a" held: ten peaks, the 9th ranked is 1.
	h.clock.Advance(7 * time.Minute)
	if tg, _ := target(t, h); tg.DemandP90 != 1 || tg.Count != 0 || tg.Reason != core.WarmReasonDemand {
		t.Fatalf("after 9 quieter minutes %+v, want p90 1 keeping none beside the lease", tg)
	}
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, ""); len(res) != 2 || !res[0].Executed || !res[1].Executed {
		t.Fatalf("cleanup %+v, want the two devices the decayed target lets go", res)
	}
	h.engine.WaitIdle()
	if err := h.engine.Release(gs[0].Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if tg, _ := target(t, h); tg.Count != 1 || tg.Ready != 1 {
		t.Fatalf("after the last release %+v, want its device kept for p90 1", tg)
	}
	h.clock.Advance(11 * time.Minute)
	if tg, ok := target(t, h); ok {
		t.Fatalf("target %+v left after an idle window", tg)
	}
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, ""); len(res) != 1 {
		t.Fatalf("cleanup %+v, want the last device shut down", res)
	}
	h.engine.WaitIdle()
	if n := countState(h, core.StateReady); n != 0 {
		t.Fatalf("%d ready after the idle window", n)
	}
	if n := countCalls(h.drv.Calls(), "provision"); n != 3 {
		t.Fatalf("%d provisions, want the burst's 3", n)
	}
	if resolves, downloads := rc.counts(); resolves != 3 || downloads != 0 {
		t.Fatalf("%d resolves (%d with download), want only the 3 requests' own", resolves, downloads)
	}
	// A restart forgets the history: nothing is provisioned for it.
	h.start()
	h.engine.WaitIdle()
	if ws := h.engine.Warm().WarmPool(); len(ws.Targets) != 0 || countCalls(h.drv.Calls(), "provision") != 3 {
		t.Fatalf("after a restart %+v, calls %v", ws, h.drv.Calls())
	}
}

// An operator's target is a floor: kept with no demand at all, and what the
// target falls back to when demand decays.
func TestDemandConfiguredTargetIsAFloor(t *testing.T) {
	h, _ := demandHarness(t, one(4), false, core.WarmTarget{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, Count: 1})
	h.engine.WaitIdle()
	tg, ok := target(t, h)
	if !ok || tg.Count != 1 || tg.Reason != core.WarmReasonConfigured || tg.Configured != 1 || countState(h, core.StateReady) != 1 {
		t.Fatalf("target %+v, %d ready; want the configured floor 1", tg, countState(h, core.StateReady))
	}
	a, _ := h.lease("a", "Phone")
	b, _ := h.lease("b", "Phone")
	h.engine.WaitIdle()
	// p90 2, both leased: demand asks 0 beyond them, the floor asks 1.
	if tg, _ := target(t, h); tg.Count != 1 || tg.Reason != core.WarmReasonConfigured || tg.DemandP90 != 2 {
		t.Fatalf("while leased %+v", tg)
	}
	if countState(h, core.StateReady) != 1 {
		t.Fatalf("the floor was not refilled while both were leased: %+v", h.engine.Devices())
	}
	h.engine.Release(a.Lease.ID)
	h.engine.Release(b.Lease.ID)
	h.engine.WaitIdle()
	if tg, _ := target(t, h); tg.Count != 2 || tg.Reason != core.WarmReasonDemand {
		t.Fatalf("after the burst %+v, want demand 2", tg)
	}
	h.clock.Advance(12 * time.Minute)
	if tg, _ := target(t, h); tg.Count != 1 || tg.Reason != core.WarmReasonConfigured || tg.DemandP90 != 0 {
		t.Fatalf("after an idle window %+v, want the floor 1", tg)
	}
	if res, _ := h.engine.Cleanup().RunCleanup(context.Background(), false, ""); len(res) != 2 {
		t.Fatalf("cleanup %+v, want all but the floor's device", res)
	}
	h.engine.WaitIdle()
	if n := countState(h, core.StateReady); n != 1 {
		t.Fatalf("%d ready, want the floor's 1", n)
	}
}

// The spare: a spec leased within the window keeps one ready device beside
// the leased ones, so the next execution is a warm hit; it never exceeds
// running capacity or evicts a leased device, and it goes with the window.
func TestDemandSpareAppearsWithinCapacityAndDisappears(t *testing.T) {
	h, rc := demandHarness(t, one(2), true)
	a, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	tg, _ := target(t, h)
	if tg.Reason != core.WarmReasonSpare || tg.Count != 1 || countState(h, core.StateReady) != 1 {
		t.Fatalf("target %+v, %d ready; want a spare beside the lease", tg, countState(h, core.StateReady))
	}
	before := countCalls(h.drv.Calls(), "provision")
	b, err := h.lease("b", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if b.Lease.Timing == nil || b.Lease.Timing.Path != core.PathWarm {
		t.Fatalf("the next execution was not a warm hit: %+v", b.Lease.Timing)
	}
	// maxRunning 2, both leased: no third device, nothing evicted.
	if n := countCalls(h.drv.Calls(), "provision"); n != before || countCalls(h.drv.Calls(), "shutdown") != 0 {
		t.Fatalf("the spare provisioned past running capacity: %v", h.drv.Calls())
	}
	if countState(h, core.StateLeased) != 2 || len(h.engine.Devices()) != 2 {
		t.Fatalf("devices %+v", h.engine.Devices())
	}
	h.engine.Release(a.Lease.ID)
	h.engine.Release(b.Lease.ID)
	h.engine.WaitIdle()
	h.clock.Advance(12 * time.Minute)
	if tg, ok := target(t, h); ok {
		t.Fatalf("spare %+v kept after an idle window", tg)
	}
	if resolves, downloads := rc.counts(); resolves != 2 || downloads != 0 {
		t.Fatalf("%d resolves (%d with download), want the 2 requests' own", resolves, downloads)
	}
}

// The RAM budget binds the demand targets as it binds requests.
func TestDemandRespectsTheRAMBudget(t *testing.T) {
	// Room for two 2 GiB devices, running limit for four.
	h, _ := demandHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8, RAMBudget: 4 << 30}, true)
	if _, err := h.lease("a", "Phone"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.lease("b", "Phone"); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if tg, _ := target(t, h); tg.Count != 1 || tg.Ready != 0 {
		t.Fatalf("target %+v: the spare is wanted but must not fit", tg)
	}
	if n := len(h.engine.Devices()); n != 2 {
		t.Fatalf("%d devices under a budget for two", n)
	}
}

// Off (the zero policy), the pool is the configured targets alone: a lease
// leaves nothing extra behind.
func TestDemandOffKeepsNoSpare(t *testing.T) {
	h := newHarness(t, one(3))
	if _, err := h.lease("a", "Phone"); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if n := len(h.engine.Devices()); n != 1 {
		t.Fatalf("%d devices with demand off", n)
	}
	if ws := h.engine.Warm().WarmPool(); ws.Demand || len(ws.Targets) != 0 {
		t.Fatalf("warm pool %+v", ws)
	}
}

// A multi-device lease is demand for every member it holds: a group of two
// iPhones makes the p90 two, where counting only its first member made it
// one and the pool kept too few ready for the next group.
func TestDemandCountsEveryGroupMember(t *testing.T) {
	h, _ := demandHarness(t, one(4), false)
	phone := core.SpecRequest{Platform: "ios", Model: "Phone"}
	g, err := h.engine.Request(context.Background(), core.Request{Group: []core.SpecRequest{phone, phone},
		RequesterID: "g", OwnerID: "g", TTL: 30 * time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 2 {
		t.Fatalf("members %+v", g.Members)
	}
	h.engine.WaitIdle()
	tg, ok := target(t, h)
	if !ok || tg.DemandP90 != 2 || tg.Leased != 2 {
		t.Fatalf("target %+v, want p90 2 with both members leased", tg)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if tg, _ := target(t, h); tg.Count != 2 || tg.Ready != 2 {
		t.Fatalf("after the group's release %+v, want both devices kept ready for p90 2", tg)
	}
}
