package android

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

// deviceListFull is `avdmanager list device` in the layout of the captured
// excerpt (avdmanager/list-device-excerpt-2025.txt), with the header and the
// newer profiles the excerpt does not reach. It is assembled for these tests,
// not captured.
const deviceListFull = `Available devices definitions:
id: 0 or "automotive_1024p_landscape"
    Name: Automotive (1024p landscape)
    OEM : Google
    Tag : android-automotive-playstore
---------
id: 18 or "medium_phone"
    Name: Medium Phone
    OEM : Generic
---------
id: 26 or "pixel_2"
    Name: Pixel 2
    OEM : Google
---------
id: 39 or "pixel_6"
    Name: Pixel 6
    OEM : Google
---------
id: 60 or "tv_1080p"
    Name: Television (1080p)
    OEM : Google
    Tag : android-tv
`

func installedLinux(t *testing.T) string {
	return string(fixture(t, "sdkmanager/list-installed-linux-2026.txt"))
}

// withImage appends an installed system image row to a --list_installed
// capture.
func withImage(list, pkg string) string {
	return list + fmt.Sprintf("  %s | 1 | Google APIs Intel x86_64 Atom System Image | %s\n", pkg, strings.ReplaceAll(pkg, ";", "/"))
}

func TestResolveSpec(t *testing.T) {
	tests := []struct {
		name    string
		arch    string
		req     core.SpecRequest
		want    core.Spec
		wantErr error
	}{
		{name: "newest installed, google_apis over playstore",
			req:  core.SpecRequest{Model: "pixel_6"},
			want: core.Spec{Model: "Pixel 6", ModelID: "pixel_6", OSVersion: "16", RuntimeID: "system-images;android-36;google_apis;x86_64"}},
		{name: "release mapped to API level",
			req:  core.SpecRequest{Model: "pixel_6", OSVersion: "15"},
			want: core.Spec{Model: "Pixel 6", ModelID: "pixel_6", OSVersion: "15", RuntimeID: "system-images;android-35;google_apis_playstore;x86_64"}},
		{name: "explicit API level, display name",
			req:  core.SpecRequest{Model: "Medium Phone", OSVersion: "API 34"},
			want: core.Spec{Model: "Medium Phone", ModelID: "medium_phone", OSVersion: "14", RuntimeID: "system-images;android-34;google_apis_playstore;x86_64"}},
		{name: "default model",
			req:  core.SpecRequest{OSVersion: "16"},
			want: core.Spec{Model: "Pixel 6", ModelID: "pixel_6", OSVersion: "16", RuntimeID: "system-images;android-36;google_apis;x86_64"}},
		{name: "no image for the host ABI", arch: "arm64",
			req: core.SpecRequest{Model: "pixel_6"}, wantErr: core.ErrRuntimeMissing},
		{name: "release not installed",
			req: core.SpecRequest{Model: "pixel_2", OSVersion: "13"}, wantErr: core.ErrRuntimeMissing},
		{name: "tv profile gets no phone image",
			req: core.SpecRequest{Model: "tv_1080p"}, wantErr: core.ErrRuntimeMissing},
		{name: "unknown profile",
			req: core.SpecRequest{Model: "iPhone 16"}, wantErr: core.ErrUnknownModel},
		{name: "unknown release",
			req: core.SpecRequest{Model: "pixel_6", OSVersion: "42"}, wantErr: core.ErrOSOutOfRange},
		{name: "other platform",
			req: core.SpecRequest{Platform: "ios", Model: "pixel_6"}, wantErr: core.ErrUnsupportedPlatform},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) {
				if tt.arch != "" {
					o.GOARCH = tt.arch
				}
			})
			h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
			h.run.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
			got, err := h.d.ResolveSpec(context.Background(), tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				var se *core.SpecError
				if !errors.As(err, &se) {
					t.Errorf("%v is not a SpecError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Platform = Platform
			got.Data = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestResolveSpecMissingNamesThePackage(t *testing.T) {
	h := newHarness(t)
	h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
	h.run.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
	_, err := h.d.ResolveSpec(context.Background(), core.SpecRequest{Model: "pixel_6", OSVersion: "13"})
	var se *core.SpecError
	if !errors.As(err, &se) || se.Details["package"] != "system-images;android-33;google_apis;x86_64" {
		t.Fatalf("err = %v (%+v)", err, se)
	}
	for _, c := range h.run.Calls {
		if strings.Contains(c, "--install") {
			t.Errorf("installed without permission: %s", c)
		}
	}
	if len(h.diagnostics()) != 0 {
		t.Errorf("diagnostics without an install: %+v", h.diagnostics())
	}
}

func TestResolveSpecCachesProfiles(t *testing.T) {
	h := newHarness(t)
	h.run.Expect(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull}) // once only
	h.run.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
	for range 3 {
		if _, err := h.d.ResolveSpec(context.Background(), core.SpecRequest{Model: "pixel_6"}); err != nil {
			t.Fatal(err)
		}
	}
}

type fakeGuard struct {
	mu       sync.Mutex
	free     uint64
	reserved []uint64
	released int
}

func (g *fakeGuard) Reserve(path string, n uint64) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > g.free {
		// Shaped like the daemon's guard: a SpecError naming what is free.
		return nil, core.NewSpecError(core.ErrInsufficientDisk, fmt.Sprintf("%d bytes available on %s", g.free, path),
			"requiredBytes", n, "availableBytes", g.free)
	}
	g.reserved = append(g.reserved, n)
	return func() { g.mu.Lock(); g.released++; g.mu.Unlock() }, nil
}

func TestResolveSpecDownload(t *testing.T) {
	const pkg = "system-images;android-33;google_apis;x86_64"
	tests := []struct {
		name       string
		install    fake.Step
		rescan     string
		wantErr    error
		wantTypes  []string
		wantReason string
	}{
		{name: "installed and verified",
			install:   fake.Step{Match: "sdkmanager --install " + pkg},
			rescan:    withImage(installedLinux(t), pkg),
			wantTypes: []string{"component.install-started", "component.installed"}},
		{name: "success without the image",
			install:    fake.Step{Match: "sdkmanager --install " + pkg},
			rescan:     installedLinux(t),
			wantErr:    core.ErrRuntimeMissing,
			wantTypes:  []string{"component.install-started", "component.install-failed"},
			wantReason: "is not installed"},
		{name: "installer fails",
			install:    fake.Step{Match: "sdkmanager --install " + pkg, ExitCode: 1, Stderr: "Failed to find package"},
			wantTypes:  []string{"component.install-started", "component.install-failed"},
			wantReason: "Failed to find package"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard := &fakeGuard{free: 10 << 30}
			h := newHarness(t, func(o *Options) { o.DiskGuard = guard })
			h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
			h.run.Expect(
				fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
				fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
				tt.install,
			)
			if tt.rescan != "" {
				h.run.Expect(fake.Step{Match: "sdkmanager --list_installed", Stdout: tt.rescan})
			}
			spec, err := h.d.ResolveSpec(context.Background(), core.SpecRequest{
				Model: "pixel_6", OSVersion: "13", AllowDownload: true, RequesterID: "agent-7"})
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case tt.wantTypes[1] == "component.install-failed" && err == nil:
				t.Fatal("install failure not reported")
			case tt.wantTypes[1] == "component.installed" && (err != nil || spec.RuntimeID != pkg || spec.OSVersion != "13"):
				t.Fatalf("spec %+v, err %v", spec, err)
			}
			h.assertDone()
			var types []string
			for _, d := range h.diagnostics() {
				types = append(types, d.Type)
				if d.RequesterID != "agent-7" || d.Data["component"] != pkg {
					t.Errorf("diagnostic %+v", d)
				}
			}
			if !reflect.DeepEqual(types, tt.wantTypes) {
				t.Errorf("diagnostics %q, want %q", types, tt.wantTypes)
			}
			if tt.wantReason != "" && !strings.Contains(fmt.Sprint(h.diagnostics()[1].Data["reason"]), tt.wantReason) {
				t.Errorf("reason %v", h.diagnostics()[1].Data["reason"])
			}
			if len(guard.reserved) != 1 || guard.reserved[0] != 2<<30 || guard.released != 1 {
				t.Errorf("reservation %v released %d", guard.reserved, guard.released)
			}
		})
	}
}

