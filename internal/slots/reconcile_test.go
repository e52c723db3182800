package slots

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/hostreg"
)

type prober struct{ alive map[int]string }

func (p *prober) ProcessStart(_ context.Context, pid int) (string, bool, error) {
	s, ok := p.alive[pid]
	return s, ok, nil
}
func (p *prober) HomeExists(context.Context, string) (bool, error) { return true, nil }

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { c.t = c.t.Add(time.Millisecond); return c.t }

// devices is a scripted inventory with a command log.
type devices struct {
	byID      map[string]Device
	n         int
	log       []string
	partial   bool
	failDel   bool
	ghostDel  bool // Destroy drops the record but the device stays listed
	noCap     bool
	noRestart bool     // MayRestart refuses: the platform is at its limit
	restarts  []string // devices MayRestart was asked about
	crashMade bool     // Create records the device, then "crashes" before returning
	names     []string
	home      string          // the daemon's home; "" is /home/a
	installed map[string]bool // device types the host has; nil: every one
	lists     int             // inventory reads
	// unrecorded are stable ids the listing shows that no record names
	// (a delete that did not take, seen by the proof of absence).
	unrecorded []string
}

// work is the log without its listings: the device work alone.
func (f *devices) work() []string {
	var out []string
	for _, l := range f.log {
		if l != "list" {
			out = append(out, l)
		}
	}
	return out
}

func newDevices() *devices { return &devices{byID: map[string]Device{}} }

func (f *devices) Home() string {
	if f.home != "" {
		return f.home
	}
	return "/home/a"
}

// List is one inventory read: it is logged as "list", like the SDK
// listing it stands for.
func (f *devices) List(_ context.Context, platform string) (map[string]bool, bool) {
	f.log = append(f.log, "list")
	f.lists++
	if f.partial {
		return nil, false
	}
	out := map[string]bool{}
	for _, d := range f.byID {
		if d.Platform == platform {
			out[d.StableID] = true
		}
	}
	for _, s := range f.unrecorded {
		out[s] = true
	}
	return out, true
}
func (f *devices) Find(_ context.Context, platform, stable string, present bool) (Device, bool) {
	for _, d := range f.byID {
		if d.StableID == stable && d.Platform == platform && present {
			return d, true
		}
	}
	return Device{}, false
}
func (f *devices) ByID(id string) (Device, bool) { d, ok := f.byID[id]; return d, ok }
func (f *devices) Create(_ context.Context, platform string, spec contract.SlotSpec, key, name string, recorded func(string) error) (Device, error) {
	f.n++
	d := Device{ID: fmt.Sprintf("dev_%d", f.n), StableID: fmt.Sprintf("UDID-%d", f.n), Name: name, Platform: platform, Resolved: spec}
	f.names = append(f.names, name)
	if err := recorded(d.ID); err != nil {
		return Device{}, err
	}
	f.byID[d.ID] = d
	f.log = append(f.log, "create "+d.StableID+" "+spec.DeviceType)
	if f.crashMade {
		return Device{}, errors.New("killed")
	}
	return d, nil
}
func (f *devices) Destroy(_ context.Context, d Device) error {
	if f.failDel {
		return errors.New("simctl delete failed")
	}
	if f.ghostDel {
		f.unrecorded = append(f.unrecorded, d.StableID)
	}
	delete(f.byID, d.ID)
	f.log = append(f.log, "delete "+d.StableID)
	return nil
}
func (f *devices) CheckSpec(_ context.Context, _ string, spec contract.SlotSpec) error {
	if f.installed != nil && !f.installed[spec.DeviceType] {
		return contract.Errorf(contract.CodeSpecUnsupported, "device type %q is not installed", spec.DeviceType)
	}
	return nil
}
func (f *devices) MayRestart(d Device) error {
	f.restarts = append(f.restarts, d.StableID)
	if f.noRestart {
		return contract.Errorf(contract.CodeCapacityExhausted, "at the limit").WithDetails("limit", 1, "booted", 1, "externalDevices", 0)
	}
	return nil
}

