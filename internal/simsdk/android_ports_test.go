package simsdk

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/loopback"
)

// freeConsole finds an even port in [from, to] whose pair is bindable now,
// so tests do not collide with emulators other test packages run. Callers
// pick ranges below the kernel's ephemeral ports (32768 and up on Linux):
// there any outgoing connection may take a port between the check and the
// emulator's bind.
func freeConsole(t *testing.T, from, to int) int {
	t.Helper()
	for p := from; p <= to; p += 2 {
		if ls, ok := loopback.Hold(p, 2); ok {
			loopback.Close(ls)
			return p
		}
	}
	t.Skipf("no free console port pair in %d–%d", from, to)
	return 0
}

// A simulated emulator really holds its console and adb ports: a second
// one, or any program holding either port, makes a -port launch fail with
// the emulator's own message, and a launch without -port take the next
// pair.
func TestEmulatorBindsItsPortsLikeTheRealOne(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	a.createAVD("one", hostImage(36, "google_apis"), "pixel_6")
	a.createAVD("two", hostImage(36, "google_apis"), "pixel_6")
	p := freeConsole(t, 26000, 26400)
	emu := a.startEmulator(emulatorArgs("one", strconv.Itoa(p))...)
	a.waitFor("the emulator to listen", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if ls, ok := loopback.Hold(p, 2); ok {
		loopback.Close(ls)
		t.Fatal("the console port of a running emulator can be bound")
	}
	emu.signal(15)
	emu.wait(waitLimit)

	// Another program holds only the adb port.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
	if err != nil {
		t.Skip("adb port taken meanwhile")
	}
	defer l.Close()
	r := a.run("emulator", emulatorArgs("two", strconv.Itoa(p))...)
	if r.code != 1 || !strings.Contains(r.stdout, "It seems too many emulator instances are running on this machine. Aborting.") {
		t.Fatalf("launch on a taken adb port: %+v", r)
	}
}

func devicesOf(t *testing.T, a *androidHarness, port string) string {
	t.Helper()
	return a.ok("adb", "-P", port, "devices")
}

// Two servers on two ports hold separate lists; discovery follows the
// environment the server started with: the emulator scan, USB and mDNS
// are on by default and off with ADB_EMU=0, ADB_USB=0, ADB_MDNS=0.
func TestADBServerDiscoveryAndSeparateServers(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	if err := SetAndroidHostDevices(a.home, []string{"R5CT30ABCDE"}, []string{"adb-R5CT30ABCDE-xYz12a._adb-tls-connect._tcp"}); err != nil {
		t.Fatal(err)
	}
	a.createAVD("mine", hostImage(36, "google_apis"), "pixel_6")
	a.createAVD("user", hostImage(36, "google_apis"), "pixel_6")

	// Server 5137, as simlock starts it: discovery off.
	for k, v := range map[string]string{"ADB_EMU": "0", "ADB_USB": "0", "ADB_MDNS": "0"} {
		a.env[k] = v
	}
	mine := freeConsole(t, 26500, 26900)
	a.startEmulator(emulatorArgs("mine", strconv.Itoa(mine))...)
	mineSerial := emulatorSerial(mine)
	a.waitFor("mine to register", func() bool { return a.deviceState(mineSerial) != "" })

	// A user's emulator in the scanned range, announced to the default
	// server 5037 (started with discovery on).
	for _, k := range []string{"ADB_EMU", "ADB_USB", "ADB_MDNS"} {
		delete(a.env, k)
	}
	a.env[envADBServerPort] = "5037"
	user := freeConsole(t, adbScanConsoleLow, adbScanConsoleHigh)
	a.startEmulator(emulatorArgs("user", strconv.Itoa(user))...)
	userSerial := emulatorSerial(user)
	a.waitFor("the user's emulator to register", func() bool { return a.deviceState(userSerial) != "" })

	shared := devicesOf(t, a, "5037")
	for _, want := range []string{userSerial, "R5CT30ABCDE\tdevice", "adb-R5CT30ABCDE-xYz12a._adb-tls-connect._tcp\tdevice"} {
		if !strings.Contains(shared, want) {
			t.Errorf("default server lacks %s:\n%s", want, shared)
		}
	}
	if strings.Contains(shared, mineSerial) {
		t.Errorf("default server lists %s, announced elsewhere outside the scanned range:\n%s", mineSerial, shared)
	}
	private := devicesOf(t, a, "5137")
	if !strings.Contains(private, mineSerial) {
		t.Errorf("private server lacks its own emulator:\n%s", private)
	}
	for _, not := range []string{userSerial, "R5CT30ABCDE", "_adb-tls-connect"} {
		if strings.Contains(private, not) {
			t.Errorf("private server (discovery off) lists %s:\n%s", not, private)
		}
	}
	// A third server started with discovery on finds the scanned emulator
	// and the physical devices, but not an emulator announced elsewhere.
	third := devicesOf(t, a, "5237")
	if !strings.Contains(third, userSerial) || !strings.Contains(third, "R5CT30ABCDE") || strings.Contains(third, mineSerial) {
		t.Errorf("server 5237:\n%s", third)
	}
	// A physical device is listed, not driven.
	if r := a.adb("-P", "5037", "-s", "R5CT30ABCDE", "shell", "true"); r.code != 1 || !strings.Contains(r.stderr, "simulated physical device") {
		t.Errorf("shell on a simulated USB phone: %+v", r)
	}
	// A scan ceiling below the range empties the scan.
	a.env["ADB_LOCAL_TRANSPORT_MAX_PORT"] = "5553"
	if out := devicesOf(t, a, "5337"); strings.Contains(out, userSerial) {
		t.Errorf("server with ADB_LOCAL_TRANSPORT_MAX_PORT=5553 scanned %s:\n%s", userSerial, out)
	}
}

// testProber answers liveness from a table: a pid not in it is dead.
type testProber struct {
	mu    sync.Mutex
	alive map[int]bool
}

func (p *testProber) ProcessStart(_ context.Context, pid int) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alive == nil || p.alive[pid] {
		return "s" + strconv.Itoa(pid), true, nil
	}
	return "", false, nil
}

