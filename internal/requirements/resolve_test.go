package requirements_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/requirements"
)

// The catalogs are what the real drivers make of real captured SDK output
// (/work/shared/fixtures/real, copied to testdata): the Xcode 16.0
// `simctl list -j` (iOS 17.5 and 18.0) and, for Android, the 2026
// `avdmanager list device` excerpt with the 2026 Linux
// `sdkmanager --list_installed` (Android 14 and 15 Play Store images,
// Android 16 Google APIs and Play Store images, x86_64).
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func iosCatalog(t *testing.T, capture string) core.Catalog {
	t.Helper()
	irun := fake.NewRunner()
	irun.Always(fake.Step{Match: "xcrun simctl *", Stdout: fixture(t, capture)})
	idrv, err := ios.New(ios.Options{Root: t.TempDir(), Runner: irun})
	if err != nil {
		t.Fatal(err)
	}
	icat, err := idrv.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return icat
}

func realCatalog(t *testing.T) requirements.Catalog {
	t.Helper()
	ctx := context.Background()
	icat := iosCatalog(t, "simctl-list-json-xcode16.0.json")

	arun := fake.NewRunner()
	arun.Always(fake.Step{Match: "avdmanager list device", Stdout: fixture(t, "avdmanager-list-device-excerpt-2025.txt")})
	// `sdkmanager --list` needs the network; the driver then lists what
	// is installed.
	arun.Always(fake.Step{Match: "sdkmanager --list_installed", Stdout: fixture(t, "sdkmanager-list-installed-linux-2026.txt")})
	arun.Always(fake.Step{Match: "sdkmanager --list", Stderr: "Warning: Failed to download any source lists!", ExitCode: 1})
	adrv, err := android.New(android.Options{Root: t.TempDir(), Runner: arun, GOARCH: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	acat, err := adrv.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return requirements.FromCore(icat, acat)
}

func policy() config.Sessions {
	return config.Sessions{
		Defaults: map[string]config.SessionDefaults{
			"ios": {
				PolicyVersion: "host-ios-v1",
				Hardware: config.SessionHardwareDefaults{
					Omitted: "phone",
					Archetypes: []config.SessionArchetypeMap{
						{Archetype: "phone", ModelType: config.SessionModelType{Family: "iphone", Variant: "pro"}},
						{Archetype: "tablet", ModelType: config.SessionModelType{Family: "ipad", Variant: "pro"}},
					},
					ModelTypes: []config.SessionModelTypeMap{
						{ModelType: config.SessionModelType{Family: "iphone", Variant: "pro"}, Model: config.SessionModel{Namespace: "product-model", Value: "iPhone16,1"}},
						{ModelType: config.SessionModelType{Family: "ipad", Variant: "pro"}, Model: config.SessionModel{Namespace: "product-model", Value: "iPad16,4"}},
						{ModelType: config.SessionModelType{Family: "iphone"}, Model: config.SessionModel{Namespace: "product-model", Value: "iPhone17,3"}},
					},
				},
				OS: config.SessionOSDefaults{Selector: config.SessionOSSelector{Kind: "latest"}, PreferredVersion: "17.5"},
			},
			"android": {
				PolicyVersion: "host-android-v1",
				Hardware: config.SessionHardwareDefaults{
					Omitted: "phone",
					Profiles: []config.SessionAndroidProfile{
						{Archetype: "phone", ProfileID: "pixel_2", MemoryMB: 4096},
						{Archetype: "tablet", ProfileID: "Nexus 9"},
					},
				},
				OS: config.SessionOSDefaults{Selector: config.SessionOSSelector{Kind: "atLeast", Version: "14"}, PreferredVersion: "16"},
			},
		},
		IOSClassifications: map[string]string{
			"iPhone 15 Pro":         "phone",
			"iPad Pro 11-inch (M4)": "tablet",
			"com.apple.CoreSimulator.SimDeviceType.iPhone-16": "phone",
		},
		AndroidProfileArchetypes: map[string]string{"pixel_2": "phone", "Nexus 9": "tablet"},
	}
}

func req(platform string, hw *contract.HardwareRequirement, os *contract.OSRequirement) contract.DeviceRequirement {
	return contract.DeviceRequirement{SchemaVersion: 1, Platform: platform, Hardware: hw, OS: os}
}

func arch(a string) *contract.HardwareRequirement {
	return &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: a}
}

func modelType(family, variant string) *contract.HardwareRequirement {
	return &contract.HardwareRequirement{Kind: contract.HardwareModelType, ModelType: &contract.ModelTypeRef{Family: family, Variant: variant}}
}

func model(ns, v string) *contract.HardwareRequirement {
	return &contract.HardwareRequirement{Kind: contract.HardwareModel, Model: &contract.ModelIdentity{Namespace: ns, Value: v}}
}

func osOf(kind, v string) *contract.OSRequirement {
	return &contract.OSRequirement{Kind: kind, Version: v}
}

// want is the part of a profile a case checks.
type want struct {
	archetype, model, ident, os, runtime string
	memory                               int
}

func TestResolveServes(t *testing.T) {
	cat := realCatalog(t)
	const (
		ios175 = "com.apple.CoreSimulator.SimRuntime.iOS-17-5"
		ios180 = "com.apple.CoreSimulator.SimRuntime.iOS-18-0"
		a16    = "system-images;android-36;google_apis;x86_64"
	)
	cases := []struct {
		name string
		edit func(*config.Sessions)
		req  contract.DeviceRequirement
		want want
	}{
		{name: "ios omitted hardware gets the omitted archetype, omitted OS the preferred version over the newer one",
			req:  req("ios", nil, nil),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "17.5", ios175, 0}},
		{name: "ios os kind omitted is the policy's too",
			req:  req("ios", nil, osOf("omitted", "")),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "17.5", ios175, 0}},
		{name: "ios archetype phone",
			req:  req("ios", arch("phone"), osOf("exact", "18.0")),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "18.0", ios180, 0}},
		{name: "ios archetype tablet goes through its model type",
			req:  req("ios", arch("tablet"), nil),
			want: want{"tablet", "iPad Pro 11-inch (M4)", "product-model/iPad16,4", "17.5", ios175, 0}},
		{name: "ios archetype foldable once the operator maps and classifies one",
			edit: func(p *config.Sessions) {
				d := p.Defaults["ios"]
				d.Hardware.Archetypes = append(d.Hardware.Archetypes, config.SessionArchetypeMap{Archetype: "foldable", ModelType: config.SessionModelType{Family: "iphone", Variant: "fold"}})
				d.Hardware.ModelTypes = append(d.Hardware.ModelTypes, config.SessionModelTypeMap{ModelType: config.SessionModelType{Family: "iphone", Variant: "fold"}, Model: config.SessionModel{Namespace: "device-type", Value: "com.apple.CoreSimulator.SimDeviceType.iPhone-16-Plus"}})
				p.Defaults["ios"] = d
				p.IOSClassifications["iPhone 16 Plus"] = "foldable"
			},
			req:  req("ios", arch("foldable"), nil),
			want: want{"foldable", "iPhone 16 Plus", "product-model/iPhone17,4", "18.0", ios180, 0}},
		{name: "ios an explicit latest ignores the preferred version",
			req:  req("ios", nil, osOf("latest", "")),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "18.0", ios180, 0}},
		{name: "ios atLeast",
			req:  req("ios", nil, osOf("atLeast", "17.6")),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "18.0", ios180, 0}},
		{name: "ios model type without variant, classified by identifier, on the only runtime it runs",
			req:  req("ios", modelType("iphone", ""), nil),
			want: want{"phone", "iPhone 16", "product-model/iPhone17,3", "18.0", ios180, 0}},
		{name: "ios exact model by product model needs no classification",
			req:  req("ios", model("product-model", "iPhone17,2"), osOf("exact", "18")),
			want: want{"", "iPhone 16 Pro Max", "product-model/iPhone17,2", "18.0", ios180, 0}},
		{name: "ios exact model by simlock's catalog name",
			req:  req("ios", model("simlock-model", "iPhone 15 Pro"), osOf("exact", "17.5")),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "17.5", ios175, 0}},
		{name: "android omitted hardware: the phone profile and its memoryMb; 16 is API 36 and Google APIs beats the Play Store",
			req:  req("android", nil, nil),
			want: want{"phone", "pixel_2", "avd-profile/pixel_2", "16", a16, 4096}},
		{name: "android exact release 16 picks the API-36 Google APIs image",
			req:  req("android", arch("phone"), osOf("exact", "16")),
			want: want{"phone", "pixel_2", "avd-profile/pixel_2", "16", a16, 4096}},
		{name: "android a release with only a Play Store image gets it",
			req:  req("android", arch("phone"), osOf("exact", "15")),
			want: want{"phone", "pixel_2", "avd-profile/pixel_2", "15", "system-images;android-35;google_apis_playstore;x86_64", 4096}},
		{name: "android archetype tablet",
			req:  req("android", arch("tablet"), osOf("latest", "")),
			want: want{"tablet", "Nexus 9", "avd-profile/Nexus 9", "16", a16, 0}},
		{name: "android archetype foldable once mapped and classified",
			edit: func(p *config.Sessions) {
				d := p.Defaults["android"]
				d.Hardware.Profiles = append(d.Hardware.Profiles, config.SessionAndroidProfile{Archetype: "foldable", ProfileID: "pixel_2_xl", MemoryMB: 6144})
				p.Defaults["android"] = d
				p.AndroidProfileArchetypes["pixel_2_xl"] = "foldable"
			},
			req:  req("android", arch("foldable"), nil),
			want: want{"foldable", "pixel_2_xl", "avd-profile/pixel_2_xl", "16", a16, 6144}},
		{name: "android preferred version among several that match",
			edit: func(p *config.Sessions) {
				d := p.Defaults["android"]
				d.OS.PreferredVersion = "14"
				p.Defaults["android"] = d
			},
			req:  req("android", nil, nil),
			want: want{"phone", "pixel_2", "avd-profile/pixel_2", "14", "system-images;android-34;google_apis_playstore;x86_64", 4096}},
		{name: "ios exact model without the platform's defaults: its omitted OS is the newest",
			edit: func(p *config.Sessions) { delete(p.Defaults, "ios") },
			req:  req("ios", model("product-model", "iPhone16,1"), nil),
			want: want{"phone", "iPhone 15 Pro", "product-model/iPhone16,1", "18.0", ios180, 0}},
		{name: "a simlock-model the catalog lacks goes to the lease as given, with its exact OS",
			req:  req("ios", model("simlock-model", "Phone"), osOf("exact", "1.0")),
			want: want{"", "Phone", "simlock-model/Phone", "1.0", "", 0}},
		{name: "a simlock-model the catalog lacks, no OS and no policy: the driver's default OS",
			edit: func(p *config.Sessions) { *p = config.Sessions{} },
			req:  req("android", model("simlock-model", "Phone"), nil),
			want: want{"", "Phone", "simlock-model/Phone", "", "", 0}},
		{name: "android exact avd profile needs no classification",
			req:  req("android", model("avd-profile", "pixel"), osOf("exact", "16")),
			want: want{"", "pixel", "avd-profile/pixel", "16", a16, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := policy()
			if c.edit != nil {
				c.edit(&p)
			}
			got, err := requirements.Resolve(p, cat, c.req)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			ident := ""
			if got.ModelIdentifier != nil {
				ident = got.ModelIdentifier.Namespace + "/" + got.ModelIdentifier.Value
			}
			g := want{got.Archetype, got.Model, ident, got.OSVersion, got.RuntimeID, got.MemoryMB}
			if g != c.want {
				t.Errorf("profile\n got %+v\nwant %+v", g, c.want)
			}
			if got.Platform != c.req.Platform || got.PolicyVersion != p.Defaults[c.req.Platform].PolicyVersion {
				t.Errorf("platform %q policyVersion %q", got.Platform, got.PolicyVersion)
			}
		})
	}
}

