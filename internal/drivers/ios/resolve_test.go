package ios

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

func parseFixture(t *testing.T, name string) *List {
	t.Helper()
	l, err := ParseListJSON(readFixture(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"18.0", Version{18, 0, 0}, true},
		{"17.0.1", Version{17, 0, 1}, true},
		{"65535.255.255", Version{65535, 255, 255}, true},
		{"18", Version{18, 0, 0}, true},
		{"", Version{}, false},
		{"18.", Version{}, false},
		{"1.2.3.4", Version{}, false},
		{"+1", Version{}, false},
		{"iOS 18", Version{}, false},
	} {
		got, err := ParseVersion(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v", tc.in, got, err)
		}
	}
	// Packed form of Xcode 11–13: 0x0B0000 is 11.0.0.
	if v := versionFromPacked(0x0B0000); v != (Version{11, 0, 0}) {
		t.Errorf("packed 0x0B0000 = %v", v)
	}
	if v := versionFromPacked(4294967295); v.Major != unboundedMajor {
		t.Errorf("packed max = %v", v)
	}
	for _, tc := range []struct {
		req  string
		want string
		ok   bool
	}{
		{"18", "18", true},
		{"iOS 17.0", "17.0", true},
		{"ios17.0.1", "17.0.1", true},
		{"com.apple.CoreSimulator.SimRuntime.iOS-18-0", "18.0", true},
		{"latest", "", false},
	} {
		p, ok := requestedVersion(tc.req)
		if ok != tc.ok || (ok && p.String() != tc.want) {
			t.Errorf("requestedVersion(%q) = %v %v", tc.req, p, ok)
		}
	}
}

// specErr asserts err is a *core.SpecError wrapping sentinel and returns it.
func specErr(t *testing.T, err, sentinel error) *core.SpecError {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	var se *core.SpecError
	if !errors.As(err, &se) {
		t.Fatalf("%v is not a SpecError", err)
	}
	return se
}

