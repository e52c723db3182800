package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/slots"
	"github.com/simlock/simlock/internal/testhost"
)

// An idle host whose slots were never used reads no slot table: the
// daemon follows the registry's slot counter on the host watcher's
// one-row poll, so it reads the tables once at start and then only after
// some daemon of the host made a slot decision.
func TestAnIdleHostReadsNoSlotTables(t *testing.T) {
	dir := isolateHost(t)
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Host.PollIntervalMs = 50 })
	ctx := context.Background()
	// Two reads are due: the start-up one, then the host watcher's first
	// pass (it starts knowing no slot counter). Waiting for both, rather
	// than sleeping, keeps a slow first pass on a loaded machine from
	// landing in the idle window below.
	eventually(t, "the start-up read and the watcher's first pass", func() bool { return f.d.slots.Refreshes() >= 2 })
	before := f.d.slots.Refreshes()
	time.Sleep(2500 * time.Millisecond) // longer than the old 2 s slot poll
	if n := f.d.slots.Refreshes(); n != before {
		t.Fatalf("an idle host read the slot tables %d more times in 2.5 s", n-before)
	}
	if f.d.slots.InUse() {
		t.Fatal("a host with no scope counts as using slots (the abandonment sweep would run)")
	}
	// Another daemon's slot decision reaches this one through the poll.
	other, err := hostreg.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	key := contract.ScopeKey("h", t.Name(), "b1")
	if _, err := other.AdmitScope(ctx, key, "h", t.Name(), "b1", time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a refresh after another daemon's slot decision", func() bool {
		return f.d.slots.Refreshes() > before && f.d.slots.InUse()
	})
}

// stillTimers is the wall clock whose After never fires: a wait that
// polls on a timer never wakes, one that blocks on the engine's signal
// does. (AfterFunc stays real: the engine's lease timers use it.)
type stillTimers struct{ ports.SystemClock }

func (stillTimers) After(time.Duration) <-chan time.Time { return nil }

// slot.release waits for the device's released work by blocking on the
// engine's op-freed signal: with timers that never fire, it still answers
// reusable_for_this_slot as soon as the reset settled.
func TestASlotReleaseWakesWhenTheDeviceSettles(t *testing.T) {
	isolateHost(t)
	f := startDaemonWith(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} },
		func(o *Options) { o.Clock = stillTimers{} })
	c := f.dial("runner", "")
	for i, tok := range []string{"tok-1", "tok-2"} {
		s := acquireTestSlot(t, c, tok)
		type answer struct {
			out contract.SlotReleaseOut
			err error
		}
		got := make(chan answer, 1)
		go func() {
			out, err := client.Do(context.Background(), c, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: tok})
			got <- answer{out, err}
		}()
		select {
		case a := <-got:
			if a.err != nil || a.out.Outcome != slots.OutcomeReusable {
				t.Fatalf("release %d: %+v %v", i, a.out, a.err)
			}
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Fatalf("release %d never answered: its wait did not wake when the device settled", i)
		}
	}
}

// A daemon that re-owns a slot execution after a restart applies the idle
// window the execution was started with, not the default.
func TestARehydratedSlotExecutionKeepsItsConfiguredIdleWindow(t *testing.T) {
	dir := isolateHost(t)
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} })
	c := f.dial("runner", "")
	cfg := slotTestConfig(t, "b1")
	cfg.IdleTimeoutMs = 7 * 60_000
	res, err := client.Do(context.Background(), c, contract.SlotAcquire, contract.SlotAcquireIn{Config: cfg, OwnerToken: "tok-1"})
	if err != nil || res.Outcome != contract.SlotOutcomeReady {
		t.Fatalf("acquire: %+v %v", res, err)
	}
	s := res.Slots[0]
	if x, ok := f.d.slots.Execution(s.LeaseID); !ok || x.Idle != 7*time.Minute {
		t.Fatalf("the execution's idle window before the restart: %+v", x)
	}
	c.Close()
	key := contract.ScopeKey(cfg.ManagedHostScope, cfg.RunnerNamespace, cfg.RunnerIncarnation)
	restartDaemonAs(t, f, dir, key, s.LeaseID)
	x, ok := f.d.slots.Execution(s.LeaseID)
	if !ok {
		t.Fatal("the execution was not rehydrated")
	}
	if x.Idle != 7*time.Minute {
		t.Fatalf("rehydrated with an idle window of %v, want the configured 7m0s", x.Idle)
	}
	c2 := f.dial("runner", "")
	if _, err := client.Do(context.Background(), c2, contract.SlotRelease, contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"}); err != nil {
		t.Fatal(err)
	}
}

// restartDaemonAs restarts f's daemon as a new process would: in between,
// the slot's owner record is moved to a daemon pid that no longer runs (a
// restart in this test process keeps its pid, and rehydration skips an
// execution this very process still owns).
func restartDaemonAs(t *testing.T, f *fixture, hostDir, scope, leaseID string) {
	t.Helper()
	cfg := f.d.cfg
	drv, _ := f.d.engine.Driver("ios")
	f.d.Stop()
	ctx := context.Background()
	db, err := hostreg.OpenWithProber(ctx, hostDir, deadProber{})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := db.Slot(ctx, scope, 0)
	if err != nil || !ok || rec.Owner == nil {
		t.Fatalf("slot record before the restart: %+v %v", rec, err)
	}
	gone := rec.Owner.Owner
	gone.PID, gone.Start = 1<<30, "gone"
	if _, err := db.ReownSlot(ctx, scope, 0, leaseID, gone); err != nil {
		t.Fatal(err)
	}
	db.Close()
	d, err := Start(ctx, Options{Home: f.home, Config: cfg, Version: "test", Drivers: []core.Driver{drv}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	f.d = d
	select {
	case <-d.readyCh:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the restarted daemon never became ready")
	}
}

// deadProber proves every process dead.
type deadProber struct{}

func (deadProber) ProcessStart(context.Context, int) (string, bool, error) { return "", false, nil }
func (deadProber) HomeExists(context.Context, string) (bool, error)        { return true, nil }
