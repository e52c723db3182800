package daemon

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/claims"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/testhost"
)

// countingStore counts the registry writes made through it and, while
// held, parks them until let go: a test can prove a path wrote nothing, or
// did not wait for a write.
type countingStore struct {
	claims.Store
	mu     sync.Mutex
	writes int
	hold   chan struct{} // non-nil: writes wait for it to close
}

func (s *countingStore) count() {
	s.mu.Lock()
	s.writes++
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
}

func (s *countingStore) Claim(ctx context.Context, c hostreg.Claim) error {
	s.count()
	return s.Store.Claim(ctx, c)
}

func (s *countingStore) Adopt(ctx context.Context, c hostreg.Claim) (hostreg.Claim, error) {
	s.count()
	return s.Store.Adopt(ctx, c)
}

func (s *countingStore) Release(ctx context.Context, k hostreg.Key, o hostreg.Owner) error {
	s.count()
	return s.Store.Release(ctx, k, o)
}

func (s *countingStore) MarkReleasing(ctx context.Context, k hostreg.Key, o hostreg.Owner) error {
	s.count()
	return s.Store.MarkReleasing(ctx, k, o)
}

func (s *countingStore) MarkReleaseFailed(ctx context.Context, k hostreg.Key, o hostreg.Owner, steps []string) error {
	s.count()
	return s.Store.MarkReleaseFailed(ctx, k, o, steps)
}

func (s *countingStore) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// wrapStore puts a counting store in front of the daemon's registry. It
// swaps under the claims' lock, which every write holds.
func wrapStore(d *Daemon) *countingStore {
	var cs *countingStore
	d.claims.WrapStore(func(s claims.Store) claims.Store {
		cs = &countingStore{Store: s}
		return cs
	})
	return cs
}

// claimOf reads key's claim as the host registry has it now.
func claimOf(t *testing.T, d *Daemon, key hostreg.Key) (hostreg.Status, bool) {
	t.Helper()
	st, err := d.host.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Key == key {
			return s, true
		}
	}
	return hostreg.Status{}, false
}

// eventually polls cond for up to five seconds (the lease writer runs in
// the background on the real clock).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func keyOf(t *testing.T, f *fixture, deviceID string) hostreg.Key {
	t.Helper()
	dev, ok := f.d.engine.Device(deviceID)
	if !ok {
		t.Fatalf("no device %s", deviceID)
	}
	k, err := f.d.claims.DeviceKey(dev.Platform, dev.Handle, dev.Attrs)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The claim follows the device: taken by the provision before the boot,
// holding the lease id once written, kept while the device runs idle, and
// cleared only by a successful shutdown (an eviction here); an operation
// on a device already claimed writes nothing.
func TestClaimsFollowTheDeviceLifecycle(t *testing.T) {
	f := startDaemon(t, nil) // one running device at most
	ctx := context.Background()
	a := f.dial("alice", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(t, f, la.Device.ID)
	eventually(t, "the lease id on the claim", func() bool {
		st, ok := claimOf(t, f.d, key)
		return ok && st.Claim.Kind == hostreg.KindLease && st.Claim.LeaseID == la.LeaseID
	})
	if st, _ := claimOf(t, f.d, key); st.Class != hostreg.ClassClaimed || st.Claim.Owner != f.d.self {
		t.Fatalf("claim %+v", st)
	}
	cs := wrapStore(f.d)
	if _, err := client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: la.LeaseID}); err != nil {
		t.Fatal(err)
	}
	f.d.engine.WaitIdle() // the purge ran on a device already claimed
	eventually(t, "the idle claim", func() bool {
		st, ok := claimOf(t, f.d, key)
		return ok && st.Claim.Kind == hostreg.KindTransient && st.Claim.Command == claims.IdleCommand
	})
	if n := cs.n(); n != 1 {
		t.Fatalf("the purge of a claimed device made %d registry writes, want 1 (the lease writer's)", n)
	}
	// Another model evicts the Phone: its claim goes, the new one's comes.
	lb, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Tablet", RequesterID: "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := f.d.engine.Device(la.Device.ID); d.State != core.StateShutdown {
		t.Fatalf("the Phone is %s", d.State)
	}
	if st, ok := claimOf(t, f.d, key); ok {
		t.Fatalf("a shut-down idle device keeps a claim: %+v", st)
	}
	if st, ok := claimOf(t, f.d, keyOf(t, f, lb.Device.ID)); !ok || st.Claim.Owner != f.d.self {
		t.Fatalf("the new device is not claimed: %+v", st)
	}
}

