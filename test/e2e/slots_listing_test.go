package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// A spec change replaces the slot's simulator with two listings of the
// device set of its own, as the simulated SDK's command log shows: one to
// decide (which also finds the old device to delete) and one after the
// delete to prove it gone, before the create. The health monitor and cleanup are slowed
// out of the window so the count is the reconciliation's alone.
func TestASlotReplaceListsTheDeviceSetTwice(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":8}},"health":{"intervalMs":3600000,"stableObservations":2,"maxRecoveryAttempts":3},"cleanup":{"intervalMs":3600000,"idleShutdownMs":1800000,"idleDestroyMs":86400000}}`)
	log := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+log)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	res, tok := acquireSlot(t, c, slotConfig("lister", "boot-1", "iPhone 15"))
	s1 := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, c, s1, tok)
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, tok = acquireSlot(t, c, slotConfig("lister", "boot-1", "iPhone 16"))
	s2 := mustReady(t, res, contract.SlotReplaced)
	// The goldens' device set (clone provisioning, on by default) is not
	// the slot's: a golden built meanwhile makes its own calls there.
	var lines []string
	for _, l := range w.commandLog(log) {
		if !strings.Contains(l, "/.golden ") {
			lines = append(lines, l)
		}
	}
	lists := matching(lines, "simctl", "list", "devices")
	del := matching(lines, "simctl", " delete ", s1.Device.StableID)
	create := matching(lines, "simctl", " create ")
	if len(del) != 1 || len(create) != 1 || del[0] > create[0] {
		t.Fatalf("delete at %v, create at %v:\n%s", del, create, strings.Join(lines, "\n"))
	}
	// The driver's delete makes its own checks (a shutdown and a listing
	// in front of simctl delete); those are the driver's, not counted.
	work := del[0]
	if sd := matching(lines, "simctl", " shutdown ", s1.Device.StableID); len(sd) > 0 && sd[0] < work {
		work = sd[0]
	}
	var before, between int
	for _, i := range lists {
		switch {
		case i < work:
			before++
		case i > del[0] && i < create[0]:
			between++
		}
	}
	if before != 1 || between != 1 {
		t.Fatalf("device-set listings: %d before the old device's deletion began, %d between delete and create; want 1 and 1:\n%s", before, between, strings.Join(lines, "\n"))
	}
	releaseSlot(t, c, s2, tok)
}
