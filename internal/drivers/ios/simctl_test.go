package ios

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func countStates(devs []Device) map[DeviceState]int {
	m := map[DeviceState]int{}
	for _, d := range devs {
		m[d.State]++
	}
	return m
}

func countUnavailable(devs []Device) int {
	n := 0
	for _, d := range devs {
		if !d.Available {
			n++
		}
	}
	return n
}

func findType(t *testing.T, l *List, name string) DeviceType {
	t.Helper()
	for _, dt := range l.DeviceTypes {
		if dt.Name == name {
			return dt
		}
	}
	t.Fatalf("device type %q not parsed", name)
	return DeviceType{}
}

func wantDevice(t *testing.T, l *List, udid, name string, state DeviceState, key string, available bool) Device {
	t.Helper()
	d, ok := l.Device(udid)
	if !ok {
		t.Fatalf("device %s not parsed", udid)
	}
	if d.Name != name || d.State != state || d.RuntimeKey != key || d.Available != available {
		t.Fatalf("device %s = {%q %q %q avail=%v}, want {%q %q %q avail=%v}",
			udid, d.Name, d.State, d.RuntimeKey, d.Available, name, state, key, available)
	}
	return d
}

func TestParseListJSON(t *testing.T) {
	const (
		rtIOS = "com.apple.CoreSimulator.SimRuntime.iOS-"
	)
	cases := []struct {
		file                          string
		types, runtimes, devices, prs int
		states                        map[DeviceState]int
		unavailable                   int
		check                         func(t *testing.T, l *List)
	}{
		{
			file: "list-devices-json-xcode10.1.json", devices: 16,
			states: map[DeviceState]int{StateShutdown: 16},
			check: func(t *testing.T, l *List) {
				d := wantDevice(t, l, "FA628127-1D5C-45C3-9918-A47BF7E2AE14", "Apple TV", StateShutdown, "com.apple.CoreSimulator.SimRuntime.tvOS-12-1", true)
				if d.AvailabilityError != "" {
					t.Errorf("empty availabilityError became %q", d.AvailabilityError)
				}
				if l.Devices[0].UDID != d.UDID {
					t.Errorf("key order lost: first device %s", l.Devices[0].UDID)
				}
			},
		},
		{
			file: "list-devices-json-xcode10.2-with-unavailable.json", devices: 32,
			states: map[DeviceState]int{StateShutdown: 32}, unavailable: 16,
			check: func(t *testing.T, l *List) {
				for _, d := range l.Devices {
					if !d.Available && d.AvailabilityError != "runtime profile not found" {
						t.Errorf("%s: availabilityError %q", d.UDID, d.AvailabilityError)
					}
				}
			},
		},
		{
			file: "list-devices-json-xcode10.2beta-empty-runtimes.json", devices: 2,
			states: map[DeviceState]int{StateBooted: 1, StateShutdown: 1},
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "1D09F29D-983E-4F39-83FB-1A66DB505355", "iPhone 6", StateBooted, rtIOS+"12-1", true)
				wantDevice(t, l, "B4F0832A-95D9-4E78-912E-A8B8E7BB339C", "iPhone X", StateShutdown, rtIOS+"12-1", true)
			},
		},
		{
			file: "list-devices-json-xcode12.5-booted.json", devices: 143,
			states: map[DeviceState]int{StateBooted: 1, StateShutdown: 142}, unavailable: 116,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "84623E6D-95DE-4325-ACBE-4FEE27DC1186", "iPhone 12 Pro Max", StateBooted, rtIOS+"14-1", false)
			},
		},
		{
			file: "list-devices-json-xcode15-excerpt.json", devices: 2,
			states: map[DeviceState]int{StateShutdown: 2}, unavailable: 1,
			check: func(t *testing.T, l *List) {
				d := wantDevice(t, l, "54B1D3DE-A943-4867-BA6A-B82BFE3A7904", "iPhone 14", StateShutdown, rtIOS+"16-2", false)
				if d.AvailabilityError != "runtime profile not found using System match policy" || d.LastBootedAt != "2023-05-09T11:08:32Z" {
					t.Errorf("got %+v", d)
				}
				d = wantDevice(t, l, "B3D623E3-9907-4E0A-B76B-13B13A47FE92", "iPhone 15 Pro Max", StateShutdown, rtIOS+"16-2", true)
				if d.DeviceTypeIdentifier != "com.apple.CoreSimulator.SimDeviceType.iPhone-15-Pro-Max" {
					t.Errorf("deviceTypeIdentifier %q", d.DeviceTypeIdentifier)
				}
			},
		},
		{
			file: "list-json-xcode9.2.json", types: 31, runtimes: 4, devices: 45, prs: 4,
			states: map[DeviceState]int{StateShutdown: 45},
			check: func(t *testing.T, l *List) {
				// Runtime keys are names before Xcode 10.1.
				wantDevice(t, l, "9356723A-4CFD-4950-B3E8-7C7F15B59C24", "iPhone 5s", StateShutdown, "iOS 11.2", true)
				x := findType(t, l, "iPhone X")
				if !x.MinRuntime.IsZero() || x.HasMax() {
					t.Errorf("Xcode 9 types carry no range, got %+v", x)
				}
				r := l.Runtimes[1]
				if r.Name != "iOS 11.2" || r.Version != "11.2" || r.Build != "15C107" || !r.Available || r.Platform != "iOS" || r.SupportedKnown {
					t.Errorf("runtime %+v", r)
				}
				p := l.Pairs[0]
				if p.ID != "60BACA2D-61CD-45EF-9D86-C9F777A9A215" || p.State != "(active, disconnected)" ||
					p.Phone.UDID != "232470E4-1F17-4A4F-8F28-028804C59B96" || p.Watch.Name != "Apple Watch Series 2 - 38mm" {
					t.Errorf("pair %+v", p)
				}
			},
		},
		{
			file: "list-json-xcode12.3.json", types: 64, runtimes: 4, devices: 121, prs: 12,
			states: map[DeviceState]int{StateBooted: 1, StateShutdown: 120}, unavailable: 97,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "C74B6E02-6094-4B4C-A0ED-F27A55B4B508", "perm1", StateBooted, rtIOS+"14-3", true)
				r := l.Runtimes[0]
				if r.Identifier != rtIOS+"10-0" || r.Available ||
					r.AvailabilityError != "The iOS 10.0 simulator runtime is not supported on hosts after macOS 10.14.99." {
					t.Errorf("unavailable runtime %+v", r)
				}
				// Packed ints: 917760 = 0x0E0100, 4294967295 = unbounded.
				dt := findType(t, l, "iPhone 12")
				if dt.MinRuntime != (Version{14, 1, 0}) || dt.HasMax() {
					t.Errorf("iPhone 12 range %+v", dt)
				}
			},
		},
		{
			file: "list-json-xcode12.4.json", types: 64, runtimes: 3, devices: 114, prs: 8,
			states: map[DeviceState]int{StateBooted: 2, StateShutdown: 112}, unavailable: 65,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "A3047E64-65FD-4A12-BC4F-C1BCCB5E7382", "iPhone 6s Plus", StateBooted, rtIOS+"14-4", true)
				wantDevice(t, l, "E1EA6964-9EE9-4B92-929D-5A378C8F7BC6", "iPad Pro (11-inch) (2nd generation)", StateBooted, rtIOS+"14-4", true)
				dt := findType(t, l, "iPhone 4s") // 327680..655359
				if dt.MinRuntime != (Version{5, 0, 0}) || dt.MaxRuntime != (Version{9, 255, 255}) || !dt.HasMax() {
					t.Errorf("iPhone 4s range %+v", dt)
				}
				if dt.ProductFamily != "iPhone" {
					t.Errorf("productFamily %q", dt.ProductFamily)
				}
				if l.Pairs[0].State != "(unavailable)" {
					t.Errorf("pair state %q", l.Pairs[0].State)
				}
				if l.Runtimes[0].SupportedKnown {
					t.Error("Xcode 12 runtimes have no supportedDeviceTypes")
				}
			},
		},
		{
			file: "list-json-xcode14.1-reformatted.json", types: 94, runtimes: 1, devices: 20,
			states: map[DeviceState]int{StateCreating: 1, StateShutdown: 19}, unavailable: 10,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "FA9ED223-1C22-4E1F-A03F-68C0F454373E", "iPhone 14", StateCreating, rtIOS+"16-0", false)
				r := l.Runtimes[0]
				if r.Version != "16.1" || r.Build != "20B72" || !r.SupportedKnown || len(r.SupportedDeviceTypes) != 48 {
					t.Errorf("runtime %+v", r)
				}
				dt := findType(t, l, "iPhone 14 Pro")
				if dt.MinRuntime != (Version{16, 0, 0}) || dt.HasMax() || dt.ModelIdentifier == "" {
					t.Errorf("iPhone 14 Pro %+v", dt)
				}
			},
		},
		{
			file: "list-json-xcode14.2-reformatted.json", types: 94, runtimes: 1, devices: 33,
			states: map[DeviceState]int{StateBooted: 3, StateCreating: 2, StateShutdown: 28}, unavailable: 20,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "A88F446E-E0A6-4995-9D63-941B063DA158", "iPhone 14 - 3", StateBooted, rtIOS+"16-2", true)
				wantDevice(t, l, "F9BAD943-8A5E-482F-AB93-938E71BD28C6", "iPhone 14", StateCreating, rtIOS+"16-1", false)
			},
		},
		{
			file: "list-json-xcode14beta1.json", types: 78, runtimes: 4, devices: 71, prs: 26,
			states: map[DeviceState]int{StateShutdown: 71}, unavailable: 30,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "20FDD0DF-0369-43FF-98E6-DBB8C820341E", "test", StateShutdown, rtIOS+"13-7", true)
				if r := l.Runtimes[2]; r.Build != "20A5283p" || r.Version != "16.0" || len(r.SupportedDeviceTypes) != 39 {
					t.Errorf("beta runtime %+v", r)
				}
			},
		},
		{
			file: "list-json-xcode15.0.json", types: 89, runtimes: 3, devices: 84,
			states: map[DeviceState]int{StateShutdown: 84}, unavailable: 61,
			check: func(t *testing.T, l *List) {
				if r := l.Runtimes[2]; r.Identifier != rtIOS+"17-0" || r.Build != "21A328" || len(r.SupportedDeviceTypes) != 46 {
					t.Errorf("runtime %+v", r)
				}
				if dt := findType(t, l, "iPhone 8"); dt.MaxRuntime != (Version{16, 9, 0}) {
					t.Errorf("iPhone 8 max %v", dt.MaxRuntime)
				}
			},
		},
		{
			file: "list-json-xcode16.0.json", types: 102, runtimes: 3, devices: 47,
			states: map[DeviceState]int{StateBooted: 1, StateShutdown: 46}, unavailable: 15,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "BA519339-BEC4-4E69-B98B-BE2EFDA190F0", "iPad Pro 11-inch (M4)", StateBooted, rtIOS+"18-0", true)
				if l.Devices[0].RuntimeKey != "com.apple.CoreSimulator.SimRuntime.xrOS-1-2" {
					t.Errorf("first group %q", l.Devices[0].RuntimeKey)
				}
				if r := l.Runtimes[2]; r.Name != "visionOS 1.2" || r.Platform != "xrOS" {
					t.Errorf("visionOS runtime %+v", r)
				}
				xr := findType(t, l, "iPhone Xʀ")
				if xr.Identifier != "com.apple.CoreSimulator.SimDeviceType.iPhone-XR" {
					t.Errorf("XR %+v", xr)
				}
			},
		},
		{
			file: "list-runtimes-json-xcode15.json", runtimes: 9,
			check: func(t *testing.T, l *List) {
				// Two builds share one identifier; the name says 17.0 for both.
				a, b := l.Runtimes[1], l.Runtimes[2]
				if a.Identifier != b.Identifier || a.Name != "iOS 17.0" || b.Name != "iOS 17.0" || a.Version != "17.0" || b.Version != "17.0.1" {
					t.Errorf("17.0 pair %+v / %+v", a, b)
				}
				if r := l.Runtimes[3]; r.Build != "21C5046b" {
					t.Errorf("beta build %q", r.Build)
				}
				v := l.Runtimes[8]
				if v.Name != "visionOS 1.0" || v.Platform != "xrOS" || !v.SupportedKnown || len(v.SupportedDeviceTypes) != 0 {
					t.Errorf("visionOS %+v", v)
				}
			},
		},
		{
			file: "list-runtimes-json-xcode8.3.json", runtimes: 3,
			check: func(t *testing.T, l *List) {
				r := l.Runtimes[0]
				if r.Name != "iOS 10.3" || r.Build != "14E269" || !r.Available || r.Platform != "iOS" {
					t.Errorf("runtime %+v", r)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			l, err := ParseListJSON(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(l.DeviceTypes) != tc.types || len(l.Runtimes) != tc.runtimes || len(l.Devices) != tc.devices || len(l.Pairs) != tc.prs {
				t.Fatalf("counts types=%d runtimes=%d devices=%d pairs=%d, want %d %d %d %d",
					len(l.DeviceTypes), len(l.Runtimes), len(l.Devices), len(l.Pairs), tc.types, tc.runtimes, tc.devices, tc.prs)
			}
			if tc.states != nil {
				got := countStates(l.Devices)
				for s, n := range tc.states {
					if got[s] != n {
						t.Errorf("state %q: %d devices, want %d (all: %v)", s, got[s], n, got)
					}
				}
			}
			if u := countUnavailable(l.Devices); u != tc.unavailable {
				t.Errorf("unavailable devices %d, want %d", u, tc.unavailable)
			}
			tc.check(t, l)
		})
	}
}

