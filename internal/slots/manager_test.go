package slots

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/testhost"
)

// managerHarness is a Manager over a real engine (one fake iOS driver, a
// store of its own) and a host registry of its own, without a daemon: what
// the manager decides, with nothing of the dispatcher, the claims or the
// host watcher around it.
type managerHarness struct {
	t   *testing.T
	m   *Manager
	eng *core.Engine
	reg *hostreg.DB
}

func newManagerHarness(t *testing.T, limits core.Limits) *managerHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "simlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	eng := core.New(core.Config{DefaultTTL: time.Hour, MaxTTL: time.Hour}, core.Deps{
		Clock: ports.SystemClock{}, Store: db, Drivers: []core.Driver{fakedrv.New("ios")},
		Strategy: core.FixedStrategy{L: limits}, Bus: events.New(100, time.Now),
		DiskFree: func() (uint64, error) { return 1 << 40, nil },
	})
	reg, err := hostreg.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	self, err := hostreg.Self(home)
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{Engine: eng, Desk: eng.Slots(), Ends: eng.Watch(), Named: eng.OneDevice(), Registry: reg, Self: self, Clock: ports.SystemClock{}, Logger: slog.New(slog.DiscardHandler),
		ToContract: func(err error) *contract.Error {
			if ce := contract.AsError(err); ce != nil {
				return ce
			}
			return contract.Errorf(contract.CodeInternal, "%v", err)
		}})
	if err := eng.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	m.Start(ctx)
	t.Cleanup(func() {
		cancel()
		eng.Stop(context.Background())
		reg.Close()
		db.Close()
	})
	return &managerHarness{t: t, m: m, eng: eng, reg: reg}
}

// slotTestConfig names a scope of its own per test.
func slotTestConfig(t *testing.T, inc string) contract.SlotLaunchConfig {
	return contract.SlotLaunchConfig{ContractVersion: 1, ManagedHostScope: "h", RunnerNamespace: t.Name(), RunnerIncarnation: inc, LocalSlotCapacity: 1,
		Requests: []contract.SlotRequest{{SlotIndex: 0, Role: "main", Platform: "ios", RequestedSpec: contract.SlotSpec{Runtime: "18.0"}}}}
}

// runner is the call of an execution's connection.
func runner() *dispatch.Call {
	return &dispatch.Call{Session: contract.Session{Principal: "runner", Role: contract.RoleAgent, Compatible: true}}
}

func (h *managerHarness) acquire(tok string) contract.SlotResult {
	h.t.Helper()
	res, err := h.m.Acquire(context.Background(), runner(), contract.SlotAcquireIn{Config: slotTestConfig(h.t, "b1"), OwnerToken: tok})
	if err != nil {
		h.t.Fatal(err)
	}
	if res.Outcome != contract.SlotOutcomeReady {
		h.t.Fatalf("acquire: %+v", res.Failure)
	}
	return res.Slots[0]
}

// The idle window ends an execution at its next call, for good: the
// heartbeat answers MANAGED_EXECUTION_ENDED (idle, relaunch_execution),
// the lease is gone, and a new execution reuses the slot's device.
func TestAnIdleSlotExecutionEndsForGood(t *testing.T) {
	h := newManagerHarness(t, core.Limits{MaxRunning: 2, MaxManaged: 4})
	ctx := context.Background()
	s := h.acquire("tok-1")
	hb, err := h.m.Heartbeat(ctx, runner(), contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"})
	if err != nil || hb.ExpiresAtMs == 0 {
		t.Fatalf("heartbeat inside the window: %+v %v", hb, err)
	}
	if _, err := h.m.Heartbeat(ctx, runner(), contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "someone-else"}); contract.AsError(err) == nil || contract.AsError(err).Code != contract.CodeForbidden {
		t.Fatalf("heartbeat with another token: %v", err)
	}
	x, ok := h.m.exec(s.LeaseID)
	if !ok {
		t.Fatal("execution not tracked")
	}
	h.m.mu.Lock()
	x.lastControl = x.lastControl.Add(-3 * time.Minute) // past the 2 min default
	h.m.mu.Unlock()
	_, err = h.m.Heartbeat(ctx, runner(), contract.SlotHeartbeatIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"})
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeExecutionEnded || ce.NextAction != "relaunch_execution" || ce.Details["idle"] != true {
		t.Fatalf("heartbeat after the idle window: %v", err)
	}
	if _, live := h.eng.Lease(s.LeaseID); live {
		t.Fatal("the idle execution's lease is still live")
	}
	// Terminal: every later call says so too.
	if _, err := h.m.Release(ctx, runner(), contract.SlotReleaseIn{LeaseID: s.LeaseID, OwnerToken: "tok-1"}); contract.AsError(err) == nil || contract.AsError(err).Code != contract.CodeExecutionEnded {
		t.Fatalf("release after the idle end: %v", err)
	}
	var s2 contract.SlotResult
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for {
		res, err := h.m.Acquire(ctx, runner(), contract.SlotAcquireIn{Config: slotTestConfig(t, "b1"), OwnerToken: "tok-2"})
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
	if _, err := h.m.Release(ctx, runner(), contract.SlotReleaseIn{LeaseID: s2.LeaseID, OwnerToken: "tok-2"}); err != nil {
		t.Fatal(err)
	}
}

// An acquisition waiting behind another one's reconciliation gives up at
// its own deadline, with a typed failure, and the slot stays free.
func TestASlotAcquisitionWaitsForAnotherOnlyUntilItsDeadline(t *testing.T) {
	h := newManagerHarness(t, core.Limits{MaxRunning: 1, MaxManaged: 2})
	h.m.acquiring <- struct{}{} // another reconciliation holds the daemon's turn
	cfg := slotTestConfig(t, "b1")
	cfg.PreparationTimeoutMs = 300
	res, err := h.m.Acquire(context.Background(), runner(), contract.SlotAcquireIn{Config: cfg, OwnerToken: "tok-late"})
	if err != nil || res.Outcome != contract.SlotOutcomeFailed || res.Failure == nil || res.Failure.Code != contract.CodePreparationTimeout {
		t.Fatalf("acquisition past its deadline: %+v %v", res, err)
	}
	if len(h.eng.Devices()) != 0 {
		t.Fatal("a timed-out acquisition made a device")
	}
	<-h.m.acquiring
	h.acquire("tok-next") // the slot was not left claimed
}
