package ios

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

func TestResolvePassthrough(t *testing.T) {
	h := newHarness(t)
	local := core.PassthroughScope{Terminal: true}
	cmd, err := h.d.ResolvePassthrough("simctl", []string{"io", transcriptUDID, "screenshot", "/tmp/s.png"}, core.PassthroughScope{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"simctl", "--set", h.root, "io", transcriptUDID, "screenshot", "/tmp/s.png"}
	if cmd.Name != "xcrun" || !slices.Equal(cmd.Args, want) {
		t.Fatalf("command %s %q", cmd.Name, cmd.Args)
	}
	if _, err := h.d.ResolvePassthrough("simctl", nil, local); err != nil {
		t.Fatalf("bare simctl (usage): %v", err)
	}
	// The local passthrough has no lease: any device of the root may be named.
	if _, err := h.d.ResolvePassthrough("simctl", []string{"launch", "booted", "com.example"}, local); err != nil {
		t.Fatalf("local launch booted: %v", err)
	}

	for _, args := range [][]string{
		{"delete", transcriptUDID},
		{"erase", "all"},
		{"shutdown", transcriptUDID},
		{"boot", transcriptUDID},
		{"create", "x", "iPhone 16"},
		{"clone", transcriptUDID, "copy"},
		{"Delete", "all"},
		{"--set", "/Users/me/Library/Developer/CoreSimulator/Devices", "list"},
	} {
		if _, err := h.d.ResolvePassthrough("simctl", args, local); !errors.Is(err, ErrPassthroughRefused) {
			t.Errorf("%q: error %v", args, err)
		}
	}
	if _, err := h.d.ResolvePassthrough("adb", []string{"devices"}, local); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("error %v", err)
	}
}

const otherUDID = "A1B2C3D4-0000-4000-8000-000000000001"

func pinned(udid string) core.PassthroughScope {
	return core.PassthroughScope{Pin: &core.DeviceRef{ID: "dev_1", Handle: udid, Attrs: map[string]string{core.AttrUDID: udid}}}
}

// Pinned to a lease (device.exec), simctl may address only the lease's
// UDID; "booted", names and other UDIDs are refused with a next step.
func TestPinnedSimctlNamesOnlyTheLeasedDevice(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		args   string
		reason string // empty: allowed
	}{
		{args: "list devices"},
		{args: "list -j devices available"},
		{args: "help launch"},
		{args: "install " + transcriptUDID + " /tmp/App.app"},
		{args: "launch --console-pty " + transcriptUDID + " com.example"},
		{args: "launch " + strings.ToLower(transcriptUDID) + " com.example"},
		{args: "io " + transcriptUDID + " screenshot /tmp/s.png"},
		{args: "spawn -w " + transcriptUDID + " launchctl list"},
		{args: "pbsync " + transcriptUDID + " host"},
		{args: "pbsync host " + transcriptUDID},
		{args: "getenv"}, // no device: simctl prints the usage
		{args: "install " + otherUDID + " /tmp/App.app", reason: "names a device other than the lease's"},
		{args: "launch --console " + otherUDID + " com.example", reason: otherUDID},
		{args: "launch booted com.example", reason: "booted may pick another lease's device"},
		{args: "io BOOTED screenshot x.png", reason: "booted"},
		{args: "openurl 'iPhone 16' https://example.com", reason: "names a device other"},
		{args: "privacy " + otherUDID + " grant all com.example", reason: otherUDID},
		{args: "pbsync " + transcriptUDID + " " + otherUDID, reason: "pbsync"},
		{args: "pair " + transcriptUDID + " " + otherUDID, reason: "joins two devices"},
		{args: "unpair 1234", reason: "joins two devices"},
		{args: "erase " + transcriptUDID, reason: "behind simlock's back"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			cmd, err := h.d.ResolvePassthrough("simctl", strings.Fields(tc.args), pinned(transcriptUDID))
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := append([]string{"simctl", "--set", h.root}, strings.Fields(tc.args)...); !slices.Equal(cmd.Args, want) {
					t.Fatalf("args %q", cmd.Args)
				}
				return
			}
			if !errors.Is(err, ErrPassthroughRefused) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v, want a refusal mentioning %q", err, tc.reason)
			}
		})
	}
	// The refusal names the way forward.
	_, err := h.d.ResolvePassthrough("simctl", []string{"launch", "booted", "x"}, pinned(transcriptUDID))
	var se *core.SpecError
	if !errors.As(err, &se) || !strings.Contains(se.Next, "simctl launch "+transcriptUDID) {
		t.Fatalf("next step: %+v", err)
	}
}

func FuzzPinnedSimctl(f *testing.F) {
	for _, s := range []string{"list", "launch booted x", "install " + otherUDID + " a.app", "launch " + transcriptUDID + " x",
		"pbsync host " + otherUDID, "pair a b", "io -x " + otherUDID + " screenshot", "--set /x list", "help"} {
		f.Add(s)
	}
	root := f.TempDir()
	d, err := New(Options{Root: root})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		cmd, err := d.ResolvePassthrough("simctl", args, pinned(transcriptUDID))
		if err != nil {
			if !errors.Is(err, ErrPassthroughRefused) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(cmd.Args) < 3 || cmd.Args[1] != "--set" || cmd.Args[2] != root {
			t.Fatalf("args %q escape the root", cmd.Args)
		}
		if len(args) == 0 {
			return
		}
		// Whatever passes names no device but the lease's where simctl
		// expects one (pbsync may also name the host).
		verb := strings.ToLower(args[0])
		if deviceFreeVerbs[verb] {
			return
		}
		if pairVerbs[verb] {
			t.Fatalf("%q passed", args)
		}
		if dev := firstPositional(args); dev != "" && !strings.EqualFold(dev, transcriptUDID) &&
			!(verb == "pbsync" && strings.EqualFold(dev, "host")) {
			t.Fatalf("%q passed naming %s", args, dev)
		}
	})
}

func firstPositional(args []string) string {
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
