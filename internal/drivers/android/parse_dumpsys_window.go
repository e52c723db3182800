package android

import (
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
)

// windowState is what `adb shell dumpsys window` says about the default
// display's lock screen and rotation (testdata/real/INDEX.md lists the
// captures). The dump's wording changed across Android versions, so the
// decoder reads every form the captures show and believes only what they
// agree on:
//
//   - Lock screen: mShowingLockscreen= and isStatusBarKeyguard= (Android
//     7 era), the KeyguardServiceDelegate block's showing= and its
//     KeyguardStateMonitor's mIsShowing=, isKeyguardShowing= of the
//     display policy (Android 12 and later), mKeyguardShowing= where a
//     keyguard controller is dumped. mDreamingLockscreen=true says the lock
//     screen waits under a dream; its false says nothing about the lock.
//   - Rotation, in quarter turns from the panel's natural frame:
//     mRotation= of the display rotation, mCurrentRotation= of the
//     orientation listener (a number or ROTATION_0/90/180/270), and the r=
//     of DisplayFrames.
//   - Size: init= is the natural size, cur= and DisplayFrames' w= h= and
//     mUnrestrictedScreen= the current one.
//
// Only fields outside brackets count (winConfig={... mRotation=...} is
// some window's configuration, not the display's), and within the display
// contents only display 0's. Two readings that disagree, or a value the
// decoder does not know, leave the fact unknown.
type windowState struct {
	// Locked is whether the lock screen shows; nil: unknown.
	Locked *bool
	// Rotation is in quarter turns (0..3); -1: unknown.
	Rotation int
	// Orientation is contract.OrientationPortrait or Landscape; "":
	// unknown.
	Orientation string
}

// windowSize is a display size a dump states.
type windowSize struct{ w, h int }

// windowScan collects one dump's readings before they are judged.
type windowScan struct {
	shown, hidden int // lock screen readings either way
	rotations     []int
	badRotation   bool
	natural       []windowSize
	current       []windowSize
}

// parseDumpsysWindow decodes `dumpsys window` (or one of its sections:
// policy, displays) output. Anything it cannot read is unknown.
func parseDumpsysWindow(out []byte) windowState {
	var sc windowScan
	display := -1    // -1: outside any display's section
	keyguardAt := -1 // indentation of the KeyguardServiceDelegate line
	for _, l := range lines(out) {
		trimmed := strings.TrimSpace(l)
		indent := len(l) - len(strings.TrimLeft(l, " \t"))
		if strings.HasPrefix(l, "WINDOW MANAGER ") {
			display, keyguardAt = -1, -1 // a new section of the dump
			continue
		}
		if id, ok := strings.CutPrefix(trimmed, "Display: mDisplayId="); ok {
			display = -2 // a display this decoder cannot name
			if n, err := strconv.Atoi(leadingDigits(id)); err == nil {
				display = n
			}
			continue
		}
		if display != -1 && display != 0 {
			continue
		}
		if keyguardAt >= 0 && trimmed != "" && indent <= keyguardAt {
			keyguardAt = -1
		}
		if trimmed == "KeyguardServiceDelegate" {
			keyguardAt = indent
			continue
		}
		fields := topLevelFields(trimmed)
		frames := len(fields) > 0 && fields[0] == "DisplayFrames"
		var fw, fh int
		for i, f := range fields {
			key, val, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			switch {
			case key == "mShowingLockscreen" || key == "isStatusBarKeyguard" || key == "isKeyguardShowing" || key == "mKeyguardShowing":
				sc.lock(val, true)
			case keyguardAt >= 0 && (key == "showing" || key == "mIsShowing"):
				sc.lock(val, true)
			case key == "mDreamingLockscreen":
				sc.lock(val, false)
			case key == "mRotation" || key == "mCurrentRotation" || (frames && key == "r"):
				sc.rotation(val)
			case key == "init":
				if s, ok := parseWindowSize(val); ok {
					sc.natural = append(sc.natural, s)
				}
			case key == "cur":
				if s, ok := parseWindowSize(val); ok {
					sc.current = append(sc.current, s)
				}
			case key == "mUnrestrictedScreen" && i+1 < len(fields):
				// "mUnrestrictedScreen=(0,0) 1080x1920": origin, then size.
				if s, ok := parseWindowSize(fields[i+1]); ok {
					sc.current = append(sc.current, s)
				}
			case frames && key == "w":
				fw, _ = strconv.Atoi(val)
			case frames && key == "h":
				fh, _ = strconv.Atoi(val)
			}
		}
		if frames && fw > 0 && fh > 0 {
			sc.current = append(sc.current, windowSize{fw, fh})
		}
	}
	return sc.judge()
}

