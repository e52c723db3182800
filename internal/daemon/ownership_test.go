package daemon

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/hostreg"
)

// restartWith leases a device on a daemon, stops it, lets change rewrite
// the device's claim as a recovery would have while it was away, and
// starts the home again. It returns the restarted daemon (ready), the
// lease and the device's key and handle.
func restartWith(t *testing.T, change func(reg *hostreg.DB, key hostreg.Key, self hostreg.Owner)) (*Daemon, []string, contract.Lease, hostreg.Key, string) {
	t.Helper()
	home, err := os.MkdirTemp("", "sld-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: 1, MaxManaged: 2}
	drv := fakedrv.New("ios")
	start := func() *Daemon {
		d, err := Start(context.Background(), Options{Home: home, Config: cfg, Version: "test", Drivers: []core.Driver{drv}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ctx := context.Background()
	d := start()
	f := &fixture{t: t, d: d, home: home, drv: drv}
	la, err := f.dial("alice", "").LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(t, f, la.Device.ID)
	dev, _ := d.engine.Device(la.Device.ID)
	self := d.self
	d.Stop()
	reg, err := hostreg.Open(ctx, os.Getenv("SIMLOCK_HOST_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	change(reg, key, self)
	reg.Close()
	before := len(drv.Calls())
	d2 := start()
	t.Cleanup(func() { d2.Stop() })
	f.d = d2
	// A call parks on the readiness gate: once answered, the startup
	// check has run.
	if _, err := client.Do(ctx, f.dial("alice", ""), contract.LeaseList, contract.LeaseListIn{}); err != nil {
		t.Fatal(err)
	}
	d2.engine.WaitIdle()
	return d2, drv.Calls()[before:], la, key, dev.Handle
}

// lostReason is the reason the lease ended with, from the bus buffer.
func lostReason(d *Daemon, lease string) (released, lost string) {
	evs, _ := d.bus.Since(0)
	for _, e := range evs {
		switch {
		case e.Type == "lease.released" && e.LeaseID == lease:
			released = e.Reason
		case e.Type == "claim.lost" && e.LeaseID == lease:
			lost, _ = e.Data["deviceKey"].(string)
		}
	}
	return released, lost
}

// The restart-trust check (ADR 0059): another home claimed the device
// while this home's daemon was away, so the restored lease ends, as lost,
// naming the claim and the key, before the readiness gate opens; and the
// restarted daemon sent the driver nothing for the device.
func TestARestoredLeaseOnAnotherHomesClaimEndsBeforeTheGate(t *testing.T) {
	var other hostreg.Owner
	d, calls, la, key, handle := restartWith(t, func(reg *hostreg.DB, key hostreg.Key, self hostreg.Owner) {
		ctx := context.Background()
		if err := reg.Release(ctx, key, self); err != nil { // --stale cleared it...
			t.Fatal(err)
		}
		other = hostreg.Owner{Home: t.TempDir(), PID: os.Getpid(), Start: self.Start} // ...and another home leased it
		if err := reg.Claim(ctx, hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: "lse_c", Owner: other, ClaimedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	})
	// Ended before anyone was let in: the first call already finds no lease.
	if ls := d.engine.Leases(); len(ls) != 0 {
		t.Fatalf("restored leases %+v", ls)
	}
	released, lostKey := lostReason(d, la.LeaseID)
	if released != hostreg.ReasonClaimHeldElsewhere || lostKey != string(key) {
		t.Fatalf("lease.released reason %q, claim.lost key %q", released, lostKey)
	}
	if n, ok := contract.NoticeFor(contract.Event{Type: "lease.released", Reason: released}); !ok || n != contract.NotifyLeaseLost {
		t.Fatalf("no lease-lost notice for %q", released)
	}
	for _, c := range calls {
		if strings.HasSuffix(c, " "+handle) {
			t.Fatalf("the restarted daemon touched the other home's device: %v", calls)
		}
	}
	if st, ok := claimOf(t, d, key); !ok || st.Claim.Owner != other {
		t.Fatalf("the other home's claim was changed: %+v %v", st, ok)
	}
}

// A restored lease whose claim a recovery cleared (nobody holds it now)
// ends too, with the recovery's reason.
func TestARestoredLeaseWhoseClaimWasClearedEnds(t *testing.T) {
	d, _, la, key, _ := restartWith(t, func(reg *hostreg.DB, key hostreg.Key, self hostreg.Owner) {
		if err := reg.Release(context.Background(), key, self); err != nil {
			t.Fatal(err)
		}
	})
	if ls := d.engine.Leases(); len(ls) != 0 {
		t.Fatalf("restored leases %+v", ls)
	}
	if released, lostKey := lostReason(d, la.LeaseID); released != hostreg.ReasonClaimReleased || lostKey != string(key) {
		t.Fatalf("lease.released reason %q, claim.lost key %q", released, lostKey)
	}
}

// The ordinary restart keeps its lease: the claim names this home's
// previous daemon, dead, so it is adopted and trusted.
func TestARestoredLeaseOnItsHomesDeadDaemonsClaimIsKept(t *testing.T) {
	d, _, la, key, _ := restartWith(t, func(reg *hostreg.DB, key hostreg.Key, self hostreg.Owner) {
		ctx := context.Background()
		if err := reg.Release(ctx, key, self); err != nil {
			t.Fatal(err)
		}
		dead := hostreg.Owner{Home: self.Home, PID: 1 << 30, Start: "gone"}
		if err := reg.Claim(ctx, hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: "lse_prev", Owner: dead, ClaimedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	})
	if ls := d.engine.Leases(); len(ls) != 1 || ls[0].ID != la.LeaseID {
		t.Fatalf("restored leases %+v, want %s", ls, la.LeaseID)
	}
	if st, ok := claimOf(t, d, key); !ok || st.Claim.Owner != d.self {
		t.Fatalf("claim %+v", st)
	}
}

// At runtime: a claim this daemon holds is cleared and taken by another
// home (a --force while this daemon was hung); the host watcher ends the
// lease on it as lost, and the daemon leaves the device alone.
func TestTheWatcherEndsALeaseWhoseClaimAnotherHomeTook(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(t, f, la.Device.ID)
	dev, _ := f.d.engine.Device(la.Device.ID)
	st, ok := claimOf(t, f.d, key)
	if !ok {
		t.Fatal("no claim")
	}
	if _, err := f.d.host.ForceRelease(ctx, key, st); err != nil {
		t.Fatal(err)
	}
	other := hostreg.Owner{Home: t.TempDir(), PID: os.Getpid(), Start: f.d.self.Start}
	if err := f.d.host.Claim(ctx, hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: "lse_c", Owner: other, ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	before := len(f.drv.Calls())
	f.d.claims.Kick()
	eventually(t, "the lease to end as lost", func() bool {
		r, _ := lostReason(f.d, la.LeaseID)
		return r == hostreg.ReasonClaimHeldElsewhere
	})
	eventually(t, "the device to be out of the pool", func() bool {
		_, held := f.d.engine.Host().ForeignHolder(la.Device.ID)
		return held
	})
	f.d.engine.WaitIdle()
	for _, c := range f.drv.Calls()[before:] {
		if strings.HasSuffix(c, " "+dev.Handle) {
			t.Fatalf("the daemon touched the device another home holds: %v", f.drv.Calls()[before:])
		}
	}
	if cur, ok := claimOf(t, f.d, key); !ok || cur.Claim.Owner != other {
		t.Fatalf("the other home's claim was changed: %+v %v", cur, ok)
	}
}

// The daemon's reclaimer clears another home's dead owner's claim whose
// device cannot run (its root is gone), records and announces it, and
// leaves a live owner's claim and this home's own dead daemon's alone.
func TestTheReclaimerClearsOnlyOtherHomesProvenOrphans(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Host.PollIntervalMs = 50 })
	ctx := context.Background()
	f.dial("alice", "")
	if _, err := client.Do(ctx, f.dial("alice", ""), contract.LeaseList, contract.LeaseListIn{}); err != nil {
		t.Fatal(err)
	}
	key := func(u string) hostreg.Key {
		k, err := hostreg.IOSSimulatorKey(u)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	deadK, liveK, ownK := key("0000DEAD-0000-0000-0000-000000000001"), key("0000AAAA-0000-0000-0000-000000000002"), key("0000BBBB-0000-0000-0000-000000000003")
	dead := hostreg.Owner{Home: t.TempDir(), PID: 1 << 30, Start: "gone"} // home there, device root never made
	live := hostreg.Owner{Home: t.TempDir(), PID: os.Getpid(), Start: f.d.self.Start}
	ownDead := hostreg.Owner{Home: f.d.self.Home, PID: 1<<30 + 1, Start: "gone"}
	for k, o := range map[hostreg.Key]hostreg.Owner{deadK: dead, liveK: live, ownK: ownDead} {
		if err := f.d.host.Claim(ctx, hostreg.Claim{Key: k, Kind: hostreg.KindLease, LeaseID: "lse_x", Owner: o, ClaimedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the dead owner's claim to be reclaimed", func() bool {
		_, ok := claimOf(t, f.d, deadK)
		return !ok
	})
	var ev *struct{ reason, action, device string }
	evs, _ := f.d.bus.Since(0)
	for _, e := range evs {
		if e.Type == "claim.reclaimed" && e.Data["deviceKey"] == string(deadK) {
			ev = &struct{ reason, action, device string }{e.Reason, e.Data["action"].(string), e.Data["device"].(string)}
		}
	}
	if ev == nil || ev.reason != "dead" || ev.action != "cleared" || ev.device != "absent" {
		t.Fatalf("claim.reclaimed %+v", ev)
	}
	rep, err := hostreg.InspectReport(ctx, os.Getenv("SIMLOCK_HOST_DIR"), hostreg.SystemProber{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rep.Reclaimed {
		if r.Key == deadK && r.Owner.Home == dead.Home && r.By.Home == f.d.self.Home && r.LeaseID == "lse_x" {
			found = true
		}
	}
	if !found {
		t.Fatalf("reclaim not recorded: %+v", rep.Reclaimed)
	}
	// Several more passes leave the others alone.
	time.Sleep(300 * time.Millisecond)
	if _, ok := claimOf(t, f.d, liveK); !ok {
		t.Fatal("a live owner's claim was reclaimed")
	}
	if _, ok := claimOf(t, f.d, ownK); !ok {
		t.Fatal("this home's own dead daemon's claim was reclaimed by the watcher")
	}
}
