package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// cloneHarness is the engine over the fake iOS driver with the clone
// ability, whose verbs cost the simulated SDK's modelled timings on the
// fake clock.
func cloneHarness(t *testing.T) (*harness, *fakedrv.Cloning) {
	t.Helper()
	return cloneHarnessWith(t, core.Limits{MaxRunning: 1, MaxManaged: 4})
}

// cloneHarnessWith is cloneHarness under other limits.
func cloneHarnessWith(t *testing.T, lim core.Limits) (*harness, *fakedrv.Cloning) {
	t.Helper()
	h := &harness{t: t}
	*h = *newHarness(t, lim)
	c := fakedrv.NewCloning(h.drv, h.clock)
	for verb, d := range map[string]time.Duration{"erase": 300 * time.Millisecond, "first-boot": 30 * time.Second,
		"clone": 500 * time.Millisecond, "boot": 1500 * time.Millisecond} {
		c.SetCost(verb, d)
	}
	h.drivers = []core.Driver{c, h.droid}
	h.start()
	return h, c
}

// cycle leases the phone, releases it, waits for the purge and reports
// which reset kind ran, checking that the device came back ready.
func cycle(t *testing.T, h *harness) (kind string, before, after core.DeviceRecord) {
	t.Helper()
	return cycleHeld(t, h, 0)
}