// A failed shutdown keeps the claim, marked release-failed with the step
// that failed, so nobody else takes a device in an unknown state.
func TestAFailedTeardownKeepsTheClaim(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(t, f, la.Device.ID)
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: la.LeaseID})
	f.d.engine.WaitIdle()
	f.drv.SetFail("shutdown", 1)
	go a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Tablet", RequesterID: "b"}, nil)
	eventually(t, "a release-failed claim", func() bool {
		st, ok := claimOf(t, f.d, key)
		return ok && st.Class == hostreg.ClassReleaseFailed && len(st.Claim.FailedSteps) == 1 && st.Claim.FailedSteps[0] == "shutdown"
	})
}

// The warm grant, the lease hot path, does no host-registry I/O: with every
// registry write held, a grant of a warm device returns at once and the
// registry's generation has not moved; the lease id reaches the claim
// record afterwards, from the background writer.
func TestAWarmGrantWritesNothingToTheHostRegistry(t *testing.T) {
	// A registry of its own: in the package's shared one, this daemon's
	// watcher reclaims the claims earlier tests' deleted homes left behind,
	// and those writes moved the generation during the grant.
	isolateHost(t)
	f := startDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(t, f, la.Device.ID)
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: la.LeaseID})
	f.d.engine.WaitIdle()
	// A lease that ended within the writer's delay left the record as the
	// provision wrote it: held, with no lease.
	eventually(t, "the idle claim", func() bool {
		st, ok := claimOf(t, f.d, key)
		return ok && st.Claim.Owner == f.d.self && st.Claim.LeaseID == ""
	})
	cs := wrapStore(f.d)
	cs.mu.Lock()
	cs.hold = make(chan struct{})
	cs.mu.Unlock()
	gen, err := f.d.host.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan contract.Lease, 1)
	go func() {
		out, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "warm"}, nil)
		if err != nil {
			t.Error(err)
		}
		granted <- out
	}()
	var lb contract.Lease
	select {
	case lb = <-granted:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("a warm grant waited for a host-registry write")
	}
	if lb.Device == nil || lb.Device.ID != la.Device.ID {
		t.Fatalf("not a warm grant: %+v", lb)
	}
	if g2, _ := f.d.host.Generation(ctx); g2 != gen {
		t.Fatalf("the host registry changed during a warm grant (generation %d -> %d)", gen, g2)
	}
	close(cs.hold)
	eventually(t, "the lease id on the claim, written in the background", func() bool {
		st, ok := claimOf(t, f.d, key)
		return ok && st.Claim.LeaseID == lb.LeaseID
	})
	if n := cs.n(); n != 1 {
		t.Fatalf("a warm grant cost %d registry writes in all, want the lease writer's one", n)
	}
}

