package simsdk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// xcodebuild sees the default device set and nothing else: -showdestinations
// lists a simulator created without --set, and `test -destination id=` of a
// simulator in a private set fails with the real "Unable to find a
// destination" block and exit 70, while the same command for the
// default-set device succeeds.
func TestXcodebuildResolvesDestinationsFromTheDefaultSetOnly(t *testing.T) {
	h := newHarness(t)
	proj := filepath.Join(t.TempDir(), "App.xcodeproj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	def := strings.TrimSpace(h.must("create", "Phone", "iPhone 16", "iOS 18.0"))
	private := filepath.Join(t.TempDir(), "set")
	mine := strings.TrimSpace(h.must("--set", private, "create", "Mine", "iPhone 16", "iOS 18.0"))

	r := h.run("xcodebuild", "-showdestinations", "-scheme", "App", "-project", proj)
	if r.code != 0 {
		t.Fatalf("showdestinations: %+v", r)
	}
	want := "\t\t{ platform:iOS Simulator, id:" + def + ", OS:18.0, name:Phone }\n"
	if !strings.Contains(r.stdout, "\tAvailable destinations for the \"App\" scheme:\n") || !strings.Contains(r.stdout, want) {
		t.Fatalf("showdestinations lacks the default-set device:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, mine) {
		t.Fatalf("showdestinations lists a private set's device:\n%s", r.stdout)
	}

	r = h.run("xcrun", "xcodebuild", "test", "-scheme", "App", "-project", proj, "-destination", "id="+mine)
	wantErr := "xcodebuild: error: Unable to find a destination matching the provided destination specifier:\n\t\t{ id:" + mine + " }\n\n\tAvailable destinations for the \"App\" scheme:\n"
	if r.code != 70 || !strings.HasPrefix(r.stderr, wantErr) || !strings.Contains(r.stderr, def) {
		t.Fatalf("test on a private-set device: exit %d\n%s", r.code, r.stderr)
	}

	r = h.run("xcodebuild", "test", "-scheme", "App", "-project", proj, "-destination", "platform=iOS Simulator,id="+def)
	if r.code != 0 || !strings.Contains(r.stdout, "** TEST SUCCEEDED **") {
		t.Fatalf("test on the default-set device: %+v", r)
	}
}

// The project actions are as strict as the real tool: a scheme is
// required, a named project must exist, unknown options are usage errors.
func TestXcodebuildProjectActionsRejectBadArguments(t *testing.T) {
	h := newHarness(t)
	proj := filepath.Join(t.TempDir(), "App.xcodeproj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(t.TempDir(), "App.xctestrun")
	if err := os.WriteFile(run, []byte("<plist/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		text string
	}{
		{[]string{"-showdestinations", "-project", proj}, 64, "requires a scheme"},
		{[]string{"-showdestinations", "-scheme", "App", "-project", "/nope/App.xcodeproj"}, 66, "'/nope/App.xcodeproj' does not exist."},
		{[]string{"test", "-scheme", "App", "-project", proj, "-bogus"}, 64, "invalid option '-bogus'"},
		{[]string{"test", "-scheme", "App", "-project", proj, "-destination"}, 64, "requires at least one argument"},
		// A prebuilt bundle runs without a scheme, but only with
		// test-without-building, and its run file must exist.
		{[]string{"test", "-xctestrun", run, "-destination", "id=X"}, 64, "only be used with the test-without-building action"},
		{[]string{"test-without-building", "-xctestrun", "/nope/App.xctestrun", "-destination", "id=X"}, 66, "“App.xctestrun” couldn’t be opened"},
		{[]string{"test-without-building", "-xctestrun", run, "-destination", "id=NOT-A-DEVICE"}, 70, "Unable to find a destination"},
	} {
		r := h.run("xcodebuild", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.text) {
			t.Errorf("xcodebuild %v: exit %d %q, want %d %q", c.args, r.code, r.stderr, c.code, c.text)
		}
	}
}