func TestResolveRefuses(t *testing.T) {
	cat := realCatalog(t)
	cases := []struct {
		name string
		edit func(*config.Sessions)
		req  contract.DeviceRequirement
		code contract.Code
		// in is a word the message or next action must carry.
		in string
	}{
		{name: "ios unmapped foldable", req: req("ios", arch("foldable"), nil), code: contract.CodeUnsupportedHardware, in: "foldable"},
		{name: "android unmapped foldable", req: req("android", arch("foldable"), nil), code: contract.CodeUnsupportedHardware, in: "foldable"},
		{name: "ios unmapped model type", req: req("ios", modelType("ipad", "mini"), nil), code: contract.CodeUnsupportedHardware, in: "ipad/mini"},
		{name: "android model types are not mapped", req: req("android", modelType("pixel", "pro"), nil), code: contract.CodeUnsupportedHardware, in: "pixel/pro"},
		{name: "ios archetype mapped to a model type with no model", edit: func(p *config.Sessions) {
			d := p.Defaults["ios"]
			d.Hardware.ModelTypes = d.Hardware.ModelTypes[1:]
			p.Defaults["ios"] = d
		}, req: req("ios", arch("phone"), nil), code: contract.CodeUnsupportedHardware, in: "iphone/pro"},
		{name: "ios missing classification", edit: func(p *config.Sessions) { delete(p.IOSClassifications, "iPhone 15 Pro") },
			req: req("ios", nil, nil), code: contract.CodeCatalogMetadataInvalid, in: "iPhone 15 Pro"},
		{name: "ios missing classification for a model type request", edit: func(p *config.Sessions) {
			delete(p.IOSClassifications, "com.apple.CoreSimulator.SimDeviceType.iPhone-16")
		}, req: req("ios", modelType("iphone", ""), nil), code: contract.CodeCatalogMetadataInvalid, in: "iPhone 16"},
		{name: "ios classification contradicts the archetype", edit: func(p *config.Sessions) { p.IOSClassifications["iPad Pro 11-inch (M4)"] = "phone" },
			req: req("ios", arch("tablet"), nil), code: contract.CodeCatalogMetadataInvalid, in: "classified as phone"},
		{name: "android without androidProfileArchetypes", edit: func(p *config.Sessions) { p.AndroidProfileArchetypes = nil },
			req: req("android", nil, nil), code: contract.CodeCatalogMetadataInvalid, in: "pixel_2"},
		{name: "android classification contradicts the archetype", edit: func(p *config.Sessions) { p.AndroidProfileArchetypes["Nexus 9"] = "foldable" },
			req: req("android", arch("tablet"), nil), code: contract.CodeCatalogMetadataInvalid, in: "foldable"},
		{name: "ios exact version not installed", req: req("ios", nil, osOf("exact", "26.5")), code: contract.CodeRuntimeMissing, in: "17.5, 18.0"},
		{name: "ios atLeast above everything installed", req: req("ios", nil, osOf("atLeast", "19")), code: contract.CodeRuntimeMissing, in: "atLeast 19"},
		{name: "ios installed version the model does not run", req: req("ios", modelType("iphone", ""), osOf("exact", "17.5")), code: contract.CodeOSOutOfRange, in: "iPhone 16"},
		{name: "android exact release not installed", req: req("android", nil, osOf("exact", "13")), code: contract.CodeRuntimeMissing, in: "14, 15, 16"},
		{name: "android an API level is not a release", req: req("android", nil, osOf("exact", "36")), code: contract.CodeRuntimeMissing, in: "not API levels"},
		{name: "ios mapped model not installed", edit: func(p *config.Sessions) {
			d := p.Defaults["ios"]
			d.Hardware.ModelTypes[0].Model.Value = "iPhone18,1"
			p.Defaults["ios"] = d
		}, req: req("ios", nil, nil), code: contract.CodeUnknownModel, in: "iPhone18,1"},
		{name: "android exact profile not installed", req: req("android", model("avd-profile", "pixel_9"), nil), code: contract.CodeUnknownModel, in: "pixel_9"},
		{name: "a platform without defaults maps no archetype", edit: func(p *config.Sessions) { delete(p.Defaults, "android") },
			req: req("android", nil, nil), code: contract.CodeUnsupportedHardware, in: "exact model"},
		{name: "a platform without defaults maps no model type", edit: func(p *config.Sessions) { delete(p.Defaults, "ios") },
			req: req("ios", modelType("iphone", "pro"), nil), code: contract.CodeUnsupportedHardware, in: "sessions.defaults.ios"},
		{name: "an unlisted simlock-model with a selector that needs the catalog", req: req("ios", model("simlock-model", "Phone"), osOf("atLeast", "17")),
			code: contract.CodeUnknownModel, in: "Phone"},
		{name: "an unlisted simlock-model whose omitted OS is the policy's", req: req("android", model("simlock-model", "tv_1080p"), nil),
			code: contract.CodeUnknownModel, in: "tv_1080p"},
		{name: "bad requirement", req: req("ios", arch("watch"), nil), code: contract.CodeSessionConfigInvalid, in: "device.hardware.archetype"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := policy()
			if c.edit != nil {
				c.edit(&p)
			}
			got, err := requirements.Resolve(p, cat, c.req)
			ce := contract.AsError(err)
			if ce == nil || ce.Code != c.code {
				t.Fatalf("Resolve = %+v, %v; want %s", got, err, c.code)
			}
			if ce.Retryable {
				t.Errorf("%s is retryable", ce.Code)
			}
			if ce.NextAction == "" {
				t.Errorf("no next action")
			}
			if !strings.Contains(ce.Message+" "+ce.NextAction, c.in) {
				t.Errorf("%q / %q does not mention %q", ce.Message, ce.NextAction, c.in)
			}
		})
	}
}

