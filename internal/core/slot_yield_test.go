package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/testhost"
)

// Idle slot devices yield their running room (ADR 0062), like warm ones:
// shut down, never destroyed, and booted again for their slot.

var keepNone = core.ReleasePolicy{Mode: contract.ResetNone}

// slotDevice provisions a device for slot and runs one execution on it,
// leaving it ready, idle and assigned, as a released slot leaves it.
func (h *harness) slotDevice(slot string) core.DeviceRecord {
	h.t.Helper()
	ctx := context.Background()
	d, err := h.engine.Slots().ProvisionAssigned(ctx, core.SpecRequest{Platform: "ios", Model: "Phone"}, slot, "simlock-slot-"+slot, func(string) error { return nil })
	if err != nil {
		h.t.Fatal(err)
	}
	h.clock.Advance(time.Second) // distinct last uses: the LRU order is the order made
	return d
}

func (h *harness) slotExec(slot, id string) core.Grant {
	h.t.Helper()
	g, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "x-" + slot, OwnerID: "runner",
		DeviceID: id, Slot: slot, Release: keepNone}, nil)
	if err != nil || g.Device.ID != id {
		h.t.Fatalf("slot %s's execution: %v %v", slot, g.Device.ID, err)
	}
	return g
}

func (h *harness) state(id string) core.DeviceState {
	h.t.Helper()
	d, ok := h.engine.Device(id)
	if !ok {
		h.t.Fatalf("device %s was forgotten", id)
	}
	return d.State
}

// At the running limit a plain request shuts down the least recently used
// idle slot device (the other keeps running) and is served; the shut-down
// device stays recorded and assigned, and its slot's next execution boots
// it again, making room by shutting down the other idle slot device.
func TestAnIdleSlotDeviceYieldsItsRoomAndBootsAgainForItsSlot(t *testing.T) {
	h := newHarness(t, one(2))
	a, b := h.slotDevice("scopeA/0"), h.slotDevice("scopeB/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0", b.ID: "scopeB/0"})

	// Bounded: without the yield the request would wait for ever.
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(10*time.Second))
	defer cancel()
	g, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "plain", OwnerID: "plain"}, nil)
	if err != nil {
		t.Fatalf("a plain request at the limit beside two idle slot devices: %v", err)
	}
	h.engine.WaitIdle()
	if g.Device.ID == a.ID || g.Device.ID == b.ID {
		t.Fatal("a plain request was granted a slot's device")
	}
	if h.state(a.ID) != core.StateShutdown || h.state(b.ID) != core.StateReady {
		t.Fatalf("after the plain grant: A %s, B %s; want A (least recently used) shut down, B ready", h.state(a.ID), h.state(b.ID))
	}
	if s, ok := h.engine.Slots().AssignedSlot(a.ID); !ok || s != "scopeA/0" {
		t.Fatalf("the yielded device left its slot: %q %v", s, ok)
	}
	for _, c := range h.drv.Calls() {
		if strings.HasPrefix(c, "destroy") {
			t.Fatalf("a slot device was destroyed: %v", h.drv.Calls())
		}
	}

	// A's next execution: B yields in turn, A boots.
	ga := h.slotExec("scopeA/0", a.ID)
	h.engine.WaitIdle()
	if h.state(b.ID) != core.StateShutdown {
		t.Fatalf("B is %s, want shut down for A's boot", h.state(b.ID))
	}
	if ga.Device.State != core.StateLeased && h.state(a.ID) != core.StateLeased {
		t.Fatalf("A is %s, want leased", h.state(a.ID))
	}
}

// A slot device with a live execution never yields: at the limit a plain
// no-wait request is refused and the execution keeps its device.
func TestASlotDeviceWithALiveExecutionDoesNotYield(t *testing.T) {
	h := newHarness(t, one(1))
	a := h.slotDevice("scopeA/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0"})
	h.slotExec("scopeA/0", a.ID)
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "p", OwnerID: "p", NoWait: true}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("plain no-wait request beside a live execution: %v, want no capacity", err)
	}
	h.engine.WaitIdle()
	if h.state(a.ID) != core.StateLeased {
		t.Fatalf("the execution's device is %s", h.state(a.ID))
	}
}

