package simsdk

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The captured machine's Xcode was "Xcode-16RC.app"; the simulated one is
// "Xcode.app". Otherwise the catalog parts must match the capture byte for
// byte.
func captureAsSimulated(s string) string {
	return strings.ReplaceAll(s, `Xcode-16RC.app`, `Xcode.app`)
}

func TestListJSONDeviceTypesAreByteIdenticalToCapture(t *testing.T) {
	h := newHarness(t)
	got := h.must("list", "-j")
	want := captureAsSimulated(readTestdata(t, "list-json-xcode16.0.json"))
	cut := func(s string) string {
		i := strings.Index(s, `  "runtimes" : [`)
		if i < 0 {
			t.Fatalf("no runtimes section in:\n%.300s", s)
		}
		return s[:i]
	}
	if g, w := cut(got), cut(want); g != w {
		t.Errorf("devicetypes section differs from the capture\n%s", firstDiff(g, w))
	}
	if !strings.HasSuffix(got, "  \"pairs\" : {\n\n  }\n}\n") {
		t.Errorf("output does not end like the capture: %q", got[max(0, len(got)-40):])
	}
}

func TestListJSONRuntimeObjectsAreByteIdenticalToCapture(t *testing.T) {
	h := newHarness(t)
	got := h.must("list", "runtimes", "-j")
	want := captureAsSimulated(readTestdata(t, "list-json-xcode16.0.json"))
	// Each captured runtime object must appear verbatim (at the same
	// indentation) in the simulated output.
	for _, id := range []string{"iOS-17-5", "iOS-18-0", "xrOS-1-2"} {
		obj := runtimeObjectText(t, want, id)
		if !strings.Contains(got, obj) {
			t.Errorf("runtime %s differs from the capture\n%s", id, firstDiff(runtimeObjectText(t, got, id), obj))
		}
	}
}

// runtimeObjectText cuts the text of one runtime object out of list output.
func runtimeObjectText(t *testing.T, s, id string) string {
	t.Helper()
	key := `"identifier" : "com.apple.CoreSimulator.SimRuntime.` + id + `"`
	i := strings.Index(s, key)
	if i < 0 {
		t.Fatalf("runtime %s not found", id)
	}
	start := strings.LastIndex(s[:i], "\n    {\n") + 1
	end := strings.Index(s[i:], "\n    }") + i + len("\n    }")
	return s[start:end]
}

func firstDiff(got, want string) string {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return fmt.Sprintf("line %d:\n got: %q\nwant: %q", i+1, g, w)
		}
	}
	return "(no line differs)"
}

// orderedKeys returns the key order of every JSON object in data, in
// document order, keyed by the object's path (array indices as "[]").
func orderedKeys(t *testing.T, data string) map[string][][]string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(data))
	out := map[string][][]string{}
	var walk func(path string) // called with the opening token consumed
	walk = func(path string) {
		var keys []string
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			key := tok.(string)
			keys = append(keys, key)
			sub := path + "." + key
			if strings.HasPrefix(key, "com.apple.CoreSimulator.SimRuntime.") {
				sub = path + ".<runtime>"
			}
			value(dec, sub, walk, t)
		}
		if _, err := dec.Token(); err != nil { // '}'
			t.Fatal(err)
		}
		out[path] = append(out[path], keys)
	}
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	walk("")
	return out
}