func TestParseListJSONNoise(t *testing.T) {
	// stderr merged in front of the JSON must not break parsing.
	noise := "2016-08-10 14:10:26.116 simctl[48890:1712880] Failed to locate a valid instance of CoreSimulatorService in the bootstrap.  Adding it now.\n"
	l, err := ParseListJSON(append([]byte(noise), readFixture(t, "list-devices-json-xcode10.2beta-empty-runtimes.json")...))
	if err != nil || len(l.Devices) != 2 {
		t.Fatalf("got %v, %v", l, err)
	}
	if _, err := ParseListJSON([]byte("xcrun: error: unable to find utility \"simctl\"")); err == nil {
		t.Fatal("no JSON: want an error")
	}
}

func TestParseListText(t *testing.T) {
	cases := []struct {
		file                          string
		types, runtimes, devices, prs int
		states                        map[DeviceState]int
		unavailable, unparsed         int
		check                         func(t *testing.T, l *List)
	}{
		{
			file: "list-devices-text-xcode10-booted-unavailable.txt", devices: 6,
			states: map[DeviceState]int{StateShutdown: 5, StateBooted: 1}, unavailable: 2,
			check: func(t *testing.T, l *List) {
				// Trailing space after the state, Booted device in an Unavailable group.
				wantDevice(t, l, "8350A403-0E68-4F48-8ABA-C392F9CB8D7C", "iPhone XR", StateBooted, "com.apple.CoreSimulator.SimRuntime.iOS-12-1", true)
				d := wantDevice(t, l, "3BE7BCB8-BCDB-45A2-8569-48B657BDD44E", "Apple Watch - 42mm", StateShutdown, "watchOS 5.0", false)
				if d.AvailabilityError != "device type not supported by runtime" {
					t.Errorf("reason %q", d.AvailabilityError)
				}
			},
		},
		{
			file: "list-devices-text-xcode11.txt", devices: 162,
			states: map[DeviceState]int{StateShutdown: 158, StateCreating: 4}, unavailable: 126,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "6FEF5BEA-265E-47A3-8FC1-C8803D34BF0D", "iPhone 11 Pro", StateCreating, "com.apple.CoreSimulator.SimRuntime.iOS-13-0", false)
			},
		},
		{
			file: "list-devices-text-xcode15.txt", devices: 80,
			states: map[DeviceState]int{StateShutdown: 80}, unavailable: 11,
			check: func(t *testing.T, l *List) {
				// Devices after the second of two "-- iOS 17.0 --" headers.
				wantDevice(t, l, "20952C59-B21A-49D8-A09F-4DB0983018C5", "iPhone 15 Pro Max", StateShutdown, "iOS 17.0", true)
				d := wantDevice(t, l, "D315D0CE-3813-4492-81BA-1ED059633C31", "iPad Pro (12.9-inch) (6th generation)", StateShutdown, "com.apple.CoreSimulator.SimRuntime.iOS-16-4", false)
				if d.AvailabilityError != `runtime profile not found using "System" match policy` {
					t.Errorf("reason %q", d.AvailabilityError)
				}
			},
		},
		{
			file: "list-devices-text-xcode7.3-creating.txt", devices: 9,
			states: map[DeviceState]int{StateShutdown: 5, StateCreating: 4}, unavailable: 4,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "22C04589-2AD4-42BB-9869-FB2331708E62", "Apple Watch - 38mm", StateCreating, "com.apple.CoreSimulator.SimRuntime.watchOS-2-0", false)
			},
		},
		{
			file: "list-devices-text-xcode7.txt", devices: 12,
			states: map[DeviceState]int{StateShutdown: 10, StateBooted: 2}, unavailable: 3,
			check: func(t *testing.T, l *List) {
				// The last line has no trailing newline.
				wantDevice(t, l, "66D1BF17-3003-465F-A165-E6E3A565E5EB", "Apple Watch - 38mm", StateBooted, "watchOS 2.0", true)
				d := wantDevice(t, l, "8E3D97C4-1143-4E84-8D57-F697140F2ED0", "iPhone 4s", StateShutdown, "iOS 7.1", false)
				if d.AvailabilityError != "failed to open liblaunch_sim.dylib" {
					t.Errorf("reason %q", d.AvailabilityError)
				}
			},
		},
		{
			file: "list-devices-text-xcode8-with-stderr-noise.txt", devices: 35, unparsed: 2,
			states: map[DeviceState]int{StateShutdown: 35}, unavailable: 20,
			check: func(t *testing.T, l *List) {
				if !strings.Contains(l.Unparsed[0], "stale CoreSimulatorService job") {
					t.Errorf("noise line %q", l.Unparsed[0])
				}
				wantDevice(t, l, "6B3494CA-7ECA-4BE7-9197-D7129424309F", "iPhone 5", StateShutdown, "iOS 10.0", true)
			},
		},
		{
			file: "list-devices-text-xcode9.txt", devices: 41,
			states: map[DeviceState]int{StateShutdown: 41}, unavailable: 21,
		},
		{
			file: "list-runtimes-text-xcode26.5.txt", runtimes: 12,
			check: func(t *testing.T, l *List) {
				r := l.Runtimes[1]
				if r.Name != "iOS 26.4" || r.Version != "26.4.1" || r.Build != "23E254a" || r.Identifier != "com.apple.CoreSimulator.SimRuntime.iOS-26-4" {
					t.Errorf("runtime %+v", r)
				}
				v := l.Runtimes[10]
				if v.Name != "visionOS 26.4" || v.Platform != "xrOS" || v.Identifier != "com.apple.CoreSimulator.SimRuntime.xrOS-26-4" {
					t.Errorf("visionOS %+v", v)
				}
			},
		},
		{
			file: "list-runtimes-text-xcode8.txt", runtimes: 3,
			check: func(t *testing.T, l *List) {
				// Xcode 8: identifier in parentheses; last line unterminated.
				if r := l.Runtimes[2]; r.Identifier != "com.apple.CoreSimulator.SimRuntime.watchOS-3-2" || r.Version != "3.2" || r.Build != "14V243" {
					t.Errorf("runtime %+v", r)
				}
				if r := l.Runtimes[0]; r.Name != "iOS 10.3" || r.Version != "10.3.1" {
					t.Errorf("runtime %+v", r)
				}
			},
		},
		{
			file: "list-runtimes-text-xcode9.txt", runtimes: 3,
			check: func(t *testing.T, l *List) {
				if r := l.Runtimes[0]; r.Identifier != "com.apple.CoreSimulator.SimRuntime.iOS-10-3" || r.Build != "14E8301" {
					t.Errorf("runtime %+v", r)
				}
			},
		},
		{
			file: "list-text-xcode11.txt", types: 44, runtimes: 8, devices: 123, prs: 6,
			states: map[DeviceState]int{StateShutdown: 123}, unavailable: 46,
			check: func(t *testing.T, l *List) {
				r := l.Runtimes[0]
				if r.Available || r.AvailabilityError != "The iOS 10.0 simulator runtime is not supported on hosts after macOS 10.14.99." {
					t.Errorf("doubled unavailable suffix: %+v", r)
				}
				if xr := findType(t, l, "iPhone Xʀ"); xr.Identifier != "com.apple.CoreSimulator.SimDeviceType.iPhone-XR" {
					t.Errorf("XR %+v", xr)
				}
				if p := l.Pairs[0]; p.State != "active, disconnected" || p.Watch.UDID != "519757DA-22F9-4BE6-9681-D9AC2B65DCA8" || p.Phone.Name != "iPhone Xs" {
					t.Errorf("pair %+v", p)
				}
			},
		},
		{
			file: "list-text-xcode6-runtimes-devices.txt", runtimes: 3, devices: 14,
			states: map[DeviceState]int{StateShutdown: 13, StateBooted: 1},
			check: func(t *testing.T, l *List) {
				r := l.Runtimes[1]
				if r.Build != "Unknown" || r.Available || r.AvailabilityError != "runtime path not found" {
					t.Errorf("runtime %+v", r)
				}
				wantDevice(t, l, "EDD8A319-DF91-4B24-B9C3-0B0BC5EAD82B", "iPhone 5", StateBooted, "iOS 8.0", true)
			},
		},
		{
			file: "list-text-xcode6-unavailable.txt", types: 10, runtimes: 2, devices: 46,
			states: map[DeviceState]int{StateShutdown: 45, StateBooted: 1}, unavailable: 30,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "454F3900-7B07-422E-A731-D46C821888B5", "iPad 2", StateBooted, "iOS 7.1", true)
			},
		},
		{
			file: "list-text-xcode7.0.txt", types: 13, runtimes: 2, devices: 13, prs: 2,
			states: map[DeviceState]int{StateShutdown: 13},
		},
		{
			file: "list-text-xcode7.1.txt", types: 15, runtimes: 4, devices: 37, prs: 4,
			states: map[DeviceState]int{StateShutdown: 37}, unavailable: 2,
			check: func(t *testing.T, l *List) {
				d := wantDevice(t, l, "B33E6523-6E44-42EA-A8B6-AEFB6873E9E8", "Resizable iPad", StateShutdown, "iOS 8.4", false)
				if d.AvailabilityError != "device type profile not found" {
					t.Errorf("reason %q", d.AvailabilityError)
				}
				if p := l.Pairs[1]; p.ID != "6A4425C4-3D19-47F5-B6FE-76BD20D8C17E" || p.State != "unavailable" || p.Phone.UDID != "91473A74-55E0-452F-9B76-C27021F6ADF9" {
					t.Errorf("pair %+v", p)
				}
				if r := l.Runtimes[1]; r.Build != "13B5110e" || r.Identifier != "com.apple.CoreSimulator.SimRuntime.iOS-9-1" {
					t.Errorf("runtime %+v", r)
				}
			},
		},
		{
			file: "list-text-xcode8.0beta.txt", types: 21, runtimes: 3, devices: 19, prs: 10,
			states: map[DeviceState]int{StateShutdown: 19},
			check: func(t *testing.T, l *List) {
				if r := l.Runtimes[0]; r.Build != "14A5261u" || r.Identifier != "com.apple.CoreSimulator.SimRuntime.iOS-10-0" {
					t.Errorf("runtime %+v", r)
				}
			},
		},
		{
			file: "list-text-xcode9.0beta.txt", types: 24, runtimes: 3, devices: 62, prs: 10,
			states: map[DeviceState]int{StateShutdown: 62}, unavailable: 42,
			check: func(t *testing.T, l *List) {
				if r := l.Runtimes[0]; r.Build != "15A5278f" || r.Identifier != "com.apple.CoreSimulator.SimRuntime.iOS-11-0" {
					t.Errorf("runtime %+v", r)
				}
			},
		},
		{
			file: "list-text-xcode9.1beta.txt", types: 31, runtimes: 3, devices: 94, prs: 16,
			states: map[DeviceState]int{StateShutdown: 94}, unavailable: 67,
			check: func(t *testing.T, l *List) {
				wantDevice(t, l, "B4CE41EC-3A8B-4C3F-A2ED-1E3B12ECDFA9", "iPhone 5s", StateShutdown, "iOS 11.1", true)
				if p := l.Pairs[15]; p.ID != "E7644BC4-9C16-4750-87ED-B5B22B74904A" || p.Phone.UDID != "1BDAB151-FEA4-4902-A1BE-B9BA46CCA9B7" {
					t.Errorf("last pair %+v", p)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			l := ParseListText(string(readFixture(t, tc.file)))
			if len(l.DeviceTypes) != tc.types || len(l.Runtimes) != tc.runtimes || len(l.Devices) != tc.devices || len(l.Pairs) != tc.prs {
				t.Fatalf("counts types=%d runtimes=%d devices=%d pairs=%d, want %d %d %d %d",
					len(l.DeviceTypes), len(l.Runtimes), len(l.Devices), len(l.Pairs), tc.types, tc.runtimes, tc.devices, tc.prs)
			}
			if len(l.Unparsed) != tc.unparsed {
				t.Errorf("unparsed lines %q, want %d", l.Unparsed, tc.unparsed)
			}
			got := countStates(l.Devices)
			for s, n := range tc.states {
				if got[s] != n {
					t.Errorf("state %q: %d devices, want %d (all: %v)", s, got[s], n, got)
				}
			}
			if u := countUnavailable(l.Devices); u != tc.unavailable {
				t.Errorf("unavailable devices %d, want %d", u, tc.unavailable)
			}
			if tc.check != nil {
				tc.check(t, l)
			}
		})
	}
}

