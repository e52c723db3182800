package simsdk

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The window manager's view of the screen: `dumpsys window` and its
// policy and displays sections, the keys that put the screen to sleep,
// wake it and dismiss the lock screen, and `wm dismiss-keyguard`.
//
// The dump follows the API 36 emulator captures the Android driver's
// parser is tested on (internal/drivers/android/testdata/real: the policy
// section's KeyguardServiceDelegate block, display 0's init/cur sizes,
// DisplayFrames, DisplayPolicy and DisplayRotation), with only the lines
// that describe this simulated screen; the other sections (windows,
// tokens, sessions, animator) are not simulated and are left out.
//
// Rotation follows the system settings the captures were driven with:
// with accelerometer_rotation other than 1 the screen takes user_rotation
// (0..3, as `settings put system user_rotation` writes it); with it 1 the
// virtual sensor holds the device upright (rotation 0). The lock screen
// is the images' swipe keyguard: KEYCODE_SLEEP, or KEYCODE_POWER on an
// awake screen, turns the screen off and shows it; KEYCODE_WAKEUP, or
// POWER on a dark screen, wakes the screen with the keyguard still up;
// KEYCODE_MENU or `wm dismiss-keyguard` on an awake screen dismisses it.
// A boot starts awake and unlocked. The key effects and the answer to an
// unknown dumpsys window argument follow AOSP's behaviour as publicly
// described; no capture shows them.

// screenNow re-reads the run: another adb call may have changed it.
func (sh *devShell) screenNow() *emuRun {
	if cur := liveRun(sh.s.runDir(sh.run.ConsolePort)); cur != nil {
		return cur
	}
	return sh.run
}

// rotation is the screen's rotation in quarter turns, from the settings.
func (st devState) rotation() int {
	sys := st.Settings["system"]
	if sys["accelerometer_rotation"] == "1" {
		return 0
	}
	if n, err := strconv.Atoi(sys["user_rotation"]); err == nil && n >= 0 && n <= 3 {
		return n
	}
	return 0
}

// dumpsysWindow is `dumpsys window [policy|displays]`.
func (sh *devShell) dumpsysWindow(args []string, stdout, stderr io.Writer) int {
	if f, fired, err := sh.s.fire(faultWindowDumpSlow); err != nil {
		fmt.Fprintf(stderr, "dumpsys: %v\n", err)
		return 1
	} else if fired {
		ms, _ := strconv.Atoi(f.Value)
		if sleepCtx(sh.ctx, time.Duration(ms)*time.Millisecond) != nil {
			return 130
		}
	}
	section := ""
	if len(args) > 0 {
		section = args[0]
	}
	switch {
	case len(args) == 0:
		sh.windowPolicy(stdout)
		sh.windowDisplays(stdout)
	case len(args) == 1 && section == "policy":
		sh.windowPolicy(stdout)
	case len(args) == 1 && section == "displays":
		sh.windowDisplays(stdout)
	default:
		// The window manager takes an argument it does not know as the
		// name of a window to dump; no window of the simulated screen has
		// one.
		fmt.Fprintf(stdout, "Bad window command, or no windows match: %s\nUse -h for help.\n", strings.Join(args, " "))
	}
	return 0
}

func (sh *devShell) windowPolicy(w io.Writer) {
	r := sh.screenNow()
	booted := r.booted(sh.s.now())
	screen, interactive := "SCREEN_STATE_ON", "INTERACTIVE_STATE_AWAKE"
	if r.ScreenOff {
		screen, interactive = "SCREEN_STATE_OFF", "INTERACTIVE_STATE_SLEEP"
	}
	fmt.Fprintf(w, "WINDOW MANAGER POLICY STATE (dumpsys window policy)\n"+
		"    mSafeMode=false mSystemReady=%t mSystemBooted=%t\n"+
		"    mHasSoftInput=true\n"+
		"    mKeyguardOccluded=false mKeyguardOccludedChanged=false mPendingKeyguardOccluded=false\n"+
		"    KeyguardServiceDelegate\n"+
		"      showing=%t\n"+
		"      inputRestricted=false\n"+
		"      occluded=false\n"+
		"      secure=false\n"+
		"      dreaming=false\n"+
		"      systemIsReady=%t\n"+
		"      deviceHasKeyguard=true\n"+
		"      enabled=true\n"+
		"      offReason=OFF_BECAUSE_OF_USER\n"+
		"      currentUser=-10000\n"+
		"      bootCompleted=%t\n"+
		"      screenState=%s\n"+
		"      interactiveState=%s\n"+
		"      KeyguardStateMonitor\n"+
		"        mIsShowing=%t\n"+
		"        mSimSecure=false\n"+
		"        mInputRestricted=%t\n"+
		"        mTrusted=false\n"+
		"        mCurrentUserId=0\n",
		booted, booted, r.Keyguard, booted, booted, screen, interactive, r.Keyguard, r.Keyguard)
}

