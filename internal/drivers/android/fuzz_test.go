package android

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// seedDir adds every capture under testdata/dir to f's corpus, so plain
// `go test` runs each decoder over the real outputs.
func seedDir(f *testing.F, dirs ...string) {
	f.Helper()
	for _, dir := range dirs {
		ents, err := os.ReadDir(filepath.Join("testdata", dir))
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range ents {
			f.Add(fixture(f, filepath.Join(dir, e.Name())))
		}
	}
}

func FuzzParseADBDevices(f *testing.F) {
	seedDir(f, "adb")
	f.Add([]byte("List of devices attached \nemulator-5700\tno permissions (user not in plugdev); see [http://x]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		devs, err := parseADBDevices(b)
		if err != nil && err != errNoDeviceList {
			t.Fatalf("unexpected error %v", err)
		}
		var render strings.Builder
		render.WriteString(adbListHeader + "\n")
		for _, d := range devs {
			if d.Serial == "" || strings.ContainsAny(d.Serial, " \t\r\n") || d.State == "" {
				t.Fatalf("bad row %+v", d)
			}
			render.WriteString(d.Serial + "\t" + d.State + "\n")
		}
		// Serial and state survive a round trip through adb's own layout.
		again, err := parseADBDevices([]byte(render.String()))
		if err != nil || len(again) != len(devs) {
			t.Fatalf("round trip: %d rows, %v; want %d", len(again), err, len(devs))
		}
		for i := range devs {
			if again[i].Serial != devs[i].Serial || again[i].State != devs[i].State {
				t.Fatalf("round trip row %d: %+v != %+v", i, again[i], devs[i])
			}
		}
	})
}

func FuzzParseGetprop(f *testing.F) {
	seedDir(f, "adb")
	f.Add([]byte("[a]: [line1\nline2]\n[b]: []\r\r\n[c]: [open"))
	f.Fuzz(func(t *testing.T, b []byte) {
		props := parseGetprop(b)
		keys := make([]string, 0, len(props))
		for k := range props {
			if k == "" || strings.Contains(k, "\n") || strings.Contains(k, "]: [") {
				t.Fatalf("bad key %q", k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var render strings.Builder
		for _, k := range keys {
			render.WriteString("\n[" + k + "]: [" + props[k] + "]\n")
		}
		if again := parseGetprop([]byte(render.String())); !reflect.DeepEqual(again, props) {
			t.Fatalf("round trip changed the properties:\n%q\n%q", props, again)
		}
	})
}

func FuzzParseDeviceList(f *testing.F) {
	seedDir(f, "avdmanager")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range parseDeviceList(b) {
			if p.Index < 0 || strings.Contains(p.ID, "\n") {
				t.Fatalf("bad profile %+v", p)
			}
		}
	})
}

func FuzzParseAVDList(f *testing.F) {
	seedDir(f, "avdmanager")
	f.Fuzz(func(t *testing.T, b []byte) {
		loaded, broken := parseAVDList(b)
		for _, e := range append(loaded, broken...) {
			if e.Name == "" || e.APILevel < 0 {
				t.Fatalf("bad entry %+v", e)
			}
		}
		for _, e := range loaded {
			if e.Error != "" {
				t.Fatalf("loaded entry with an error %+v", e)
			}
		}
		_ = avdmanagerError(b)
	})
}

func FuzzParseSDKList(f *testing.F) {
	seedDir(f, "sdkmanager")
	f.Fuzz(func(t *testing.T, b []byte) {
		l := parseSDKList(b)
		rows := len(l.Installed) + len(l.Available) + len(l.Updates)
		if rows > strings.Count(string(b), "|") {
			t.Fatalf("%d rows from %d separators", rows, strings.Count(string(b), "|"))
		}
		for _, p := range append(l.Installed, l.Available...) {
			if p.Path == "" || p.Path == "Path" || strings.Contains(p.Path+p.Version+p.Description+p.Location, "|") {
				t.Fatalf("bad row %+v", p)
			}
		}
		for _, u := range l.Updates {
			if u.ID == "" || u.ID == "ID" {
				t.Fatalf("bad update %+v", u)
			}
		}
		for _, img := range imagesIn(l.Installed) {
			if img.Package == "" || img.Tag == "" || img.ABI == "" {
				t.Fatalf("bad image %+v", img)
			}
		}
	})
}

func FuzzParseImagePackage(f *testing.F) {
	for _, s := range []string{
		"system-images;android-35;google_apis;x86_64", "system-images;android-36.1;google_apis_ps16k;arm64-v8a",
		"system-images;android-35-ext15;google_apis;x86_64", "system-images;android-36.0-Baklava;google_apis;x86_64",
		"system-images;android-CANARY;google_apis;x86_64", "platforms;android-35",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		img, ok := parseImagePackage(s)
		if !ok {
			return
		}
		if img.Package != s || img.Tag == "" || img.ABI == "" || img.APILevel < 0 || img.Minor < 0 || img.Ext < 0 {
			t.Fatalf("bad image %+v", img)
		}
		if img.APILevel == 0 && img.Codename == "" {
			t.Fatalf("image with neither level nor codename %+v", img)
		}
	})
}