func TestParseRuntimesText(t *testing.T) {
	rts := ParseRuntimesText(string(readFixture(t, "list-runtimes-text-xcode26.5.txt")))
	var ios []string
	for _, r := range rts {
		if isIOSRuntime(r) {
			ios = append(ios, r.Version)
		}
	}
	if strings.Join(ios, ",") != "26.2,26.4.1,26.5" {
		t.Fatalf("iOS runtimes %v", ios)
	}
}

// transcript splits the session transcript into command → output.
func transcript(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	var cmd string
	for _, line := range strings.Split(string(readFixture(t, "xcode26.3-session-transcript.txt")), "\n") {
		if c, ok := strings.CutPrefix(line, "$ "); ok {
			cmd = c
			out[cmd] = ""
			continue
		}
		out[cmd] += line + "\n"
	}
	return out
}

func TestSessionTranscript(t *testing.T) {
	tr := transcript(t)
	const udid = "03423413-ED3A-44FD-AD37-E9B456938AAA"

	rts := ParseRuntimesText(tr["xcrun simctl list runtimes"])
	if len(rts) != 1 || rts[0].Version != "26.3.1" || rts[0].Build != "23D8133" || rts[0].Identifier != "com.apple.CoreSimulator.SimRuntime.iOS-26-3" {
		t.Fatalf("headerless runtimes: %+v", rts)
	}
	got, err := ParseCreateOutput(tr[`xcrun simctl create "Probe iPhone" "iPhone 16 Pro" "com.apple.CoreSimulator.SimRuntime.iOS-26-3"`])
	if err != nil || got != udid {
		t.Fatalf("create: %q, %v", got, err)
	}
	if out := tr["xcrun simctl boot "+udid]; strings.TrimSpace(out) != "" {
		t.Fatalf("boot printed %q", out)
	}
	l := ParseListText(tr["xcrun simctl list devices | grep -i probe"])
	if len(l.Devices) != 1 || l.Devices[0].UDID != udid || l.Devices[0].State != StateBooted || l.Devices[0].Name != "Probe iPhone" {
		t.Fatalf("grep'd device line: %+v", l.Devices)
	}
	bs := ParseBootStatus(tr["xcrun simctl bootstatus "+udid+" -b"])
	if !bs.AlreadyBooted || !bs.Finished || bs.UDID != udid || bs.Name != "Probe iPhone" {
		t.Fatalf("bootstatus %+v", bs)
	}
}