func TestResolve(t *testing.T) {
	xc16 := parseFixture(t, "list-json-xcode16.0.json")
	xc15 := parseFixture(t, "list-json-xcode15.0.json")
	xc124 := parseFixture(t, "list-json-xcode12.4.json")
	xc92 := parseFixture(t, "list-json-xcode9.2.json")

	// Two real captures of one Xcode 15 machine family combined: its device
	// types with a runtime list holding both iOS 17.0 and 17.0.1 (same
	// identifier) and a 17.2 beta.
	xc15rt := &List{DeviceTypes: xc15.DeviceTypes, Runtimes: parseFixture(t, "list-runtimes-json-xcode15.json").Runtimes}

	ok := []struct {
		name        string
		l           *List
		model, os   string
		wantModel   string
		wantVersion string
		wantRuntime string
	}{
		{"default model is the newest plain iPhone", xc16, "", "", "iPhone 16", "18.0", "com.apple.CoreSimulator.SimRuntime.iOS-18-0"},
		{"default OS is the newest supporting runtime", xc16, "iPhone 15", "", "iPhone 15", "18.0", "com.apple.CoreSimulator.SimRuntime.iOS-18-0"},
		{"model by identifier", xc16, "com.apple.CoreSimulator.SimDeviceType.iPhone-15-Pro", "17", "iPhone 15 Pro", "17.5", "com.apple.CoreSimulator.SimRuntime.iOS-17-5"},
		{"XR found by ASCII name", xc16, "iphone xr", "", "iPhone Xʀ", "18.0", "com.apple.CoreSimulator.SimRuntime.iOS-18-0"},
		{"max range skips a newer runtime", xc15, "iPhone 8", "", "iPhone 8", "16.4", "com.apple.CoreSimulator.SimRuntime.iOS-16-4"},
		{"older max", xc15, "iPhone 7", "", "iPhone 7", "14.5", "com.apple.CoreSimulator.SimRuntime.iOS-14-5"},
		{"explicit OS", xc15, "iPhone 12", "14.5", "iPhone 12", "14.5", "com.apple.CoreSimulator.SimRuntime.iOS-14-5"},
		{"major-only OS", xc15, "iPhone 14", "16", "iPhone 14", "16.4", "com.apple.CoreSimulator.SimRuntime.iOS-16-4"},
		{"default model honours the OS", xc15, "", "16.4", "iPhone 14", "16.4", "com.apple.CoreSimulator.SimRuntime.iOS-16-4"},
		{"name version picks newest build", xc15rt, "iPhone 15", "17.0", "iPhone 15", "17.0.1", "com.apple.CoreSimulator.SimRuntime.iOS-17-0"},
		{"exact patch", xc15rt, "iPhone 15", "17.0.1", "iPhone 15", "17.0.1", "com.apple.CoreSimulator.SimRuntime.iOS-17-0"},
		{"beta is newest", xc15rt, "iPhone 15", "", "iPhone 15", "17.2", "com.apple.CoreSimulator.SimRuntime.iOS-17-2"},
		{"packed ranges", xc124, "", "", "iPhone 12", "14.4", "com.apple.CoreSimulator.SimRuntime.iOS-14-4"},
		{"no ranges (Xcode 9)", xc92, "", "", "iPhone 8", "11.2", "com.apple.CoreSimulator.SimRuntime.iOS-11-2"},
		{"runtime identifier as OS", xc92, "iPhone X", "com.apple.CoreSimulator.SimRuntime.iOS-11-1", "iPhone X", "11.1", "com.apple.CoreSimulator.SimRuntime.iOS-11-1"},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			res, err := resolve(tc.l, tc.model, tc.os)
			if err != nil {
				t.Fatal(err)
			}
			s := res.spec()
			if s.Model != tc.wantModel || s.OSVersion != tc.wantVersion || s.RuntimeID != tc.wantRuntime || s.Platform != Platform {
				t.Fatalf("got %+v", s)
			}
		})
	}

	t.Run("out of range names the range", func(t *testing.T) {
		_, err := resolve(xc16, "iPhone 16", "17.5")
		se := specErr(t, err, core.ErrOSOutOfRange)
		if se.Details["min"] != "18.0" || se.Details["max"] != "" || se.Details["model"] != "iPhone 16" {
			t.Fatalf("details %v", se.Details)
		}
	})
	t.Run("out of range above max (packed)", func(t *testing.T) {
		_, err := resolve(xc124, "iPhone 4s", "14")
		se := specErr(t, err, core.ErrOSOutOfRange)
		if se.Details["min"] != "5.0" || se.Details["max"] != "9.255.255" {
			t.Fatalf("details %v", se.Details)
		}
	})
	t.Run("installed out-of-range runtime is still out of range", func(t *testing.T) {
		_, err := resolve(xc15, "iPhone 8", "17.0")
		specErr(t, err, core.ErrOSOutOfRange)
	})
	t.Run("in range, not installed", func(t *testing.T) {
		res, err := resolve(xc16, "iPhone 15", "17.0")
		se := specErr(t, err, core.ErrRuntimeMissing)
		if !res.missing || res.model.Name != "iPhone 15" || se.Details["osVersion"] != "17.0" {
			t.Fatalf("res %+v details %v", res, se.Details)
		}
	})
	t.Run("model with no runtime in range", func(t *testing.T) {
		res, err := resolve(xc124, "iPhone 4s", "")
		specErr(t, err, core.ErrRuntimeMissing)
		if !res.missing {
			t.Fatal("a download could serve it")
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		_, err := resolve(xc16, "iPhone 99", "")
		specErr(t, err, core.ErrUnknownModel)
		_, err = resolve(xc16, "Apple TV 4K (3rd generation)", "")
		specErr(t, err, core.ErrUnknownModel)
	})
	t.Run("unparseable OS never downloads", func(t *testing.T) {
		res, err := resolve(xc16, "iPhone 16", "latest")
		specErr(t, err, core.ErrRuntimeMissing)
		if res.missing {
			t.Fatal("must not be downloadable")
		}
	})
	t.Run("empty runtime list is a normal starting state", func(t *testing.T) {
		empty := &List{DeviceTypes: xc16.DeviceTypes}
		res, err := resolve(empty, "", "")
		specErr(t, err, core.ErrRuntimeMissing)
		if !res.missing || res.model.Name != "iPhone 16" {
			t.Fatalf("res %+v", res)
		}
	})

	// No capture shows a runtime that drops an in-range model (iOS 26 did so
	// for iPhone XS), so derive one in memory from the Xcode 16 capture.
	dropped := &List{DeviceTypes: xc16.DeviceTypes}
	for _, r := range xc16.Runtimes {
		if r.Identifier == "com.apple.CoreSimulator.SimRuntime.iOS-18-0" {
			r.SupportedDeviceTypes = slices.DeleteFunc(slices.Clone(r.SupportedDeviceTypes), func(id string) bool {
				return id == "com.apple.CoreSimulator.SimDeviceType.iPhone-XS"
			})
		}
		dropped.Runtimes = append(dropped.Runtimes, r)
	}
	t.Run("default OS skips a runtime that dropped the model", func(t *testing.T) {
		res, err := resolve(dropped, "iPhone Xs", "")
		if err != nil || res.runtime.Version != "17.5" {
			t.Fatalf("got %+v, %v", res.runtime, err)
		}
	})
	t.Run("explicit OS that dropped the model fails without download", func(t *testing.T) {
		res, err := resolve(dropped, "iPhone Xs", "18.0")
		specErr(t, err, core.ErrOSOutOfRange)
		if res.missing {
			t.Fatal("a download cannot pair it")
		}
	})
}

