package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
)

// slotTestConfig names a scope of its own per test. Each slot test also
// gets a host registry of its own (isolateHost): the fake driver names
// devices ios-1, ios-2... in every daemon, so an assignment one test left
// in a shared registry could take the next test's device.
func slotTestConfig(t *testing.T, inc string) contract.SlotLaunchConfig {
	return contract.SlotLaunchConfig{ContractVersion: 1, ManagedHostScope: "h", RunnerNamespace: t.Name(), RunnerIncarnation: inc, LocalSlotCapacity: 1,
		Requests: []contract.SlotRequest{{SlotIndex: 0, Role: "main", Platform: "ios", RequestedSpec: contract.SlotSpec{Runtime: "18.0"}}}}
}

func acquireTestSlot(t *testing.T, c *client.Client, tok string) contract.SlotResult {
	t.Helper()
	res, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotTestConfig(t, "b1"), OwnerToken: tok})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != contract.SlotOutcomeReady {
		t.Fatalf("acquire: %+v", res.Failure)
	}
	return res.Slots[0]
}

// The idle window ends an execution at its next call, for good: the
// heartbeat answers MANAGED_EXECUTION_ENDED (idle, relaunch_execution),
// the lease is gone, and a new execution reuses the slot's device.
func TestAnIdleSlotExecutionEndsForGood(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} })
	c := f.dial("runner", "")
	s := acquireTestSlot(t, c, "tok-1")
	hb, err := client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"})
	if err != nil || hb.ExpiresAtMs == 0 {
		t.Fatalf("heartbeat inside the window: %+v %v", hb, err)
	}
	if _, err := client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "someone-else"}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("heartbeat with another token: %v", err)
	}
	x, ok := f.d.slots.exec(s.LeaseID)
	if !ok {
		t.Fatal("execution not tracked")
	}
	f.d.slots.mu.Lock()
	x.lastControl = x.lastControl.Add(-3 * time.Minute) // past the 2 min default
	f.d.slots.mu.Unlock()
	_, err = client.Do(context.Background(), c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"})
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeExecutionEnded || ce.NextAction != "relaunch_execution" || ce.Details["idle"] != true {
		t.Fatalf("heartbeat after the idle window: %v", err)
	}
	if _, live := f.d.engine.Lease(s.LeaseID); live {
		t.Fatal("the idle execution's lease is still live")
	}
	// Terminal: every later call says so too.
	if _, err := client.Do(context.Background(), c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"}); !client.IsCode(err, contract.CodeExecutionEnded) {
		t.Fatalf("release after the idle end: %v", err)
	}
	var s2 contract.SlotResult
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotTestConfig(t, "b1"), OwnerToken: "tok-2"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == contract.SlotOutcomeReady {
			s2 = res.Slots[0]
			break
		}
		// The idle release's reclaim may still hold the device.
		if time.Now().After(deadline) {
			t.Fatalf("relaunch: %+v", res.Failure)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s2.Disposition != contract.SlotReused || s2.Device.StableID != s.Device.StableID || s2.LeaseID == s.LeaseID {
		t.Fatalf("relaunch after idle: %+v", s2)
	}
	if _, err := client.Do(context.Background(), c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s2.LeaseID, OwnerToken: "tok-2"}); err != nil {
		t.Fatal(err)
	}
}

// A malformed launch config is an error before anything happens; a
// refused slot is an answer with the typed failure.
func TestSlotAcquireRefusals(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, nil)
	c := f.dial("runner", "")
	bad := slotTestConfig(t, "b1")
	bad.IdleTimeoutMs = 1000
	if _, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: bad, OwnerToken: "t"}); !client.IsCode(err, contract.CodeSlotConfigInvalid) {
		t.Fatalf("idle 1000: %v", err)
	}
	bad = slotTestConfig(t, "b1")
	bad.ContractVersion = 2
	if _, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: bad, OwnerToken: "t"}); !client.IsCode(err, contract.CodeContractUnsupported) {
		t.Fatalf("version 2: %v", err)
	}
	if len(f.d.engine.Devices()) != 0 {
		t.Fatal("a refused config made a device")
	}
	s := acquireTestSlot(t, c, "tok-a")
	res, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotTestConfig(t, "b1"), OwnerToken: "tok-b"})
	if err != nil || res.Outcome != contract.SlotOutcomeFailed || res.Failure.Code != contract.CodeSlotInUse || !res.Failure.Retryable {
		t.Fatalf("second execution: %+v %v", res, err)
	}
	// With the platform at its running limit, a new slot's device cannot
	// boot: CAPACITY_EXHAUSTED with the figures, before anything is made.
	other := slotTestConfig(t, "b1")
	other.RunnerNamespace = t.Name() + "-other"
	res, err = client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: other, OwnerToken: "tok-c"})
	if err != nil || res.Outcome != contract.SlotOutcomeFailed || res.Failure.Code != contract.CodeCapacityExhausted || res.Failure.Details["limit"] == nil || res.Failure.RetryAfterMs == nil {
		t.Fatalf("at the limit: %+v %v", res.Failure, err)
	}
	if n := len(f.d.engine.Devices()); n != 1 {
		t.Fatalf("%d devices after a capacity refusal", n)
	}
	if _, err := client.Do(context.Background(), c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "tok-a"}); err != nil {
		t.Fatal(err)
	}
}

// An acquisition waiting behind another one's reconciliation gives up at
// its own deadline, with a typed failure, and the slot stays free.
func TestASlotAcquisitionWaitsForAnotherOnlyUntilItsDeadline(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, nil)
	c := f.dial("runner", "")
	f.d.slots.acquiring <- struct{}{} // another reconciliation holds the daemon's turn
	cfg := slotTestConfig(t, "b1")
	cfg.PreparationTimeoutMs = 300
	res, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: cfg, OwnerToken: "tok-late"})
	if err != nil || res.Outcome != contract.SlotOutcomeFailed || res.Failure == nil || res.Failure.Code != contract.CodePreparationTimeout {
		t.Fatalf("acquisition past its deadline: %+v %v", res, err)
	}
	if len(f.d.engine.Devices()) != 0 {
		t.Fatal("a timed-out acquisition made a device")
	}
	<-f.d.slots.acquiring
	acquireTestSlot(t, c, "tok-next") // the slot was not left claimed
}
