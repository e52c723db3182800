package core_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/testhost"
)

// droidLimits leave iOS room for a golden beside the devices while one
// running Android device is the most there may be, so an Android request
// can wait while an iOS golden would fit.
func droidLimits() core.Limits {
	return core.Limits{MaxRunning: 3, MaxManaged: 6, Platforms: map[string]core.PlatformLimits{"android": {MaxRunning: 1}}}
}

func droidReq(req string) core.Request {
	return core.Request{Spec: core.SpecRequest{Platform: "android", Model: "Pixel"}, RequesterID: req, OwnerID: req}
}

const ensurePhone = "ensure-golden Phone|rt-1.0"

// A golden build refused because a request waited is built once that
// request is granted, without any new provision of its spec: the engine
// asks the driver itself, and the gate admits it beside the devices.
func TestRefusedGoldenIsBuiltOnceTheWaitingRequestIsGranted(t *testing.T) {
	h, c := goldenHarness(t, droidLimits())
	a := leaseOn(t, h, "a", "android", "Pixel")
	waiting := h.async(droidReq("b"))
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
		t.Fatalf("golden admitted while a request waits: %v", v)
	}
	h.engine.WaitIdle()
	if slices.Contains(c.Calls(), ensurePhone) {
		t.Fatalf("golden retried while the request still waits: %v", c.Calls())
	}
	if err := h.engine.Release(a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting; r.err != nil {
		t.Fatalf("waiting request: %v", r.err)
	}
	h.engine.WaitIdle()
	if n := countCalls(c.Calls(), ensurePhone); n != 1 {
		t.Fatalf("golden build asked %d times once the queue emptied, want 1: %v", n, c.Calls())
	}
	if slices.ContainsFunc(c.Calls(), func(s string) bool {
		return strings.HasPrefix(s, "provision Phone") || strings.HasPrefix(s, "clone Phone")
	}) {
		t.Fatalf("the retry needed a provision of the spec: %v", c.Calls())
	}
	gs := c.Goldens()
	if len(gs) != 1 || gs[0].ModelID != "Phone" || !gs[0].Building {
		t.Fatalf("goldens after the retry: %+v", gs)
	}
	if r := h.engine.Capacity(); r.Global.Reserved != 1 || r.Global.Goldens != 1 {
		t.Fatalf("the retried build is not charged as running: %+v", r.Global)
	}
	if got := h.engine.Goldens().GoldenRefusals(); len(got) != 0 {
		t.Fatalf("refusal kept after the build was admitted: %v", got)
	}
}

// While any request waits for capacity, nothing that frees capacity makes
// the engine ask for the refused golden; the last waiter's grant does.
func TestRefusedGoldenIsNotRetriedWhileARequestStillWaits(t *testing.T) {
	h, c := goldenHarness(t, droidLimits())
	a := leaseOn(t, h, "a", "android", "Pixel")
	first := h.async(droidReq("b"))
	second := h.async(droidReq("b2"))
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
		t.Fatalf("golden admitted while requests wait: %v", v)
	}
	if err := h.engine.Release(a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	b := <-first
	if b.err != nil {
		t.Fatalf("first waiter: %v", b.err)
	}
	h.engine.WaitIdle()
	if slices.Contains(c.Calls(), ensurePhone) {
		t.Fatalf("golden retried while b2 still waits: %v", c.Calls())
	}
	if got := h.engine.Goldens().GoldenRefusals()["ios|Phone|rt-1.0"]; !strings.Contains(got, "waiting") {
		t.Fatalf("refusal %q, want the waiting reason kept", got)
	}
	if err := h.engine.Release(b.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if r := <-second; r.err != nil {
		t.Fatalf("second waiter: %v", r.err)
	}
	h.engine.WaitIdle()
	if n := countCalls(c.Calls(), ensurePhone); n != 1 {
		t.Fatalf("golden build asked %d times once the last waiter was granted, want 1: %v", n, c.Calls())
	}
}

// A refusal the engine itself would repeat is never asked of the driver,
// however often capacity changes; and a retry that fails does not ask
// again by itself: the next event that may clear it does.
func TestRefusedGoldenRetryDoesNotLoop(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 2})
	leaseOn(t, h, "a", "ios", "Phone")
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
		t.Fatalf("golden admitted into the last managed slot: %v", v)
	}
	for i := range 3 {
		g := leaseOn(t, h, "t", "ios", "Tablet")
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		h.engine.WaitIdle()
		if slices.Contains(c.Calls(), ensurePhone) {
			t.Fatalf("cycle %d: asked for a golden the gate refuses: %v", i, c.Calls())
		}
	}

	h, c = goldenHarness(t, droidLimits())
	a := leaseOn(t, h, "a", "android", "Pixel")
	waiting := h.async(droidReq("b"))
	c.AskGoldenBuild("G1", "Phone", "rt-1.0", true)
	c.SetFail("ensure-golden", 1)
	if err := h.engine.Release(a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	b := <-waiting
	if b.err != nil {
		t.Fatal(b.err)
	}
	h.engine.WaitIdle()
	if n := countCalls(c.Calls(), ensurePhone); n != 1 {
		t.Fatalf("a failed retry asked %d times, want 1 (no loop): %v", n, c.Calls())
	}
	if len(c.Goldens()) != 0 || len(h.engine.Goldens().GoldenRefusals()) != 1 {
		t.Fatalf("after a failed retry: goldens %+v refusals %v", c.Goldens(), h.engine.Goldens().GoldenRefusals())
	}
	// The next release (a device settles) may clear it: asked again.
	if err := h.engine.Release(b.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	g := leaseOn(t, h, "x", "ios", "Tablet")
	_ = h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	if n := countCalls(c.Calls(), ensurePhone); n != 2 {
		t.Fatalf("retry after a later event asked %d times, want 2: %v", n, c.Calls())
	}
	if len(c.Goldens()) != 1 {
		t.Fatalf("the second retry built nothing: %+v", c.Goldens())
	}
}

func longLease(t *testing.T, h *harness, req, model string) core.Grant {
	t.Helper()
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: model},
		RequesterID: req, OwnerID: req, TTL: time.Hour}, nil)
	if err != nil {
		t.Fatalf("lease %s: %v", model, err)
	}
	return g
}

