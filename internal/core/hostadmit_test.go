package core_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// refusingHooks refuses every start the way the daemon's host admission
// does while full is set, and allows everything else.
type refusingHooks struct {
	core.NoOpHooks
	mu      sync.Mutex
	full    bool
	refused int
	// others and capacity replace the refusal's figures when set.
	others   map[string]int
	capacity *core.HostCapacityError
}

func (r *refusingHooks) BeforeOp(_ context.Context, op core.OpInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full && (op.Kind == core.OpKindProvision || op.Kind == core.OpKindBoot) {
		r.refused++
		if r.capacity != nil {
			c := *r.capacity
			c.Platform = op.Platform
			return &core.HostFullError{Others: r.others, Capacity: &c}
		}
		return &core.HostFullError{Others: map[string]int{"ios": 1},
			Capacity: &core.HostCapacityError{Limit: core.LimitHost, Max: 1, Booted: 1, Platform: op.Platform}}
	}
	return nil
}

func (r *refusingHooks) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

func (r *refusingHooks) set(full bool) {
	r.mu.Lock()
	r.full = full
	r.mu.Unlock()
}

// A start the host registry refuses (another home took the host's last room
// within one watcher poll) is not a failed boot: nothing is quarantined or
// left behind, the request waits for room instead of repeating the start,
// a noWait request meanwhile is refused with the host's figures, and the
// daemon's next view of the host lets the start go ahead.
func TestARefusedStartWaitsForRoom(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 8})
	hooks := &refusingHooks{full: true}
	h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: h.store, Drivers: []core.Driver{h.drv, h.droid},
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus, Hooks: hooks})
	if err := h.engine.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 4}) // the watcher's view: room
	waiting := make(chan result, 1)
	go func() {
		g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
			RequesterID: "a", OwnerID: "a"}, nil)
		waiting <- result{g, err}
	}()
	// The request starts a provision that the hooks refuse; then it waits.
	for hooks.count() == 0 {
		runtime.Gosched()
	}
	h.engine.WaitIdle()
	select {
	case r := <-waiting:
		t.Fatalf("the refused start ended the request: %+v", r)
	default:
	}
	if hooks.count() != 1 {
		t.Fatalf("%d starts refused, want exactly 1: a refused start must not be repeated before a new view", hooks.count())
	}
	if n := len(h.drv.Calls()); n != 0 {
		t.Fatalf("the driver was called for a refused start: %v", h.drv.Calls())
	}
	for _, d := range h.engine.Devices() {
		t.Fatalf("a refused provision left a device behind: %+v", d)
	}
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
		RequesterID: "b", OwnerID: "b", NoWait: true}, nil)
	var he *core.HostCapacityError
	if !errors.As(err, &he) || he.Max != 1 || he.Booted != 1 {
		t.Fatalf("noWait while the host is full: %v, want the host's refusal with the registry's figures (1 of 1)", err)
	}
	// Room appears (another home released), and the watcher says so.
	hooks.set(false)
	h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: 4})
	r := <-waiting
	if r.err != nil {
		t.Fatalf("after room appeared: %v", r.err)
	}
	for _, d := range h.engine.Devices() {
		if d.State == core.StateQuarantined {
			t.Fatalf("a device was quarantined: %+v", d)
		}
	}
}

// While a start the registry refused is held back, a noWait request is
// refused with the registry's figures, not the planner's (which leave room:
// the registry also counts this engine's devices that are shutting down).
// When this engine's own share of those figures meets its own limit, its
// own limit binds: NO_CAPACITY, as a single home on a host sees it.
func TestANoWaitBesideARefusedStartNamesTheLimitThatBinds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		own     int            // the engine's own running limit
		host    int            // the host limit set (0: the engine's own)
		others  map[string]int // other homes in the registry's count
		booted  int            // the registry's count
		wantOwn bool
	}{
		{name: "its own devices fill its own limit", own: 2, booted: 2, wantOwn: true},
		{name: "other homes fill the host", own: 4, host: 2, others: map[string]int{"ios": 1}, booted: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, core.Limits{MaxRunning: tc.own, MaxManaged: 8})
			max := tc.host
			if max == 0 {
				max = tc.own
			}
			hooks := &refusingHooks{full: true, others: tc.others,
				capacity: &core.HostCapacityError{Limit: core.LimitHost, Max: max, Booted: tc.booted}}
			h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: h.store, Drivers: []core.Driver{h.drv, h.droid},
				Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus, Hooks: hooks})
			if err := h.engine.Converge(context.Background()); err != nil {
				t.Fatal(err)
			}
			h.engine.Host().SetHostUsage(core.HostUsage{MaxRunning: tc.host}) // the watcher's view: room
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				_, _ = h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
					RequesterID: "a", OwnerID: "a"}, nil)
			}()
			for hooks.count() == 0 {
				runtime.Gosched()
			}
			h.engine.WaitIdle()
			_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"},
				RequesterID: "b", OwnerID: "b", NoWait: true}, nil)
			var he *core.HostCapacityError
			switch {
			case tc.wantOwn && (!errors.Is(err, core.ErrNoCapacity) || errors.As(err, &he)):
				t.Fatalf("noWait: %v, want NO_CAPACITY: the engine's own limit binds", err)
			case !tc.wantOwn && (!errors.As(err, &he) || he.Max != max || he.Booted != tc.booted):
				t.Fatalf("noWait: %v, want the host's refusal with the registry's figures (%d of %d)", err, tc.booted, max)
			}
		})
	}
}