func (f *devices) MayBoot(_ context.Context, platform string, _ contract.SlotSpec, freeing *Device) error {
	if f.noCap && freeing == nil {
		return contract.Errorf(contract.CodeCapacityExhausted, "at the limit").WithDetails("limit", 1, "booted", 1, "externalDevices", 0)
	}
	return nil
}

type fixture struct {
	t    *testing.T
	db   *hostreg.DB
	devs *devices
	rec  *Reconciler
	pr   *prober
	clk  *clock
}

func newFixture(t *testing.T) *fixture {
	pr := &prober{alive: map[int]string{1: "s1", 2: "s2"}}
	db, err := hostreg.OpenWithProber(context.Background(), t.TempDir(), pr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clk := &clock{t: time.UnixMilli(1_800_000_000_000).UTC()}
	devs := newDevices()
	return &fixture{t: t, db: db, devs: devs, pr: pr, clk: clk, rec: &Reconciler{Reg: db, Devs: devs, Clock: clk}}
}

func (f *fixture) admit(inc string) string {
	f.t.Helper()
	key := contract.ScopeKey("host-1", "runner-A", inc)
	if _, err := f.db.AdmitScope(context.Background(), key, "host-1", "runner-A", inc, f.clk.Now()); err != nil {
		f.t.Fatal(err)
	}
	return key
}

func req(model string) contract.SlotRequest {
	return contract.SlotRequest{SlotIndex: 0, Role: "main", Platform: "android", RequestedSpec: contract.SlotSpec{Runtime: "android-36", DeviceType: model}}
}

// acquire runs one execution and releases it.
func (f *fixture) acquire(scope string, r contract.SlotRequest, tok string) (Outcome, error) {
	f.t.Helper()
	out, err := f.rec.Acquire(context.Background(), scope, r, hostreg.SlotOwner{Owner: hostreg.Owner{Home: "/home/a", PID: 1, Start: "s1"}, Token: tok})
	if rerr := f.db.ReleaseSlot(context.Background(), scope, r.SlotIndex, tok, false, f.clk.Now()); rerr != nil {
		var se *hostreg.SlotError
		if !errors.As(rerr, &se) {
			f.t.Fatal(rerr)
		}
	}
	return out, err
}

func TestReconcileCreateReuseRecreateReplaceAdopt(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil || o1.Disposition != contract.SlotCreated || o1.Record.Generation < 1 {
		t.Fatalf("first: %+v %v", o1, err)
	}
	if want := fmt.Sprintf("simlock-slot-%.8s-0-g1", scope); f.devs.names[0] != want {
		t.Fatalf("created device named %q, want %q", f.devs.names[0], want)
	}
	o2, err := f.acquire(scope, req("pixel_6"), "p2")
	if err != nil || o2.Disposition != contract.SlotReused || o2.Device.StableID != o1.Device.StableID {
		t.Fatalf("second: %+v %v", o2, err)
	}
	// Omitted fields are unconstrained: any runtime-only request matches.
	loose := req("")
	o3, err := f.acquire(scope, loose, "p3")
	if err != nil || o3.Disposition != contract.SlotReused || o3.Device.StableID != o1.Device.StableID {
		t.Fatalf("omitted deviceType: %+v %v", o3, err)
	}
	// Deleted out of band: recreated, still "reused" for the slot.
	delete(f.devs.byID, o1.Device.ID)
	o4, err := f.acquire(scope, req("pixel_6"), "p4")
	if err != nil || o4.Disposition != contract.SlotReused || o4.Device.StableID == o1.Device.StableID || o4.Record.Generation <= o1.Record.Generation {
		t.Fatalf("recreate: %+v %v", o4, err)
	}
	// A spec change replaces: delete, prove absence, then create.
	f.devs.log = nil
	o5, err := f.acquire(scope, req("pixel_7"), "p5")
	if err != nil || o5.Disposition != contract.SlotReplaced {
		t.Fatalf("replace: %+v %v", o5, err)
	}
	// One listing to decide (it also serves the pre-delete lookup), one
	// after the deletion to prove absence, and nothing more.
	want := []string{"list", "delete " + o4.Device.StableID, "list", "create " + o5.Device.StableID + " pixel_7"}
	if strings.Join(f.devs.log, ";") != strings.Join(want, ";") {
		t.Fatalf("replacement order %q, want %q", f.devs.log, want)
	}
	// A new incarnation retires boot-1 and adopts its device.
	scope2 := f.admit("boot-2")
	o6, err := f.acquire(scope2, req("pixel_7"), "p6")
	if err != nil || o6.Disposition != contract.SlotAdopted || o6.Device.StableID != o5.Device.StableID {
		t.Fatalf("adopt: %+v %v", o6, err)
	}
	if _, err := f.acquire(scope, req("pixel_7"), "late"); err == nil {
		t.Fatal("the retired incarnation acquired")
	} else if se := new(hostreg.SlotError); !errors.As(err, &se) || se.Reason != hostreg.RefuseScopeInvalidated {
		t.Fatalf("late proxy: %v", err)
	}
	if len(f.devs.byID) != 1 {
		t.Fatalf("devices leaked: %+v", f.devs.byID)
	}
}

func TestReplaceChecksCapacityBeforeDeleting(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	delete(f.devs.byID, o1.Device.ID) // nothing to free: the new device needs a boot of its own
	f.devs.noCap = true
	f.devs.log = nil
	_, err = f.acquire(scope, req("pixel_7"), "p2")
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeCapacityExhausted {
		t.Fatalf("want CAPACITY_EXHAUSTED, got %v", err)
	}
	if w := f.devs.work(); len(w) != 0 {
		t.Fatalf("device work before the capacity check: %q", w)
	}
}

// A replacement to a spec the host cannot serve is refused before the old
// device is touched: the slot keeps its device and its generation.
func TestReplaceToAnUninstalledSpecChangesNothing(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	f.devs.installed = map[string]bool{"pixel_6": true}
	f.devs.log = nil
	_, err = f.acquire(scope, req("pixel_404"), "p2")
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeSpecUnsupported {
		t.Fatalf("want SPEC_UNSUPPORTED, got %v", err)
	}
	if w := f.devs.work(); len(w) != 0 {
		t.Fatalf("device work for a spec the host cannot serve: %q", w)
	}
	if _, ok := f.devs.byID[o1.Device.ID]; !ok {
		t.Fatal("the old device was deleted")
	}
	o3, err := f.acquire(scope, req("pixel_6"), "p3")
	if err != nil || o3.Device.ID != o1.Device.ID || o3.Record.Generation != o1.Record.Generation {
		t.Fatalf("the slot did not keep its device and generation: %+v, %v (had %s gen %d)", o3.Record, err, o1.Device.ID, o1.Record.Generation)
	}
}

func TestPartialInventoryNeverReplaces(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	if _, err := f.acquire(scope, req("pixel_6"), "p1"); err != nil {
		t.Fatal(err)
	}
	f.devs.partial = true
	f.devs.log = nil
	_, err := f.acquire(scope, req("pixel_7"), "p2")
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeDiscoveryIncomplete {
		t.Fatalf("want DISCOVERY_INCOMPLETE, got %v", err)
	}
	if w := f.devs.work(); len(w) != 0 {
		t.Fatalf("device work from a partial inventory: %q", w)
	}
}

func TestFailedDeletionKeepsTheOldAssignmentCleanupPending(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	f.devs.failDel = true
	_, err = f.acquire(scope, req("pixel_7"), "p2")
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeCleanupPending {
		t.Fatalf("want CLEANUP_PENDING, got %v", err)
	}
	rec, _, _ := f.db.Slot(context.Background(), scope, 0)
	if rec.State != hostreg.SlotCleanupPending || rec.Device.StableID != o1.Device.StableID {
		t.Fatalf("slot after a failed deletion: %+v", rec)
	}
	// Once deletion works, the next acquire replaces.
	f.devs.failDel = false
	o3, err := f.acquire(scope, req("pixel_7"), "p3")
	if err != nil || o3.Disposition != contract.SlotReplaced {
		t.Fatalf("after cleanup: %+v %v", o3, err)
	}
	if len(f.devs.byID) != 1 {
		t.Fatalf("devices: %+v", f.devs.byID)
	}
}

// A daemon killed after the replacement device was made but before the
// binding: the retry of the same (scope, slot, spec) binds that device,
// creates nothing more, and leaves exactly one device.
func TestInterruptedReplacementConvergesToOneDevice(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	if _, err := f.acquire(scope, req("pixel_6"), "p1"); err != nil {
		t.Fatal(err)
	}
	f.devs.crashMade = true
	if _, err := f.rec.Acquire(context.Background(), scope, req("pixel_7"), hostreg.SlotOwner{Owner: hostreg.Owner{Home: "/home/a", PID: 1, Start: "s1"}, Token: "p2"}); err == nil {
		t.Fatal("the crash was not simulated")
	}
	f.devs.crashMade = false
	delete(f.pr.alive, 1) // the daemon died with the slot claimed
	made := f.devs.n
	out, err := f.rec.Acquire(context.Background(), scope, req("pixel_7"), hostreg.SlotOwner{Owner: hostreg.Owner{Home: "/home/a", PID: 2, Start: "s2"}, Token: "p3"})
	if err != nil || out.Disposition != contract.SlotReplaced {
		t.Fatalf("retry: %+v %v", out, err)
	}
	if f.devs.n != made || len(f.devs.byID) != 1 || out.Device.ID != fmt.Sprintf("dev_%d", made) {
		t.Fatalf("retry made %d more devices; inventory %+v", f.devs.n-made, f.devs.byID)
	}
	if open, _ := f.db.OpenIntents(context.Background()); len(open) != 0 {
		t.Fatalf("journal left open: %+v", open)
	}
}

func TestSpecMatchesTreatsOmittedFieldsAsUnconstrained(t *testing.T) {
	requested := contract.SlotSpec{Runtime: "iOS-27-0", DeviceType: "iPhone 16"}
	resolved := contract.SlotSpec{Runtime: "com.apple.CoreSimulator.SimRuntime.iOS-27-0", DeviceType: "com.apple.iPhone-16", DisplayCutout: "default"}
	for _, c := range []struct {
		req  contract.SlotSpec
		want bool
	}{
		{contract.SlotSpec{Runtime: "iOS-27-0"}, true},
		{contract.SlotSpec{Runtime: "com.apple.CoreSimulator.SimRuntime.iOS-27-0", DisplayCutout: "default"}, true},
		{contract.SlotSpec{Runtime: "iOS-27-0", DeviceType: "iPhone 17"}, false},
		{contract.SlotSpec{Runtime: "iOS-26-0"}, false},
	} {
		if got := SpecMatches("ios", c.req, "ios", requested, resolved); got != c.want {
			t.Errorf("%+v: %v, want %v", c.req, got, c.want)
		}
	}
	if SpecMatches("android", contract.SlotSpec{Runtime: "iOS-27-0"}, "ios", requested, resolved) {
		t.Error("matched across platforms")
	}
}

// Adopting from the free pool lists the inventory once, however many
// candidates it has to look at.
func TestAdoptionListsTheInventoryOnce(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	var made []Outcome
	for i := range 3 {
		r := req("pixel_6")
		r.SlotIndex = i
		o, err := f.acquire(scope, r, fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, o)
	}
	scope2 := f.admit("boot-2") // retires boot-1: its three devices go to the free pool
	if free, _ := f.db.FreePool(context.Background()); len(free) != 3 {
		t.Fatalf("free pool %+v", free)
	}
	// The first two candidates were deleted out of band.
	delete(f.devs.byID, made[0].Device.ID)
	delete(f.devs.byID, made[1].Device.ID)
	f.devs.lists = 0
	o, err := f.acquire(scope2, req("pixel_6"), "q")
	if err != nil || o.Disposition != contract.SlotAdopted || o.Device.StableID != made[2].Device.StableID {
		t.Fatalf("adopt: %+v %v", o, err)
	}
	if f.devs.lists != 1 {
		t.Fatalf("the adoption listed the inventory %d times, want 1", f.devs.lists)
	}
}

// The proof of absence after a deletion is a fresh listing, not the one
// the decision was made on: a device still listed after its delete keeps
// the old assignment cleanup_pending and nothing is created.
func TestAProofOfAbsenceIsAFreshListing(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	f.devs.ghostDel = true
	made := f.devs.n
	_, err = f.acquire(scope, req("pixel_7"), "p2")
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeCleanupPending {
		t.Fatalf("want CLEANUP_PENDING, got %v", err)
	}
	if f.devs.n != made {
		t.Fatal("created a device although the old one is still listed")
	}
	if rec, _, _ := f.db.Slot(context.Background(), scope, 0); rec.State != hostreg.SlotCleanupPending || rec.Device.StableID != o1.Device.StableID {
		t.Fatalf("slot %+v", rec)
	}
}

// Reusing the slot's own shut-down device at the platform's limit is
// refused at once with CAPACITY_EXHAUSTED, before anything is committed:
// the slot keeps its device. A running device is reused without asking.
func TestReuseOfAShutDownDeviceAtTheLimitIsRefusedAtOnce(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	running := o1.Device
	running.Running = true
	f.devs.byID[running.ID] = running
	f.devs.noRestart = true
	if _, err := f.acquire(scope, req("pixel_6"), "p2"); err != nil || len(f.devs.restarts) != 0 {
		t.Fatalf("reuse of a running device: %v (asked about %q)", err, f.devs.restarts)
	}
	f.devs.byID[running.ID] = o1.Device // shut down
	f.devs.log = nil
	_, err = f.acquire(scope, req("pixel_6"), "p3")
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeCapacityExhausted {
		t.Fatalf("want CAPACITY_EXHAUSTED, got %v", err)
	}
	if len(f.devs.restarts) != 1 || f.devs.restarts[0] != o1.Device.StableID {
		t.Fatalf("MayRestart asked about %q, want [%s]", f.devs.restarts, o1.Device.StableID)
	}
	if w := f.devs.work(); len(w) != 0 {
		t.Fatalf("device work for a refused reuse: %q", w)
	}
}

// Reference, "Error codes": each failure "carries retryable and a
// nextAction", and discovery_incomplete is for a partial inventory. A slot
// whose device lives in another home's root is refused for good here, as
// DEVICE_OUTSIDE_MANAGED_SLOTS (reason host), and its message and next
// step both name the home whose daemon serves the slot; nothing is deleted
// or created (ADR 0069).
func TestConfSlotADeviceInAnotherHomeIsRefusedNotRetried(t *testing.T) {
	f := newFixture(t)
	scope := f.admit("boot-1")
	o1, err := f.acquire(scope, req("pixel_6"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	// Through another home's daemon: its inventory has no such device.
	f.devs.home = "/home/b"
	delete(f.devs.byID, o1.Device.ID)
	f.devs.log = nil
	_, err = f.acquire(scope, req("pixel_6"), "p2")
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeDeviceOutsideSlots || ce.Info().Retryable || ce.Details["reason"] != "host" {
		t.Fatalf("a device in another home: %v", err)
	}
	if !strings.Contains(ce.Message, "/home/a") || !strings.Contains(ce.NextAction, "/home/a") || ce.Details["deviceHome"] != "/home/a" {
		t.Fatalf("message %q and next %q must both name the device's home", ce.Message, ce.NextAction)
	}
	if w := f.devs.work(); len(w) != 0 {
		t.Fatalf("device work for a slot of another home: %v", w)
	}
}
