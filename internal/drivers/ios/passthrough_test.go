package ios

import (
	"errors"
	"slices"
	"testing"
)

func TestResolvePassthrough(t *testing.T) {
	h := newHarness(t)
	cmd, err := h.d.ResolvePassthrough("simctl", []string{"io", transcriptUDID, "screenshot", "/tmp/s.png"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"simctl", "--set", h.root, "io", transcriptUDID, "screenshot", "/tmp/s.png"}
	if cmd.Name != "xcrun" || !slices.Equal(cmd.Args, want) {
		t.Fatalf("command %s %q", cmd.Name, cmd.Args)
	}
	if _, err := h.d.ResolvePassthrough("simctl", nil, true); err != nil {
		t.Fatalf("bare simctl (usage): %v", err)
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
		if _, err := h.d.ResolvePassthrough("simctl", args, true); !errors.Is(err, ErrPassthroughRefused) {
			t.Errorf("%q: error %v", args, err)
		}
	}
	if _, err := h.d.ResolvePassthrough("adb", []string{"devices"}, true); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("error %v", err)
	}
}