// cycleHeld is cycle with the lease held for hold on the fake clock: a
// lease held past core.ResetProbeIdle leaves its spec idle long enough for
// a due reset probe to run at its release (ADR 0093).
func cycleHeld(t *testing.T, h *harness, hold time.Duration) (kind string, before, after core.DeviceRecord) {
	t.Helper()
	g, err := h.engine.Request(context.Background(), core.Request{
		Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "r", OwnerID: "r", TTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ = h.engine.Device(g.Device.ID)
	if hold > 0 {
		h.clock.Advance(hold)
	}
	n := len(h.drv.Calls())
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	after, _ = h.engine.Device(g.Device.ID)
	if after.State != core.StateReady {
		t.Fatalf("after the reset the device is %s, want ready", after.State)
	}
	kind = core.ResetErase
	for _, c := range h.drv.Calls()[n:] {
		if strings.HasPrefix(c, "clone ") {
			kind = core.ResetClone
		}
	}
	return kind, before, after
}

// Both kinds are measured first; then the faster on this machine's record
// wins, the slower is tried every eighth reset (here the tenth lease is
// held past the probe's idle window, so the probe may run at its release),
// and when the figures turn (clones got slow) the choice turns with them.
func TestResetChoiceFollowsRecordedTimings(t *testing.T) {
	h, c := cloneHarness(t)
	key := core.Spec{Platform: "ios", ModelID: "Phone", OSVersion: "1.0"}.Key()
	var got []string
	for i := range 10 {
		hold := time.Duration(0)
		if i == 1 || i == 9 {
			hold = core.ResetProbeIdle // the first erase and the probe
		}
		k, _, _ := cycleHeld(t, h, hold)
		got = append(got, k)
	}
	want := "clone erase clone clone clone clone clone clone clone erase"
	if strings.Join(got, " ") != want {
		t.Fatalf("reset kinds %v, want %s", got, want)
	}
	if d, ok := h.engine.Resets().ResetFigure(key, core.ResetClone); !ok || d != 2*time.Second {
		t.Errorf("clone figure %v (%v), want 2s (clone 0.5 s + boot 1.5 s)", d, ok)
	}
	if d, ok := h.engine.Resets().ResetFigure(key, core.ResetErase); !ok || d != 30300*time.Millisecond {
		t.Errorf("erase figure %v (%v), want 30.3s", d, ok)
	}

	// Clones turn slow (61.5 s a reset): the moving figure crosses the
	// erase figure on the third slow clone, and erase is chosen from then.
	c.SetCost("clone", 60*time.Second)
	got = got[:0]
	for range 5 {
		k, _, _ := cycle(t, h)
		got = append(got, k)
	}
	if want := "clone clone clone erase erase"; strings.Join(got, " ") != want {
		t.Fatalf("after clones slowed: %v, want %s", got, want)
	}
}

// A clone reset puts a new device in the old one's place: the record keeps
// its id and takes the clone's handle, the old device is deleted, nothing
// else is left behind. Without a fresh golden, or when the clone fails,
// the purge erases the device it has.
func TestCloneResetReplacesTheDeviceAndFallsBack(t *testing.T) {
	h, c := cloneHarness(t)
	k, before, after := cycle(t, h)
	if k != core.ResetClone || after.ID != before.ID || after.Handle == before.Handle {
		t.Fatalf("first reset %s: %s -> %s, want a clone under the same id", k, before.Handle, after.Handle)
	}
	if after.Attrs[core.AttrUDID] != h.drv.UDID(after.Handle) {
		t.Errorf("record attrs %v do not name the clone", after.Attrs)
	}
	if exist, running := h.drv.Count(); exist != 1 || running != 1 {
		t.Errorf("fake driver has %d devices (%d running), want the clone only", exist, running)
	}
	if calls := h.drv.Calls(); !strings.Contains(strings.Join(calls, ","), "destroy "+before.Handle) {
		t.Errorf("old device not destroyed: %v", calls)
	}

	// The clone failing leaves the device as it was, and erases it.
	cycleHeld(t, h, core.ResetProbeIdle) // the erase, measured once the spec is idle
	h.drv.SetFail("clone", 1)
	k, before, after = cycle(t, h)
	if k != core.ResetClone || after.Handle != before.Handle {
		t.Fatalf("failed clone: kind %s, handle %s -> %s; want the same device back", k, before.Handle, after.Handle)
	}
	if calls := h.drv.Calls(); calls[len(calls)-2] != "erase "+before.Handle {
		t.Errorf("failed clone should fall back to an erase: %v", calls[len(calls)-4:])
	}

	// No fresh golden: erase, and CloneDevice is never asked.
	c.SetGoldenReady(false)
	for range 3 {
		n := len(h.drv.Calls())
		if k, b, a := cycle(t, h); k != core.ResetErase || a.Handle != b.Handle {
			t.Fatalf("without a golden: %s, %s -> %s", k, b.Handle, a.Handle)
		}
		if strings.Contains(strings.Join(h.drv.Calls()[n:], ","), "clone") {
			t.Fatal("clone attempted without a golden")
		}
	}
}

// The every-eighth probe of the slower kind waits while a request waits
// for the spec: that reset hands the device to the waiter by the faster
// kind, and the probe runs at the next reset nobody waits for.
func TestSlowerResetProbeWaitsWhileARequestWaits(t *testing.T) {
	h, _ := cloneHarness(t)
	for i := range 9 {
		hold := time.Duration(0)
		if i == 1 {
			hold = core.ResetProbeIdle // the first erase waits for an idle spec
		}
		cycleHeld(t, h, hold) // clone, erase, then seven clones: the probe is due
	}
	g := leaseOn(t, h, "r", "ios", "Phone")
	waiting := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "w", OwnerID: "w", TTL: time.Hour})
	n := len(h.drv.Calls())
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	r := <-waiting
	if r.err != nil || r.g.Device.ID != g.Device.ID {
		t.Fatalf("waiter: %+v %v", r.g.Device, r.err)
	}
	if calls := strings.Join(h.drv.Calls()[n:], ","); !strings.Contains(calls, "clone ") || strings.Contains(calls, "erase ") {
		t.Fatalf("reset with a waiter should be the faster clone: %s", calls)
	}
	// Held past the idle window, with nobody waiting: the probe runs.
	h.clock.Advance(core.ResetProbeIdle)
	n = len(h.drv.Calls())
	if err := h.engine.Release(r.g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if calls := strings.Join(h.drv.Calls()[n:], ","); !strings.Contains(calls, "erase ") {
		t.Fatalf("the deferred probe should run once nobody waits: %s", calls)
	}
}

// Executions that follow one another on the one running slot leave nobody
// queued when a release decides its reset, yet the next execution comes
// right after and would wait out a probe of the slower kind. The probe
// waits until the spec has been idle for the probe window or another ready
// device of the spec could serve the next request (ADR 0093).
func TestNoResetProbeWhileAnExecutionWaits(t *testing.T) {
	h, _ := cloneHarness(t)
	var got []string
	for range 20 {
		k, _, _ := cycle(t, h) // back to back: each lease comes right after the reset
		got = append(got, k)
	}
	// Not even the first erase, which measures the kind, runs back to back.
	if want := "clone" + strings.Repeat(" clone", 19); strings.Join(got, " ") != want {
		t.Fatalf("back-to-back reset kinds %v, want %s: no probe while the next execution comes", got, want)
	}
	// Held just short of the window: still no probe.
	if k, _, _ := cycleHeld(t, h, core.ResetProbeIdle-time.Second); k != core.ResetClone {
		t.Fatalf("a lease held %v (under the window) was reset by %s", core.ResetProbeIdle-time.Second, k)
	}
	// The spec idle for the window: the erase is measured at once, and
	// later due probes wait in the same way.
	if k, _, _ := cycleHeld(t, h, core.ResetProbeIdle); k != core.ResetErase {
		t.Fatalf("after an idle window the erase should be measured, got %s", k)
	}
	got = got[:0]
	for range 10 {
		k, _, _ := cycle(t, h)
		got = append(got, k)
	}
	if want := "clone" + strings.Repeat(" clone", 9); strings.Join(got, " ") != want {
		t.Fatalf("back-to-back reset kinds after the measurement %v, want %s", got, want)
	}
	if k, _, _ := cycleHeld(t, h, core.ResetProbeIdle); k != core.ResetErase {
		t.Fatalf("after an idle window the due probe should run, got %s", k)
	}
}

// With a second ready device of the spec, the next execution is served by
// it while the released device runs the slower reset: a due probe runs
// then even back to back (ADR 0093), so the figures stay measured.
func TestResetProbeRunsWhileAnotherReadyDeviceServes(t *testing.T) {
	h, _ := cloneHarnessWith(t, core.Limits{MaxRunning: 2, MaxManaged: 4})
	a := leaseOn(t, h, "a", "ios", "Phone")
	b := leaseOn(t, h, "b", "ios", "Phone")
	for _, g := range []core.Grant{a, b} {
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
	}
	h.engine.WaitIdle()
	erases := 0
	var got []string
	for range 20 {
		k, _, _ := cycle(t, h)
		got = append(got, k)
		if k == core.ResetErase {
			erases++
		}
	}
	// At most one erase measures the kind; the rest are probes.
	if erases < 2 {
		t.Fatalf("reset kinds %v: no probe ran though another ready device served each next execution", got)
	}
}