func (p *testProber) HomeExists(context.Context, string) (bool, error) { return true, nil }

func openTestHost(t *testing.T, p hostreg.Prober) *hostreg.DB {
	t.Helper()
	if p == nil {
		p = &testProber{}
	}
	db, err := hostreg.OpenWithProber(context.Background(), t.TempDir(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func testHostPorts(t *testing.T, db *hostreg.DB, home string, pid int) *android.HostPorts {
	return &android.HostPorts{DB: db, Owner: hostreg.Owner{Home: home, PID: pid, Start: "s" + strconv.Itoa(pid)}}
}

// driverFor builds the real Android driver for one home against the
// simulated SDK, with its ports from hp; extraEnv goes to every tool it
// runs (a command log, say).
func driverFor(t *testing.T, a *androidHarness, root string, hp *android.HostPorts, extraEnv ...string) *android.Driver {
	t.Helper()
	env := append([]string(nil), extraEnv...)
	for _, kv := range a.childEnv() {
		if !strings.HasPrefix(kv, "ANDROID_") {
			env = append(env, kv)
		}
	}
	link := func(tool string) string { return filepath.Join(toolLinks, tool) }
	d, err := android.New(android.Options{
		Root: root, Ports: hp, Runner: envRunner{env: env},
		Tools:        android.Tools{ADB: link("adb"), Emulator: link("emulator"), AVDManager: link("avdmanager"), SDKManager: link("sdkmanager")},
		PollInterval: 20 * time.Millisecond, ShutdownGrace: 5 * time.Second, BootTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func bootOne(t *testing.T, d *android.Driver) (core.DeviceRef, string, string) {
	t.Helper()
	ctx := context.Background()
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	dev := core.DeviceRef{ID: "dev-" + p.Handle, Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	return dev, p.Attrs[core.AttrSerial], p.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"]
}

// Two homes' drivers on one host registry and one simulated host: distinct
// console ports and adb servers, each server holding only its own
// emulator; the host count of external emulators sees neither, and a
// restarted daemon takes its AVD's port back.
func TestTwoDriversShareAHostWithoutSharingPorts(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	prober := &testProber{alive: map[int]bool{1: true, 2: true}}
	db := openTestHost(t, prober)
	base := freeConsole(t, 27500, 27900)
	hpA, hpB := testHostPorts(t, db, "/homes/a", 1), testHostPorts(t, db, "/homes/b", 2)
	hpA.ConsoleBase, hpB.ConsoleBase = base, base
	rootA, rootB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	dA := driverFor(t, a, rootA, hpA)
	dB := driverFor(t, a, rootB, hpB)
	devA, serialA, portA := bootOne(t, dA)
	_, serialB, portB := bootOne(t, dB)
	if serialA == serialB || portA == portB || portA == "5037" || portB == "5037" {
		t.Fatalf("home a %s on %s, home b %s on %s", serialA, portA, serialB, portB)
	}
	for _, c := range []struct{ port, own, other string }{{portA, serialA, serialB}, {portB, serialB, serialA}} {
		out := devicesOf(t, a, c.port)
		if !strings.Contains(out, c.own+"\tdevice") || strings.Contains(out, c.other) {
			t.Errorf("server %s (own %s):\n%s", c.port, c.own, out)
		}
	}
	ctx := context.Background()
	// A user's emulator, on the first free console port from 5554 as the
	// emulator picks it, counts as external; simlock's own never do (they
	// are outside the range). Other test packages may run some too, so
	// only the lower bound is certain.
	a.createAVD("users", hostImage(36, "google_apis"), "pixel_6")
	userEnv := a.env[envADBServerPort]
	a.env[envADBServerPort] = "5037"
	user := a.startEmulator(append([]string{"-avd", "users"}, driverFlags...)...)
	a.env[envADBServerPort] = userEnv
	a.waitFor("the user's emulator to bind its port", func() bool {
		n, err := dA.ExternalRunning(ctx)
		return err == nil && n >= 1
	})
	user.signal(15)
	user.wait(waitLimit)

	// Home a's daemon dies (its emulator with it) and a new one starts:
	// the AVD keeps its console port and the home its adb server.
	if err := dA.Shutdown(ctx, devA); err != nil {
		t.Fatal(err)
	}
	// While its daemon lives, the stopped AVD's ports stay bound, so
	// programs that do not read the registry see them taken too.
	if ls, ok := loopback.Hold(base, 2); ok {
		loopback.Close(ls)
		t.Error("a stopped AVD's console pair is not held")
	}
	if err := dA.Close(ctx); err != nil { // the daemon's end lets go of them
		t.Fatal(err)
	}
	prober.mu.Lock()
	delete(prober.alive, 1)
	prober.alive[3] = true
	prober.mu.Unlock()
	hpA2 := testHostPorts(t, db, "/homes/a", 3)
	hpA2.ConsoleBase = base
	if got, err := hpA2.ADBServerPort(ctx); err != nil || strconv.Itoa(got) != portA {
		t.Fatalf("restarted home's adb server port %d (%v), want %s", got, err, portA)
	}
	dA2 := driverFor(t, a, rootA, hpA2)
	// Its first look at the root takes the AVD's port back and holds it.
	if _, err := dA2.ListManaged(ctx); err != nil {
		t.Fatal(err)
	}
	if ls, ok := loopback.Hold(base, 2); ok {
		loopback.Close(ls)
		t.Error("the restarted driver does not hold its AVD's console pair")
	}
	if err := dA2.MakeReady(ctx, devA); err != nil {
		t.Fatal(err)
	}
	if out := devicesOf(t, a, portA); !strings.Contains(out, serialA+"\tdevice") {
		t.Errorf("after restart, server %s:\n%s", portA, out)
	}
	// Destroy gives the console port back.
	if err := dA2.Destroy(ctx, devA); err != nil {
		t.Fatal(err)
	}
	leases, err := db.Ports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.Lease.Purpose == hostreg.PortConsole && l.Lease.Owner.Home == "/homes/a" {
			t.Errorf("home a's console lease survived Destroy: %+v", l)
		}
	}
}
