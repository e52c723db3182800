package daemon

import (
	"context"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
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
