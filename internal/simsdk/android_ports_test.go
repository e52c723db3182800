package simsdk

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// freeConsole finds an even port in [from, to] whose pair is bindable now,
// so tests do not collide with emulators other test packages run.
func freeConsole(t *testing.T, from, to int) int {
	t.Helper()
	for p := from; p <= to; p += 2 {
		if ls, ok := bindPair(p); ok {
			closeAll(ls)
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
	p := freeConsole(t, 46000, 46400)
	emu := a.startEmulator(emulatorArgs("one", strconv.Itoa(p))...)
	a.waitFor("the emulator to listen", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if ls, ok := bindPair(p); ok {
		closeAll(ls)
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
	mine := freeConsole(t, 46500, 46900)
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
