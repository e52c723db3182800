package simsdk

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
)

// The Android driver's live-state probe against the simulated SDK: the
// simulated `dumpsys window` reports the screen's lock and rotation in the
// captures' format, the rotation follows the settings the captures were
// driven with, the lock follows the power and menu keys, and a dump that
// outlasts the probe's bound is an error, not a wait.
func TestAndroidLiveStateAgainstTheSimulatedSDK(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	d, run, root := newResDriver(t, a, 30100, nil)
	ctx := context.Background()

	boot := func(model string) (core.DeviceRef, string) {
		t.Helper()
		spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: model, OSVersion: "15"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := d.Provision(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		dev := core.DeviceRef{ID: "dev-" + model, Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
		if err := d.MakeReady(ctx, dev); err != nil {
			t.Fatal(err)
		}
		// The harness's adb talks to the driver's private server, wherever
		// the host's registry placed it (5137 may be another program's).
		a.env[envADBServerPort] = p.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"]
		return dev, p.Attrs[core.AttrSerial]
	}
	dev, serial := boot("pixel_7")
	a.env[envAVDHome] = root
	sh := func(cmd string) string {
		t.Helper()
		r := a.shell(serial, cmd)
		if r.code != 0 {
			t.Fatalf("%s: exit %d %s", cmd, r.code, r.stderr)
		}
		return r.stdout
	}
	expect := func(what string, locked *bool, orientation string) {
		t.Helper()
		live, err := d.ObserveLive(ctx, dev.Handle)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if (live.Locked == nil) != (locked == nil) || (locked != nil && *live.Locked != *locked) || live.Orientation != orientation {
			t.Fatalf("%s: locked %v orientation %q, want %v %q", what, live.Locked, live.Orientation, locked, orientation)
		}
	}
	yes, no := ptr(true), ptr(false)

	// A fresh boot: awake, unlocked, upright.
	expect("after boot", no, contract.OrientationPortrait)
	if got := run.commands("adb -P"); len(got) == 0 || !strings.HasSuffix(got[len(got)-1], "-s "+serial+" shell dumpsys window") {
		t.Errorf("the probe ran %q, want adb -s %s shell dumpsys window", got[len(got)-1], serial)
	}
	full := sh("dumpsys window")
	for _, l := range []string{"WINDOW MANAGER POLICY STATE (dumpsys window policy)\n", "      showing=false\n",
		"WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n", "  Display: mDisplayId=0 (organized)\n",
		"    init=1080x2400 420dpi mMinSizeOfResizeableTaskDp=220 cur=1080x2400 app=1080x2400 rng=1080x1080-2400x2400\n",
		"  DisplayFrames w=1080 h=2400 r=0\n", "    isKeyguardShowing=false\n", "    mRotation=0 mDeferredRotationPauseCount=0\n"} {
		if !strings.Contains(full, l) {
			t.Errorf("dumpsys window lacks %q:\n%s", l, full)
		}
	}
	if p := sh("dumpsys window policy"); strings.Contains(p, "DISPLAY CONTENTS") || !strings.Contains(p, "KeyguardServiceDelegate") {
		t.Errorf("dumpsys window policy:\n%s", p)
	}
	if p := sh("dumpsys window displays"); strings.Contains(p, "POLICY STATE") || !strings.Contains(p, "DisplayRotation") {
		t.Errorf("dumpsys window displays:\n%s", p)
	}
	if p := sh("dumpsys window nosuchwindow"); p != "Bad window command, or no windows match: nosuchwindow\nUse -h for help.\n" {
		t.Errorf("dumpsys window nosuchwindow: %q", p)
	}

	// Rotation: user_rotation turns the screen while auto-rotate is off;
	// with it on, the upright virtual sensor wins.
	sh("settings put system user_rotation 1")
	expect("user_rotation 1", no, contract.OrientationLandscape)
	if !strings.Contains(sh("dumpsys window displays"), "cur=2400x1080") {
		t.Error("a turned screen keeps its portrait size")
	}
	sh("settings put system user_rotation 2")
	expect("user_rotation 2", no, contract.OrientationPortrait)
	sh("settings put system user_rotation 3")
	sh("settings put system accelerometer_rotation 1")
	expect("auto-rotate on an upright device", no, contract.OrientationPortrait)
	sh("settings put system accelerometer_rotation 0")
	expect("auto-rotate off again", no, contract.OrientationLandscape)
	sh("settings put system user_rotation 0")

	// The lock screen: sleep shows it, waking keeps it, menu dismisses it;
	// dismissing a dark screen's keyguard does nothing.
	sh("input keyevent KEYCODE_SLEEP")
	expect("asleep", yes, contract.OrientationPortrait)
	if !strings.Contains(sh("dumpsys window policy"), "      screenState=SCREEN_STATE_OFF\n") {
		t.Error("a sleeping screen reports itself on")
	}
	sh("wm dismiss-keyguard")
	expect("dismissed while dark", yes, contract.OrientationPortrait)
	sh("input keyevent 224")
	expect("woken", yes, contract.OrientationPortrait)
	sh("input keyevent 82")
	expect("menu", no, contract.OrientationPortrait)
	sh("input keyevent 26")
	expect("power on an awake screen", yes, contract.OrientationPortrait)
	sh("input keyevent POWER")
	sh("wm dismiss-keyguard")
	expect("power again, then dismissed", no, contract.OrientationPortrait)
	sh("input keyevent --longpress 26")
	expect("a long press opens the power menu", no, contract.OrientationPortrait)

	// A dump that outlasts the probe's 2 s bound fails the probe in time.
	run.setFaults("window-dump-slow=20000")
	// It must give up at its own deadline, not wait the dump out: no
	// wall-clock bound here, which a loaded machine would break.
	if _, err := d.ObserveLive(ctx, dev.Handle); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 20 s dump: %v, want the probe's own deadline", err)
	}
	run.setFaults("")
	expect("after the slow dump", no, contract.OrientationPortrait)

	// A tablet's panel is landscape at rotation 0.
	tab, _ := boot("pixel_tablet")
	live, err := d.ObserveLive(ctx, tab.Handle)
	if err != nil || live.Orientation != contract.OrientationLandscape || live.Locked == nil || *live.Locked {
		t.Fatalf("tablet: %+v %v, want unlocked landscape", live, err)
	}
}
