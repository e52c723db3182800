package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
)

// isolateHost gives the test a host registry of its own: the fake
// driver's handles (ios-1, ...) repeat from daemon to daemon, so a slot
// assignment an earlier test left on ios-1 would hold this test's first
// device. (Real handles are host-unique UDIDs and AVD names.)
func isolateHost(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("SIMLOCK_HOST_DIR", dir)
	return dir
}

// Another client naming a slot execution's lease with its own token, on
// its own connection, can neither heartbeat nor release it (FORBIDDEN):
// the execution, its lease and the lease's expiry are as they were, and
// the owner's own calls still work.
func TestASlotExecutionRefusesAForeignOwnerToken(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} })
	ctx := context.Background()
	c, m := f.dial("runner", ""), f.dial("mallory", "")
	s := acquireTestSlot(t, c, "tok-own")
	before, _ := f.d.engine.Lease(s.LeaseID)
	for _, tok := range []string{"tok-foreign", ""} {
		if _, err := client.Do(ctx, m, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: tok}); !client.IsCode(err, contract.CodeForbidden) {
			t.Fatalf("heartbeat with token %q: %v", tok, err)
		}
		if _, err := client.Do(ctx, m, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: tok}); !client.IsCode(err, contract.CodeForbidden) {
			t.Fatalf("release with token %q: %v", tok, err)
		}
	}
	after, held := f.d.engine.Lease(s.LeaseID)
	if !held || !after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Fatalf("the execution's lease after the foreign calls: held %v, expiry %v (was %v)", held, after.ExpiresAt, before.ExpiresAt)
	}
	if x, ok := f.d.slots.Execution(s.LeaseID); !ok || x.Ended != nil {
		t.Fatalf("the execution after the foreign calls: tracked %v, %+v", ok, x)
	}
	// A plain release of the slot's lease is refused too, whoever asks.
	if _, err := client.Do(ctx, m, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: s.LeaseID}); err == nil {
		t.Fatal("another principal released the slot's lease through lease.release")
	}
	if _, err := client.Do(ctx, c, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "tok-own"}); err != nil {
		t.Fatalf("the owner's heartbeat: %v", err)
	}
	if _, err := client.Do(ctx, c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "tok-own"}); err != nil {
		t.Fatalf("the owner's release: %v", err)
	}
}

// A flood of slot.acquire for one slot, each with its own token over its
// own connection: exactly one execution wins, every other one is the
// retryable SLOT_IN_USE, and the slot's device is created once.
func TestASlotAcquireFloodHasOneWinner(t *testing.T) {
	isolateHost(t)
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} })
	const n = 8
	// A namespace of this run's own: the package's tests share one host
	// registry, and -count repeats this test's name.
	cfg := slotTestConfig(t, "b1")
	cfg.RunnerNamespace = fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	var wg sync.WaitGroup
	results := make([]contract.ManagedSlotsResult, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		c := f.dial(fmt.Sprintf("runner-%d", i), "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: cfg, OwnerToken: fmt.Sprintf("tok-%d", i)})
		}()
	}
	wg.Wait()
	winners := 0
	var lease string
	for i, r := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("acquire %d: %v", i, errs[i])
		case r.Outcome == contract.SlotOutcomeReady:
			winners++
			lease = r.Slots[0].LeaseID
		case r.Failure == nil || r.Failure.Code != contract.CodeSlotInUse || !r.Failure.Retryable:
			t.Errorf("acquire %d lost with %+v, want retryable SLOT_IN_USE", i, r.Failure)
		}
	}
	if winners != 1 {
		t.Fatalf("%d executions won the slot", winners)
	}
	provisions := 0
	for _, c := range f.drv.Calls() {
		if strings.HasPrefix(c, "provision") {
			provisions++
		}
	}
	if provisions != 1 || len(f.d.engine.Devices()) != 1 || len(f.d.engine.Leases()) != 1 {
		t.Fatalf("after the flood: %d provisions, %d devices, %d leases; want one of each", provisions, len(f.d.engine.Devices()), len(f.d.engine.Leases()))
	}
	if _, held := f.d.engine.Lease(lease); !held {
		t.Fatal("the winner's lease is not held")
	}
}
