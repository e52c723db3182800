package captures

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScrubReplacesWhatNamesTheMachineAndKeepsShapes(t *testing.T) {
	s := NewScrubber(Identity{Home: "/Users/alice", Scratch: "/var/folders/xy/T/simlock-selftest-1", TempDir: "/var/folders/xy/T", User: "alice", Host: "alices-mbp"})
	in := `{"dataPath" : "\/Users\/alice\/Library\/x", "logPath" : "\/private\/var\/folders\/xy\/T\/simlock-selftest-1\/logs",
"udid" : "7e7b227c-6a5d-4a61-be04-31e1d26648a5", "again" : "7E7B227C-6A5D-4A61-BE04-31E1D26648A5",
"other" : "1BE9C4A2-0000-4C40-815F-44A9F35EA736", "owner" : "alice on alices-mbp", "word" : "malice", "mac" : "a4:83:e7:12:34:56"}`
	out := s.ScrubString(in)
	for _, leak := range []string{"alice\\/", "/Users/alice", "7E7B227C", "7e7b227c", "1BE9C4A2", "alices-mbp", "xy", "a4:83"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q survived scrubbing:\n%s", leak, out)
		}
	}
	for _, keep := range []string{`\/HOME\/Library\/x`, `\/SCRATCH\/logs`, "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", `"USER on HOST"`, "malice"} {
		if !strings.Contains(out, keep) {
			t.Errorf("scrubbed text lacks %q:\n%s", keep, out)
		}
	}
	// The same UDID is the same placeholder in both spellings and in later
	// files, and a placeholder is never scrubbed again into another one.
	if strings.Count(out, "00000000-0000-4000-8000-000000000001") != 2 {
		t.Errorf("one UDID, two placeholders:\n%s", out)
	}
	if got := s.ScrubString("boot 7E7B227C-6A5D-4A61-BE04-31E1D26648A5 " + "00000000-0000-4000-8000-000000000002"); got != "boot 00000000-0000-4000-8000-000000000001 00000000-0000-4000-8000-000000000002" {
		t.Errorf("second file: %q", got)
	}
}

func TestScrubHidesPhysicalSerialsOnlyInADBOutput(t *testing.T) {
	s := NewScrubber(Identity{})
	devs := "List of devices attached\nR58M12ABCDE\tdevice usb:1-1 product:x model:SM_G973F transport_id:2\nemulator-5554\tdevice\n192.168.1.20:5555\toffline\n"
	out := string(s.Scrub("adb", []byte(devs)))
	if strings.Contains(out, "R58M12ABCDE") || !strings.Contains(out, "SERIAL0001\tdevice usb:1-1") {
		t.Errorf("physical serial:\n%s", out)
	}
	if !strings.Contains(out, "emulator-5554\tdevice") || !strings.Contains(out, "192.168.1.20:5555\toffline") {
		t.Errorf("emulator and TCP serials must stay:\n%s", out)
	}
	prop := string(s.Scrub("adb", []byte("[ro.serialno]: [R58M12ABCDE]\n[ro.product.model]: [SM-G973F]\n")))
	if prop != "[ro.serialno]: [SERIAL0001]\n[ro.product.model]: [SM-G973F]\n" {
		t.Errorf("getprop: %q", prop)
	}
	simctl := "Invalid device: 7E7B227C-6A5D-4A61-BE04-31E1D26648A5"
	if got := string(s.Scrub("simctl", []byte(simctl))); !strings.HasPrefix(got, "Invalid device: 00000000-") {
		t.Errorf("simctl's refusal read as an adb device line: %q", got)
	}
}