func TestResolveSpecDownloadNeedsDisk(t *testing.T) {
	guard := &fakeGuard{free: 1 << 30}
	h := newHarness(t, func(o *Options) { o.DiskGuard = guard })
	h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
	h.run.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
	_, err := h.d.ResolveSpec(context.Background(), core.SpecRequest{Model: "pixel_6", OSVersion: "13", AllowDownload: true})
	if !errors.Is(err, core.ErrInsufficientDisk) {
		t.Fatalf("err = %v", err)
	}
	var se *core.SpecError
	if !errors.As(err, &se) || se.Details["requiredBytes"] != uint64(2<<30) || se.Details["availableBytes"] != uint64(1<<30) {
		t.Errorf("error does not name required and available bytes: %v %+v", err, se)
	}
	if len(h.diagnostics()) != 0 {
		t.Errorf("no install started, yet diagnostics %+v", h.diagnostics())
	}
}

func TestSpecData(t *testing.T) {
	h := newHarness(t)
	h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
	h.run.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
	spec, err := h.d.ResolveSpec(context.Background(), core.SpecRequest{Model: "pixel_6", OSVersion: "15"})
	if err != nil {
		t.Fatal(err)
	}
	var sd specData
	if err := json.Unmarshal(spec.Data, &sd); err != nil || sd != (specData{APILevel: 35, Tag: "google_apis_playstore", ABI: "x86_64"}) {
		t.Errorf("data %s (%v)", spec.Data, err)
	}
	if spec.Key() != "android|pixel_6|15" {
		t.Errorf("key %q", spec.Key())
	}
}

