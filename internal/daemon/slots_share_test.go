package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/testhost"
)

// acquireNS runs slot.acquire for slot 0 of namespace ns.
func acquireNS(t *testing.T, c *client.Client, ns, tok string) contract.ManagedSlotsResult {
	t.Helper()
	cfg := slotTestConfig(t, "b1")
	cfg.RunnerNamespace = t.Name() + "-" + ns
	res, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: cfg, OwnerToken: tok})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) deviceState(id string) core.DeviceState {
	f.t.Helper()
	d, ok := f.d.engine.Device(id)
	if !ok {
		f.t.Fatalf("device %s was forgotten", id)
	}
	return d.State
}

// waitReady waits for the released execution's device to be ready again.
func (f *fixture) waitReady(id string) {
	f.t.Helper()
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for f.deviceState(id) != core.StateReady {
		if time.Now().After(deadline) {
			f.t.Fatalf("device %s is %s, want ready", id, f.deviceState(id))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slots.maxDevicesPerPrincipal: a principal's next slot execution beyond
// the bound shuts down that principal's own least recently released idle
// slot device (never another principal's, never one with a live
// execution), and with every one live it is refused CAPACITY_EXHAUSTED
// naming the bound, having made nothing.
func TestThePerPrincipalBoundShutsDownOwnIdleSlotDevicesFirst(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, func(c *config.Config) {
		c.Capacity.Fixed = config.Fixed{MaxRunning: 6, MaxManaged: 8}
		c.Slots.MaxDevicesPerPrincipal = 2
	})
	agent, other := f.dial("agent", ""), f.dial("other", "")
	ctx := context.Background()
	var slots []contract.SlotResult
	for i, ns := range []string{"a", "b"} {
		res := acquireNS(t, agent, ns, fmt.Sprintf("tok-%d", i))
		if res.Outcome != contract.SlotOutcomeReady {
			t.Fatalf("%s: %+v", ns, res.Failure)
		}
		slots = append(slots, res.Slots[0])
	}
	// The other principal's idle slot device is not the agent's to stop.
	ores := acquireNS(t, other, "o", "tok-o")
	if ores.Outcome != contract.SlotOutcomeReady {
		t.Fatalf("other: %+v", ores.Failure)
	}
	if _, err := client.Do(ctx, other, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: ores.Slots[0].LeaseID, OwnerToken: "tok-o"}); err != nil {
		t.Fatal(err)
	}

	// Both of the agent's live: the third is refused and makes nothing.
	before := len(f.d.engine.Devices())
	res := acquireNS(t, agent, "c", "tok-c")
	if res.Outcome != contract.SlotOutcomeFailed || res.Failure.Code != contract.CodeCapacityExhausted || !res.Failure.Retryable ||
		res.Failure.Details["binding"] != "slots.maxDevicesPerPrincipal" || res.Failure.Details["limit"] != float64(2) || res.Failure.NextAction == "" {
		t.Fatalf("third live execution: %+v", res.Failure)
	}
	if n := len(f.d.engine.Devices()); n != before {
		t.Fatalf("a refused acquisition made a device: %d -> %d", before, n)
	}

	// Both released, a released first: the third shuts down a's device
	// (released longest ago) and only that one.
	for i, s := range slots {
		if _, err := client.Do(ctx, agent, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: fmt.Sprintf("tok-%d", i)}); err != nil {
			t.Fatal(err)
		}
		f.waitReady(s.Device.DeviceID)
		time.Sleep(5 * time.Millisecond) // distinct release times
	}
	res = acquireNS(t, agent, "c", "tok-c2")
	if res.Outcome != contract.SlotOutcomeReady {
		t.Fatalf("third after the releases: %+v", res.Failure)
	}
	if st := f.deviceState(slots[0].Device.DeviceID); st != core.StateShutdown {
		t.Fatalf("a's device is %s, want shut down", st)
	}
	if st := f.deviceState(slots[1].Device.DeviceID); st != core.StateReady {
		t.Fatalf("b's device is %s, want still ready (the bound needed one)", st)
	}
	if st := f.deviceState(ores.Slots[0].Device.DeviceID); st != core.StateReady {
		t.Fatalf("the other principal's idle device is %s, want ready", st)
	}
	if slot, ok := f.d.engine.Slots().AssignedSlot(slots[0].Device.DeviceID); !ok || slot == core.FreePoolSlot {
		t.Fatalf("a's device left its slot: %q %v", slot, ok)
	}
	// a's next execution boots its device again: b's idle one is shut
	// down for it, and the answer is a reuse.
	res = acquireNS(t, agent, "a", "tok-a2")
	if res.Outcome != contract.SlotOutcomeReady || res.Slots[0].Disposition != contract.SlotReused || res.Slots[0].Device.DeviceID != slots[0].Device.DeviceID {
		t.Fatalf("a's next execution: %+v %+v", res.Failure, res.Slots)
	}
	if st := f.deviceState(slots[1].Device.DeviceID); st != core.StateShutdown {
		t.Fatalf("b's device is %s, want shut down for a's", st)
	}
}

// A new slot device at the running limit gets its room the way a waiting
// request does: the least recently released idle slot device is shut down
// (it keeps its assignment), instead of CAPACITY_EXHAUSTED while nothing
// runs but idle devices.
func TestASlotCreateAtTheLimitShutsDownAnIdleSlotDevice(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, func(c *config.Config) {
		c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 6}
		c.Slots.MaxDevicesPerPrincipal = 8 // the running limit binds, not the bound
	})
	c := f.dial("runner", "")
	ctx := context.Background()
	var ids []string
	for i, ns := range []string{"a", "b"} {
		res := acquireNS(t, c, ns, fmt.Sprintf("tok-%d", i))
		if res.Outcome != contract.SlotOutcomeReady {
			t.Fatalf("%s: %+v", ns, res.Failure)
		}
		if _, err := client.Do(ctx, c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: res.Slots[0].LeaseID, OwnerToken: fmt.Sprintf("tok-%d", i)}); err != nil {
			t.Fatal(err)
		}
		f.waitReady(res.Slots[0].Device.DeviceID)
		ids = append(ids, res.Slots[0].Device.DeviceID)
		time.Sleep(5 * time.Millisecond)
	}
	res := acquireNS(t, c, "c", "tok-c")
	if res.Outcome != contract.SlotOutcomeReady || res.Slots[0].Disposition != contract.SlotCreated {
		t.Fatalf("a new slot beside two idle slot devices at the limit: %+v", res.Failure)
	}
	if f.deviceState(ids[0]) != core.StateShutdown || f.deviceState(ids[1]) != core.StateReady {
		t.Fatalf("after the create: a %s, b %s; want a shut down, b ready", f.deviceState(ids[0]), f.deviceState(ids[1]))
	}
	if c := f.d.engine.Capacity(); c.Global.Running > 2 {
		t.Fatalf("%d devices run at a limit of 2", c.Global.Running)
	}
}