func TestVersionsNameTheToolRelease(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{XcodeVersion([]byte("Xcode 26.3\nBuild version 17C52\n")), "xcode26.3"},
		{ADBVersion([]byte("Android Debug Bridge version 1.0.41\nVersion 36.0.0-13206524\nInstalled as /x/adb\n")), "platform-tools36.0.0"},
		{ADBVersion([]byte("Android Debug Bridge version 1.0.39\nRevision 3db08f2c6889-android\n")), "adb1.0.39"},
		{EmulatorVersion([]byte("INFO    | Android emulator version 36.1.9.0 (build_id 1) (CL:N/A)\n")), "emulator36.1.9.0"},
		{CmdlineToolsVersion([]byte("19.0\n")), "cmdline-tools19.0"},
		{CmdlineToolsVersion([]byte("Warning: something\n")), "unknown"},
		{XcodeVersion(nil), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestFileNamesStayInsideTheRecording(t *testing.T) {
	if got := FileName("adb", "devices-l", "platform-tools36.0.0", "darwin", false); got != "adb/devices-l.platform-tools36.0.0.darwin.txt" {
		t.Errorf("got %q", got)
	}
	if got := FileName("simctl", "list", "../../etc/x y", "linux", true); strings.Contains(got, "..") || strings.Contains(got, " ") || !strings.HasSuffix(got, ".stderr.txt") {
		t.Errorf("unsafe version made %q", got)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"format":1,"os":"linux","captures":[{"tool":"adb","probe":"x","stdout":"../secret"}]}`), 0o644)
	if _, err := Load(dir); err == nil {
		t.Error("a manifest naming a file outside its recording loaded")
	}
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"format":2,"os":"linux","captures":[]}`), 0o644)
	if _, err := Load(dir); err == nil {
		t.Error("a manifest of an unknown format loaded")
	}
}

func rec(entries []Entry, out ...string) *Recording {
	r := &Recording{Manifest: Manifest{Format: Format, Captures: entries}, Out: map[int][]byte{}, Err: map[int][]byte{}}
	for i := range entries {
		if entries[i].Refusal {
			r.Err[i] = []byte(out[i])
		} else {
			r.Out[i] = []byte(out[i])
		}
	}
	return r
}

func TestCompareFindsMissingKeysReorderedColumnsAndRewordedRefusals(t *testing.T) {
	real := rec([]Entry{{Tool: "simctl", Probe: "list-devices-json"}, {Tool: "adb", Probe: "devices-l"}, {Tool: "simctl", Probe: "boot-already-booted", Refusal: true, ExitCode: 149}},
		`{"devices":{"com.apple.CoreSimulator.SimRuntime.iOS-26-3":[{"udid":"A","state":"Booted","deviceTypeIdentifier":"x"}]}}`,
		"List of devices attached\nemulator-5554          device product:sdk model:sdk device:emu transport_id:1\n",
		"An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\nUnable to boot device in current state: Booted\n")
	same := rec([]Entry{{Tool: "simctl", Probe: "list-devices-json"}, {Tool: "adb", Probe: "devices-l"}, {Tool: "simctl", Probe: "boot-already-booted", Refusal: true, ExitCode: 149}},
		`{"devices":{"com.apple.CoreSimulator.SimRuntime.iOS-18-0":[],"com.apple.CoreSimulator.SimRuntime.iOS-26-3":[{"udid":"B","state":"Shutdown","deviceTypeIdentifier":"y"}]}}`,
		"List of devices attached\nemulator-5700          device product:p model:m device:d transport_id:7\n",
		"An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\nUnable to boot device in current state: Booted\n")
	for i := range real.Manifest.Captures {
		if ds := Compare("t", "p", ShapeOf(same, i), ShapeOf(real, i)); len(ds) != 0 {
			t.Errorf("entry %d: same shape, different values, reported %v", i, ds)
		}
	}
	off := rec([]Entry{{Tool: "simctl", Probe: "list-devices-json"}, {Tool: "adb", Probe: "devices-l"}, {Tool: "simctl", Probe: "boot-already-booted", Refusal: true, ExitCode: 1}},
		`{"devices":{"com.apple.CoreSimulator.SimRuntime.iOS-26-3":[{"udid":"B","status":"Shutdown","deviceTypeIdentifier":"y"}]}}`,
		"List of devices attached\nemulator-5700          device model:m product:p device:d transport_id:7\n",
		"error: device already booted\n")
	want := []string{"key missing from the simulator: devices.*.[].state", "key the tool does not print: devices.*.[].status"}
	ds := Compare("simctl", "list-devices-json", ShapeOf(off, 0), ShapeOf(real, 0))
	if len(ds) != 2 || ds[0].What != want[0] || ds[1].What != want[1] {
		t.Errorf("json: %v", ds)
	}
	if ds := Compare("adb", "devices-l", ShapeOf(off, 1), ShapeOf(real, 1)); len(ds) != 1 || !strings.Contains(ds[0].What, "device fields") {
		t.Errorf("columns: %v", ds)
	}
	if ds := Compare("simctl", "boot", ShapeOf(off, 2), ShapeOf(real, 2)); len(ds) != 2 {
		t.Errorf("refusal: %v", ds)
	}
}