// While its slot is pinned (an acquisition deciding about it), an idle
// slot device does not yield; unpinned, it does, to the waiter queued
// meanwhile.
func TestAPinnedSlotDeviceDoesNotYield(t *testing.T) {
	h := newHarness(t, one(1))
	a := h.slotDevice("scopeA/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0"})
	unpin := h.engine.Slots().PinSlot("scopeA/0")
	if blocked := h.engine.Slots().BootBlocked(a.ID); blocked != nil {
		t.Fatalf("a running device reports boot limits %v", blocked)
	}
	ch := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "p", OwnerID: "p"})
	h.engine.WaitIdle()
	if h.state(a.ID) != core.StateReady {
		t.Fatalf("a pinned slot device is %s, want ready", h.state(a.ID))
	}
	select {
	case r := <-ch:
		t.Fatalf("the plain request was served while the only room was pinned: %+v", r)
	default:
	}
	unpin()
	unpin() // a second call changes nothing
	r := <-ch
	if r.err != nil || r.g.Device.ID == a.ID {
		t.Fatalf("after the unpin: %v %v", r.g.Device.ID, r.err)
	}
	if h.state(a.ID) != core.StateShutdown {
		t.Fatalf("after the unpin the slot device is %s, want shut down", h.state(a.ID))
	}
}

// A managed-device limit is eased only by destroying a device: an idle
// slot device is never chosen, so the request waits (here: no-wait is
// refused) and both slot devices remain.
func TestAManagedLimitNeverDestroysASlotDevice(t *testing.T) {
	h := newHarness(t, core.Limits{MaxRunning: 4, MaxManaged: 2})
	a, b := h.slotDevice("scopeA/0"), h.slotDevice("scopeB/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0", b.ID: "scopeB/0"})
	_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "p", OwnerID: "p", NoWait: true}, nil)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("plain request at the managed limit: %v", err)
	}
	h.engine.WaitIdle()
	h.state(a.ID)
	h.state(b.ID)
}

// BootBlocked: the slot's own shut-down device at the limit reports the
// binding limit when nothing idle could yield (the execution would only
// wait), and nothing once an idle slot device could.
func TestBootBlockedCountsWhatCouldYield(t *testing.T) {
	h := newHarness(t, one(2))
	a, b := h.slotDevice("scopeA/0"), h.slotDevice("scopeB/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0", b.ID: "scopeB/0"})
	if _, err := h.lease("plain", "Phone"); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if h.state(a.ID) != core.StateShutdown {
		t.Fatalf("A is %s", h.state(a.ID))
	}
	if blocked := h.engine.Slots().BootBlocked(a.ID); blocked != nil {
		t.Fatalf("with B idle, A's boot reports %v", blocked)
	}
	h.slotExec("scopeB/0", b.ID)
	if blocked := h.engine.Slots().BootBlocked(a.ID); len(blocked) == 0 || blocked[0] != core.LimitRunning {
		t.Fatalf("with B's execution live, A's boot reports %v, want [maxRunning]", blocked)
	}
}

// The idle-shutdown rule stops an idle slot device past T1, and nothing
// destroys it, not even past T2.
func TestCleanupShutsDownAnIdleSlotDeviceAndNeverDestroysIt(t *testing.T) {
	h := newHarness(t, one(3))
	h.cfg.Cleanup = core.CleanupPolicy{IdleShutdown: time.Minute, IdleDestroy: 2 * time.Minute}
	h.start()
	a := h.slotDevice("scopeA/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0"})
	ctx := context.Background()
	h.clock.Advance(30 * time.Second)
	if res, _ := h.engine.Cleanup().RunCleanup(ctx, false, ""); len(res) != 0 {
		t.Fatalf("cleanup before T1: %+v", res)
	}
	h.clock.Advance(time.Minute)
	res, _ := h.engine.Cleanup().RunCleanup(ctx, false, "")
	if len(res) != 1 || res[0].Action != core.ActionShutdown || !res[0].Executed {
		t.Fatalf("cleanup past T1: %+v", res)
	}
	if h.state(a.ID) != core.StateShutdown {
		t.Fatalf("the idle slot device is %s", h.state(a.ID))
	}
	h.clock.Advance(time.Hour)
	if res, _ := h.engine.Cleanup().RunCleanup(ctx, false, ""); len(res) != 0 {
		t.Fatalf("cleanup past T2 proposed %+v for a slot device", res)
	}
	h.state(a.ID)
}

