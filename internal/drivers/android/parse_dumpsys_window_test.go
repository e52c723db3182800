package android

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// lockOf renders a decoded lock state for messages: true, false or unknown.
func lockOf(b *bool) string {
	if b == nil {
		return "unknown"
	}
	if *b {
		return "true"
	}
	return "false"
}

// Every real capture (testdata/real/INDEX.md) decodes to what it shows,
// and what it does not show is unknown.
func TestParseDumpsysWindowCaptures(t *testing.T) {
	tests := []struct {
		file        string
		locked      string
		rotation    int
		orientation string
	}{
		// API 36, portrait: isKeyguardShowing=false, mRotation=0, init and
		// cur 1080x2400.
		{"real/dumpsys-window-displays-api36-portrait.txt", "false", 0, contract.OrientationPortrait},
		// API 36, landscape with a mirror display (id 3, rotation 0)
		// dumped first: only display 0 counts.
		{"real/dumpsys-window-displays-api36-mirror-landscape.txt", "false", 1, contract.OrientationLandscape},
		// API 36 policy section: the keyguard block only, no rotation.
		{"real/dumpsys-window-policy-api36-unlocked.txt", "false", -1, ""},
		{"real/dumpsys-window-policy-api36-keyguard-showing.txt", "true", -1, ""},
		// Android 7 era policy section: mShowingLockscreen and
		// isStatusBarKeyguard, the orientation listener's mCurrentRotation=0
		// and the unrestricted screen's current size.
		{"real/dumpsys-window-policy-android7-goldfish-unlocked.txt", "false", 0, contract.OrientationPortrait},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[filepath.Base(tt.file)] = true
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			ws := parseDumpsysWindow(fixture(t, tt.file))
			if lockOf(ws.Locked) != tt.locked || ws.Rotation != tt.rotation || ws.Orientation != tt.orientation {
				t.Fatalf("got locked %s rotation %d orientation %q, want %s %d %q",
					lockOf(ws.Locked), ws.Rotation, ws.Orientation, tt.locked, tt.rotation, tt.orientation)
			}
		})
	}
	// Every capture in the directory has a row above.
	ents, err := os.ReadDir(filepath.Join("testdata", "real"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".txt") && !seen[e.Name()] {
			t.Errorf("capture %s has no expectation", e.Name())
		}
	}
}

// A whole `dumpsys window` holds the policy section and the display
// contents; the decoder reads them together, and two sections that
// disagree about the lock screen (here captures of different moments)
// leave it unknown rather than picking one.
func TestParseDumpsysWindowJoinsSections(t *testing.T) {
	join := func(files ...string) []byte {
		var b []byte
		for _, f := range files {
			b = append(b, fixture(t, "real/"+f)...)
		}
		return b
	}
	ws := parseDumpsysWindow(join("dumpsys-window-policy-api36-unlocked.txt", "dumpsys-window-displays-api36-mirror-landscape.txt"))
	if lockOf(ws.Locked) != "false" || ws.Orientation != contract.OrientationLandscape {
		t.Fatalf("unlocked policy + landscape displays: %s %q", lockOf(ws.Locked), ws.Orientation)
	}
	ws = parseDumpsysWindow(join("dumpsys-window-policy-api36-keyguard-showing.txt", "dumpsys-window-displays-api36-portrait.txt"))
	if ws.Locked != nil || ws.Orientation != contract.OrientationPortrait {
		t.Fatalf("showing keyguard + a display saying it is not: %s %q, want unknown portrait", lockOf(ws.Locked), ws.Orientation)
	}
}