func value(dec *json.Decoder, path string, walk func(string), t *testing.T) {
	tok, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	switch tok {
	case json.Delim('{'):
		walk(path)
	case json.Delim('['):
		for dec.More() {
			value(dec, path+"[]", walk, t)
		}
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestListJSONKeyShapesMatchCapture(t *testing.T) {
	h := newHarness(t)
	never := h.create("Never Booted", "iPhone 15", "com.apple.CoreSimulator.SimRuntime.iOS-17-5")
	booted := h.create("Booted Once", "iPhone 15 Pro", "iOS 18.0")
	h.must("boot", booted)
	h.waitState(booted, "Booted")
	got := h.must("list", "-j")

	var parsed map[string]any
	if err := json.Unmarshal([]byte(got), &parsed); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	capture := orderedKeys(t, readTestdata(t, "list-json-xcode16.0.json"))
	ours := orderedKeys(t, got)

	for _, path := range []string{"", ".devicetypes[]", ".runtimes[]", ".runtimes[].supportedDeviceTypes[]"} {
		for _, keys := range ours[path] {
			if !slices.ContainsFunc(capture[path], func(k []string) bool { return slices.Equal(k, keys) }) {
				t.Errorf("%s: key order %v never occurs in the capture", path, keys)
			}
		}
	}
	// Devices: each shape we print must be one the capture shows, and both
	// the never-booted and the booted shape must be exercised.
	devPath := ".devices.<runtime>[]"
	if len(ours[devPath]) != 2 {
		t.Fatalf("want 2 devices, got shapes %v", ours[devPath])
	}
	for _, keys := range ours[devPath] {
		if !slices.ContainsFunc(capture[devPath], func(k []string) bool { return slices.Equal(k, keys) }) {
			t.Errorf("device key order %v never occurs in the capture", keys)
		}
	}
	devs := parsed["devices"].(map[string]any)
	find := func(udid string) map[string]any {
		for _, list := range devs {
			for _, d := range list.([]any) {
				if m := d.(map[string]any); m["udid"] == udid {
					return m
				}
			}
		}
		t.Fatalf("device %s missing from JSON", udid)
		return nil
	}
	if d := find(never); d["state"] != "Shutdown" || d["lastBootedAt"] != nil || d["isAvailable"] != true {
		t.Errorf("never-booted device: %v", d)
	}
	if d := find(booted); d["state"] != "Booted" || d["lastBootedAt"] == nil || d["deviceTypeIdentifier"] != "com.apple.CoreSimulator.SimDeviceType.iPhone-15-Pro" {
		t.Errorf("booted device: %v", d)
	}
	// Every installed runtime is a key, even without devices.
	for _, id := range []string{"iOS-17-5", "iOS-18-0", "iOS-26-3", "xrOS-1-2"} {
		if _, ok := devs["com.apple.CoreSimulator.SimRuntime."+id]; !ok {
			t.Errorf("devices has no key for runtime %s", id)
		}
	}
	if !strings.Contains(got, "\"com.apple.CoreSimulator.SimRuntime.xrOS-1-2\" : [\n\n    ]") {
		t.Error("an empty device list is not printed as simctl prints it")
	}
}

func TestListJSONSlashEscaping(t *testing.T) {
	h := newHarness(t)
	escaped := h.must("list", "devicetypes", "-j")
	if !strings.Contains(escaped, `"bundlePath" : "\/Applications\/Xcode.app\/Contents\/Developer\/Platforms\/iPhoneOS.platform`) {
		t.Errorf("slashes not escaped:\n%.400s", escaped)
	}
	plain := h.must("list", "devicetypes", "-j", "-e")
	if strings.Contains(plain, `\/`) || !strings.Contains(plain, `"bundlePath" : "/Applications/Xcode.app/`) {
		t.Errorf("-e still escapes slashes:\n%.400s", plain)
	}
	var a, b any
	if json.Unmarshal([]byte(escaped), &a) != nil || json.Unmarshal([]byte(plain), &b) != nil {
		t.Fatal("not JSON")
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("-e changed the content, not only the escaping")
	}
}

func TestRuntimeSupportFollowsCapture(t *testing.T) {
	var capture struct {
		Runtimes []struct {
			Identifier           string `json:"identifier"`
			SupportedDeviceTypes []struct {
				Identifier string `json:"identifier"`
			} `json:"supportedDeviceTypes"`
		} `json:"runtimes"`
	}
	if err := json.Unmarshal([]byte(readTestdata(t, "list-json-xcode16.0.json")), &capture); err != nil {
		t.Fatal(err)
	}
	for _, cr := range capture.Runtimes {
		r, ok := runtimeByID(iosRuntimes, cr.Identifier)
		if !ok {
			t.Fatalf("runtime %s missing from the catalog", cr.Identifier)
		}
		var want, got []string
		for _, d := range cr.SupportedDeviceTypes {
			want = append(want, d.Identifier)
		}
		for _, d := range r.supportedDeviceTypes() {
			got = append(got, d.Identifier)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s supports %v, capture says %v", cr.Identifier, got, want)
		}
	}
	ios26, _ := runtimeByID(iosRuntimes, "com.apple.CoreSimulator.SimRuntime.iOS-26-3")
	xs, _ := findDeviceType("iPhone Xs")
	if ios26.supports(xs) {
		t.Error("iOS 26.3 must not support iPhone Xs")
	}
	if pro, _ := findDeviceType("iPhone 16 Pro"); !ios26.supports(pro) {
		t.Error("iOS 26.3 must support iPhone 16 Pro (the transcript creates one)")
	}
}

// deviceLine is how every available device line of the Xcode 15 text
// capture looks.
var deviceLine = regexp.MustCompile(`^    (.+) \(([0-9A-F]{8}-[0-9A-F-]{27})\) \((Shutdown|Booted|Booting|Shutting Down|Creating)\) $`)

func TestListDevicesTextFormat(t *testing.T) {
	for _, line := range strings.Split(readTestdata(t, "list-devices-text-xcode15.txt"), "\n") {
		if strings.HasPrefix(line, "    ") && !strings.Contains(line, "unavailable") && !deviceLine.MatchString(line) {
			t.Fatalf("the pattern does not fit the capture line %q", line)
		}
	}
	h := newHarness(t)
	a := h.create("iPhone 15", "iPhone 15", "iOS 17.5")
	b := h.create("iPad Air 13-inch (M2)", "com.apple.CoreSimulator.SimDeviceType.iPad-Air-13-inch-M2", "iOS 17.5")
	c := h.create("Probe iPhone", "iPhone 16 Pro", "com.apple.CoreSimulator.SimRuntime.iOS-26-3")
	h.must("boot", c)
	got := h.must("list", "devices")
	want := "== Devices ==\n" +
		"-- iOS 17.5 --\n" +
		"    iPhone 15 (" + a + ") (Shutdown) \n" +
		"    iPad Air 13-inch (M2) (" + b + ") (Shutdown) \n" +
		"-- iOS 18.0 --\n" +
		"-- iOS 26.3 --\n" +
		"    Probe iPhone (" + c + ") (Booted) \n" +
		"-- visionOS 1.2 --\n"
	if got != want {
		t.Errorf("list devices:\n%s\nwant:\n%s", got, want)
	}
	// The transcript's grep line, modulo the trailing space it lost.
	transcript := readTestdata(t, "xcode26.3-session-transcript.txt")
	if !strings.Contains(transcript, "    Probe iPhone (03423413-ED3A-44FD-AD37-E9B456938AAA) (Booted)\n") {
		t.Fatal("transcript changed")
	}
	if got := h.must("list", "devices", "booted"); got != "== Devices ==\n-- iOS 26.3 --\n    Probe iPhone ("+c+") (Booted) \n" {
		t.Errorf("list devices booted:\n%s", got)
	}
}

func TestListRuntimesTextMatchesCaptures(t *testing.T) {
	h := newHarness(t)
	got := h.must("list", "runtimes")
	// The 26.3 runtime exactly as the Xcode 26.3 transcript prints it.
	line := "iOS 26.3 (26.3.1 - 23D8133) - com.apple.CoreSimulator.SimRuntime.iOS-26-3\n"
	if !strings.Contains(readTestdata(t, "xcode26.3-session-transcript.txt"), line) {
		t.Fatal("transcript changed")
	}
	want := "== Runtimes ==\n" +
		"iOS 17.5 (17.5 - 21F79) - com.apple.CoreSimulator.SimRuntime.iOS-17-5\n" +
		"iOS 18.0 (18.0 - 22A3351) - com.apple.CoreSimulator.SimRuntime.iOS-18-0\n" +
		line +
		"visionOS 1.2 (1.2 - 21O5565d) - com.apple.CoreSimulator.SimRuntime.xrOS-1-2\n"
	if got != want {
		t.Errorf("list runtimes:\n%s\nwant:\n%s", got, want)
	}
	// The downloadable 26.5, once installed, reads like the 26.5 capture.
	h.env[EnvIOSRuntimes] = "iOS 26.5"
	got = h.must("list", "runtimes")
	capLine := "iOS 26.5 (26.5 - 23F77) - com.apple.CoreSimulator.SimRuntime.iOS-26-5\n"
	if !strings.Contains(readTestdata(t, "list-runtimes-text-xcode26.5.txt"), "== Runtimes ==\n") ||
		!strings.Contains(readTestdata(t, "list-runtimes-text-xcode26.5.txt"), capLine) {
		t.Fatal("capture changed")
	}
	if got != "== Runtimes ==\n"+capLine {
		t.Errorf("list runtimes with only 26.5: %q", got)
	}
	h.env[EnvIOSRuntimes] = "none"
	if got := h.must("list", "runtimes"); got != "== Runtimes ==\n" {
		t.Errorf("fresh Xcode: %q", got)
	}
}

func TestListFullTextSectionsInCaptureOrder(t *testing.T) {
	h := newHarness(t)
	got := h.must("list")
	var headers []string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "== ") {
			headers = append(headers, l)
		}
	}
	var capHeaders []string
	for _, l := range strings.Split(readTestdata(t, "list-text-xcode11.txt"), "\n") {
		if strings.HasPrefix(l, "== ") {
			capHeaders = append(capHeaders, l)
		}
	}
	if !slices.Equal(headers, capHeaders) {
		t.Errorf("sections %v, capture %v", headers, capHeaders)
	}
	if !strings.Contains(got, "\niPhone Xʀ (com.apple.CoreSimulator.SimDeviceType.iPhone-XR)\n") {
		t.Error("device type lines differ from the capture's form")
	}
}

func TestUnavailableRuntimeDevices(t *testing.T) {
	h := newHarness(t)
	u := h.create("Old", "iPhone 15", "iOS 17.5")
	h.env[EnvIOSRuntimes] = "iOS 18.0"
	got := h.must("list", "devices")
	want := "== Devices ==\n-- iOS 18.0 --\n" +
		"-- Unavailable: com.apple.CoreSimulator.SimRuntime.iOS-17-5 --\n" +
		"    Old (" + u + ") (Shutdown) (unavailable, runtime profile not found using \"System\" match policy)\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	js := h.must("list", "devices", "-j")
	if !strings.Contains(js, `"availabilityError" : "runtime profile not found using \"System\" match policy",`) ||
		!strings.Contains(js, `"isAvailable" : false,`) {
		t.Errorf("unavailable device JSON:\n%s", js)
	}
	if got := h.must("list", "devices", "available"); strings.Contains(got, u) {
		t.Error("available filter kept an unavailable device")
	}
	h.must("delete", "unavailable")
	if got := h.must("list", "devices"); strings.Contains(got, u) {
		t.Error("delete unavailable kept the device")
	}
}
