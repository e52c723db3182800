package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// A request that names a device is served by that device only: not by a
// warm one of the same spec, not by a new one, even while it waits; it is
// granted once its device is released, and refused for a device the engine
// does not know.
func TestATargetedRequestIsServedByItsDeviceOnly(t *testing.T) {
	h := newHarness(t, one(2))
	ga, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	gb, err := h.lease("b", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Release(gb.Lease.ID)
	h.engine.WaitIdle() // b's device is warm now; a's is leased
	ch := h.async(core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "c", OwnerID: "c", DeviceID: ga.Device.ID})
	select {
	case r := <-ch:
		t.Fatalf("a request for a leased device was answered at once: %+v %v", r.g.Device.ID, r.err)
	default:
	}
	if n := len(h.engine.Devices()); n != 2 {
		t.Fatalf("a targeted request made a device: %d devices", n)
	}
	if d, _ := h.engine.Device(gb.Device.ID); d.State != core.StateReady {
		t.Fatalf("the other device is %s", d.State)
	}
	h.engine.Release(ga.Lease.ID)
	r := <-ch
	if r.err != nil || r.g.Device.ID != ga.Device.ID {
		t.Fatalf("targeted request got %s, %v; want %s", r.g.Device.ID, r.err, ga.Device.ID)
	}
	_, err = h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "d", OwnerID: "d", DeviceID: "dev_nope"}, nil)
	if !errors.Is(err, core.ErrUnknownDevice) {
		t.Fatalf("a request for an unknown device: %v", err)
	}
}
