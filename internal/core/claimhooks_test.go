package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// claimWindows is a claim model in memory, the daemon's rule in miniature:
// a device is claimed from the hook that first names it (BeforeOp, or
// Created for a new one) until a successful shutdown or destroy. It notes
// how many driver calls had happened at each edge, so the test can tell
// whether every driver call on a device fell inside a claim.
type claimWindows struct {
	drvs []*fakedrv.Driver
	veto func(core.OpInfo) error

	mu      sync.Mutex
	open    map[string]int      // handle -> calls seen when its claim began
	windows map[string][][2]int // handle -> closed [from, to) call ranges
	refused int
}

func (c *claimWindows) calls() int {
	n := 0
	for _, d := range c.drvs {
		n += len(d.Calls())
	}
	return n
}

func (c *claimWindows) claim(op core.OpInfo) error {
	if op.Handle == "" {
		return nil // nothing on the platform to claim yet
	}
	if c.veto != nil {
		if err := c.veto(op); err != nil {
			c.refused++
			return err
		}
	}
	if _, ok := c.open[op.Handle]; !ok {
		c.open[op.Handle] = c.calls()
	}
	return nil
}

func (c *claimWindows) BeforeOp(_ context.Context, op core.OpInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claim(op)
}

func (c *claimWindows) Created(_ context.Context, op core.OpInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claim(op)
}

func (c *claimWindows) AfterOp(op core.OpInfo, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from, ok := c.open[op.Handle]
	if !ok || err != nil || (op.Kind != core.OpKindShutdown && op.Kind != core.OpKindDestroy) {
		return
	}
	delete(c.open, op.Handle)
	c.windows[op.Handle] = append(c.windows[op.Handle], [2]int{from, c.calls()})
}

// uncovered lists the driver calls on a device that happened outside
// every claim of it. Calls are numbered across drivers in the order the
// test reads them; each driver's log is in call order.
func (c *claimWindows) uncovered() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.calls()
	for h, from := range c.open {
		c.windows[h] = append(c.windows[h], [2]int{from, end})
	}
	var bad []string
	base := 0
	for _, d := range c.drvs {
		for i, call := range d.Calls() {
			verb, handle, _ := strings.Cut(call, " ")
			if verb == "provision" {
				continue // the creation itself: the device has no identity before it
			}
			in := false
			for _, w := range c.windows[handle] {
				if base+i >= w[0] && base+i < w[1] {
					in = true
				}
			}
			if !in {
				bad = append(bad, fmt.Sprintf("#%d %s", base+i, call))
			}
		}
		base += len(d.Calls())
	}
	return bad
}

// No device mutation skips a claim: every driver call on a device, over a
// life of provision, boot, purge, eviction, restart and reset, happens
// while the device is claimed; and a refused claim stops the operation
// before the driver hears of it.
func TestNoDeviceMutationSkipsAClaim(t *testing.T) {
	h := newHarness(t, one(1))
	cw := &claimWindows{drvs: []*fakedrv.Driver{h.drv}, open: map[string]int{}, windows: map[string][][2]int{}}
	build := func() {
		h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: h.store, Drivers: []core.Driver{h.drv, h.droid},
			Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus, Hooks: cw})
		if err := h.engine.Converge(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.engine.WaitIdle()
	}
	build()
	g, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Release(g.Lease.ID); err != nil { // purge
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	g2, err := h.lease("b", "Tablet") // evicts the Phone, provisions a Tablet
	if err != nil {
		t.Fatal(err)
	}
	h.drv.Crash(g2.Device.Handle)
	h.engine.Stop(context.Background())
	build() // the restart recovers the crashed leased device
	if _, err := h.engine.Maintenance().Nuke(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.engine.WaitIdle()
	if bad := cw.uncovered(); len(bad) > 0 {
		t.Fatalf("driver calls outside a claim: %v (calls %v)", bad, h.drv.Calls())
	}
	if n := len(h.drv.Calls()); n < 6 {
		t.Fatalf("the scenario exercised too little: %v", h.drv.Calls())
	}

}

// A claim refused before a boot fails the waiting request with the
// refusal, and the driver never touches the device.
func TestARefusedClaimFailsTheRequestBeforeTheDriver(t *testing.T) {
	h := newHarness(t, one(1))
	cw := &claimWindows{drvs: []*fakedrv.Driver{h.drv}, open: map[string]int{}, windows: map[string][][2]int{}}
	h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: h.store, Drivers: []core.Driver{h.drv, h.droid},
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus, Hooks: cw})
	if err := h.engine.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	g2, err := h.lease("b", "Tablet") // the Phone is shut down for it
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Release(g2.Lease.ID)
	h.engine.WaitIdle()
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateShutdown {
		t.Fatalf("the Phone is %s, want shutdown", d.State)
	}
	phone := g.Device.Handle
	cw.mu.Lock()
	cw.veto = func(op core.OpInfo) error {
		if op.Handle == phone {
			return fmt.Errorf("held: %w", core.ErrHeldElsewhere)
		}
		return nil
	}
	cw.mu.Unlock()
	before := len(h.drv.Calls())
	_, err = h.lease("c", "Phone")
	h.engine.WaitIdle()
	if !errors.Is(err, core.ErrHeldElsewhere) {
		t.Fatalf("a request whose device is held elsewhere got %v", err)
	}
	for _, call := range h.drv.Calls()[before:] {
		if strings.HasSuffix(call, " "+phone) {
			t.Fatalf("the driver ran %q on a device whose claim was refused", call)
		}
	}
	if cw.refused == 0 {
		t.Fatal("the claim was never asked")
	}
	if d, _ := h.engine.Device(g.Device.ID); d.State != core.StateQuarantined {
		t.Fatalf("a refused boot left the device %s, want quarantined (backoff, no hot loop)", d.State)
	}
}

// A device another owner on the host holds leaves the general pool: a
// request is served by another device, though the held one is warm and
// matches; once the holder lets go, the pool has it again.
func TestAForeignClaimKeepsADeviceOutOfThePool(t *testing.T) {
	h := newHarness(t, one(2))
	g, err := h.lease("a", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	h.engine.Host().SetForeignClaims(map[string]string{g.Device.ID: "home /b"})
	if who, ok := h.engine.Host().ForeignHolder(g.Device.ID); !ok || who != "home /b" {
		t.Fatalf("foreign holder %q %v", who, ok)
	}
	g2, err := h.lease("b", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if g2.Device.ID == g.Device.ID {
		t.Fatal("a device held by another owner on the host was granted")
	}
	if calls := h.drv.Calls(); anyCall(calls, "shutdown") || anyCall(calls, "destroy") {
		t.Fatalf("the engine acted on a foreign-held device: %v", calls)
	}
	h.engine.Release(g2.Lease.ID)
	h.engine.WaitIdle()
	h.engine.Host().SetForeignClaims(nil)
	g3, err := h.lease("c", "Phone")
	if err != nil {
		t.Fatal(err)
	}
	if g3.Device.ID != g.Device.ID && g3.Device.ID != g2.Device.ID {
		t.Fatalf("after the claim went, a third device %s was made", g3.Device.ID)
	}
}
