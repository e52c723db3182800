package daemon

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/testhost"
)

// setSlotTablesReadable renames the slot_assignments table of the host
// registry in dir away, or back: SQLite then fails every read of the slot
// tables with "no such table", as for a damaged or half-migrated file,
// while claims and the rest of the registry still work.
func setSlotTablesReadable(t *testing.T, dir string, readable bool) {
	t.Helper()
	from, to := "slot_assignments", "slot_assignments_unreadable"
	if readable {
		from, to = to, from
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, hostreg.FileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("ALTER TABLE " + from + " RENAME TO " + to); err != nil {
		t.Fatal(err)
	}
}

// A daemon whose first read of the slot tables failed allocates nothing:
// lease.request and slot.acquire are refused with the retryable
// DISCOVERY_INCOMPLETE, a retry hint and a next step, and nothing is made.
// An acquisition reads the tables itself, so the first one after they are
// readable again goes through. A read failing after that keeps the map it
// had: the slot's idle device, which a restarted daemon knows only from
// the tables, stays its slot's, and a plain lease of its very spec gets
// another device.
func TestSlotTablesNeverReadRefuseAllocationAndALaterFailedReadKeepsTheMap(t *testing.T) {
	dir := isolateHost(t)
	ctx := context.Background()
	reg, err := hostreg.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	reg.Close()
	setSlotTablesReadable(t, dir, false)
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} })
	c := f.dial("runner", "")
	plain := contract.LeaseRequestIn{Platform: "ios", OSVersion: "18.0", RequesterID: "plain", NoWait: true}

	_, err = c.LeaseRequest(ctx, plain, nil)
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeDiscoveryIncomplete || !ce.Retryable || ce.RetryAfterMs == nil || *ce.RetryAfterMs <= 0 ||
		!strings.Contains(ce.NextAction, "slot tables") {
		t.Fatalf("a plain lease before the slot tables were ever read: %v; want a retryable DISCOVERY_INCOMPLETE with retryAfterMs and a next step", err)
	}
	res, err := client.Do(ctx, c, contract.SlotAcquire, contract.SlotAcquireIn{Config: slotTestConfig(t, "b1"), OwnerToken: "tok-1"})
	if err != nil || res.Outcome != contract.SlotOutcomeFailed || res.Failure == nil {
		t.Fatalf("a slot acquisition before the slot tables were ever read: %+v %v", res, err)
	}
	if fl := res.Failure; fl.Code != contract.CodeDiscoveryIncomplete || !fl.Retryable || fl.RetryAfterMs == nil || fl.NextAction == "" ||
		!strings.Contains(fl.Message, "no such table") || len(res.Slots[0].Decisions) != 1 || res.Slots[0].Decisions[0].Step != "discovery" {
		t.Fatalf("the acquisition's failure: %+v, decisions %+v", fl, res.Slots[0].Decisions)
	}
	if n := len(f.d.engine.Devices()); n != 0 {
		t.Fatalf("%d devices made while the slot tables were unreadable", n)
	}

	setSlotTablesReadable(t, dir, true)
	s := acquireTestSlot(t, c, "tok-2")
	if _, err := client.Do(ctx, c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "tok-2"}); err != nil {
		t.Fatal(err)
	}
	f.waitReady(s.Device.DeviceID)
	// A new daemon knows the slot's device only from the slot tables (the
	// one that made it remembers it as made), so its map is what is kept.
	restartDaemon(t, f, false)
	select {
	case <-f.d.readyCh: // its first read of the slot tables is done
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the restarted daemon never became ready")
	}
	c = f.dial("runner", "")

	setSlotTablesReadable(t, dir, false)
	if f.d.slots.Refresh(ctx) {
		t.Fatal("a refresh over the unreadable slot tables reported success")
	}
	if slot, ok := f.d.engine.Slots().AssignedSlot(s.Device.DeviceID); !ok || slot != hostreg.SlotKey(contract.ScopeKey("h", t.Name(), "b1"), 0) {
		t.Fatalf("after a failed read the slot's device is assigned to %q (%v); want its slot still", slot, ok)
	}
	l, err := c.LeaseRequest(ctx, plain, nil)
	if err != nil || l.DeviceID == s.Device.DeviceID {
		t.Fatalf("a plain lease after a failed read: %+v %v; the slot's device %s must stay out of the pool", l, err, s.Device.DeviceID)
	}
}