func TestCatalog(t *testing.T) {
	c := catalogOf(parseFixture(t, "list-json-xcode16.0.json"))
	if len(c.Runtimes) != 2 {
		t.Fatalf("iOS runtimes %+v", c.Runtimes)
	}
	r := c.Runtimes[1]
	if r.Version != "18.0" || r.Build != "22A3351" || !r.Available || len(r.SupportedModels) != 53 ||
		!slices.Contains(r.SupportedModels, "com.apple.CoreSimulator.SimDeviceType.iPhone-16") {
		t.Fatalf("runtime %+v", r)
	}
	var names []string
	for _, m := range c.Models {
		names = append(names, m.Name)
		if m.Name == "iPhone 8" && (m.MinOS != "11.0" || m.MaxOS != "16.9") {
			t.Errorf("iPhone 8 %+v", m)
		}
		if m.Name == "iPhone 16" && (m.MinOS != "18.0" || m.MaxOS != "") {
			t.Errorf("iPhone 16 %+v", m)
		}
	}
	if slices.Contains(names, "Apple TV") || slices.Contains(names, "Apple Vision Pro") || !slices.Contains(names, "iPod touch (7th generation)") {
		t.Fatalf("models %v", names)
	}
}

// The listing cache (ADR 0026): a warm grant's resolution starts no process,
// a request the cached listing cannot serve re-reads once before it is
// refused, and an install or a failed create drops the cached listing.
func TestResolveSpecCachesTheListing(t *testing.T) {
	ctx := context.Background()
	xc16 := string(readFixture(t, xcode16JSON))
	xc15 := string(readFixture(t, "list-json-xcode15.0.json"))
	lists := func(h *harness) int {
		n := 0
		for _, c := range h.runner.Calls {
			if c == h.sim("list -j") {
				n++
			}
		}
		return n
	}

	t.Run("a second resolve starts no process", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: xc16})
		for i := range 3 {
			s, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 16"})
			if err != nil || s.OSVersion != "18.0" {
				t.Fatalf("resolve %d: %+v %v", i, s, err)
			}
		}
		if len(h.runner.Calls) != 1 {
			t.Fatalf("three resolutions ran %q", h.runner.Calls)
		}
		// Past the bound the listing is read again, once.
		h.clock.Advance(listingTTL)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: xc16})
		for range 2 {
			if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 16"}); err != nil {
				t.Fatal(err)
			}
		}
		if lists(h) != 2 {
			t.Fatalf("after the bound: %q", h.runner.Calls)
		}
		h.assertDone()
	})

	t.Run("a miss re-reads once, and a runtime installed meanwhile is found", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			// iOS 17.0 was installed outside simlock after the first read.
			fake.Step{Match: h.sim("list -j"), Stdout: xc15},
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err != nil {
			t.Fatal(err)
		}
		s, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 15", OSVersion: "17.0"})
		if err != nil || s.RuntimeID != "com.apple.CoreSimulator.SimRuntime.iOS-17-0" {
			t.Fatalf("just-installed runtime: %+v %v", s, err)
		}
		// The newer listing is the one kept.
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 15", OSVersion: "17.0"}); err != nil {
			t.Fatal(err)
		}
		if lists(h) != 2 {
			t.Fatalf("reads %q", h.runner.Calls)
		}
		h.assertDone()
	})

	t.Run("a miss that stays a miss is refused after one re-read", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: xc16}, fake.Step{Match: h.sim("list -j"), Stdout: xc16})
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err != nil {
			t.Fatal(err)
		}
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 99"})
		specErr(t, err, core.ErrUnknownModel)
		if lists(h) != 2 {
			t.Fatalf("reads %q", h.runner.Calls)
		}
		h.assertDone()
	})

	t.Run("a failed read is not kept", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), ExitCode: 1, Stderr: "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=405):\n"},
			fake.Step{Match: h.sim("list -j"), Stdout: `{"devicetypes": [], "runtimes": [], "devices": {}, "pairs": {}}`},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err == nil {
			t.Fatal("a failed listing resolved")
		}
		// A listing without device types is a partial read: answered, not kept.
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{})
		specErr(t, err, core.ErrUnknownModel)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err != nil {
			t.Fatal(err)
		}
		if lists(h) != 3 {
			t.Fatalf("reads %q", h.runner.Calls)
		}
		h.assertDone()
	})

	t.Run("an install invalidates at once", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16}, // the miss's re-read
			fake.Step{Match: h.sim("list -j"), Stdout: xc16}, // under the install lock
			fake.Step{Match: "xcodebuild -downloadPlatform iOS -buildVersion 21A342"},
			fake.Step{Match: h.sim("list -j"), Stdout: xc15}, // the proof, kept
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err != nil {
			t.Fatal(err)
		}
		req := core.SpecRequest{Model: "iPhone 15", OSVersion: "17.0", AllowDownload: true}
		if _, err := h.d.ResolveSpec(ctx, req); err != nil {
			t.Fatal(err)
		}
		req.AllowDownload = false
		if s, err := h.d.ResolveSpec(ctx, req); err != nil || s.OSVersion != "17.0" {
			t.Fatalf("after the install: %+v %v", s, err)
		}
		if len(h.runner.Calls) != 5 {
			t.Fatalf("calls %q", h.runner.Calls)
		}
		h.assertDone()
	})

	t.Run("a failed create invalidates", func(t *testing.T) {
		h := newHarness(t)
		h.expect(
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
			fake.Step{Match: h.sim("create simlock-*"), ExitCode: 148,
				Stderr: string(readFixture(t, "errors/create-unsupported-combination-code403-xcode16.3.txt"))},
			fake.Step{Match: h.sim("list -j"), Stdout: xc16},
		)
		s, err := h.d.ResolveSpec(ctx, core.SpecRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.d.Provision(ctx, s); err == nil {
			t.Fatal("create succeeded")
		}
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{}); err != nil {
			t.Fatal(err)
		}
		if lists(h) != 2 {
			t.Fatalf("calls %q", h.runner.Calls)
		}
		h.assertDone()
	})

	t.Run("a burst starts one read", func(t *testing.T) {
		h := newHarness(t)
		h.expect(fake.Step{Match: h.sim("list -j"), Stdout: xc16})
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "iPhone 16"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(h.runner.Calls) != 1 {
			t.Fatalf("a burst of 16 ran %q", h.runner.Calls)
		}
	})
}