func FuzzParseListAVDs(f *testing.F) {
	seedDir(f, "emulator")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range parseListAVDs(b) {
			if n == "" || strings.ContainsAny(n, " \t\r\n|") {
				t.Fatalf("bad name %q", n)
			}
		}
		_ = emulatorUnknownAVD(b)
		if v := parseEmulatorVersion(b); strings.Contains(v, "\n") {
			t.Fatalf("version spans lines: %q", v)
		}
	})
}

func FuzzParseConsoleReply(f *testing.F) {
	seedDir(f, "emulator")
	f.Add([]byte("KO: unknown command\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := parseConsoleReply(b)
		if r.OK && r.Err != "" {
			t.Fatalf("both OK and KO: %+v", r)
		}
		for _, l := range r.Lines {
			if l == "" || strings.Contains(l, "\n") {
				t.Fatalf("bad line %q", l)
			}
		}
	})
}

func FuzzParseADBVersion(f *testing.F) {
	seedDir(f, "adb")
	f.Fuzz(func(t *testing.T, b []byte) {
		v := parseADBVersion(b)
		if strings.ContainsAny(v.Protocol+v.Version, "\r\n") {
			t.Fatalf("field spans lines: %+v", v)
		}
	})
}

func FuzzParseINI(f *testing.F) {
	seedDir(f, "avd")
	f.Add([]byte("a = b\r\n#c=d\n;e=f\n = g\nh=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ini := parseINI(b)
		var render strings.Builder
		for _, k := range ini.keys() {
			v := ini[k]
			if k == "" || k != strings.TrimSpace(k) || strings.ContainsAny(k, "=\n") || k[0] == '#' || k[0] == ';' {
				t.Fatalf("bad key %q", k)
			}
			if v != strings.TrimSpace(v) || strings.Contains(v, "\n") {
				t.Fatalf("bad value %q", v)
			}
			render.WriteString("\n" + k + " = " + v + "\n")
		}
		if again := parseINI([]byte(render.String())); !reflect.DeepEqual(again, ini) {
			t.Fatalf("round trip changed the file:\n%q\n%q", ini, again)
		}
	})
}

func FuzzParseOSRequest(f *testing.F) {
	for _, s := range []string{"15", "16", "15.0", "API 35", "api-36", "android-34", "12L", "7.1.1", "Android 14", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		api, err := parseOSRequest(s)
		if err != nil {
			return
		}
		if api < 1 || api > 1000 {
			t.Fatalf("%q → API %d", s, api)
		}
		// The spelling a spec reports resolves back to the same level.
		if again, err := parseOSRequest(releaseForAPI(api)); err != nil || again != api {
			t.Fatalf("%q → %d → %q → %d, %v", s, api, releaseForAPI(api), again, err)
		}
	})
}

func FuzzParseDumpsysWindow(f *testing.F) {
	seedDir(f, "real")
	f.Add([]byte("  Display: mDisplayId=0\n    init=1080x2400 cur=2400x1080\n    mRotation=ROTATION_90 x={[(\n    isKeyguardShowing=true\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ws := parseDumpsysWindow(b)
		if ws.Rotation < -1 || ws.Rotation > 3 {
			t.Fatalf("rotation %d", ws.Rotation)
		}
		switch ws.Orientation {
		case "", contract.OrientationPortrait, contract.OrientationLandscape:
		default:
			t.Fatalf("orientation %q", ws.Orientation)
		}
		// An orientation is only ever stated with the rotation it came from.
		if ws.Orientation != "" && ws.Rotation < 0 {
			t.Fatalf("orientation %q without a rotation", ws.Orientation)
		}
		// Line endings do not change the reading.
		crlf := parseDumpsysWindow([]byte(strings.ReplaceAll(string(b), "\n", "\r\n")))
		if lockOf(crlf.Locked) != lockOf(ws.Locked) || crlf.Rotation != ws.Rotation || crlf.Orientation != ws.Orientation {
			t.Fatalf("CRLF changed the reading: %+v vs %+v", crlf, ws)
		}
	})
}
