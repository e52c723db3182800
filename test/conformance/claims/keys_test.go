package claims

import (
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Reference §6 item 3: a claim key is the device's canonical identity.
// A selector that names a connection (an emulator's transport serial, a
// host:port) or a key of no known shape is refused before any registry
// read, and the keys `device status` prints have one spelling per device.
// §5's closing note: the singular `device` group holds status and release,
// beside the plural inventory (`list`). No daemon is needed for any of it.
func TestClaimsKeysNameDevicesNotConnections(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/6.3", "claims/5.8")
	w := harness.NewWorld(t, "")
	for _, args := range [][]string{
		{"device", "status", "--serial", "emulator-5554"},
		{"device", "status", "--serial", "127.0.0.1:5555"},
		{"device", "status", "emulator-5554"},
		{"device", "status", "ios:udid:not-a-udid"},
		{"device", "release", "--stale", "--serial", "emulator-5554"},
	} {
		ref, r := w.Refused(append(args, "--json")...)
		if ref.Error.Code != "BAD_REQUEST" || ref.Error.Retryable {
			t.Errorf("simlock %s: exit %d %+v", strings.Join(args, " "), r.Code, ref.Error)
		}
	}
	// A well-formed key of a device nobody claims is simply free.
	if cs := claims(w, "ios:udid:0E0C9A3B-6C37-4C0F-8D5B-3C2F1A4B5D6E"); len(cs) != 0 {
		t.Fatalf("a free device lists %+v", cs)
	}
	// One spelling per device: a lower-case UDID is not a key, and the
	// refusal gives the canonical one.
	ref, _ := w.Refused("device", "release", "ios:udid:0e0c9a3b-6c37-4c0f-8d5b-3c2f1a4b5d6e", "--json")
	if ref.Error.Code != "BAD_REQUEST" || !strings.Contains(ref.Error.Message, "ios:udid:0E0C9A3B-6C37-4C0F-8D5B-3C2F1A4B5D6E") {
		t.Errorf("a lower-case key: %+v", ref.Error)
	}
	w.MustRun("device", "release", "ios:udid:0E0C9A3B-6C37-4C0F-8D5B-3C2F1A4B5D6E")

	help := w.MustRun("device", "--help")
	for _, sub := range []string{"status", "release"} {
		if !strings.Contains(help, "\n  "+sub+" ") {
			t.Errorf("`simlock device` has no %s subcommand:\n%s", sub, help)
		}
	}
	if r := w.Run("list", "--help"); r.Code != 0 {
		t.Errorf("the plural inventory command `simlock list` is gone: %+v", r)
	}
	for _, f := range []string{"simlock.sock", "daemon.json"} {
		if exists(w.Home, f) {
			t.Errorf("a claims command started a daemon (%s)", f)
		}
	}
}
