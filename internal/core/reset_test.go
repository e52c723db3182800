package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
)

// newResetHarness is a harness whose iOS and Android fakes have every
// reset ability (erase and verify, keep-booted cleaning, data wipe).
func newResetHarness(t *testing.T, limits core.Limits) (*harness, fakedrv.Resetting, fakedrv.Resetting) {
	t.Helper()
	h := &harness{t: t, clock: fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), store: newMemStore(),
		drv: fakedrv.New("ios"), droid: fakedrv.New("android"), limits: limits,
		cfg: core.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour}, disk: 100 << 30}
	ios, droid := fakedrv.NewResetting(h.drv), fakedrv.NewResetting(h.droid)
	h.drivers = []core.Driver{ios, droid}
	h.start()
	return h, ios, droid
}

func (h *harness) sessionLease(req, platform string, p core.ReleasePolicy) core.Grant {
	h.t.Helper()
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: platform},
		RequesterID: req, OwnerID: req, Release: p}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if g.Lease.Release != p {
		h.t.Fatalf("lease carries release %+v, want %+v", g.Lease.Release, p)
	}
	return g
}

// settled waits for lease id's reset to settle and returns its record.
func (h *harness) settled(id string) contract.SessionReset {
	h.t.Helper()
	_, done, ok := h.engine.Resets().ResetOf(id)
	if !ok {
		h.t.Fatalf("no reset for lease %s", id)
	}
	select {
	case <-done:
	case <-time.After(testhost.Scale(5 * time.Second)):
		h.t.Fatalf("reset of %s never settled", id)
	}
	h.engine.WaitIdle()
	rec, _, _ := h.engine.Resets().ResetOf(id)
	return rec
}

func eventIndex(evs []events.Event, match func(events.Event) bool) int {
	for i, e := range evs {
		if match(e) {
			return i
		}
	}
	return -1
}

func callIndex(calls []string, call string) int {
	for i, c := range calls {
		if c == call {
			return i
		}
	}
	return -1
}

// Zero pooling: the released device is destroyed, and a waiter for its
// capacity is served only after the destroy is confirmed; while the
// destroy fails, the device's record stays and keeps the capacity.
func TestResetDestroyFreesCapacityOnlyOnceAbsent(t *testing.T) {
	h, _, _ := newResetHarness(t, core.Limits{MaxRunning: 1, MaxManaged: 1})
	g := h.sessionLease("a", "ios", core.ReleasePolicy{Mode: contract.ResetDestroy})
	h.drv.SetFail("destroy", 1)
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", OwnerID: "b", Timeout: time.Hour})
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if rec, _, _ := h.engine.Resets().ResetOf(g.Lease.ID); rec.Outcome != contract.ResetOutcomePending || rec.Mode != contract.ResetDestroy {
		t.Fatalf("reset after a failed destroy: %+v", rec)
	}
	d, ok := h.engine.Device(g.Device.ID)
	if !ok || d.State != core.StateQuarantined {
		t.Fatalf("device after a failed destroy: %+v (present %v), want it kept and quarantined", d, ok)
	}
	select {
	case r := <-waiting:
		t.Fatalf("the waiter was served while the destroy was unconfirmed: %+v %v", r.g.Device.ID, r.err)
	default:
	}
	h.clock.Advance(time.Minute) // the quarantine retry destroys it again
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Outcome != contract.ResetOutcomeDestroyed || rec.CompletedAtMs == nil {
		t.Fatalf("reset %+v", rec)
	}
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("the destroyed device is still recorded")
	}
	calls := h.drv.Calls()
	if last, prov := strings.LastIndex(strings.Join(calls, ","), "destroy ios-1"), strings.LastIndex(strings.Join(calls, ","), "provision"); last < 0 || prov < last {
		t.Fatalf("the new device was provisioned before the old one was destroyed: %v", calls)
	}
	evs, _ := h.bus.Since(0)
	destroyed := eventIndex(evs, func(e events.Event) bool { return e.Type == "device.destroyed" && e.DeviceID == g.Device.ID })
	granted := eventIndex(evs, func(e events.Event) bool { return e.Type == "lease.granted" && e.RequesterID == "b" })
	reset := eventIndex(evs, func(e events.Event) bool { return e.Type == "device.reset" && e.LeaseID == g.Lease.ID })
	if destroyed < 0 || granted < 0 || reset < 0 || destroyed > granted {
		t.Fatalf("event order: destroyed %d, reset %d, granted %d", destroyed, reset, granted)
	}
}

