package android

import (
	"testing"

	"github.com/simlock/simlock/internal/captures"
)

const capturesRoot = "../../../testdata/captures"

// Every adb, emulator and avdmanager output in testdata/captures goes
// through the parser the driver uses for it, and yields what the driver
// reads from it.
func TestEveryRecordedAndroidOutputParses(t *testing.T) {
	recs, err := captures.LoadAll(capturesRoot)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, rec := range recs {
		for i, e := range rec.Manifest.Captures {
			out := rec.Out[i]
			where := rec.Dir + ": " + e.Tool + " " + e.Probe + " (" + e.ToolVersion + ")"
			switch {
			case e.Refusal:
				continue
			case e.Tool == "adb" && (e.Probe == "devices" || e.Probe == "devices-l"):
				devs, err := parseADBDevices(out)
				if err != nil {
					t.Errorf("%s: %v", where, err)
				}
				for _, d := range devs {
					// A TCP device may carry no -l fields at all (adb prints none
					// it does not know), so only the serial and state are sure.
					if d.Serial == "" || d.State == "" {
						t.Errorf("%s: device %+v", where, d)
					}
				}
			case e.Tool == "adb" && e.Probe == "getprop":
				if p := parseGetprop(out); p["ro.build.version.sdk"] == "" {
					t.Errorf("%s: no ro.build.version.sdk among %d properties", where, len(p))
				}
			case e.Tool == "adb" && e.Probe == "version":
				if v := parseADBVersion(out); v.Protocol == "" {
					t.Errorf("%s: no protocol version in %q", where, out)
				}
			case e.Tool == "emulator" && e.Probe == "version":
				if parseEmulatorVersion(out) == "" {
					t.Errorf("%s: no version in %q", where, out)
				}
			case e.Tool == "emulator" && e.Probe == "list-avds":
				for _, n := range parseListAVDs(out) {
					if n == "" || len(n) > 200 {
						t.Errorf("%s: AVD name %q", where, n)
					}
				}
			case e.Tool == "avdmanager" && e.Probe == "list-avd":
				loaded, broken := parseAVDList(out)
				for _, a := range append(loaded, broken...) {
					if a.Name == "" {
						t.Errorf("%s: an AVD without a name: %+v", where, a)
					}
				}
			case e.Tool == "avdmanager" && e.Probe == "list-device":
				if len(parseDeviceList(out)) == 0 {
					t.Errorf("%s: no device profiles", where)
				}
			default:
				continue
			}
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no Android captures under " + capturesRoot)
	}
	t.Logf("%d Android captures parsed from %d recordings", seen, len(recs))
}
