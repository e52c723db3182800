package e2e

// Managed device slots, issue 23: the deviations of the slots slice, each
// proved on the real binary and the simulated SDK.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// Reference, "Concepts": entering replacing consumes a generation, and a
// replacement is fenced for deletion before its empty binding. A daemon
// killed in the middle of a replace leaves the slot, as `slot list` shows
// it after the restart, replacing at the fenced generation (the journal
// still holds the step), not ready with the device the step deleted.
func TestConfSlotsAnInterruptedReplaceListsReplacing(t *testing.T) {
	w := newWorld(t, slotWorldConfig)
	log := filepath.Join(w.home, "commands.log")
	w.setEnv("SIMLOCK_SIMSDK_COMMAND_LOG", log)
	w.mustRun("daemon", "start")
	c := w.dial(t, "runner")
	res, tok := acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 15"))
	s1 := mustReady(t, res, contract.SlotCreated)
	releaseSlot(t, c, s1, tok)
	c.Close()
	w.mustRun("daemon", "stop")

	// Slow the SDK so the replacement's create takes seconds.
	w.setEnv("SIMLOCK_SIMSDK_SPEED", "0.2")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.mustRun("daemon", "start")
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(w.home, "daemon.pid"))))
	c = w.dial(t, "runner")
	go func() {
		_, _ = client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotConfig("runner-A", "boot-1", "iPhone 16"), OwnerToken: "doomed"})
	}()
	eventually(t, "the replacement's delete and create", 20*time.Second, func() bool {
		l := readFile(log)
		return strings.Contains(l, " delete ") && strings.Contains(l, " create ")
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon's death", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	c.Close()
	w.setEnv("SIMLOCK_SIMSDK_SPEED", "0")
	w.mustRun("daemon", "start")

	var list contract.SlotListOut
	w.json(&list, "slot", "list", "--json")
	if len(list.Assignments) != 1 {
		t.Fatalf("assignments: %+v", list)
	}
	a := list.Assignments[0]
	if a.State != "replacing" || a.AssignmentGeneration <= s1.AssignmentGeneration || a.LeaseID != "" {
		t.Fatalf("after an interrupted replace the slot lists %q at generation %d (bound at %d), lease %q; want replacing past it",
			a.State, a.AssignmentGeneration, s1.AssignmentGeneration, a.LeaseID)
	}
	// The retry converges, and the slot is ready again.
	c = w.dial(t, "runner")
	res, tok = acquireSlot(t, c, slotConfig("runner-A", "boot-1", "iPhone 16"))
	s2 := mustReady(t, res, contract.SlotReplaced)
	releaseSlot(t, c, s2, tok)
	w.json(&list, "slot", "list", "--json")
	if len(list.Assignments) != 1 || list.Assignments[0].State != "ready" {
		t.Fatalf("after the retry: %+v", list)
	}
}
