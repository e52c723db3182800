package ios

import (
	"testing"

	"github.com/simlock/simlock/internal/captures"
)

// capturesRoot holds every recording contributed so far (see
// docs/real-machine.md, "Sending captures").
const capturesRoot = "../../../testdata/captures"

// Every simctl, xcodebuild and launchctl output in testdata/captures goes
// through the parser the driver uses for it, and what that parser reads
// must be there: a listing that parses to nothing is a parser that has
// stopped understanding the tool.
func TestEveryRecordedXcodeOutputParses(t *testing.T) {
	recs, err := captures.LoadAll(capturesRoot)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, rec := range recs {
		for i, e := range rec.Manifest.Captures {
			out, errOut := rec.Out[i], rec.Err[i]
			where := rec.Dir + ": " + e.Tool + " " + e.Probe + " (" + e.ToolVersion + ")"
			switch {
			case e.Tool == "simctl" && e.Refusal:
				if e.Probe == "boot-already-booted" {
					se, ok := ParseError(string(errOut))
					if !ok || se.Code == 0 {
						t.Errorf("%s: no simctl error in %q", where, errOut)
					}
				}
			case e.Tool == "simctl" && (e.Probe == "list-json" || e.Probe == "list-devices-json" || e.Probe == "list-runtimes-json" || e.Probe == "list-devicetypes-json"):
				l, err := ParseListJSON(out)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if e.Probe == "list-json" && (len(l.DeviceTypes) == 0 || len(l.Runtimes) == 0) {
					t.Errorf("%s: %d device types, %d runtimes", where, len(l.DeviceTypes), len(l.Runtimes))
				}
				if e.Probe == "list-runtimes-json" && len(l.Runtimes) == 0 {
					t.Errorf("%s: no runtimes", where)
				}
			case e.Tool == "simctl" && e.Probe == "list-runtimes-text":
				if len(ParseRuntimesText(string(out))) == 0 {
					t.Errorf("%s: no runtimes", where)
				}
			case e.Tool == "simctl" && (e.Probe == "list-text" || e.Probe == "list-devices-text"):
				l := ParseListText(string(out))
				if e.Probe == "list-text" && len(l.Runtimes) == 0 {
					t.Errorf("%s: no runtimes", where)
				}
				if len(l.Devices) == 0 && len(l.Runtimes) == 0 {
					t.Errorf("%s: nothing parsed; unparsed %q", where, l.Unparsed)
				}
			case e.Tool == "simctl" && e.Probe == "runtime-match-list-json":
				if e.ExitCode != 0 {
					continue // a simulated SDK that does not model it says so
				}
				if _, err := ParseRuntimeMatchJSON(out); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			case e.Tool == "simctl" && e.Probe == "launchctl-print-disabled":
				if _, err := ParsePrintDisabled(out); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			case e.Tool == "xcodebuild" && e.Probe == "version":
				if captures.XcodeVersion(out) == "unknown" {
					t.Errorf("%s: no Xcode version in %q", where, out)
				}
			default:
				continue
			}
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no Xcode captures under " + capturesRoot)
	}
	t.Logf("%d Xcode captures parsed from %d recordings", seen, len(recs))
}
