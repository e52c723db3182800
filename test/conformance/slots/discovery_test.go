package slots

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/test/harness"
)

// The slot tables are the host registry's record of which devices slots
// hold; a daemon reads them at start and again whenever a daemon of the
// host commits a slot decision. These tests make them unreadable the way a
// damaged or half-migrated registry would: slot_assignments is renamed
// away in host.db, so SQLite answers "no such table" for it while claims
// and everything else in the file still work. Renaming it back is the
// repair.

// The model the slot asks for and the plain leases ask for too: a plain
// lease that were allowed to use the slot's idle device would take it.
const discoveryModel = "iPhone 16"

// A daemon that read the slot tables once keeps that snapshot when a later
// read fails: another daemon's slot decision moves the registry's slot
// counter, the reread fails (the daemon says so in its log), and the
// slot's idle device, which this daemon knows only from its snapshot, is
// still out of the general pool, so a plain lease of its very spec gets
// another device. With the tables back, the slot's next execution reuses
// its device.
func TestSlotsAFailedReadOfTheSlotTablesKeepsTheLastGoodSnapshot(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "slots/12.7")
	w := harness.NewWorld(t, worldConfig)
	w.MustRun("daemon", "start")
	dev := idleSlotDevice(t, w)
	// A new daemon knows the slot's device only from the slot tables (the
	// daemon that made it also remembers it as made): its snapshot is what
	// a failed read must keep. Its slot list answers once that first read
	// is in.
	w.MustRun("daemon", "stop")
	w.MustRun("daemon", "start")
	var l0 slotList
	w.JSON(&l0, "slot", "list", "--json")
	if len(l0.Assignments) != 1 || l0.Assignments[0].Device == nil || l0.Assignments[0].Device.StableID != dev {
		t.Fatalf("the restarted daemon's slot list: %+v", l0)
	}

	before := failedSlotReads(t, w)
	setSlotTablesReadable(t, w, false)
	harness.Eventually(t, "the daemon to reread the slot tables and fail", 20*time.Second, func() bool {
		return failedSlotReads(t, w) > before
	})
	var l struct {
		LeaseID string `json:"leaseId"`
		Device  struct {
			UDID string `json:"udid"`
		} `json:"device"`
	}
	w.JSON(&l, "lease", "--platform", "ios", "--model", discoveryModel, "--os", "18.0", "--detach", "--ttl", "10m", "--timeout", "60s", "--json")
	if l.Device.UDID == "" || l.Device.UDID == dev {
		t.Fatalf("a plain lease while the slot tables are unreadable got %q; the slot's device is %s and must stay out of the pool", l.Device.UDID, dev)
	}
	w.MustRun("release", l.LeaseID)

	setSlotTablesReadable(t, w, true)
	p := startProxy(t, w, "--slot-config", launch("runner-A", "boot-1", discoveryModel, nil))
	if s := slot(p.initialize); p.initialize["outcome"] != "ready" || s["disposition"] != "reused" || str(s, "device", "stableId") != dev {
		t.Fatalf("the slot's next execution after the repair: %v; want %s reused", p.initialize, dev)
	}
}

