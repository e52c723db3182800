package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// Against the real daemon and the simulated SDK: a flood of slot.acquire
// for one slot, each execution with its own token on its own connection,
// has exactly one winner; every other is the retryable SLOT_IN_USE and the
// SDK creates the slot's simulator once. A foreign token can neither
// heartbeat nor release the winner's execution.
func TestSlotAcquireFloodHasOneWinnerAndForeignTokensChangeNothing(t *testing.T) {
	// Counts the slot's simulators by their simctl create: clone provisioning off, so no golden build adds one.
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":8}},"drivers":{"ios":{"clone":{"enabled":false}}}}`)
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	cfg := slotConfig("flood", "boot-1", "iPhone 15")
	const n = 6
	var wg sync.WaitGroup
	results := make([]contract.ManagedSlotsResult, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		c := w.dial(t, fmt.Sprintf("runner-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(60*time.Second))
			defer cancel()
			results[i], errs[i] = client.Do(ctx, c, contract.SlotAcquire, contract.SlotAcquireIn{Config: cfg, OwnerToken: fmt.Sprintf("flood-%d", i)})
		}()
	}
	wg.Wait()
	win := -1
	for i, r := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("acquire %d: %v", i, errs[i])
		case r.Outcome == contract.SlotOutcomeReady:
			if win >= 0 {
				t.Fatalf("acquires %d and %d both won the slot", win, i)
			}
			win = i
		case r.Failure == nil || r.Failure.Code != contract.CodeSlotInUse || !r.Failure.Retryable:
			t.Fatalf("acquire %d lost with %+v, want retryable SLOT_IN_USE", i, r.Failure)
		}
	}
	if win < 0 {
		t.Fatal("no acquire won the slot")
	}
	if c := len(matching(w.commandLog(logPath), "simctl", "create")); c != 1 {
		t.Fatalf("%d simulators created for one slot", c)
	}
	s := results[win].Slots[0]
	m := w.dial(t, "mallory")
	ctx := context.Background()
	if _, err := client.Do(ctx, m, contract.SlotHeartbeat, contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "flood-x"}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("a foreign heartbeat: %v", err)
	}
	if _, err := client.Do(ctx, m, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "flood-x"}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("a foreign release: %v", err)
	}
	if st := w.status(); len(st.Leases) != 1 || st.Leases[0].LeaseID != s.LeaseID {
		t.Fatalf("leases after the foreign calls %+v, want the winner's %s", st.Leases, s.LeaseID)
	}
	owner := w.dial(t, fmt.Sprintf("runner-%d", win))
	if _, err := client.Do(ctx, owner, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: fmt.Sprintf("flood-%d", win)}); err != nil {
		t.Fatalf("the owner's release: %v", err)
	}
}