func goldenState(t *testing.T, h *harness, handle string) core.GoldenDevice {
	t.Helper()
	for _, g := range h.engine.Goldens().GoldenStatus().Devices {
		if g.Handle == handle {
			return g
		}
	}
	t.Fatalf("golden %s not in status: %+v", handle, h.engine.Goldens().GoldenStatus())
	return core.GoldenDevice{}
}

// A golden whose removal failed is stuck: not chosen again before its
// backoff (a minute, then doubling) ends, chosen again once it has, on
// the clock alone, and forgotten when a removal succeeds.
func TestStuckGoldenIsRetriedAfterItsBackoffAndNotBefore(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 2})
	c.SetGoldens([]core.Golden{{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"}})
	longLease(t, h, "a", "Phone")
	c.SetFail("remove-golden", 2)
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Tablet"}, RequesterID: "c", OwnerID: "c", TTL: time.Hour})
	h.engine.WaitIdle()
	removals := func() int { return countCalls(c.Calls(), "remove-golden G1") }
	if n := removals(); n != 1 {
		t.Fatalf("removal attempts %d, want 1", n)
	}
	t0 := h.clock.Now()
	if g := goldenState(t, h, "G1"); g.State != core.GoldenStateStuck || !g.RetryAt.Equal(t0.Add(time.Minute)) || g.StuckErr == "" {
		t.Fatalf("after a failed removal: %+v", g)
	}
	h.clock.Advance(time.Minute - time.Second)
	h.engine.WaitIdle()
	if n := removals(); n != 1 {
		t.Fatalf("retried %d times before the backoff ended", n-1)
	}
	h.clock.Advance(time.Second)
	h.engine.WaitIdle()
	if n := removals(); n != 2 {
		t.Fatalf("removal attempts %d once the minute passed, want 2", n)
	}
	// Failed again: the wait doubles.
	if g := goldenState(t, h, "G1"); g.State != core.GoldenStateStuck || !g.RetryAt.Equal(h.clock.Now().Add(2*time.Minute)) {
		t.Fatalf("after a second failure: %+v (now %v)", g, h.clock.Now())
	}
	h.clock.Advance(2*time.Minute - time.Second)
	h.engine.WaitIdle()
	if n := removals(); n != 2 {
		t.Fatalf("retried before the doubled backoff ended: %d attempts", n)
	}
	select {
	case r := <-waiting:
		t.Fatalf("the tablet was answered while the golden is stuck: %+v", r)
	default:
	}
	h.clock.Advance(time.Second)
	select {
	case r := <-waiting:
		if r.err != nil {
			t.Fatalf("tablet after the golden was removed: %v", r.err)
		}
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatalf("tablet never granted after the backoff: %v", c.Calls())
	}
	h.engine.WaitIdle()
	if n := removals(); n != 3 {
		t.Fatalf("removal attempts %d, want 3", n)
	}
	if st := h.engine.Goldens().GoldenStatus(); len(st.Devices) != 0 {
		t.Fatalf("golden still reported after its removal: %+v", st)
	}
}

// The golden report names every golden's state, and the refused specs
// with their reasons and whether a retry is in flight.
func TestGoldenStatusShowsBuildingStuckAndRefused(t *testing.T) {
	h, c := goldenHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 3})
	c.SetGoldens([]core.Golden{
		{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"},
		{Handle: "G2", ModelID: "Tablet", RuntimeID: "rt-1.0", Building: true, Busy: true},
	})
	longLease(t, h, "a", "Phone")
	c.SetFail("remove-golden", 1)
	// Managed: two goldens and the phone. A watch needs G1's slot (G2
	// builds), its removal fails, and G1 is stuck.
	w := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Watch"}, RequesterID: "w", OwnerID: "w"})
	h.engine.WaitIdle()
	if v := c.AskGoldenBuild("G3", "Watch", "rt-1.0", false); v != core.GoldenRefused {
		t.Fatalf("golden admitted while the watch waits: %v", v)
	}
	st := h.engine.Goldens().GoldenStatus()
	got := map[string]string{}
	for _, g := range st.Devices {
		got[g.Handle] = g.State
	}
	if got["G1"] != core.GoldenStateStuck || got["G2"] != core.GoldenStateBuilding || len(got) != 2 {
		t.Fatalf("golden states %v", got)
	}
	if len(st.Refused) != 1 || st.Refused[0].ModelID != "Watch" || st.Refused[0].Platform != "ios" ||
		!strings.Contains(st.Refused[0].Reason, "waiting") || st.Refused[0].Retrying {
		t.Fatalf("refused %+v", st.Refused)
	}
	select {
	case r := <-w:
		t.Fatalf("watch answered with every slot held: %+v", r)
	default:
	}
}

// A waiter that leaves without a grant (its caller cancels, its queue
// timeout passes) clears the refusal's reason as a grant does: the golden
// is asked for at once, with no other event needed.
func TestRefusedGoldenIsRetriedWhenTheWaiterLeavesWithoutAGrant(t *testing.T) {
	for _, leave := range []string{"cancel", "timeout"} {
		t.Run(leave, func(t *testing.T) {
			h, c := goldenHarness(t, droidLimits())
			leaseOn(t, h, "a", "android", "Pixel")
			r := droidReq("b")
			r.Timeout = 30 * time.Second
			waiting := h.async(r)
			if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
				t.Fatalf("golden admitted while a request waits: %v", v)
			}
			if leave == "cancel" {
				if err := h.engine.Cancel("b"); err != nil {
					t.Fatal(err)
				}
			} else {
				h.clock.Advance(30 * time.Second)
			}
			if res := <-waiting; res.err == nil {
				t.Fatal("the waiter was granted instead of leaving")
			}
			h.engine.WaitIdle()
			if n := countCalls(c.Calls(), ensurePhone); n != 1 {
				t.Fatalf("golden build asked %d times after the waiter left, want 1: %v", n, c.Calls())
			}
		})
	}
}

// A reset (nuke) removes every golden and starts clone provisioning over:
// a build refused before it is not retried when the reset ends, so the
// host the reset reported empty stays empty.
func TestNukeForgetsRefusedGoldens(t *testing.T) {
	h, c := goldenHarness(t, droidLimits())
	leaseOn(t, h, "a", "android", "Pixel")
	waiting := h.async(droidReq("b"))
	if v := c.AskGoldenBuild("G1", "Phone", "rt-1.0", true); v != core.GoldenRefused {
		t.Fatalf("golden admitted while a request waits: %v", v)
	}
	if _, err := h.engine.Maintenance().Nuke(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting; r.err == nil {
		t.Fatal("the waiter outlived the reset")
	}
	h.engine.WaitIdle()
	if n := countCalls(c.Calls(), ensurePhone); n != 0 {
		t.Fatalf("golden build asked %d times after the reset, want none: %v", n, c.Calls())
	}
	if got := h.engine.Goldens().GoldenRefusals(); len(got) != 0 {
		t.Fatalf("refusals after the reset: %v", got)
	}
}