// A slot execution's lease restored by a restart is kept for the re-bind
// window even though its deadline passed while the daemon was away; a
// plain lease whose deadline passed ends at startup as before.
func TestARestartKeepsASlotExecutionsLeaseForTheRebindWindow(t *testing.T) {
	h := newHarness(t, one(3))
	h.cfg.SlotRebindWindow = time.Minute
	h.start()
	a := h.slotDevice("scopeA/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0"})
	ctx := context.Background()
	g, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "x", OwnerID: "runner",
		DeviceID: a.ID, Slot: "scopeA/0", Release: keepNone, TTL: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "p", OwnerID: "p", TTL: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Stop(ctx)
	h.clock.Advance(12 * time.Second) // away past both TTLs
	h.start()
	if _, live := h.engine.Lease(g.Lease.ID); !live {
		t.Fatal("the slot execution's lease ended at startup")
	}
	h.clock.Advance(time.Millisecond)
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for _, live := h.engine.Lease(plain.Lease.ID); live; _, live = h.engine.Lease(plain.Lease.ID) {
		if time.Now().After(deadline) {
			t.Fatal("a plain lease past its deadline survived the restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, live := h.engine.Lease(g.Lease.ID); !live {
		t.Fatal("the slot execution's lease ended with the plain one")
	}
	h.clock.Advance(59 * time.Second)
	h.engine.WaitIdle()
	if _, live := h.engine.Lease(g.Lease.ID); !live {
		t.Fatal("the slot execution's lease ended inside the re-bind window")
	}
	if _, err := h.engine.Renew(g.Lease.ID, 10*time.Second); err != nil {
		t.Fatalf("the re-bound execution's heartbeat: %v", err)
	}
	h.clock.Advance(11 * time.Second)
	h.engine.WaitIdle()
	ended := h.engine.Watch().LeaseEnded(g.Lease.ID)
	select {
	case <-ended:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("without heartbeats the restored lease did not end")
	}
}

// MakeRoom, a slot's create asking for running room: an idle slot device
// is shut down for it (not destroyed); with only live executions running
// it reports the binding limit and changes nothing; a device about to be
// deleted counts as stopped and is left alone.
func TestMakeRoomShutsDownAnIdleDeviceOrReportsTheLimit(t *testing.T) {
	h := newHarness(t, one(1))
	ctx := context.Background()
	phone := core.SpecRequest{Platform: "ios", Model: "Phone"}
	a := h.slotDevice("scopeA/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0"})
	if binding, err := h.engine.Slots().MakeRoom(ctx, phone, ""); err != nil || binding != nil {
		t.Fatalf("room beside an idle slot device: %v %v", binding, err)
	}
	if h.state(a.ID) != core.StateShutdown {
		t.Fatalf("the idle slot device is %s, want shut down", h.state(a.ID))
	}
	b := h.slotDevice("scopeB/0")
	h.engine.Slots().SetAssigned(map[string]string{a.ID: "scopeA/0", b.ID: "scopeB/0"})
	h.slotExec("scopeB/0", b.ID)
	calls := len(h.drv.Calls())
	if binding, err := h.engine.Slots().MakeRoom(ctx, phone, ""); err != nil || len(binding) == 0 || binding[0] != core.LimitRunning {
		t.Fatalf("room beside a live execution: %v %v, want [maxRunning]", binding, err)
	}
	if binding, err := h.engine.Slots().MakeRoom(ctx, phone, b.ID); err != nil || binding != nil {
		t.Fatalf("room when the live device is the one being replaced: %v %v", binding, err)
	}
	if got := h.drv.Calls()[calls:]; len(got) != 0 {
		t.Fatalf("device work without a victim: %v", got)
	}
	if h.state(b.ID) != core.StateLeased {
		t.Fatalf("the execution's device is %s", h.state(b.ID))
	}
}