// The plain destroy: released, destroyed, confirmed absent, reported.
func TestResetDestroyReportsDestroyed(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	g := h.sessionLease("a", "ios", core.ReleasePolicy{Mode: contract.ResetDestroy})
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Mode != contract.ResetDestroy || rec.Outcome != contract.ResetOutcomeDestroyed || rec.TotalMs == nil {
		t.Fatalf("reset %+v", rec)
	}
	if _, ok := rec.Phases["destroy"]; !ok {
		t.Fatalf("no destroy phase: %+v", rec.Phases)
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left in the fake", exist)
	}
}

// ReleaseWith overrides the lease's own policy: an erase session whose
// owner exited is destroyed.
func TestReleaseWithOverridesThePolicy(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	g := h.sessionLease("a", "ios", core.ReleasePolicy{Mode: contract.ResetErase})
	if err := h.engine.Resets().ReleaseWith(g.Lease.ID, core.ReleasePolicy{Mode: contract.ResetDestroy}, "session_owner_exited"); err != nil {
		t.Fatal(err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Mode != contract.ResetDestroy || rec.Outcome != contract.ResetOutcomeDestroyed {
		t.Fatalf("reset %+v", rec)
	}
	if callIndex(h.drv.Calls(), "erase ios-1") >= 0 {
		t.Fatalf("the lease's own erase ran: %v", h.drv.Calls())
	}
	evs, _ := h.bus.Since(0)
	if eventIndex(evs, func(e events.Event) bool { return e.Type == "lease.released" && e.Reason == "session_owner_exited" }) < 0 {
		t.Fatal("lease.released does not carry the reason")
	}
	if err := h.engine.Resets().ReleaseWith(g.Lease.ID, core.ReleasePolicy{}, ""); err != core.ErrUnknownLease {
		t.Fatalf("second release: %v", err)
	}
}

// The pool's own purge is unchanged and tracks no reset.
func TestZeroPolicyKeepsThePoolPurge(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	g := h.sessionLease("a", "ios", core.ReleasePolicy{})
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if _, _, ok := h.engine.Resets().ResetOf(g.Lease.ID); ok {
		t.Fatal("a pool purge reported a session reset")
	}
	if d, ok := h.engine.Device(g.Device.ID); !ok || d.State != core.StateReady || d.ReuseCount != 0 {
		t.Fatalf("device after the pool purge: %+v", d)
	}
}

// Erase and reuse: stop, erase, boot, verify; the same device serves the
// next lease with its reuse count raised.
func TestResetEraseReusesTheDevice(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	p := core.ReleasePolicy{Mode: contract.ResetErase}
	g := h.sessionLease("a", "ios", p)
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Mode != contract.ResetErase || rec.Outcome != contract.ResetOutcomeClean || rec.ReuseCount != 1 || rec.FallbackReason != "" {
		t.Fatalf("reset %+v", rec)
	}
	for _, ph := range []string{"stop", "erase", "boot", "verify"} {
		if _, ok := rec.Phases[ph]; !ok {
			t.Fatalf("phase %s missing: %+v", ph, rec.Phases)
		}
	}
	calls := h.drv.Calls()
	order := []int{callIndex(calls, "shutdown ios-1"), callIndex(calls, "erase ios-1"), callIndex(calls, "verify ios-1")}
	if order[0] < 0 || order[0] > order[1] || order[1] > order[2] {
		t.Fatalf("erase steps out of order: %v", calls)
	}
	d, _ := h.engine.Device(g.Device.ID)
	if d.State != core.StateReady || d.ReuseCount != 1 || d.Intent != (core.DeviceIntent{}) {
		t.Fatalf("device after the erase: state %s reuse %d intent %+v", d.State, d.ReuseCount, d.Intent)
	}
	g2 := h.sessionLease("b", "ios", p)
	if g2.Device.ID != g.Device.ID || g2.Device.ReuseCount != 1 {
		t.Fatalf("second lease got %s (reuse %d), want the erased %s", g2.Device.ID, g2.Device.ReuseCount, g.Device.ID)
	}
}

// Any failure of the erase, its verification included, destroys the device
// and says why.
func TestResetEraseVerifyFailureDestroys(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	g := h.sessionLease("a", "ios", core.ReleasePolicy{Mode: contract.ResetErase})
	h.drv.SetFail("verify", 1)
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Outcome != contract.ResetOutcomeDestroyed || !strings.Contains(rec.FallbackReason, "verify") {
		t.Fatalf("reset %+v", rec)
	}
	if _, ok := rec.Phases["destroy"]; !ok {
		t.Fatalf("phases %+v", rec.Phases)
	}
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("a device whose erase was not verified is still recorded")
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left", exist)
	}
}

// A driver that can erase but not verify cannot reuse: destroyed.
func TestResetEraseWithoutVerifierDestroys(t *testing.T) {
	h := newHarness(t, one(2))
	h.drivers = []core.Driver{fakedrv.Erasing{Driver: h.drv}, h.droid}
	h.start()
	g := h.sessionLease("a", "ios", core.ReleasePolicy{Mode: contract.ResetErase})
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := h.settled(g.Lease.ID); rec.Outcome != contract.ResetOutcomeDestroyed || rec.FallbackReason == "" {
		t.Fatalf("reset %+v", rec)
	}
}

// Keep-booted: the baseline is captured after the first boot, each
// release cleans and checks health, and the lease at maxUses retires the
// device.
func TestResetKeepBootedCleansThenRetiresAtMaxUses(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	p := core.ReleasePolicy{Mode: contract.ResetKeepBooted, MaxUses: 2}
	g := h.sessionLease("a", "android", p)
	if callIndex(h.droid.Calls(), "capture android-1") < 0 {
		t.Fatalf("no baseline captured after the first boot: %v", h.droid.Calls())
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Mode != contract.ResetKeepBooted || rec.Outcome != contract.ResetOutcomeClean || rec.ReuseCount != 1 {
		t.Fatalf("first reset %+v", rec)
	}
	for _, ph := range []string{"uninstall", "settings", "files", "health"} {
		if _, ok := rec.Phases[ph]; !ok {
			t.Fatalf("phase %s missing: %+v", ph, rec.Phases)
		}
	}
	if callIndex(h.droid.Calls(), "shutdown android-1") >= 0 {
		t.Fatalf("a keep-booted device was shut down: %v", h.droid.Calls())
	}
	g2 := h.sessionLease("b", "android", p)
	if g2.Device.ID != g.Device.ID {
		t.Fatalf("second lease got %s, want the cleaned %s", g2.Device.ID, g.Device.ID)
	}
	if err := h.engine.Release(g2.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec = h.settled(g2.Lease.ID)
	if rec.Outcome != contract.ResetOutcomeDestroyed || !strings.Contains(rec.FallbackReason, "maxUses 2") {
		t.Fatalf("second reset %+v, want retired", rec)
	}
	if _, ok := h.engine.Device(g.Device.ID); ok {
		t.Fatal("the retired device is still recorded")
	}
	evs, _ := h.bus.Since(0)
	if eventIndex(evs, func(e events.Event) bool {
		return e.Type == "device.reset" && e.LeaseID == g2.Lease.ID && e.Data["retired"] == true
	}) < 0 {
		t.Fatal("no device.reset marked retired")
	}
}

// The fallback chain: a failed cleaning falls back to the snapshot, a
// failed snapshot to wiping the data, and when that fails too the device
// is destroyed; each outcome says which step left it clean.
func TestResetKeepBootedFallbackChain(t *testing.T) {
	p := core.ReleasePolicy{Mode: contract.ResetKeepBooted, Fallback: contract.ResetSnapshot}
	for _, c := range []struct {
		name    string
		fail    []string
		outcome string
		phase   string
	}{
		{"clean fails", []string{"clean"}, "fallback:snapshot", "snapshot:restore"},
		{"health fails", []string{"health"}, "fallback:snapshot", "snapshot:health"},
		{"snapshot fails too", []string{"clean", "reclaim"}, "fallback:wipe-data", "snapshot:wipe-data"},
		{"everything fails", []string{"clean", "reclaim", "wipe-data"}, contract.ResetOutcomeDestroyed, "destroy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, _, _ := newResetHarness(t, one(2))
			g := h.sessionLease("a", "android", p)
			for _, v := range c.fail {
				h.droid.SetFail(v, 1)
			}
			if err := h.engine.Release(g.Lease.ID); err != nil {
				t.Fatal(err)
			}
			rec := h.settled(g.Lease.ID)
			if rec.Outcome != c.outcome || !strings.Contains(rec.FallbackReason, "keep-booted") {
				t.Fatalf("reset %+v, want %s", rec, c.outcome)
			}
			if _, ok := rec.Phases[c.phase]; !ok {
				t.Fatalf("phase %s missing: %+v", c.phase, rec.Phases)
			}
			_, present := h.engine.Device(g.Device.ID)
			if present != (c.outcome != contract.ResetOutcomeDestroyed) {
				t.Fatalf("device recorded %v after outcome %s", present, rec.Outcome)
			}
			if present {
				// The fallback began a new boot: its baseline was taken
				// again, so the next release can clean.
				calls := h.droid.Calls()
				if strings.LastIndex(strings.Join(calls, ","), "capture") < strings.LastIndex(strings.Join(calls, ","), c.fail[len(c.fail)-1]) {
					t.Fatalf("no baseline recaptured after the fallback: %v", calls)
				}
			}
		})
	}
}

// Without a fallback a failed cleaning destroys the device.
func TestResetKeepBootedWithoutFallbackDestroys(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	g := h.sessionLease("a", "android", core.ReleasePolicy{Mode: contract.ResetKeepBooted})
	h.droid.SetFail("clean", 1)
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := h.settled(g.Lease.ID); rec.Outcome != contract.ResetOutcomeDestroyed || !strings.Contains(rec.FallbackReason, "fake clean failure") {
		t.Fatalf("reset %+v", rec)
	}
}

// The snapshot mode restores the snapshot, and wipes the data when that
// fails.
func TestResetSnapshotAndWipeData(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	p := core.ReleasePolicy{Mode: contract.ResetSnapshot}
	g := h.sessionLease("a", "android", p)
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := h.settled(g.Lease.ID); rec.Mode != contract.ResetSnapshot || rec.Outcome != contract.ResetOutcomeClean {
		t.Fatalf("reset %+v", rec)
	}
	g2 := h.sessionLease("b", "android", p)
	h.droid.SetFail("reclaim", 1)
	if err := h.engine.Release(g2.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := h.settled(g2.Lease.ID); rec.Outcome != "fallback:wipe-data" || rec.ReuseCount != 2 || rec.FallbackReason == "" {
		t.Fatalf("reset %+v", rec)
	}
}

// A crash in the middle of a reset: the restart destroys the device
// (whatever the mode, nobody saw the reset finish) and reports the reset
// destroyed under the lease.
func TestResetCrashMidResetDestroysOnRestart(t *testing.T) {
	for _, c := range []struct {
		platform, mode string
		// inFlight is the call that shows the reset under way; without
		// one, the release's own commit of the intent is the cut.
		inFlight string
	}{
		{"ios", contract.ResetErase, "erase ios-1"}, // held in the boot after the erase
		{"android", contract.ResetKeepBooted, ""},   // held in the cleaning
	} {
		t.Run(c.mode, func(t *testing.T) {
			h, _, _ := newResetHarness(t, one(2))
			g := h.sessionLease("a", c.platform, core.ReleasePolicy{Mode: c.mode})
			drv := h.drv
			if c.platform == "android" {
				drv = h.droid
			}
			drv.Gate = make(chan struct{}) // the held call never returns: "kill -9"
			if err := h.engine.Release(g.Lease.ID); err != nil {
				t.Fatal(err)
			}
			var d core.DeviceRecord
			for i := 0; ; i++ {
				h.store.with(func(m *memStore) { d = m.devices[g.Device.ID] })
				if c.inFlight != "" && callIndex(drv.Calls(), c.inFlight) >= 0 || c.inFlight == "" && d.Intent.Op == core.OpKindReclaim {
					break
				}
				if i > 5000 {
					t.Fatalf("the reset never got under way: %v", drv.Calls())
				}
				time.Sleep(time.Millisecond)
			}
			if d.Intent.Release.Mode != c.mode || d.Intent.LeaseID != g.Lease.ID {
				t.Fatalf("stored intent mid-reset %+v", d.Intent)
			}
			h.start()
			h.engine.WaitIdle()
			if _, ok := h.engine.Device(g.Device.ID); ok {
				t.Fatal("the device of an interrupted reset survived the restart")
			}
			if callIndex(drv.Calls(), "destroy "+g.Device.Handle) < 0 {
				t.Fatalf("not destroyed: %v", drv.Calls())
			}
			_, done, ok := h.engine.Resets().ResetOf(g.Lease.ID)
			if !ok {
				t.Fatal("the restarted engine does not know the reset")
			}
			<-done
			if rec, _, _ := h.engine.Resets().ResetOf(g.Lease.ID); rec.Outcome != contract.ResetOutcomeDestroyed || !strings.Contains(rec.FallbackReason, "interrupted") {
				t.Fatalf("reset after the restart %+v", rec)
			}
		})
	}
}

// Of several clean reset devices, the one returned most recently serves
// the next session.
func TestResetPrefersTheMostRecentlyReturnedDevice(t *testing.T) {
	h, _, _ := newResetHarness(t, one(3))
	p := core.ReleasePolicy{Mode: contract.ResetErase}
	first := h.sessionLease("a", "ios", p)
	second := h.sessionLease("b", "ios", p)
	for _, g := range []core.Grant{second, first} {
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		if rec := h.settled(g.Lease.ID); rec.Outcome != contract.ResetOutcomeClean {
			t.Fatalf("reset %+v", rec)
		}
		h.clock.Advance(10 * time.Second) // within the leases' TTL
	}
	if g := h.sessionLease("c", "ios", p); g.Device.ID != first.Device.ID {
		t.Fatalf("got %s, want %s, returned last", g.Device.ID, first.Device.ID)
	}
}

// A policy the device cannot run is refused at admission.
func TestReleasePolicyIsCheckedAtAdmission(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	for _, c := range []struct {
		platform string
		p        core.ReleasePolicy
	}{
		{"android", core.ReleasePolicy{Mode: contract.ResetErase}},
		{"ios", core.ReleasePolicy{Mode: contract.ResetKeepBooted}},
		{"ios", core.ReleasePolicy{Mode: contract.ResetSnapshot}},
		{"android", core.ReleasePolicy{Mode: contract.ResetSnapshot, Fallback: contract.ResetDestroy}},
		{"android", core.ReleasePolicy{Mode: contract.ResetKeepBooted, Fallback: contract.ResetErase}},
		{"ios", core.ReleasePolicy{Mode: "scrub"}},
	} {
		_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: c.platform},
			RequesterID: "a", OwnerID: "a", Release: c.p, NoWait: true}, nil)
		if !errors.Is(err, core.ErrBadRequest) {
			t.Errorf("%s %+v: %v, want a bad request", c.platform, c.p, err)
		}
	}
	if exist, _ := h.drv.Count(); exist != 0 {
		t.Fatalf("a refused request created %d devices", exist)
	}
}

