package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
)

// Until the daemon hands in a map of the devices managed slots hold, an
// idle device may be a slot's, so the engine hands out none: a request is
// refused with ErrAssignedUnknown (and its idempotency key is admitted
// again later, not replayed), the warm pool makes no device beside ones it
// cannot count, and the idle rules stop or delete nothing. The first map
// ends all of it.
func TestUnknownSlotAssignmentsHandOutNoDevice(t *testing.T) {
	h := withPolicies(t, one(3), func(c *core.Config) {
		c.Cleanup = core.CleanupPolicy{Interval: -1, IdleShutdown: time.Minute, IdleDestroy: time.Hour}
	})
	// Two idle devices: a Phone a warm target would count, a Tablet the
	// idle rules would stop and then delete.
	var idle []string
	for _, model := range []string{"Phone", "Tablet"} {
		g, err := h.lease("a-"+model, model)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		idle = append(idle, g.Device.ID)
	}
	h.engine.WaitIdle()

	// A restart whose first read of the slot tables has not come yet (the
	// daemon marks the engine before it converges), with a warm target
	// the idle Phone would meet.
	h.cfg.WarmTargets = []core.WarmTarget{{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, Count: 1}}
	startUnknown(h)
	if devs := h.engine.Devices(); len(devs) != 2 {
		t.Fatalf("devices with the assignments unknown: %+v; want only %v (no warm device made)", devs, idle)
	}
	ctx := context.Background()
	keyed := core.Request{Spec: core.SpecRequest{Platform: "ios", Model: "Phone"}, RequesterID: "b", OwnerID: "b", IdempotencyKey: "k"}
	if _, err := h.engine.Request(ctx, keyed, nil); !errors.Is(err, core.ErrAssignedUnknown) {
		t.Fatalf("a request with the assignments unknown: %v; want ErrAssignedUnknown", err)
	}
	h.clock.Advance(2 * time.Hour) // past both idle rules
	if res, err := h.engine.Cleanup().RunCleanup(ctx, false, ""); err != nil || len(res) != 0 {
		t.Fatalf("cleanup with the assignments unknown: %+v %v; want nothing proposed", res, err)
	}
	for _, id := range idle {
		if d, ok := h.engine.Device(id); !ok || d.State != core.StateReady {
			t.Fatalf("idle device %s after cleanup: %+v %v", id, d, ok)
		}
	}

	h.engine.Slots().SetAssigned(map[string]string{}) // read: no slot holds it
	h.engine.WaitIdle()
	g2, err := h.engine.Request(ctx, keyed, nil)
	if err != nil || g2.Device.ID != idle[0] {
		t.Fatalf("the same key once the assignments are known: %v %v; want a grant of the idle Phone %s", g2.Device.ID, err, idle[0])
	}
}

// startUnknown restarts h's engine as a daemon does: over the same store
// and drivers, marked SetAssignedUnknown before it converges.
func startUnknown(h *harness) {
	h.t.Helper()
	h.bus = events.New(100, h.clock.Now)
	drivers := h.drivers
	if drivers == nil {
		drivers = []core.Driver{h.drv, h.droid}
	}
	h.engine = core.New(h.cfg, core.Deps{
		DiskFree: func() (uint64, error) { return h.disk, nil },
		Clock:    h.clock, Store: h.store, Drivers: drivers,
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus,
		NewID: func() string { h.ids++; return fmt.Sprintf("%04d", h.ids) },
	})
	h.engine.Slots().SetAssignedUnknown()
	if err := h.engine.Converge(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.engine.WaitIdle()
}