// An unmapped archetype is decided from the policy alone: nothing about
// the catalog (empty, or holding perfect hardware) changes the answer.
func TestUnmappedArchetypeBeforeCatalog(t *testing.T) {
	p := policy()
	r := req("android", arch("foldable"), nil)
	if _, err := requirements.PlanFor(p, r); !isCode(err, contract.CodeUnsupportedHardware) {
		t.Fatalf("PlanFor = %v, want UNSUPPORTED_HARDWARE", err)
	}
	p.AndroidProfileArchetypes["pixel_2_xl"] = "foldable"
	for _, cat := range []requirements.Catalog{{}, realCatalog(t)} {
		if _, err := requirements.Resolve(p, cat, r); !isCode(err, contract.CodeUnsupportedHardware) {
			t.Fatalf("Resolve = %v, want UNSUPPORTED_HARDWARE", err)
		}
	}
}

// Resolution is deterministic: the same inputs give the same profile,
// whatever the catalog's order.
func TestResolveDeterministic(t *testing.T) {
	cat := realCatalog(t)
	first, err := requirements.Resolve(policy(), cat, req("android", nil, osOf("latest", "")))
	if err != nil {
		t.Fatal(err)
	}
	rev := cat
	rev.Android.Images = nil
	for i := len(cat.Android.Images) - 1; i >= 0; i-- {
		rev.Android.Images = append(rev.Android.Images, cat.Android.Images[i])
	}
	for range 3 {
		again, err := requirements.Resolve(policy(), rev, req("android", nil, osOf("latest", "")))
		if err != nil || !reflect.DeepEqual(again, first) {
			t.Fatalf("Resolve = %+v, %v; first %+v", again, err, first)
		}
	}
}