func TestParseBootStatusProgress(t *testing.T) {
	bs := ParseBootStatus(string(readFixture(t, "bootstatus-data-migration-excerpt-2021.txt")))
	if len(bs.Progress) != 3 || bs.Finished || bs.AlreadyBooted {
		t.Fatalf("got %+v", bs)
	}
	p := bs.Progress[2]
	if p.At != "2021-04-21 14:08:23 +0000" || p.Status != 2 || p.Terminal || p.Elapsed != "00:17" {
		t.Fatalf("progress %+v", p)
	}
	if len(p.Detail) != 3 || p.Detail[0] != "Waiting on Data Migration" || p.Detail[2] != "Migration Elapsed:00:10 seconds" {
		t.Fatalf("detail %q", p.Detail)
	}
}

func TestParseError(t *testing.T) {
	const sim = "com.apple.CoreSimulator.SimError"
	cases := []struct {
		file     string
		domain   string
		code     int
		reason   string
		state    DeviceState
		preamble []string
		check    func(t *testing.T, e *SimError)
	}{
		{file: "boot-already-booted-code164-xcode10.txt", domain: sim, code: 164,
			reason: "Unable to boot device in current state: Booted", state: StateBooted},
		{file: "boot-already-booted-code405-exit149.txt", domain: sim, code: 405,
			reason: "Unable to boot device in current state: Booted", state: StateBooted},
		{file: "boot-already-booted-code405-xcode16-rules_apple.txt", domain: sim, code: 405,
			reason: "Unable to boot device in current state: Booted", state: StateBooted,
			preamble: []string{"Device boot failed"}},
		{file: "boot-launchd-failed-posix60-xcode14.txt", domain: "NSPOSIXErrorDomain", code: 60,
			reason: "Unable to boot the Simulator.\nlaunchd failed to respond.",
			check: func(t *testing.T, e *SimError) {
				u := e.Underlying
				if u == nil || u.Domain != "com.apple.SimLaunchHostService.RequestError" || u.Code != 4 ||
					u.Reason != "Failed to start launchd_sim: could not bind to session, launchd_sim may have crashed or quit responding" {
					t.Fatalf("underlying %+v", u)
				}
			}},
		{file: "create-unsupported-combination-code403-xcode16.3.txt", domain: sim, code: 403,
			// The reason precedes the header here; it becomes the reason.
			reason:   "Unable to create a device for device type: iPhone 6s Plus (com.apple.CoreSimulator.SimDeviceType.iPhone-6s-Plus), runtime: iOS 18.4 (18.4 - 22E238) - com.apple.CoreSimulator.SimRuntime.iOS-18-4",
			preamble: []string{"Unable to create a device for device type: iPhone 6s Plus (com.apple.CoreSimulator.SimDeviceType.iPhone-6s-Plus), runtime: iOS 18.4 (18.4 - 22E238) - com.apple.CoreSimulator.SimRuntime.iOS-18-4"}},
		{file: "lookup-shutting-down-code405.txt", domain: sim, code: 405,
			reason: "Unable to lookup in current state: Shutting Down", state: StateShuttingDown},
		{file: "shutdown-already-shutdown-code159-xcode7.txt", domain: sim, code: 159,
			reason: "Unable to shutdown device in current state: Shutdown", state: StateShutdown},
		{file: "shutdown-already-shutdown-code405.txt", domain: sim, code: 405,
			reason: "Unable to shutdown device in current state: Shutdown", state: StateShutdown},
		{file: "shutdown-creating-code163.txt", domain: sim, code: 163,
			reason: "Unable to shutdown device in current state: Creating", state: StateCreating},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			e, ok := ParseError(string(readFixture(t, "errors/"+tc.file)))
			if !ok {
				t.Fatal("no error found")
			}
			if e.Domain != tc.domain || e.Code != tc.code || e.Reason != tc.reason {
				t.Fatalf("got domain=%q code=%d reason=%q", e.Domain, e.Code, e.Reason)
			}
			if strings.Join(e.Preamble, "|") != strings.Join(tc.preamble, "|") {
				t.Errorf("preamble %q, want %q", e.Preamble, tc.preamble)
			}
			st, ok := e.CurrentState()
			if st != tc.state || ok != (tc.state != "") {
				t.Errorf("current state %q %v, want %q", st, ok, tc.state)
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func TestParseErrorVariants(t *testing.T) {
	// Xcode 6 printed no domain.
	e, ok := ParseError("An error was encountered processing the command (code=146):\nUnable to erase contents and settings in current state: Booted\n")
	if !ok || e.Domain != "" || e.Code != 146 {
		t.Fatalf("got %+v %v", e, ok)
	}
	if st, _ := e.CurrentState(); st != StateBooted {
		t.Fatalf("state %q", st)
	}
	if _, ok := ParseError("Invalid device: 03423413-ED3A-44FD-AD37-E9B456938AAA\n"); ok {
		t.Fatal("not a SimError")
	}
}

func TestParseCreateOutput(t *testing.T) {
	for _, bad := range []string{"", "\n", "03423413-ED3A-44FD-AD37\n", "simlock-1 created\n"} {
		if _, err := ParseCreateOutput(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	got, err := ParseCreateOutput("2016-08-10 14:10:26.116 simctl[1:2] Failed to locate a valid instance of CoreSimulatorService\n03423413-ED3A-44FD-AD37-E9B456938AAA\n")
	if err != nil || got != "03423413-ED3A-44FD-AD37-E9B456938AAA" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestParseRuntimeMatchJSON(t *testing.T) {
	cases := []struct {
		file, sdk, chosen, version string
	}{
		{"runtime-match-list-json-xcode14.json", "iphoneos16.4", "20E247", "16.4"},
		{"runtime-match-list-json-xcode15.json", "iphoneos17.0", "", "17.0"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			ms, err := ParseRuntimeMatchJSON(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 3 {
				t.Fatalf("%d entries", len(ms))
			}
			var m *RuntimeMatch
			for i := range ms {
				if ms[i].SDK == tc.sdk {
					m = &ms[i]
				}
			}
			if m == nil || m.Platform != "com.apple.platform.iphoneos" || m.SDKVersion != tc.version {
				t.Fatalf("%s: %+v", tc.sdk, ms)
			}
			if tc.chosen != "" && m.ChosenRuntimeBuild != tc.chosen {
				t.Fatalf("chosen %q", m.ChosenRuntimeBuild)
			}
			if !strings.Contains(m.SDKDirectory, "/Applications/") {
				t.Fatalf("escaped slashes not decoded: %q", m.SDKDirectory)
			}
		})
	}
}
