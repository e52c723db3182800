package core_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// memTimings is a TimingStore that outlives the engines of one test, as a
// home's database outlives its daemons.
type memTimings struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

func (s *memTimings) LoadTimings(context.Context) (map[string]time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m), nil
}

func (s *memTimings) SaveTimings(_ context.Context, m map[string]time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = maps.Clone(m)
	return nil
}

// slowBoot is the fake driver whose boots take `took` of the engine's
// (fake) clock, as a boot on a slow or fast machine would.
type slowBoot struct {
	*fakedrv.Driver
	clock *fake.Clock
	mu    sync.Mutex
	took  time.Duration
}

func (d *slowBoot) MakeReady(ctx context.Context, r core.DeviceRef) error {
	d.mu.Lock()
	took := d.took
	d.mu.Unlock()
	d.clock.Advance(took)
	return d.Driver.MakeReady(ctx, r)
}

func (d *slowBoot) set(took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.took = took
}

// bootETA leases a device of a model nothing has booted yet, so the grant
// provisions and boots one, and returns the ETA its booting progress gave.
func bootETA(t *testing.T, h *harness, requester, model string) time.Duration {
	t.Helper()
	var eta time.Duration
	booting := false
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: model},
		RequesterID: requester, OwnerID: requester}, func(p core.Progress) {
		if p.Phase == "booting" {
			eta, booting = p.ETA, true
		}
	})
	if err != nil {
		t.Fatalf("lease %s: %v", model, err)
	}
	if !booting {
		t.Fatalf("lease %s reported no booting progress", model)
	}
	return eta
}

// The booting ETA follows the boots this home timed: the driver's guess
// only before any was timed, then the measured figure, carried across a
// restart by the timing store, and moving with the machine's speed. A
// different speed scope starts from the guess again.
func TestBootETAFollowsObservedSpeedAcrossRestarts(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 8, MaxManaged: 16})
	h.engine.Stop(context.Background())
	slow := &slowBoot{Driver: h.drv, clock: h.clock, took: 5 * time.Second}
	h.drivers = []core.Driver{slow, h.droid}
	h.timings = &memTimings{}
	h.cfg.TimingScope = "sdk-speed=0"
	h.start()
	guess := h.drv.Estimate(core.OpBoot)

	if got := bootETA(t, h, "a", "Phone A"); got != guess {
		t.Fatalf("first boot ETA %v, want the driver's guess %v", got, guess)
	}
	// A new run of the daemon over the same home.
	h.engine.Stop(context.Background())
	h.start()
	if got := bootETA(t, h, "b", "Phone B"); got != 5*time.Second {
		t.Fatalf("after a restart the boot ETA is %v, want the 5s boot this home timed", got)
	}
	// That boot took 5s as well; the machine now boots in 1s.
	slow.set(time.Second)
	bootETA(t, h, "c", "Phone C")
	if got := bootETA(t, h, "d", "Phone D"); got != 3*time.Second {
		t.Fatalf("after boots of 5s, 5s and 1s the ETA is %v, want the smoothed 3s", got)
	}

	h.engine.Stop(context.Background())
	h.cfg.TimingScope = "sdk-speed=1"
	h.start()
	if got := bootETA(t, h, "e", "Phone E"); got != guess {
		t.Fatalf("at another speed the boot ETA is %v, want the driver's guess %v", got, guess)
	}
}