func (sh *devShell) windowDisplays(w io.Writer) {
	r := sh.screenNow()
	st := readDevState(r)
	phys := sh.physicalDisplay("size")
	density := sh.physicalDisplay("density")
	nw, nh := splitSize(phys)
	bw, bh, bd := nw, nh, density
	base := ""
	if o := st.Display["size"]; o != "" {
		bw, bh = splitSize(o)
	}
	if o := st.Display["density"]; o != "" {
		bd = o
	}
	if bw != nw || bh != nh || bd != density {
		base = fmt.Sprintf(" base=%dx%d %sdpi", bw, bh, bd)
	}
	rot := st.rotation()
	cw, ch := bw, bh
	if rot%2 == 1 {
		cw, ch = bh, bw
	}
	short, long := min(bw, bh), max(bw, bh)
	awake := !r.ScreenOff
	userMode := "USER_ROTATION_LOCKED"
	if st.Settings["system"]["accelerometer_rotation"] == "1" {
		userMode = "USER_ROTATION_FREE"
	}
	user := 0
	if n, err := strconv.Atoi(st.Settings["system"]["user_rotation"]); err == nil && n >= 0 && n <= 3 {
		user = n
	}
	// A panel wider than tall is landscape at rotation 0 (the captures'
	// landscape mirror display says so for itself).
	landscape, seascape, portrait, upsideDown := 90, 270, 0, 180
	if nw > nh {
		landscape, seascape, portrait, upsideDown = 0, 180, 270, 90
	}
	fmt.Fprintf(w, "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n"+
		"  Display: mDisplayId=0 (organized)\n"+
		"    init=%dx%d %sdpi%s mMinSizeOfResizeableTaskDp=220 cur=%dx%d app=%dx%d rng=%dx%d-%dx%d\n"+
		"    deferred=false mLayoutNeeded=false\n"+
		"\n"+
		"  displayId=0\n"+
		"  DisplayFrames w=%d h=%d r=%d\n"+
		"\n"+
		"  DisplayPolicy\n"+
		"    mAwake=%t mScreenOnEarly=%t mScreenOnFully=%t\n"+
		"    mKeyguardDrawComplete=true mWindowManagerDrawComplete=true\n"+
		"    mShowingDream=false mDreamingLockscreen=false\n"+
		"    isKeyguardShowing=%t\n"+
		"\n"+
		"  DisplayRotation\n"+
		"    mCurrentAppOrientation=SCREEN_ORIENTATION_UNSPECIFIED\n"+
		"    mLastOrientation=-1\n"+
		"    mRotation=%d mDeferredRotationPauseCount=0\n"+
		"    mLandscapeRotation=ROTATION_%d mSeascapeRotation=ROTATION_%d\n"+
		"    mPortraitRotation=ROTATION_%d mUpsideDownRotation=ROTATION_%d\n"+
		"    mSupportAutoRotation=true\n"+
		"    WindowOrientationListener\n"+
		"      mEnabled=true\n"+
		"      mCurrentRotation=ROTATION_%d\n"+
		"\n"+
		"    mCarDockRotation=-1 mDeskDockRotation=-1\n"+
		"    mUserRotationMode=%s mUserRotation=ROTATION_%d mCameraRotationMode=0 mAllowAllRotations=unknown\n"+
		"    mFixedToUserRotation=false\n",
		nw, nh, density, base, cw, ch, cw, ch, short, short, long, long,
		cw, ch, rot,
		awake, awake, awake, r.Keyguard,
		rot, landscape, seascape, portrait, upsideDown, rot*90,
		userMode, user*90)
}

// splitSize reads "1080x2400"; anything else is the default panel.
func splitSize(s string) (int, int) {
	ws, hs, _ := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if err1 != nil || err2 != nil || w <= 0 || h <= 0 {
		return 1080, 2400
	}
	return w, h
}

// screenKeys applies what a successful `input keyevent` does to the
// screen: args are input's own arguments.
func (sh *devShell) screenKeys(args []string) {
	if len(args) > 0 && slices.Contains(inputSources, args[0]) {
		args = args[1:]
	}
	if len(args) >= 2 && args[0] == "-d" {
		args = args[2:]
	}
	if len(args) == 0 || args[0] != "keyevent" {
		return
	}
	var keys []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--longpress":
			return // a long press of POWER opens the power menu instead
		case a == "--duration" || a == "--delay":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			keys = append(keys, screenKey(a))
		}
	}
	_ = sh.s.updateRun(sh.run.ConsolePort, func(r *emuRun) error {
		for _, k := range keys {
			switch {
			case k == "SLEEP" || (k == "POWER" && !r.ScreenOff):
				r.ScreenOff, r.Keyguard = true, true
			case k == "WAKEUP" || k == "POWER":
				r.ScreenOff = false
			case k == "MENU" && !r.ScreenOff:
				r.Keyguard = false
			}
		}
		return nil
	})
}

// screenKey names the keys that act on the screen, by number or name.
func screenKey(k string) string {
	switch k = strings.TrimPrefix(k, "KEYCODE_"); k {
	case "26", "POWER":
		return "POWER"
	case "223", "SLEEP":
		return "SLEEP"
	case "224", "WAKEUP":
		return "WAKEUP"
	case "82", "MENU":
		return "MENU"
	}
	return ""
}

// dismissKeyguard is `wm dismiss-keyguard`: an awake screen's insecure
// keyguard goes away; it prints nothing.
func (sh *devShell) dismissKeyguard(stderr io.Writer) int {
	err := sh.s.updateRun(sh.run.ConsolePort, func(r *emuRun) error {
		if !r.ScreenOff {
			r.Keyguard = false
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "wm: %v\n", err)
		return 1
	}
	return 0
}