func isCode(err error, code contract.Code) bool {
	var ce *contract.Error
	return errors.As(err, &ce) && ce.Code == code
}

// The catalog view carries what the drivers report.
func TestFromCore(t *testing.T) {
	c := requirements.FromCore(
		core.Catalog{Models: []core.CatalogModel{{Name: "iPhone 16", Identifier: "t16", Family: "iPhone", ProductModel: "iPhone17,3"}},
			Runtimes: []core.CatalogRuntime{{Version: "18.0", Identifier: "r18", Available: true, SupportedModels: []string{"t16"}}}},
		core.Catalog{Models: []core.CatalogModel{{Name: "Pixel 9", Identifier: "pixel_9"}},
			Runtimes: []core.CatalogRuntime{{Version: "16", Identifier: "system-images;android-36;google_apis;x86_64", Available: true, Tag: "google_apis", ABI: "x86_64", APILevel: 36}}})
	if d := c.IOS.DeviceTypes[0]; d.ProductModel != "iPhone17,3" || d.ProductFamily != "iPhone" || c.IOS.Runtimes[0].SupportedTypes[0] != "t16" {
		t.Errorf("ios %+v", c.IOS)
	}
	if img := c.Android.Images[0]; img.Tag != "google_apis" || img.APILevel != 36 || !img.Installed || c.Android.Profiles[0].ID != "pixel_9" {
		t.Errorf("android %+v", c.Android)
	}
}