// lock records a lock screen reading; a one-sided field (mDreamingLockscreen)
// counts only when true.
func (sc *windowScan) lock(val string, twoSided bool) {
	switch {
	case val == "true":
		sc.shown++
	case val == "false" && twoSided:
		sc.hidden++
	}
}

// rotation records a rotation reading. -1 is Android's "not set" and says
// nothing; any other value outside the known forms spoils the reading.
func (sc *windowScan) rotation(val string) {
	if val == "-1" {
		return
	}
	if r, ok := parseRotation(val); ok {
		sc.rotations = append(sc.rotations, r)
		return
	}
	sc.badRotation = true
}

// judge turns the readings into facts, unknown wherever they disagree.
func (sc *windowScan) judge() windowState {
	ws := windowState{Rotation: -1}
	switch {
	case sc.shown > 0 && sc.hidden == 0:
		ws.Locked = ptrTo(true)
	case sc.hidden > 0 && sc.shown == 0:
		ws.Locked = ptrTo(false)
	}
	if sc.badRotation || len(sc.rotations) == 0 {
		return ws
	}
	for _, r := range sc.rotations {
		if r != sc.rotations[0] {
			return ws
		}
	}
	ws.Rotation = sc.rotations[0]
	// The screen's shape now: the natural size turned by the rotation, and
	// every current size the dump states, all of which must agree.
	var shapes []string
	for _, s := range sc.natural {
		if ws.Rotation%2 == 1 {
			s = windowSize{s.h, s.w}
		}
		shapes = append(shapes, s.shape())
	}
	for _, s := range sc.current {
		shapes = append(shapes, s.shape())
	}
	if len(shapes) == 0 {
		return ws
	}
	for _, s := range shapes {
		if s == "" || s != shapes[0] {
			return ws
		}
	}
	ws.Orientation = shapes[0]
	return ws
}

func (s windowSize) shape() string {
	switch {
	case s.h > s.w:
		return contract.OrientationPortrait
	case s.w > s.h:
		return contract.OrientationLandscape
	}
	return "" // square: neither
}

// parseRotation reads "0".."3" or "ROTATION_0/90/180/270" as quarter turns.
func parseRotation(v string) (int, bool) {
	if deg, ok := strings.CutPrefix(v, "ROTATION_"); ok {
		switch deg {
		case "0":
			return 0, true
		case "90":
			return 1, true
		case "180":
			return 2, true
		case "270":
			return 3, true
		}
		return 0, false
	}
	if len(v) == 1 && v[0] >= '0' && v[0] <= '3' {
		return int(v[0] - '0'), true
	}
	return 0, false
}

// parseWindowSize reads "1080x2400".
func parseWindowSize(v string) (windowSize, bool) {
	ws, hs, ok := strings.Cut(v, "x")
	if !ok {
		return windowSize{}, false
	}
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if err1 != nil || err2 != nil || w <= 0 || h <= 0 {
		return windowSize{}, false
	}
	return windowSize{w, h}, true
}

// topLevelFields splits a dump line at the spaces that are outside any
// bracket pair ({}, [], ()), so "mStatusBar=Window{285e842 u0 StatusBar}"
// stays one field and nothing inside winConfig={...} becomes one.
// Unbalanced closing brackets are ignored; text after an unclosed opening
// one belongs to no top-level field.
func topLevelFields(l string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i < len(l); i++ {
		switch c := l[i]; c {
		case '{', '[', '(':
			if depth == 0 && start < 0 {
				start = i
			}
			depth++
		case '}', ']', ')':
			if depth > 0 {
				depth--
			}
		case ' ', '\t':
			if depth == 0 && start >= 0 {
				out = append(out, l[start:i])
				start = -1
			}
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if depth == 0 && start >= 0 {
		out = append(out, l[start:])
	}
	return out
}

// leadingDigits is the run of decimal digits s starts with.
func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
