package android

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/loopback"
	"github.com/simlock/simlock/internal/ports/fake"
)

// liveProber says every owner is alive with its home.
type liveProber struct{}

func (liveProber) ProcessStart(_ context.Context, pid int) (string, bool, error) {
	return "s" + strconv.Itoa(pid), true, nil
}
func (liveProber) HomeExists(context.Context, string) (bool, error) { return true, nil }

func hostPorts(t *testing.T, db *hostreg.DB, home string, pid int, free func(int, int) bool) *HostPorts {
	t.Helper()
	return &HostPorts{DB: db, Owner: hostreg.Owner{Home: home, PID: pid, Start: "s" + strconv.Itoa(pid)},
		Clock: fake.NewClock(testStart), Free: free}
}

func TestTwoHomesGetDistinctADBServerAndConsolePorts(t *testing.T) {
	ctx := context.Background()
	db, err := hostreg.OpenWithProber(ctx, t.TempDir(), liveProber{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	always := func(int, int) bool { return true }
	a := hostPorts(t, db, "/homes/a", 10, always)
	b := hostPorts(t, db, "/homes/b", 20, always)
	sa, _ := a.ADBServerPort(ctx)
	sb, _ := b.ADBServerPort(ctx)
	if sa == sb || sa == sharedADBServerPort || sb == sharedADBServerPort {
		t.Fatalf("adb server ports %d and %d", sa, sb)
	}
	if again, _ := a.ADBServerPort(ctx); again != sa {
		t.Fatalf("home a's adb server port moved from %d to %d", sa, again)
	}
	ca, err := a.ConsolePort(ctx, "simlock-x", 0)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.ConsolePort(ctx, "simlock-x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ca == cb || ca%2 != 0 || cb%2 != 0 || inScannedRange(ca) || inScannedRange(cb) {
		t.Fatalf("console ports %d and %d", ca, cb)
	}
	leased, err := a.LeasedPorts(ctx)
	if err != nil || !leased(cb+1) || leased(cb+2) {
		t.Fatalf("leased set wrong (err %v)", err)
	}
}

func TestConsolePortSkipsAPortAProgramHolds(t *testing.T) {
	ctx := context.Background()
	db, err := hostreg.OpenWithProber(ctx, t.TempDir(), liveProber{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A real listener on some even port's adb half.
	var l net.Listener
	base := 0
	for p := 20000; p < 20100 && l == nil; p += 2 {
		if loopback.Free(p, 2) {
			if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1)); err == nil {
				base = p
			}
		}
	}
	if l == nil {
		t.Skip("no free port pair to test with")
	}
	defer l.Close()
	if loopback.Free(base, 2) {
		t.Fatal("loopbackFree ignored a bound adb port")
	}
	h := hostPorts(t, db, "/homes/a", 10, nil)
	h.ConsoleBase = base
	got, err := h.ConsolePort(ctx, "simlock-y", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got == base {
		t.Fatalf("leased %d although %d is bound", got, base+1)
	}
}

func TestRecordedPortOfAnotherHomeFailsTheDevice(t *testing.T) {
	ctx := context.Background()
	db, err := hostreg.OpenWithProber(ctx, t.TempDir(), liveProber{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	always := func(int, int) bool { return true }
	other := hostPorts(t, db, "/homes/b", 20, always)
	taken, _ := other.ConsolePort(ctx, "simlock-z", 0)
	h := newHarness(t, func(o *Options) { o.Ports = &fixedADB{HostPorts: hostPorts(t, db, "/homes/a", 10, always)} })
	h.addAVD("simlock-t0001", &avdState{ConsolePort: taken})
	_, _, _, err = h.d.device(ctx, devRef("simlock-t0001", taken))
	if !errors.Is(err, errPortLost) {
		t.Fatalf("err %v, want errPortLost", err)
	}
	if st, _ := db.Ports(ctx); len(st) != 1 {
		t.Fatalf("the refused lease was kept: %+v", st)
	}
}

// fixedADB keeps the harness's adb server port at 5137.
type fixedADB struct{ *HostPorts }

func (fixedADB) ADBServerPort(context.Context) (int, error) { return DefaultADBServerPort, nil }

func TestADBServerEnvironmentSwitchesDiscoveryOff(t *testing.T) {
	h := newHarness(t)
	env := h.d.env()
	for _, want := range []string{"ADB_EMU=0", "ADB_USB=0", "ADB_MDNS=0", "ADB_MDNS_AUTO_CONNECT=", "ADB_LOCAL_TRANSPORT_MAX_PORT=5553"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q lacks %s", env, want)
		}
	}
}

func TestExternalRunningCountsBoundUnleasedScannedConsoles(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	before, err := h.d.ExternalRunning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	for p := externalConsoleLow; p <= externalConsoleHigh && l == nil; p += 2 {
		if loopback.Free(p, 1) {
			l, _ = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		}
	}
	if l == nil {
		t.Skip("every console port in the scanned range is taken")
	}
	defer l.Close()
	after, err := h.d.ExternalRunning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after < before+1 {
		t.Fatalf("ExternalRunning %d then %d with one more console bound", before, after)
	}
	if len(h.run.Unexpected) > 0 {
		t.Fatalf("ExternalRunning ran commands: %q", h.run.Unexpected)
	}
}

// A program that binds the pair between the allocator's bind check and the
// driver's hold does not fail the AVD: a new lease names nothing yet, so
// the driver hands it back and takes another.
func TestConsolePortTakenBeforeItIsHeldIsLeasedAgain(t *testing.T) {
	ctx := context.Background()
	db, err := hostreg.OpenWithProber(ctx, t.TempDir(), liveProber{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var l net.Listener
	base := 0
	for p := 20200; p < 20300 && l == nil; p += 2 {
		if loopback.Free(p, 4) {
			if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
				base = p
			}
		}
	}
	if l == nil {
		t.Skip("no free port pairs to test with")
	}
	defer l.Close()
	// The allocator's first look sees the pair free (the program binds it
	// just after); later looks see the truth.
	looked := false
	racy := func(p, n int) bool {
		if !looked && p == base {
			looked = true
			return true
		}
		return loopback.Free(p, n)
	}
	hp := hostPorts(t, db, "/homes/a", 10, racy)
	hp.ConsoleBase = base
	h := newHarness(t, func(o *Options) { o.Ports = &fixedADB{HostPorts: hp} })
	got, err := h.d.consolePort(ctx, "simlock-r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got == base {
		t.Fatalf("kept console port %d although another program bound it", base)
	}
	st, _ := db.Ports(ctx)
	n := 0
	for _, s := range st {
		if s.Lease.Serves == "simlock-r" {
			n++
			if s.Lease.Port != got {
				t.Fatalf("the registry leases %d to the AVD, the driver uses %d", s.Lease.Port, got)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d leases for the AVD, want 1: %+v", n, st)
	}
}