// A daemon that has never read the slot tables cannot tell a slot's idle
// device from a free one, so it allocates nothing: a plain lease and a slot
// acquisition are both refused with the retryable DISCOVERY_INCOMPLETE,
// carrying a retry hint and a next step, and no device is made or handed
// out. Once the tables read again the daemon picks them up on its own (no
// slot decision needed), and both allocations go through, the slot's
// device never having been the plain lease's.
func TestSlotsSlotTablesNeverReadRefuseAllocationWithDiscoveryIncomplete(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "slots/12.7")
	w := harness.NewWorld(t, worldConfig)
	w.MustRun("daemon", "start")
	dev := idleSlotDevice(t, w)
	w.MustRun("daemon", "stop")
	setSlotTablesReadable(t, w, false)
	w.MustRun("daemon", "start")
	devices := deviceCount(t, w)

	lease := []string{"lease", "--platform", "ios", "--model", discoveryModel, "--os", "18.0", "--detach", "--ttl", "10m", "--timeout", "60s", "--json"}
	ref, r := w.Refused(lease...)
	if e := ref.Error; e.Code != "DISCOVERY_INCOMPLETE" || !e.Retryable || e.RetryAfterMs == nil || *e.RetryAfterMs <= 0 || e.NextAction == "" {
		t.Fatalf("a plain lease before the slot tables were ever read: %+v (exit %d); want a retryable DISCOVERY_INCOMPLETE with retryAfterMs and a next step", e, r.Code)
	}
	p := startProxy(t, w, "--slot-config", launch("runner-B", "boot-1", discoveryModel, nil))
	f, _ := p.initialize["failure"].(map[string]any)
	if p.initialize["outcome"] != "failed" || str(f, "code") != "DISCOVERY_INCOMPLETE" || f["retryable"] != true ||
		num(f, "retryAfterMs") <= 0 || str(f, "nextAction") == "" {
		t.Fatalf("a slot acquisition before the slot tables were ever read: %v; want failed, a retryable DISCOVERY_INCOMPLETE with retryAfterMs and a next step", p.initialize)
	}
	p.end()
	if n := deviceCount(t, w); n != devices {
		t.Fatalf("%d devices after the refusals, %d before: a refused allocation made one", n, devices)
	}

	setSlotTablesReadable(t, w, true)
	var granted struct {
		LeaseID string `json:"leaseId"`
		Device  struct {
			UDID string `json:"udid"`
		} `json:"device"`
	}
	harness.Eventually(t, "a plain lease once the slot tables read again", 20*time.Second, func() bool {
		r := w.Run(lease...)
		return r.Code == 0 && json.Unmarshal([]byte(r.Stdout), &granted) == nil
	})
	if granted.Device.UDID == "" || granted.Device.UDID == dev {
		t.Fatalf("the plain lease after the repair got %q; the slot's device is %s", granted.Device.UDID, dev)
	}
	w.MustRun("release", granted.LeaseID)
	p2 := startProxy(t, w, "--slot-config", launch("runner-A", "boot-1", discoveryModel, nil))
	if s := slot(p2.initialize); p2.initialize["outcome"] != "ready" || s["disposition"] != "reused" || str(s, "device", "stableId") != dev {
		t.Fatalf("the slot's next execution after the repair: %v; want %s reused", p2.initialize, dev)
	}
}

// idleSlotDevice runs one execution of runner-A's slot 0 to its end and
// returns the slot's device, assigned and idle.
func idleSlotDevice(t *testing.T, w *harness.World) string {
	t.Helper()
	p := startProxy(t, w, "--slot-config", launch("runner-A", "boot-1", discoveryModel, nil))
	dev := str(slot(p.initialize), "device", "stableId")
	if p.initialize["outcome"] != "ready" || dev == "" {
		t.Fatalf("the first execution: %v", p.initialize)
	}
	p.end()
	harness.Eventually(t, "the slot to be released and still assigned", 20*time.Second, func() bool {
		var l slotList
		w.JSON(&l, "slot", "list", "--json")
		return len(l.Assignments) == 1 && l.Assignments[0].LeaseID == "" && l.Assignments[0].Device != nil && l.Assignments[0].Device.StableID == dev
	})
	return dev
}

// setSlotTablesReadable renames slot_assignments away (or back) in the
// world's host registry, and moves the slot counter in the same
// transaction, as a daemon's slot decision does, so every daemon of the
// host rereads the tables.
func setSlotTablesReadable(t *testing.T, w *harness.World, readable bool) {
	t.Helper()
	from, to := "slot_assignments", "slot_assignments_unreadable"
	if readable {
		from, to = to, from
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(w.HostDir, hostreg.FileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []string{"ALTER TABLE " + from + " RENAME TO " + to, "UPDATE generation SET slots = slots + 1 WHERE id = 1"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// failedSlotReads counts the daemon log's lines for a failed read of the
// slot assignments.
func failedSlotReads(t *testing.T, w *harness.World) int {
	t.Helper()
	return strings.Count(w.MustRun("daemon", "logs"), `"msg":"read slot assignments"`)
}

// deviceCount is how many devices `simlock status` lists.
func deviceCount(t *testing.T, w *harness.World) int {
	t.Helper()
	var st struct {
		Devices []json.RawMessage `json:"devices"`
	}
	w.JSON(&st, "status", "--json")
	return len(st.Devices)
}
