package ios

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// Fuzz targets: each seeds its corpus with the real captures so that plain
// `go test` replays them, and `go test -fuzz` mutates from real shapes.

func seedFixtures(f *testing.F, patterns ...string) {
	f.Helper()
	for _, p := range patterns {
		files, err := filepath.Glob(filepath.Join("testdata", p))
		if err != nil || len(files) == 0 {
			f.Fatalf("no seeds for %s", p)
		}
		for _, file := range files {
			rel, _ := filepath.Rel("testdata", file)
			f.Add(readFixture(f, rel))
		}
	}
}

func FuzzParseListJSON(f *testing.F) {
	seedFixtures(f, "*.json")
	f.Add([]byte(`{"devices": {"x": [{"udid": 1}]}}`))
	f.Add([]byte(`{"devicetypes": [{"minRuntimeVersion": "x", "maxRuntimeVersionString": "65535.255.255"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseListJSON(b)
		if err != nil {
			return
		}
		for _, r := range l.Runtimes {
			if !r.SupportedKnown && r.SupportedDeviceTypes != nil {
				t.Fatalf("supported types without the field: %+v", r)
			}
		}
		for _, d := range l.Devices {
			switch runState(d.State) {
			case core.RunRunning, core.RunStopped, core.RunTransitioning:
			default:
				t.Fatalf("state %q maps outside the three values", d.State)
			}
		}
		for _, dt := range l.DeviceTypes {
			if dt.HasMax() && dt.MaxRuntime.Major >= unboundedMajor {
				t.Fatalf("unbounded max reported as bounded: %+v", dt)
			}
		}
		// Resolution and the catalog must cope with whatever parsed.
		catalogOf(l)
		res, err := resolve(l, "", "")
		if err == nil && (res.runtime.Identifier == "" && res.runtime.Version == "" && res.model.Name == "") {
			t.Fatalf("empty successful resolution %+v", res)
		}
		resolve(l, "iPhone 16", "18")
	})
}

func FuzzParseListText(f *testing.F) {
	seedFixtures(f, "list-*text*.txt", "xcode26.3-session-transcript.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		l := ParseListText(s)
		for _, d := range l.Devices {
			if !IsUDID(d.UDID) || d.Name == "" || d.State == "" {
				t.Fatalf("device %+v", d)
			}
			if !strings.Contains(s, d.UDID) {
				t.Fatalf("UDID %q not in input", d.UDID)
			}
		}
		for _, p := range l.Pairs {
			if !IsUDID(p.ID) {
				t.Fatalf("pair %+v", p)
			}
		}
		for _, r := range l.Runtimes {
			if r.Identifier == "" || strings.ContainsAny(r.Identifier, " \t") {
				t.Fatalf("runtime %+v", r)
			}
		}
		for _, dt := range l.DeviceTypes {
			if dt.Identifier == "" || dt.Name == "" {
				t.Fatalf("device type %+v", dt)
			}
		}
		if n := len(ParseRuntimesText(s)); n != len(l.Runtimes) {
			t.Fatalf("ParseRuntimesText found %d, list %d", n, len(l.Runtimes))
		}
	})
}

func FuzzParseError(f *testing.F) {
	seedFixtures(f, "errors/*.txt")
	f.Add([]byte("An error was encountered processing the command (code=146):\nUnable to erase contents and settings in current state: Booted\n"))
	f.Add([]byte("Invalid device: 03423413-ED3A-44FD-AD37-E9B456938AAA\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		e, ok := ParseError(s)
		if !ok {
			if e != nil {
				t.Fatal("error returned without ok")
			}
			return
		}
		if !strings.Contains(s, "An error was encountered processing the command (") {
			t.Fatalf("found an error in %q", s)
		}
		if e.Error() == "" {
			t.Fatal("empty message")
		}
		depth := 0
		for u := e.Underlying; u != nil; u = u.Underlying {
			depth++
		}
		if depth > strings.Count(s, "Underlying error (") {
			t.Fatalf("%d underlying errors from %q", depth, s)
		}
		if st, ok := e.CurrentState(); ok && strings.Contains(string(st), "\n") {
			t.Fatalf("state %q spans lines", st)
		}
	})
}

func FuzzParseCreateOutput(f *testing.F) {
	f.Add([]byte(transcriptUDID + "\n"))
	f.Add([]byte("noise\n" + transcriptUDID))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		udid, err := ParseCreateOutput(s)
		if err != nil {
			return
		}
		if !IsUDID(udid) || !strings.Contains(s, udid) {
			t.Fatalf("got %q from %q", udid, s)
		}
	})
}

func FuzzParseBootStatus(f *testing.F) {
	seedFixtures(f, "bootstatus-*.txt", "xcode26.3-session-transcript.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		bs := ParseBootStatus(string(b))
		if bs.UDID != "" && !IsUDID(bs.UDID) {
			t.Fatalf("udid %q", bs.UDID)
		}
		if bs.AlreadyBooted && !bs.Finished {
			t.Fatal("already booted but not finished")
		}
	})
}

func FuzzParseRuntimeMatchJSON(f *testing.F) {
	seedFixtures(f, "runtime-match-*.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseRuntimeMatchJSON(b)
		if err != nil {
			return
		}
		// Every member of a JSON object needs its own colon.
		if len(ms) > strings.Count(string(b), ":") {
			t.Fatalf("%d entries from %q", len(ms), b)
		}
	})
}

func FuzzVersion(f *testing.F) {
	for _, s := range []string{"18.0", "17.0.1", "65535.255.255", "18", "iOS 18.0", "com.apple.CoreSimulator.SimRuntime.iOS-18-0", "1.2.3.4", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseVersion(s); err == nil {
			back, err := ParseVersion(v.String())
			if err != nil || back != v {
				t.Fatalf("%q -> %v -> %q -> %v, %v", s, v, v.String(), back, err)
			}
		}
		p, ok := requestedVersion(s)
		if !ok {
			return
		}
		if !p.matches(p.v) || p.low().Compare(p.high()) > 0 {
			t.Fatalf("prefix %+v inconsistent", p)
		}
		if q, ok := requestedVersion(p.String()); !ok || q != p {
			t.Fatalf("%q -> %v -> %q -> %v", s, p, p.String(), q)
		}
	})
}