func TestPickImagePrefersGoogleAPIsAtEqualVersion(t *testing.T) {
	imgs := imagesIn([]sdkPackage{
		{Path: "system-images;android-35;google_apis_playstore;x86_64"},
		{Path: "system-images;android-35;default;x86_64"},
		{Path: "system-images;android-35;google_apis;x86_64"},
		{Path: "system-images;android-35;google_apis;arm64-v8a"},
		{Path: "system-images;android-34;google_apis;x86_64"},
		{Path: "system-images;android-CANARY;google_apis;x86_64"},
	})
	got, ok := pickImage(imgs, deviceProfile{ID: "pixel_6"}, 0, "x86_64")
	if !ok || got.Package != "system-images;android-35;google_apis;x86_64" {
		t.Errorf("x86_64: %+v", got)
	}
	got, ok = pickImage(imgs, deviceProfile{ID: "pixel_6"}, 0, "arm64-v8a")
	if !ok || got.Package != "system-images;android-35;google_apis;arm64-v8a" {
		t.Errorf("arm64: %+v", got)
	}
}

// The installed-image cache (ADR 0026): a warm grant's resolution starts no
// process, a request the cached list cannot serve re-reads once before it
// is refused, and an install drops the cached list at once.
func TestResolveSpecCachesInstalledImages(t *testing.T) {
	ctx := context.Background()
	api33 := "system-images;android-33;google_apis;x86_64"
	sdkCalls := func(h *harness) int {
		n := 0
		for _, c := range h.run.Calls {
			if strings.HasPrefix(c, "sdkmanager") {
				n++
			}
		}
		return n
	}
	newH := func(t *testing.T, tweak ...func(*Options)) *harness {
		h := newHarness(t, tweak...)
		h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
		return h
	}

	t.Run("a second resolve starts no process", func(t *testing.T) {
		h := newH(t)
		h.run.Expect(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
		for range 3 {
			if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
				t.Fatal(err)
			}
		}
		if len(h.run.Calls) != 2 {
			t.Fatalf("three resolutions ran %q", h.run.Calls)
		}
		h.clk.Advance(installedTTL)
		h.run.Expect(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
			t.Fatal(err)
		}
		if sdkCalls(h) != 2 {
			t.Fatalf("after the bound: %q", h.run.Calls)
		}
		h.assertDone()
	})

	t.Run("a miss re-reads once, and an image installed meanwhile is found", func(t *testing.T) {
		h := newH(t)
		h.run.Expect(
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
			// android-33 was installed outside simlock after the first read.
			fake.Step{Match: "sdkmanager --list_installed", Stdout: withImage(installedLinux(t), api33)},
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			s, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6", OSVersion: "13"})
			if err != nil || s.RuntimeID != api33 {
				t.Fatalf("just-installed image: %+v %v", s, err)
			}
		}
		if sdkCalls(h) != 2 {
			t.Fatalf("reads %q", h.run.Calls)
		}
		h.assertDone()
	})

	t.Run("a miss that stays a miss is refused after one re-read", func(t *testing.T) {
		h := newH(t)
		h.run.Expect(
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
			t.Fatal(err)
		}
		_, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6", OSVersion: "13"})
		if !errors.Is(err, core.ErrRuntimeMissing) {
			t.Fatalf("err = %v", err)
		}
		if sdkCalls(h) != 2 {
			t.Fatalf("reads %q", h.run.Calls)
		}
		h.assertDone()
	})

	t.Run("a failed or partial read is not kept", func(t *testing.T) {
		h := newH(t)
		h.run.Expect(
			fake.Step{Match: "sdkmanager --list_installed", ExitCode: 1, Stderr: "Error: java.lang.NoClassDefFoundError"},
			fake.Step{Match: "sdkmanager --list_installed", Stdout: "Warning: Could not create settings\n"},
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err == nil {
			t.Fatal("a failed read resolved")
		}
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); !errors.Is(err, core.ErrRuntimeMissing) {
			t.Fatalf("partial read: %v", err)
		}
		for range 2 {
			if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
				t.Fatal(err)
			}
		}
		if sdkCalls(h) != 3 {
			t.Fatalf("reads %q", h.run.Calls)
		}
		h.assertDone()
	})

	t.Run("an install invalidates at once", func(t *testing.T) {
		h := newH(t, func(o *Options) { o.DiskGuard = &fakeGuard{free: 10 << 30} })
		after := withImage(installedLinux(t), api33)
		h.run.Expect(
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)}, // the miss's re-read
			fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)}, // under the install lock
			fake.Step{Match: "sdkmanager --install " + api33},
			fake.Step{Match: "sdkmanager --list_installed", Stdout: after}, // the proof, kept
		)
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
			t.Fatal(err)
		}
		req := core.SpecRequest{Model: "pixel_6", OSVersion: "13", AllowDownload: true}
		if _, err := h.d.ResolveSpec(ctx, req); err != nil {
			t.Fatal(err)
		}
		req.AllowDownload = false
		if s, err := h.d.ResolveSpec(ctx, req); err != nil || s.RuntimeID != api33 {
			t.Fatalf("after the install: %+v %v", s, err)
		}
		if sdkCalls(h) != 5 {
			t.Fatalf("calls %q", h.run.Calls)
		}
		h.assertDone()
	})

	t.Run("an unknown profile re-reads the profiles once", func(t *testing.T) {
		h := newHarness(t)
		withPixel10 := deviceListFull + "---------\nid: 70 or \"pixel_10\"\n    Name: Pixel 10\n    OEM : Google\n"
		h.run.Expect(
			fake.Step{Match: "avdmanager list device", Stdout: deviceListFull},
			fake.Step{Match: "avdmanager list device", Stdout: withPixel10},
		)
		h.run.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)})
		if _, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_6"}); err != nil {
			t.Fatal(err)
		}
		if s, err := h.d.ResolveSpec(ctx, core.SpecRequest{Model: "pixel_10"}); err != nil || s.ModelID != "pixel_10" {
			t.Fatalf("new profile: %+v %v", s, err)
		}
		h.assertDone()
	})
}
