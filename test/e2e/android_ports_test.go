package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/simsdk"
)

// sharingHost is a second home on w's host: its own SIMLOCK_HOME, the same
// host registry, simulated SDK and simulated devices.
func (w *world) sharingHost(t *testing.T, config string) *world {
	t.Helper()
	root, err := os.MkdirTemp("", "sl2-")
	if err != nil {
		t.Fatal(err)
	}
	o := &world{t: t, home: filepath.Join(root, "h"), sdk: w.sdk, simHome: w.simHome}
	if err := os.MkdirAll(o.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.home, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// os/exec uses the last of duplicate variables.
	o.env = append(append([]string(nil), w.env...), "SIMLOCK_HOME="+o.home)
	t.Cleanup(func() {
		o.run("daemon", "stop")
		os.RemoveAll(root)
	})
	return o
}

// userEmulator starts an emulator the way a developer does, outside any
// simlock root and with the default adb server, and returns its serial.
func (w *world) userEmulator(t *testing.T) string {
	t.Helper()
	avdHome := filepath.Join(w.simHome, "user-avd")
	env := append(append([]string(nil), w.env...), "ANDROID_AVD_HOME="+avdHome, "ANDROID_ADB_SERVER_PORT=5037")
	abi := "x86_64"
	if runtime.GOARCH == "arm64" {
		abi = "arm64-v8a"
	}
	create := exec.Command(filepath.Join(w.sdk, "avdmanager"), "create", "avd", "-n", "Users_Pixel", "-k", "system-images;android-36;google_apis;"+abi, "-d", "pixel_6")
	create.Env, create.Stdin = env, strings.NewReader("no\n")
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("avdmanager create: %v\n%s", err, out)
	}
	start := exec.Command(filepath.Join(w.sdk, "adb"), "start-server")
	start.Env = env
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("adb start-server: %v\n%s", err, out)
	}
	emu := exec.Command(filepath.Join(w.sdk, "emulator"), "-avd", "Users_Pixel", "-no-window", "-no-audio")
	emu.Env = env
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Process.Kill(); _ = emu.Wait() })
	serialRe := regexp.MustCompile(`(?m)^(emulator-55[5-8][0-9])\t`)
	serial := ""
	eventually(t, "the user's emulator to appear on the default adb server", 30*time.Second, func() bool {
		devs := exec.Command(filepath.Join(w.sdk, "adb"), "devices")
		devs.Env = env
		out, _ := devs.Output()
		if m := serialRe.FindStringSubmatch(string(out)); m != nil {
			serial = m[1]
		}
		return serial != ""
	})
	return serial
}

type androidGrant struct {
	LeaseID string
	Serial  string
	ADBPort string
}

// leaseAndroid leases an Android device and reads its serial and adb
// server. It reports failures instead of failing the test, so two may run
// at once on other goroutines.
func (w *world) leaseAndroid() (androidGrant, error) {
	decode := func(v any, args ...string) error {
		r := w.run(args...)
		if r.code != 0 {
			return fmt.Errorf("simlock %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return json.Unmarshal([]byte(r.stdout), v)
	}
	var l lease
	if err := decode(&l, "lease", "--platform", "android", "--model", "pixel_6", "--detach"); err != nil {
		return androidGrant{}, err
	}
	var dev struct {
		Device struct {
			Serial string
			Env    map[string]string
		}
	}
	if err := decode(&dev, "lease", "renew", l.LeaseID); err != nil {
		return androidGrant{}, err
	}
	return androidGrant{LeaseID: l.LeaseID, Serial: dev.Device.Serial, ADBPort: dev.Device.Env["ANDROID_ADB_SERVER_PORT"]}, nil
}

// Two homes on one host lease an Android device each at the same time: the
// host registry gives them distinct console ports and adb servers, and each
// home's `simlock adb devices` lists its own emulator only — not the other
// home's, not a user's emulator in the range adb scans, not a USB phone or
// an mDNS device.
func TestTwoHomesGetTheirOwnAndroidPortsAndAdbServers(t *testing.T) {
	// Room on the host for both homes' emulators and the user's own.
	const cfg = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2},"host":{"maxRunning":4}},"exec":{"timeoutMs":1500}}`
	a := newWorld(t, cfg)
	b := a.sharingHost(t, cfg)
	const phone, wireless = "R5CT30ABCDE", "adb-R5CT30ABCDE-xYz12a._adb-tls-connect._tcp"
	if err := simsdk.SetAndroidHostDevices(a.simHome, []string{phone}, []string{wireless}); err != nil {
		t.Fatal(err)
	}
	user := a.userEmulator(t)

	var ga, gb androidGrant
	var ea, eb error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ga, ea = a.leaseAndroid() }()
	go func() { defer wg.Done(); gb, eb = b.leaseAndroid() }()
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatalf("leases at the same time: %v; %v", ea, eb)
	}
	if ga.Serial == "" || gb.Serial == "" || ga.Serial == gb.Serial {
		t.Fatalf("serials %q and %q: want two distinct console ports", ga.Serial, gb.Serial)
	}
	if ga.ADBPort == "" || ga.ADBPort == gb.ADBPort || ga.ADBPort == "5037" || gb.ADBPort == "5037" {
		t.Fatalf("adb server ports %q and %q: want two private servers", ga.ADBPort, gb.ADBPort)
	}
	for _, c := range []struct {
		w          *world
		own, other string
	}{{a, ga.Serial, gb.Serial}, {b, gb.Serial, ga.Serial}} {
		out := c.w.mustRun("adb", "devices")
		if !strings.Contains(out, c.own+"\tdevice") {
			t.Errorf("simlock adb devices lacks its own %s:\n%s", c.own, out)
		}
		for _, not := range []string{c.other, user, phone, wireless} {
			if strings.Contains(out, not) {
				t.Errorf("simlock adb devices of %s lists %s:\n%s", c.w.home, not, out)
			}
		}
		// Each home's emulator answers on its own server.
		if got := strings.TrimSpace(c.w.mustRun("adb", "-s", c.own, "shell", "getprop", "sys.boot_completed")); got != "1" {
			t.Errorf("%s: boot_completed %q", c.own, got)
		}
	}
	// The user's default server still sees the user's devices, and none of
	// simlock's.
	plain := exec.Command(filepath.Join(a.sdk, "adb"), "devices")
	plain.Env = append(append([]string(nil), a.env...), "ANDROID_ADB_SERVER_PORT=5037")
	outb, _ := plain.Output()
	if out := string(outb); !strings.Contains(out, user) || !strings.Contains(out, phone) || strings.Contains(out, ga.Serial) || strings.Contains(out, gb.Serial) {
		t.Errorf("the user's adb devices:\n%s", out)
	}

	a.mustRun("release", ga.LeaseID)
	b.mustRun("release", gb.LeaseID)
}
