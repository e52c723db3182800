package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/testhost"
)

// perPlatform allows n running and 2n managed devices on each platform.
func perPlatform(n int) core.Limits {
	return core.Limits{Platforms: map[string]core.PlatformLimits{
		"ios": {MaxRunning: n, MaxManaged: 2 * n}, "android": {MaxRunning: n, MaxManaged: 2 * n}}}
}

func pair() []core.SpecRequest {
	return []core.SpecRequest{{Platform: "ios"}, {Platform: "android"}}
}

func groupReq(id string, timeout time.Duration) core.Request {
	return core.Request{Group: pair(), RequesterID: id, OwnerID: id, Timeout: timeout}
}

func TestGroupIsGrantedAsOneLease(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	g, err := h.engine.Request(context.Background(), groupReq("g", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 2 || g.Members[0].Platform != "ios" || g.Members[1].Platform != "android" {
		t.Fatalf("members %+v", g.Members)
	}
	if g.Device.ID != g.Members[0].ID || len(g.Lease.Members) != 1 || g.Lease.Members[0] != g.Members[1].ID {
		t.Fatalf("lease %+v", g.Lease)
	}
	for _, m := range g.Members {
		if d, _ := h.engine.Device(m.ID); d.State != core.StateLeased {
			t.Fatalf("member %s is %s", m.ID, d.State)
		}
	}
	if ls := h.engine.Leases(); len(ls) != 1 {
		t.Fatalf("want one lease for the group, got %d", len(ls))
	}
}

// While one member cannot be served, nothing is provisioned, booted or
// held for the others; the grant comes in one commit when all fit.
func TestGroupHoldsNothingWhileItWaits(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	solo, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	ch := h.async(groupReq("g", time.Minute))
	h.engine.WaitIdle()
	if calls := h.droid.Calls(); len(calls) != 0 {
		t.Fatalf("android work started for a group still waiting for iOS: %v", calls)
	}
	for _, d := range h.engine.Sorted() {
		if d.Platform == "android" {
			t.Fatalf("a device exists for the waiting group: %+v", d)
		}
	}
	if err := h.engine.Release(solo.Lease.ID); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.g.Members) != 2 || r.g.Members[0].ID != solo.Device.ID {
		t.Fatalf("group got %+v, want the released iOS device first", r.g.Members)
	}
}

func TestGroupRenewsAndReleasesAsOne(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	g, err := h.engine.Request(context.Background(), groupReq("g", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(30 * time.Second)
	l, err := h.engine.Renew(g.Lease.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !l.ExpiresAt.Equal(h.clock.Now().Add(time.Minute)) || len(l.Members) != 1 {
		t.Fatalf("renewed %+v", l)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	for _, m := range g.Members {
		d, _ := h.engine.Device(m.ID)
		if d.State != core.StateReady {
			t.Fatalf("member %s after release: %s", m.ID, d.State)
		}
	}
	if c := h.drv.Calls(); c[len(c)-1] != "reclaim ios-1" {
		t.Fatalf("ios member not purged: %v", c)
	}
	if c := h.droid.Calls(); c[len(c)-1] != "reclaim android-1" {
		t.Fatalf("android member not purged: %v", c)
	}
}

func TestGroupExpiresAsOne(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	g, err := h.engine.Request(context.Background(), groupReq("g", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Minute)
	h.engine.WaitIdle()
	if _, ok := h.engine.Lease(g.Lease.ID); ok {
		t.Fatal("group lease outlived its TTL")
	}
	for _, m := range g.Members {
		if d, _ := h.engine.Device(m.ID); d.State == core.StateLeased {
			t.Fatalf("member %s still leased", m.ID)
		}
	}
}

func TestGroupRefusedWhenItCanNeverFit(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	_, err := h.engine.Request(context.Background(), core.Request{RequesterID: "g",
		Group: []core.SpecRequest{{Platform: "ios"}, {Platform: "ios"}}}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("two iOS devices with platforms.ios.maxRunning 1: %v", err)
	}
	big := make([]core.SpecRequest, core.DefaultMaxGroupSize+1)
	for i := range big {
		big[i] = core.SpecRequest{Platform: "android"}
	}
	if _, err := h.engine.Request(context.Background(), core.Request{RequesterID: "g", Group: big}, nil); !errors.Is(err, core.ErrBadRequest) {
		t.Fatalf("a group over queue.maxGroupSize: %v", err)
	}
}

func TestGroupSurvivesRestart(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	g, err := h.engine.Request(context.Background(), groupReq("g", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Stop(context.Background())
	h.start()
	l, ok := h.engine.Lease(g.Lease.ID)
	if !ok || len(l.Members) != 1 || l.Members[0] != g.Members[1].ID {
		t.Fatalf("after restart: %+v %v", l, ok)
	}
	for _, m := range g.Members {
		if d, _ := h.engine.Device(m.ID); d.State != core.StateLeased {
			t.Fatalf("member %s after restart: %s", m.ID, d.State)
		}
	}
	if err := h.engine.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if d, _ := h.engine.Device(g.Members[1].ID); d.State != core.StateReady {
		t.Fatalf("second member after release: %s", d.State)
	}
}

// A group and a stream of single requests contend for the same devices:
// nobody deadlocks, the group is granted, and no more singles that came
// after it were served before it than its bypass budget allows.
func TestGroupAgainstStreamOfSinglesIsGrantedWithinBypass(t *testing.T) {
	const budget = 3
	h := newHarness(t, perPlatform(1))
	h.cfg.GroupBypass = budget
	h.engine.Stop(context.Background())
	h.start()
	sub, cancel := h.bus.Subscribe(4096)
	defer cancel()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plat := []string{"ios", "android"}[i%2]
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("s%d-%d", i, n)
				g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: plat},
					RequesterID: id, OwnerID: id, Timeout: time.Hour}, nil)
				if err != nil {
					continue
				}
				_ = h.engine.Release(g.Lease.ID)
			}
		}()
	}
	// Let the singles take the devices first.
	time.Sleep(20 * time.Millisecond)
	done := make(chan result, 1)
	go func() {
		g, err := h.engine.Request(context.Background(), groupReq("group", time.Hour), nil)
		done <- result{g, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(testhost.Scale(20 * time.Second)):
		t.Fatal("the group was never granted: starved or deadlocked")
	}
	close(stop)
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The singles still queued wait for the group's devices.
	if err := h.engine.Release(r.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Count the singles queued after the group and granted before it.
	queued := map[string]bool{}
	after := false
	passed := 0
	// Read the subscription itself, not drain's snapshot: the observer's
	// pump may still be handing over facts the bus has already taken, so a
	// momentarily empty channel does not mean the story is over.
	for {
		var ev events.Event
		select {
		case ev = <-sub:
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Fatal("no grant event for the group")
		}
		switch {
		case ev.Type == "request.queued" && ev.RequesterID == "group":
			after = true
		case ev.Type == "request.queued" && after:
			queued[ev.RequesterID] = true
		case ev.Type == "lease.granted" && ev.RequesterID == "group":
			if passed > budget {
				t.Fatalf("%d singles queued after the group were served before it; budget %d", passed, budget)
			}
			return
		case ev.Type == "lease.granted" && queued[ev.RequesterID]:
			passed++
		}
	}
}

func TestNoWaitGroupIsServedWhenItFitsAndRefusedWhenNot(t *testing.T) {
	h := newHarness(t, perPlatform(1))
	r := groupReq("g", 0)
	r.NoWait = true
	g, err := h.engine.Request(context.Background(), r, nil)
	if err != nil || len(g.Members) != 2 {
		t.Fatalf("a noWait group that fits: %+v %v", g.Members, err)
	}
	r.RequesterID = "h"
	if _, err := h.engine.Request(context.Background(), r, nil); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("a noWait group while its devices are leased: %v", err)
	}
	if q := h.engine.Queue(); len(q) != 0 {
		t.Fatalf("a refused noWait group stayed queued: %+v", q)
	}
}

// Every member is watched: the second member of a group vanishing ends the
// whole lease, and both devices leave it.
func TestGroupLosesItsLeaseWhenAnyMemberVanishes(t *testing.T) {
	h := withPolicies(t, perPlatform(1), func(c *core.Config) {
		c.Health = core.HealthPolicy{Interval: 5 * time.Second, StableObservations: 2, MaxRecoveryAttempts: 2}
	})
	g, err := h.engine.Request(context.Background(), groupReq("g", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Health().StartHealthMonitor()
	h.droid.Vanish(g.Members[1].Handle)
	h.clock.Advance(5 * time.Second)
	h.clock.Advance(5 * time.Second)
	if _, ok := h.engine.Lease(g.Lease.ID); ok {
		t.Fatal("the group kept its lease with a vanished member")
	}
	h.engine.WaitIdle()
	if d, _ := h.engine.Device(g.Members[0].ID); d.State == core.StateLeased {
		t.Fatalf("the healthy member is still %s", d.State)
	}
}

// spentGroup is a waiting iOS+Android group whose bypass budget (1) is
// spent: an Android single passed it and holds the emulator, the iPhone a
// has been released, and a single iOS request ios waits behind the group.
type spentGroup struct {
	h        *harness
	a        core.Grant
	grp, ios <-chan result
	droid    result
}

func spendGroupBudget(t *testing.T, ctx context.Context, groupTimeout time.Duration) spentGroup {
	t.Helper()
	h := newHarness(t, perPlatform(1))
	h.cfg.GroupBypass = 1
	h.engine.Stop(context.Background())
	h.start()
	a, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	grp := h.asyncCtx(ctx, groupReq("g", groupTimeout))
	single := func(id, plat string) <-chan result {
		return h.async(core.Request{Spec: core.SpecRequest{Platform: plat}, RequesterID: id, OwnerID: id, Timeout: time.Hour})
	}
	droid := recv(t, single("c", "android")) // passes the group: the one pass it allows
	if droid.err != nil {
		t.Fatal(droid.err)
	}
	ios := single("b", "ios")
	if err := h.engine.Release(a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	select {
	case r := <-ios:
		t.Fatalf("the single iOS request passed the group after its budget was spent: %+v %v", r.g.Device.ID, r.err)
	default:
	}
	return spentGroup{h: h, a: a, grp: grp, ios: ios, droid: droid}
}

// Once its bypass budget is spent, a waiting group keeps what it could use:
// the iPhone released while the group still waits for the emulator goes to
// the group, not to the single iOS request queued behind it.
func TestGroupBypassBudgetHoldsCapacityForTheGroup(t *testing.T) {
	sg := spendGroupBudget(t, context.Background(), time.Hour)
	h, a, grp, ios, rc := sg.h, sg.a, sg.grp, sg.ios, sg.droid
	if err := h.engine.Release(rc.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	r := recv(t, grp)
	if r.err != nil || len(r.g.Members) != 2 || r.g.Members[0].ID != a.Device.ID {
		t.Fatalf("group: %+v %v", r.g.Members, r.err)
	}
	h.engine.WaitIdle()
	select {
	case r := <-ios:
		t.Fatalf("the iOS request was served while the group holds the only iPhone: %+v", r)
	default:
	}
	if err := h.engine.Release(r.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ios); r.err != nil || r.g.Device.ID != a.Device.ID {
		t.Fatalf("the iOS request after the group: %+v %v", r.g.Device.ID, r.err)
	}
}

// recv waits for a request's outcome, failing the test instead of hanging.
func recv(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("no outcome within 10s")
		return result{}
	}
}

// A group that leaves the queue without a grant (cancelled, timed out, or
// its caller gone) stops holding capacity at once: the single request it
// held back is served on the spot, not at whatever event comes next.
func TestGroupLeavingTheQueueFreesWhatItHeld(t *testing.T) {
	for _, leave := range []string{"cancel", "timeout", "abandon"} {
		t.Run(leave, func(t *testing.T) {
			ctx, cancelGroup := context.WithCancel(context.Background())
			defer cancelGroup()
			sg := spendGroupBudget(t, ctx, 30*time.Second) // before c's 1 min TTL
			h, a, grp, ios := sg.h, sg.a, sg.grp, sg.ios
			switch leave {
			case "cancel":
				if err := h.engine.Cancel("g"); err != nil {
					t.Fatal(err)
				}
			case "timeout":
				h.clock.Advance(30 * time.Second)
			case "abandon":
				cancelGroup()
			}
			if r := recv(t, grp); r.err == nil {
				t.Fatalf("the group was granted instead of leaving: %+v", r.g)
			}
			if r := recv(t, ios); r.err != nil || r.g.Device.ID != a.Device.ID {
				t.Fatalf("the single after the group left: %+v %v", r.g.Device.ID, r.err)
			}
		})
	}
}