// A keep-booted session served by a warm device that was never captured
// (the pool's own purge left it) gets its baseline before the grant, so
// its release cleans instead of giving the device up.
func TestResetKeepBootedCapturesBeforeGrantingAWarmDevice(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	pool := h.sessionLease("pool", "android", core.ReleasePolicy{})
	if err := h.engine.Release(pool.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	g := h.sessionLease("a", "android", core.ReleasePolicy{Mode: contract.ResetKeepBooted})
	calls := h.droid.Calls()
	if g.Device.ID != pool.Device.ID || callIndex(calls, "capture android-1") < callIndex(calls, "reclaim android-1") {
		t.Fatalf("device %s, calls %v: want the warm device, captured after its purge", g.Device.ID, calls)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := h.settled(g.Lease.ID); rec.Outcome != contract.ResetOutcomeClean {
		t.Fatalf("reset %+v", rec)
	}
}

// countingBoots is the resetting fake whose boots, once counting is on,
// record how many run at once.
type countingBoots struct {
	fakedrv.Resetting
	mu             sync.Mutex
	on             bool
	now, most, all int
	// tries bounds the wait for the other boot, 10 ms each: long where
	// both must meet (no limit), short where the other must not come.
	tries int
}

func (c *countingBoots) MakeReady(ctx context.Context, r core.DeviceRef) error {
	c.mu.Lock()
	on := c.on
	if on {
		c.now++
		c.all++
		c.most = max(c.most, c.now)
	}
	c.mu.Unlock()
	if on {
		// Wait (boundedly) for the other boot to arrive: without a bound
		// both run here at once; with a bound of one the other never
		// comes while this one runs.
		for i := 0; i < c.tries; i++ {
			c.mu.Lock()
			both := c.most == 2 // the other has come (it may be done already)
			c.mu.Unlock()
			if both {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	}
	return c.Resetting.MakeReady(ctx, r)
}

// MaxConcurrentResetBoots bounds the erase resets that boot at once.
func TestResetEraseBootsAreBounded(t *testing.T) {
	for _, limit := range []int{1, 0} {
		h := newHarness(t, one(3))
		cb := &countingBoots{Resetting: fakedrv.NewResetting(h.drv), tries: 30}
		if limit == 0 {
			cb.tries = 500 // both boots must meet: wait up to 5 s on a loaded machine
		}
		h.drivers = []core.Driver{cb, h.droid}
		h.cfg.MaxConcurrentResetBoots = limit
		h.start()
		p := core.ReleasePolicy{Mode: contract.ResetErase}
		a, b := h.sessionLease("a", "ios", p), h.sessionLease("b", "ios", p)
		cb.mu.Lock()
		cb.on = true
		cb.mu.Unlock()
		h.engine.ReleaseWhere(func(core.LeaseRecord) bool { return true })
		for _, g := range []core.Grant{a, b} {
			if rec := h.settled(g.Lease.ID); rec.Outcome != contract.ResetOutcomeClean {
				t.Fatalf("limit %d: reset %+v", limit, rec)
			}
		}
		cb.mu.Lock()
		most, all := cb.most, cb.all
		cb.mu.Unlock()
		if all != 2 || (limit == 1 && most != 1) || (limit == 0 && most != 2) {
			t.Fatalf("limit %d: %d boots, at most %d at once", limit, all, most)
		}
	}
}

// A multi-device lease's reset is one record over every member: it
// settles when the last member does, and one member given up makes it
// destroyed.
func TestResetOfAGroupLeaseCoversEveryMember(t *testing.T) {
	h, _, _ := newResetHarness(t, one(3))
	p := core.ReleasePolicy{Mode: contract.ResetErase}
	g, err := h.engine.Request(context.Background(), core.Request{Group: []core.SpecRequest{{Platform: "ios"}, {Platform: "ios"}},
		RequesterID: "a", OwnerID: "a", Release: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Lease.Members) != 1 || g.Lease.Release != p {
		t.Fatalf("group lease %+v", g.Lease)
	}
	h.drv.SetFail("verify", 1) // one of the two erases is not verified
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	rec := h.settled(g.Lease.ID)
	if rec.Outcome != contract.ResetOutcomeDestroyed || !strings.Contains(rec.FallbackReason, "verify") {
		t.Fatalf("reset %+v", rec)
	}
	left := 0
	for _, id := range g.Lease.DeviceIDs() {
		if d, ok := h.engine.Device(id); ok {
			left++
			if d.State != core.StateReady || d.ReuseCount != 1 {
				t.Fatalf("the verified member: %+v", d)
			}
		}
	}
	if left != 1 {
		t.Fatalf("%d members left, want the verified one", left)
	}
}
