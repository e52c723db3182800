package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// A device a slot made is its slot's only: a plain request of the same
// spec never gets it (a new device is made instead), another slot's
// execution waits, and the slot's own execution is granted it. Releasing
// it keeps it out of the pool; DestroyAssigned deletes it.
func TestAnAssignedDeviceServesOnlyItsSlot(t *testing.T) {
	h := newHarness(t, one(3))
	ctx := context.Background()
	var recorded string
	d, err := h.engine.Slots().ProvisionAssigned(ctx, core.SpecRequest{Platform: "ios", Model: "Phone"}, "scopeA/0", "simlock-slot-test", func(id string) error { recorded = id; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if d.State != core.StateReady || recorded != d.ID {
		t.Fatalf("made %+v (recorded %q)", d, recorded)
	}
	g, err := h.lease("plain", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if g.Device.ID == d.ID {
		t.Fatal("a plain request was granted the slot's device")
	}
	// Another slot's execution and a plain targeted request are refused
	// at once.
	for _, slot := range []string{"scopeB/0", ""} {
		_, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", OwnerID: "b", DeviceID: d.ID, Slot: slot}, nil)
		if !errors.Is(err, core.ErrAssigned) {
			t.Fatalf("targeted request from slot %q: %v", slot, err)
		}
	}
	own, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a", OwnerID: "a", DeviceID: d.ID, Slot: "scopeA/0"}, nil)
	if err != nil || own.Device.ID != d.ID {
		t.Fatalf("own slot: %v %v", own.Device.ID, err)
	}
	// The registry now reports it (as the daemon would); the made mark
	// and the daemon's map agree.
	h.engine.Slots().SetAssigned(map[string]string{d.ID: "scopeA/0"})
	if err := h.engine.Slots().DestroyAssigned(ctx, d.ID); !errors.Is(err, core.ErrDeviceBusy) {
		t.Fatalf("destroy of a leased slot device: %v", err)
	}
	if err := h.engine.Release(own.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if s, ok := h.engine.Slots().AssignedSlot(d.ID); !ok || s != "scopeA/0" {
		t.Fatalf("released slot device left its slot: %q %v", s, ok)
	}
	g2, err := h.lease("plain2", "Phone")
	if err != nil || g2.Device.ID == d.ID {
		t.Fatalf("plain request after release: %v %v", g2.Device.ID, err)
	}
	if err := h.engine.Slots().DestroyAssigned(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.engine.Device(d.ID); ok {
		t.Fatal("destroyed slot device still recorded")
	}
}

// A free-pool device is nobody's until adopted: not even a slot's
// execution may take it by naming it.
func TestAFreePoolDeviceServesNoExecution(t *testing.T) {
	h := newHarness(t, one(2))
	g, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.engine.Slots().SetAssigned(map[string]string{g.Device.ID: core.FreePoolSlot})
	_, err = h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "s", OwnerID: "s", DeviceID: g.Device.ID, Slot: core.FreePoolSlot}, nil)
	if !errors.Is(err, core.ErrAssigned) {
		t.Fatalf("a free-pool device was requested: %v", err)
	}
	g2, err := h.lease("b", "Phone")
	if err != nil || g2.Device.ID == g.Device.ID {
		t.Fatalf("plain request got the free-pool device: %v %v", g2.Device.ID, err)
	}
}

// A slot execution released with policy none hands the device back to its
// slot as the execution left it: no driver work between the executions,
// still booted and ready. No other request may ask for that policy.
func TestASlotExecutionKeepsItsDeviceWarm(t *testing.T) {
	h := newHarness(t, one(3))
	ctx := context.Background()
	d, err := h.engine.Slots().ProvisionAssigned(ctx, core.SpecRequest{Platform: "ios", Model: "Phone"}, "scopeA/0", "simlock-slot-warm", func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Slots().SetAssigned(map[string]string{d.ID: "scopeA/0"})
	keep := core.ReleasePolicy{Mode: contract.ResetNone}
	if _, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "p", OwnerID: "p", Release: keep}, nil); !errors.Is(err, core.ErrBadRequest) {
		t.Fatalf("policy none outside a slot: %v, want a bad request", err)
	}
	for i := range 2 {
		g, err := h.engine.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a", OwnerID: "a", DeviceID: d.ID, Slot: "scopeA/0", Release: keep}, nil)
		if err != nil || g.Device.ID != d.ID {
			t.Fatalf("execution %d: %v %v", i, g.Device.ID, err)
		}
		before := len(h.drv.Calls())
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		h.engine.WaitIdle()
		if calls := h.drv.Calls()[before:]; len(calls) != 0 {
			t.Fatalf("execution %d's release did device work: %v", i, calls)
		}
		if cur, _ := h.engine.Device(d.ID); cur.State != core.StateReady {
			t.Fatalf("after execution %d the slot's device is %s, want ready", i, cur.State)
		}
	}
}
