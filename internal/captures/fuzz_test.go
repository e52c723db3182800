package captures

import (
	"bytes"
	"testing"
)

// Scrubbing is a fixed point: a scrubbed capture scrubbed again by the same
// recording's scrubber does not change, so placeholders are never mistaken
// for new identifiers. Shapes are read from anything without a panic.
func FuzzScrubAndShape(f *testing.F) {
	f.Add("simctl", []byte(`{"devices":{"iOS 17":[{"udid":"7E7B227C-6A5D-4A61-BE04-31E1D26648A5","dataPath":"\/Users\/bob\/x"}]}}`))
	f.Add("adb", []byte("List of devices attached\nR58M12ABCDE\tdevice usb:1-1 product:x\n[ro.serialno]: [R58M]\n"))
	f.Add("adb", []byte("error: device 'emulator-5998' not found\n"))
	f.Add("emulator", []byte("bob on bobs-host at /tmp/x a4:83:e7:12:34:56\n"))
	f.Fuzz(func(t *testing.T, tool string, b []byte) {
		s := NewScrubber(Identity{Home: "/Users/bob", TempDir: "/tmp", Scratch: "/tmp/simlock-selftest-1", User: "bob", Host: "bobs-host"})
		once := s.Scrub(tool, b)
		if twice := s.Scrub(tool, once); !bytes.Equal(once, twice) {
			t.Fatalf("scrubbing again changed it:\n%q\n%q", once, twice)
		}
		for _, refusal := range []bool{false, true} {
			r := &Recording{Manifest: Manifest{Captures: []Entry{{Tool: tool, Probe: "devices-l", Refusal: refusal}}},
				Out: map[int][]byte{0: once}, Err: map[int][]byte{0: once}}
			sh := ShapeOf(r, 0)
			if ds := Compare(tool, "p", sh, sh); len(ds) != 0 {
				t.Fatalf("a shape differs from itself: %v", ds)
			}
		}
	})
}