// Xcode 12.3 lists no product models and no supported device types, and
// its iOS 10.0 runtime is unavailable on the capturing host.
func TestResolveOnXcode12(t *testing.T) {
	cat := requirements.FromCore(iosCatalog(t, "simctl-list-json-xcode12.3.json"), core.Catalog{})
	p := config.Sessions{IOSClassifications: map[string]string{"iPhone 12": "phone"}}

	got, err := requirements.Resolve(p, cat, req("ios", model("device-type", "com.apple.CoreSimulator.SimDeviceType.iPhone-12"), nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "iPhone 12" || got.Archetype != "phone" || got.OSVersion != "14.3" || got.RuntimeID != "com.apple.CoreSimulator.SimRuntime.iOS-14-3" ||
		*got.ModelIdentifier != (contract.ModelIdentity{Namespace: "device-type", Value: "com.apple.CoreSimulator.SimDeviceType.iPhone-12"}) {
		t.Fatalf("%+v", got)
	}
	if _, err := requirements.Resolve(p, cat, req("ios", model("product-model", "iPhone13,2"), nil)); !isCode(err, contract.CodeUnknownModel) {
		t.Fatalf("a product model Xcode 12 does not list: %v", err)
	}
	// The iPhone 12 starts at iOS 14; the iPhone 7 ran iOS 10, whose
	// runtime this host lists as unavailable.
	if _, err = requirements.Resolve(p, cat, req("ios", model("device-type", "com.apple.CoreSimulator.SimDeviceType.iPhone-12"), osOf("exact", "10.0"))); !isCode(err, contract.CodeOSOutOfRange) {
		t.Fatalf("iPhone 12 on iOS 10.0: %v", err)
	}
	_, err = requirements.Resolve(p, cat, req("ios", model("device-type", "com.apple.CoreSimulator.SimDeviceType.iPhone-7"), osOf("exact", "10.0")))
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeRuntimeMissing || !strings.Contains(ce.Message, "unavailable") {
		t.Fatalf("the unavailable iOS 10.0: %v", err)
	}
}

// Without the runtime's own list, the device type's range decides.
func TestResolveUsesTheTypeRangeWithoutARuntimeList(t *testing.T) {
	cat := requirements.Catalog{IOS: requirements.IOSCatalog{
		DeviceTypes: []requirements.IOSDeviceType{{Name: "iPhone 12", Identifier: "t12", MinOS: "14.0.0"}, {Name: "iPhone 6s", Identifier: "t6s", MinOS: "9.0.0", MaxOS: "15.255.255"}},
		Runtimes:    []requirements.IOSRuntime{{Version: "10.0", Identifier: "r10", Available: true}, {Version: "16.4", Identifier: "r16", Available: true}},
	}}
	p := config.Sessions{}
	if got, err := requirements.Resolve(p, cat, req("ios", model("simlock-model", "iPhone 12"), nil)); err != nil || got.RuntimeID != "r16" {
		t.Fatalf("iPhone 12: %+v, %v", got, err)
	}
	if got, err := requirements.Resolve(p, cat, req("ios", model("simlock-model", "iPhone 6s"), nil)); err != nil || got.RuntimeID != "r10" {
		t.Fatalf("iPhone 6s: %+v, %v", got, err)
	}
	if _, err := requirements.Resolve(p, cat, req("ios", model("simlock-model", "iPhone 12"), osOf("exact", "10.0"))); !isCode(err, contract.CodeOSOutOfRange) {
		t.Fatalf("iPhone 12 on 10.0: %v", err)
	}
}
