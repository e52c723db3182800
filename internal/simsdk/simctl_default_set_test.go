package simsdk

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/drivers/ios"
)

// bootedEntryKeys returns the keys, in order, of the first device entry
// whose state is Booted in an Apple-style JSON listing.
func bootedEntryKeys(t *testing.T, out string) []string {
	t.Helper()
	i := strings.Index(out, `"state" : "Booted"`)
	if i < 0 {
		t.Fatalf("no booted device in:\n%s", out)
	}
	start := strings.LastIndex(out[:i], "{")
	end := i + strings.Index(out[i:], "}")
	var keys []string
	for _, m := range regexp.MustCompile(`(?m)^\s*"([A-Za-z]+)" :`).FindAllStringSubmatch(out[start:end], -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// A simulator booted with plain `xcrun simctl boot` (no --set) lives in the
// default device set, as one booted in Xcode would: `simctl list devices
// booted -j` without --set lists it, with the same entry shape a real
// Xcode 16 prints, and the iOS driver reads it as booted. A device booted
// in a private set (simlock's) is not in that listing.
func TestDefaultSetBootIsListedAsRealSimctlPrintsIt(t *testing.T) {
	h := newHarness(t)
	udid := strings.TrimSpace(h.must("create", "By hand", "iPhone 15", "iOS 18.0"))
	private := filepath.Join(t.TempDir(), "set")
	mine := strings.TrimSpace(h.must("--set", private, "create", "Mine", "iPhone 15", "iOS 18.0"))
	h.must("--set", private, "boot", mine)
	if out := h.must("list", "devices", "booted", "-j"); strings.Contains(out, udid) || strings.Contains(out, mine) {
		t.Fatalf("before the boot the default set lists:\n%s", out)
	}
	h.must("boot", udid)
	out := h.must("list", "devices", "booted", "-j")
	if strings.Contains(out, mine) {
		t.Fatalf("a private set's device is listed in the default set:\n%s", out)
	}
	real, err := os.ReadFile(filepath.Join("..", "drivers", "ios", "testdata", "list-json-xcode16.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bootedEntryKeys(t, out), bootedEntryKeys(t, string(real)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("booted entry keys\n got  %v\n want %v (Xcode 16)", got, want)
	}
	if !strings.HasPrefix(out, "{\n  \"devices\" : {\n") {
		t.Fatalf("listing does not open as simctl's does:\n%s", out)
	}
	l, err := ios.ParseListJSON([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Devices) != 1 || l.Devices[0].UDID != udid || l.Devices[0].State != ios.StateBooted {
		t.Fatalf("the driver reads %+v", l.Devices)
	}
	h.must("shutdown", udid)
	if l, _ := ios.ParseListJSON([]byte(h.must("list", "devices", "booted", "-j"))); len(l.Devices) != 0 {
		t.Fatalf("after shutdown the default set lists %+v", l.Devices)
	}
}