// The decoder's rules on inputs the captures do not cover: nothing is
// inferred from missing, mixed or unreadable fields.
func TestParseDumpsysWindowUnknowns(t *testing.T) {
	tests := []struct {
		name, dump  string
		locked      string
		rotation    int
		orientation string
	}{
		{"empty", "", "unknown", -1, ""},
		{"no window service", "Can't find service: window\n", "unknown", -1, ""},
		{"dreaming false says nothing", "    mShowingDream=false mDreamingLockscreen=false\n", "unknown", -1, ""},
		{"dreaming true is the lock screen", "    mDreamingLockscreen=true\n", "true", -1, ""},
		{"mixed lock readings", "    isKeyguardShowing=true\n  KeyguardController:\n    mKeyguardShowing=false\n", "unknown", -1, ""},
		{"showing= outside the keyguard block", "  SomethingElse\n      showing=true\n", "unknown", -1, ""},
		{"keyguard block ends at its indentation", "    KeyguardServiceDelegate\n      showing=false\n    Other\n      showing=true\n", "false", -1, ""},
		{"rotation without a size", "    mRotation=1 mDeferredRotationPauseCount=0\n", "unknown", 1, ""},
		{"rotation named in degrees", "    mCurrentRotation=ROTATION_270\n  DisplayFrames w=2400 h=1080 r=3\n", "unknown", 3, contract.OrientationLandscape},
		{"rotations that disagree", "    mRotation=0\n    mCurrentRotation=ROTATION_90\n    init=1080x2400 cur=1080x2400\n", "unknown", -1, ""},
		{"an unknown rotation value", "    mRotation=7\n    init=1080x2400\n", "unknown", -1, ""},
		{"-1 is not set", "    mRotation=2\n      mCurrentRotation=-1\n    init=1080x2400\n", "unknown", 2, contract.OrientationPortrait},
		{"bracketed rotation is a window's", "  overrideConfig={1.0 winConfig={ mRotation=ROTATION_90}}\n    init=1080x2400\n", "unknown", -1, ""},
		{"natural landscape panel", "  Display: mDisplayId=0\n    init=2560x1600 cur=2560x1600\n    mRotation=0\n", "unknown", 0, contract.OrientationLandscape},
		{"turned natural landscape panel", "  Display: mDisplayId=0\n    init=2560x1600 cur=1600x2560\n    mRotation=3\n", "unknown", 3, contract.OrientationPortrait},
		{"size and rotation disagree (mid-turn)", "    init=1080x2400 cur=1080x2400\n    mRotation=1\n", "unknown", 1, ""},
		{"square panel", "    init=1000x1000\n    mRotation=0\n", "unknown", 0, ""},
		{"only another display", "  Display: mDisplayId=2\n    init=1080x2400\n    mRotation=0\n    isKeyguardShowing=false\n", "unknown", -1, ""},
		{"a display id it cannot read", "  Display: mDisplayId=x\n    mRotation=0\n    init=1080x2400\n", "unknown", -1, ""},
		{"a new section leaves the display", "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n  Display: mDisplayId=4\n    mRotation=1\nWINDOW MANAGER WINDOWS (dumpsys window windows)\n  mRotation=0\n  init=1080x2400\n", "unknown", 0, contract.OrientationPortrait},
		{"CR CR LF endings", "    isKeyguardShowing=true\r\r\n    mRotation=0\r\r\n    init=1080x2400\r\r\n", "true", 0, contract.OrientationPortrait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := parseDumpsysWindow([]byte(tt.dump))
			if lockOf(ws.Locked) != tt.locked || ws.Rotation != tt.rotation || ws.Orientation != tt.orientation {
				t.Fatalf("got locked %s rotation %d orientation %q, want %s %d %q",
					lockOf(ws.Locked), ws.Rotation, ws.Orientation, tt.locked, tt.rotation, tt.orientation)
			}
		})
	}
}

func TestTopLevelFields(t *testing.T) {
	got := topLevelFields("mStatusBar=Window{285e842 u0 StatusBar} isStatusBarKeyguard=false  mCur=(0,63)-(1080,1794) winConfig={ mRotation=ROTATION_0 [a b] } tail")
	want := []string{"mStatusBar=Window{285e842 u0 StatusBar}", "isStatusBarKeyguard=false", "mCur=(0,63)-(1080,1794)", "winConfig={ mRotation=ROTATION_0 [a b] }", "tail"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := topLevelFields("a={open b=1"); len(got) != 0 {
		t.Fatalf("an unclosed bracket still yielded %q", got)
	}
}