// A device whose key another live owner holds: the provision that created
// it is refused at its claim point, the device is destroyed again without
// a boot, and the request fails with DEVICE_IN_USE and the owner's details.
func TestAForeignClaimRefusesBeforeThePlatformWithDeviceInUse(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	other := t.TempDir()
	// The fake's next device is ios-1; another home claims its UDID first.
	key, err := hostreg.IOSSimulatorKey(f.drv.UDID("ios-1"))
	if err != nil {
		t.Fatal(err)
	}
	foreign := hostreg.Owner{Home: other, PID: os.Getpid(), Start: f.d.self.Start}
	if err := f.d.host.Claim(ctx, hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: "lse_theirs", Owner: foreign, ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err = f.dial("alice", "").LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeDeviceInUse || ce.Retryable {
		t.Fatalf("want DEVICE_IN_USE, not retryable: %v", err)
	}
	owner, _ := ce.Details["owner"].(map[string]any)
	recovery, _ := ce.Details["recovery"].(map[string]any)
	if ce.Details["deviceKey"] != string(key) || ce.Details["classification"] != "live-owner" || ce.Details["reason"] != hostreg.ReasonHeld ||
		owner["home"] != other || owner["leaseId"] != "lse_theirs" || recovery["command"] == "" || ce.NextAction != recovery["command"] {
		t.Fatalf("details %#v next %q", ce.Details, ce.NextAction)
	}
	for _, c := range f.drv.Calls() {
		if c == "boot ios-1" {
			t.Fatalf("the driver booted a device another owner holds: %v", f.drv.Calls())
		}
	}
	if st, _ := claimOf(t, f.d, key); st.Claim.Owner != foreign {
		t.Fatalf("the foreign claim changed: %+v", st)
	}
}

// A restart takes back the claims its home's previous daemon left: here
// the record names a dead pid, and the restarted daemon, which still runs
// the device, owns the claim again with the lease on it.
func TestARestartTakesBackItsHomesClaims(t *testing.T) {
	home, err := os.MkdirTemp("", "sld-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
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
	self := d.self
	d.Stop()
	// The previous daemon "died": its record names a pid that is gone.
	reg, err := hostreg.Open(ctx, os.Getenv("SIMLOCK_HOST_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Release(ctx, key, self); err != nil {
		t.Fatal(err)
	}
	dead := hostreg.Owner{Home: self.Home, PID: 1 << 30, Start: "gone"}
	if err := reg.Claim(ctx, hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: la.LeaseID, Owner: dead, ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	reg.Close()

	d2 := start()
	defer d2.Stop()
	f.d = d2
	f.dial("alice", "") // waits for readiness
	eventually(t, "the claim taken back", func() bool {
		st, ok := claimOf(t, d2, key)
		return ok && st.Claim.Owner == d2.self && st.Claim.LeaseID == la.LeaseID
	})
	if _, err := client.Do(ctx, f.dial("alice", ""), contract.LeaseList, contract.LeaseListIn{}); err != nil {
		t.Fatal(err)
	}
}

// toContractError maps a claim conflict however deep it is wrapped.
func TestDeviceInUseIsMappedThroughWrapping(t *testing.T) {
	c := &hostreg.ConflictError{Reason: hostreg.ReasonHeld, Classification: hostreg.ClassClaimed, DeviceKey: "ios:udid:X",
		Owner: hostreg.ConflictOwner{Home: "/h", LeaseID: "lse_1", DaemonPID: 7, DaemonStartTime: "s"}, Recovery: "simlock --home /h device release ios:udid:X"}
	err := &core.DeviceFailedError{Phase: "boot", Err: errors.Join(core.ErrHeldElsewhere, c)}
	ce := toContractError(err)
	if ce.Code != contract.CodeDeviceInUse || ce.Retryable || ce.NextAction != c.Recovery {
		t.Fatalf("%+v", ce)
	}
	if r := classifyRefusal(err); r.Code != string(contract.CodeDeviceInUse) || r.Retryable {
		t.Fatalf("the stored refusal %+v", r)
	}
}

// Another home claims a device of this daemon that is shut down (so holds
// no claim of its own): once the watcher has seen it, the device is out
// of the pool, and a request for its spec is served by a new device
// instead of booting the held one.
func TestAForeignClaimSeenByTheWatcherKeepsADeviceOutOfThePool(t *testing.T) {
	f := startDaemon(t, nil) // one running device at most
	ctx := context.Background()
	a := f.dial("alice", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: la.LeaseID})
	f.d.engine.WaitIdle()
	lb, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Tablet", RequesterID: "b"}, nil)
	if err != nil { // the Phone is evicted: shut down, no claim
		t.Fatal(err)
	}
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: lb.LeaseID})
	f.d.engine.WaitIdle()
	phone := keyOf(t, f, la.Device.ID)
	if _, ok := claimOf(t, f.d, phone); ok {
		t.Fatal("the shut-down Phone still has a claim")
	}
	foreign := hostreg.Owner{Home: t.TempDir(), PID: os.Getpid(), Start: f.d.self.Start}
	if err := f.d.host.Claim(ctx, hostreg.Claim{Key: phone, Kind: hostreg.KindTransient, Command: "boot", Owner: foreign, ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f.d.claims.Kick()
	eventually(t, "the watcher to see the foreign claim", func() bool {
		_, held := f.d.engine.Host().ForeignHolder(la.Device.ID)
		return held
	})
	before := len(f.drv.Calls())
	lc, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone", RequesterID: "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Device.ID == la.Device.ID {
		t.Fatal("a device another home holds was booted and granted")
	}
	held, _ := f.d.engine.Device(la.Device.ID)
	for _, c := range f.drv.Calls()[before:] {
		if strings.HasSuffix(c, " "+held.Handle) {
			t.Fatalf("the driver touched the held device: %v", f.drv.Calls()[before:])
		}
	}
}

// lease.request device: served by the named device (by its host key, or
// by id, evicting a warm device to boot it), and refused with
// DEVICE_IN_USE, before the driver hears of it, when another owner holds
// that device.
func TestALeaseForOneDevice(t *testing.T) {
	f := startDaemon(t, nil) // one running device at most
	ctx := context.Background()
	a := f.dial("alice", "")
	l1, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l1.LeaseID})
	f.d.engine.WaitIdle()
	l2, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Tablet", RequesterID: "two"}, nil)
	if err != nil { // the Phone is evicted: shut down, no claim
		t.Fatal(err)
	}
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l2.LeaseID})
	f.d.engine.WaitIdle()
	k2 := keyOf(t, f, l2.Device.ID)
	got, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Device: string(k2), RequesterID: "by-key"}, nil)
	if err != nil || got.Device.ID != l2.Device.ID {
		t.Fatalf("by key: %+v %v", got.Device, err)
	}
	client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: got.LeaseID})
	f.d.engine.WaitIdle()

	// Another home claims the shut-down Phone: asking for it is
	// DEVICE_IN_USE, and nothing runs on any device.
	k1 := keyOf(t, f, l1.Device.ID)
	foreign := hostreg.Owner{Home: t.TempDir(), PID: os.Getpid(), Start: f.d.self.Start}
	if err := f.d.host.Claim(ctx, hostreg.Claim{Key: k1, Kind: hostreg.KindTransient, Command: "boot", Owner: foreign, ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	before := len(f.drv.Calls())
	_, err = a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Device: l1.Device.ID, RequesterID: "by-id"}, nil)
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeDeviceInUse || ce.Details["deviceKey"] != string(k1) {
		t.Fatalf("a device another home holds: %v", err)
	}
	if calls := f.drv.Calls()[before:]; len(calls) > 0 {
		t.Fatalf("the driver ran %v for a refused request", calls)
	}
	// Once the other home lets go, the Phone is served: the warm Tablet is
	// evicted for it, since only one device may run.
	if err := f.d.host.Release(ctx, k1, foreign); err != nil {
		t.Fatal(err)
	}
	got, err = a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Device: l1.Device.ID, RequesterID: "by-id"}, nil)
	if err != nil || got.Device.ID != l1.Device.ID {
		t.Fatalf("by id after the release: %+v %v", got.Device, err)
	}
	if d, _ := f.d.engine.Device(l2.Device.ID); d.State != core.StateShutdown {
		t.Fatalf("the Tablet is %s, want evicted", d.State)
	}
}

// A purge that erased the device and left it shut down ends like a
// shutdown: the claim goes, so other homes stop counting a device that no
// longer runs. One that failed keeps it.
func TestAPurgeThatLeftTheDeviceDownClearsTheClaim(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := f.d.engine.Device(la.Device.ID)
	key := keyOf(t, f, dev.ID)
	op := core.OpInfo{Kind: core.OpKindReclaim, Lock: "reclaim", DeviceID: dev.ID, Platform: dev.Platform, Handle: dev.Handle, Attrs: dev.Attrs, LeftDown: true}
	f.d.claims.Hooks().AfterOp(op, errors.New("erase failed"))
	if _, ok := claimOf(t, f.d, key); !ok {
		t.Fatal("a failed purge dropped the claim")
	}
	op.LeftDown = false
	f.d.claims.Hooks().AfterOp(op, nil)
	if _, ok := claimOf(t, f.d, key); !ok {
		t.Fatal("a purge that left the device running dropped the claim")
	}
	op.LeftDown = true
	f.d.claims.Hooks().AfterOp(op, nil)
	if st, ok := claimOf(t, f.d, key); ok {
		t.Fatalf("a purge that left the device shut down kept its claim: %+v", st)
	}
}
