package simsdk

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The simulated Android SDK's catalog: what sdkmanager can install, what
// comes preinstalled, and avdmanager's hardware profiles. Package paths,
// versions and descriptions are rows of the real `sdkmanager --list`
// capture (sdkmanager/list-full-windows-cmdline-tools-19-2026.txt); the
// profile list is modelled on avdmanager/list-device-excerpt-2025.txt
// (catalog/PROVENANCE.md says which parts are taken and which assembled).

// androidAPI is what the tools say about one API level.
type androidAPI struct {
	Level   int
	Release string // "15"
	// BasedOn is avdmanager's "Based on:" text. Current cmdline-tools know
	// API 34's codename but print "Android API 35/36" for the newer ones
	// (capture: avdmanager/list-avd-api34-35-36-linux-2026.txt).
	BasedOn string
	// Build identity reported through getprop. Not captured: plausible
	// values in the real format.
	BuildID       string
	Incremental   string
	SecurityPatch string
}

var androidAPIs = map[int]androidAPI{
	34: {Level: 34, Release: "14", BasedOn: `Android 14.0 ("UpsideDownCake")`, BuildID: "UE1A.230829.050", Incremental: "12077443", SecurityPatch: "2024-08-05"},
	35: {Level: 35, Release: "15", BasedOn: "Android API 35", BuildID: "AE3A.240806.043", Incremental: "12960925", SecurityPatch: "2025-02-05"},
	36: {Level: 36, Release: "16", BasedOn: "Android API 36", BuildID: "BE2A.250530.026.F3", Incremental: "13832233", SecurityPatch: "2025-08-05"},
}

// sdkPackage is one package sdkmanager knows.
type sdkPackage struct {
	Path        string
	Version     string
	Description string
	// Image fields; API is 0 for packages that are not system images.
	API int
	Tag string
	ABI string
	// TagIDs are the tag ids avdmanager checks an --abi "tag/abi" against.
	// For the 16 KB page-size previews they do not include the package's
	// own tag, which is why the real avdmanager rejects
	// --abi google_apis_ps16k/x86_64 for them (the invalid-tag capture).
	TagIDs []string
}

func (p sdkPackage) isImage() bool { return p.API != 0 }

// location is the package's directory relative to the SDK root, as the
// Location column shows it.
func (p sdkPackage) location() string { return strings.ReplaceAll(p.Path, ";", "/") }

// tagDisplay is the image tag's display name (config.ini tag.display,
// list avd's Target).
func tagDisplay(tag string) string {
	switch {
	case strings.HasPrefix(tag, "google_apis_playstore"):
		return "Google Play"
	case strings.HasPrefix(tag, "google_apis"):
		return "Google APIs"
	case tag == "default":
		return "Default Android System Image"
	}
	return tag
}

func imageDescription(tag, abi string) string {
	arch := "Intel x86_64 Atom"
	if abi == "arm64-v8a" {
		arch = "ARM 64 v8a"
	}
	prefix := ""
	if strings.HasSuffix(tag, "_ps16k") {
		prefix = "Pre-Release 16 KB Page Size "
	}
	return fmt.Sprintf("%s%s %s System Image", prefix, tagDisplay(tag), arch)
}

// androidPackages is the remote catalog, in sdkmanager's (sorted) order.
var androidPackages = buildAndroidPackages()

func buildAndroidPackages() []sdkPackage {
	pkgs := []sdkPackage{
		{Path: "build-tools;35.0.0", Version: "35.0.0", Description: "Android SDK Build-Tools 35"},
		{Path: "build-tools;36.0.0", Version: "36.0.0", Description: "Android SDK Build-Tools 36"},
		{Path: "cmdline-tools;latest", Version: cmdlineToolsVersion, Description: "Android SDK Command-line Tools (latest)"},
		{Path: "emulator", Version: emulatorPackageVersion, Description: "Android Emulator"},
		{Path: "platform-tools", Version: platformToolsVersion, Description: "Android SDK Platform-Tools"},
		{Path: "platforms;android-34", Version: "3", Description: "Android SDK Platform 34"},
		{Path: "platforms;android-35", Version: "2", Description: "Android SDK Platform 35"},
		{Path: "platforms;android-36", Version: "2", Description: "Android SDK Platform 36"},
	}
	image := func(api int, version, tag string, tagIDs ...string) {
		for _, abi := range []string{"arm64-v8a", "x86_64"} {
			if len(tagIDs) == 0 {
				tagIDs = []string{tag}
			}
			pkgs = append(pkgs, sdkPackage{
				Path:        fmt.Sprintf("system-images;android-%d;%s;%s", api, tag, abi),
				Version:     version,
				Description: imageDescription(tag, abi),
				API:         api, Tag: tag, ABI: abi, TagIDs: tagIDs,
			})
		}
	}
	image(34, "14", "google_apis")
	image(34, "14", "google_apis_playstore")
	image(35, "9", "google_apis")
	image(35, "9", "google_apis_playstore")
	image(36, "7", "google_apis")
	image(36, "7", "google_apis_playstore")
	image(36, "7", "google_apis_playstore_ps16k", "page_size_16kb")
	image(36, "7", "google_apis_ps16k", "page_size_16kb")
	slices.SortStableFunc(pkgs, func(a, b sdkPackage) int { return strings.Compare(a.Path, b.Path) })
	return pkgs
}

// Versions the simulated tools report.
const (
	emulatorVersion        = "36.1.9.0" // the measured emulator of the architecture reference
	emulatorPackageVersion = "36.1.9"
	emulatorBuildID        = "13823996" // not captured
	platformToolsVersion   = "36.0.0"   // capture: adb/version-platform-tools-36.0.0-linux.txt
	platformToolsBuild     = "13206524"
	cmdlineToolsVersion    = "19.0" // capture: sdkmanager/list-full-windows-cmdline-tools-19-2026.txt
)

// preinstalled says which packages a fresh simulated SDK has: the tools,
// platforms 35 and 36, and the android-35 and android-36 Google APIs and
// Google Play images for this host's ABI. Android 34 is downloadable.
func (p sdkPackage) preinstalled() bool {
	if p.isImage() {
		return (p.API == 35 || p.API == 36) && p.ABI == hostABI() &&
			(p.Tag == "google_apis" || p.Tag == "google_apis_playstore")
	}
	switch p.Path {
	case "build-tools;35.0.0", "cmdline-tools;latest", "emulator", "platform-tools",
		"platforms;android-35", "platforms;android-36":
		return true
	}
	return false
}

func findPackage(path string) (sdkPackage, bool) {
	for _, p := range androidPackages {
		if p.Path == path {
			return p, true
		}
	}
	return sdkPackage{}, false
}

// installedPackages lists the installed packages in catalog order.
func (s *sdk) installedPackages() ([]sdkPackage, error) {
	st, err := loadHomeState(s.home)
	if err != nil {
		return nil, err
	}
	var out []sdkPackage
	for _, p := range androidPackages {
		if isInstalled(st, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func isInstalled(st homeState, p sdkPackage) bool {
	if slices.Contains(st.AndroidUninstalled, p.Path) {
		return false
	}
	return p.preinstalled() || slices.Contains(st.AndroidInstalled, p.Path)
}

func (s *sdk) packageInstalled(path string) (bool, error) {
	p, ok := findPackage(path)
	if !ok {
		return false, nil
	}
	st, err := loadHomeState(s.home)
	if err != nil {
		return false, err
	}
	return isInstalled(st, p), nil
}

// imagePackageFromSysdir turns config.ini's image.sysdir.1
// ("system-images/android-35/google_apis/x86_64/") into a package path.
func imagePackageFromSysdir(sysdir string) string {
	parts := strings.Split(strings.Trim(strings.ReplaceAll(sysdir, "\\", "/"), "/"), "/")
	if len(parts) != 4 || parts[0] != "system-images" {
		return ""
	}
	return strings.Join(parts, ";")
}

func sysdirFor(p sdkPackage) string { return p.location() + "/" }

// deviceProfile is one avdmanager hardware profile.
type deviceProfile struct {
	ID   string
	Name string
	OEM  string
	Tag  string // android-tv, android-wear, ...; empty for phones and tablets
	// Screen and memory, written into config.ini of AVDs made from it.
	Width, Height, Density, RAM int
}

// androidProfiles is `avdmanager list device` in its order; the index is
// the "id: N" number. Entries 22–27 are exactly the captured excerpt, and
// the list is sorted the way the excerpt is (by id, ignoring case).
var androidProfiles = []deviceProfile{
	{ID: "automotive_1024p_landscape", Name: "Automotive (1024p landscape)", OEM: "Google", Tag: "android-automotive-playstore", Width: 1024, Height: 768, Density: 160, RAM: 2048},
	{ID: "automotive_1080p_landscape", Name: "Automotive (1080p landscape)", OEM: "Google", Tag: "android-automotive", Width: 1920, Height: 1080, Density: 213, RAM: 2048},
	{ID: "automotive_1408p_landscape_with_google_apis", Name: "Automotive (1408p landscape) with Google APIs", OEM: "Google", Tag: "android-automotive", Width: 1408, Height: 792, Density: 160, RAM: 2048},
	{ID: "automotive_1408p_landscape_with_play", Name: "Automotive (1408p landscape) with Google Play", OEM: "Google", Tag: "android-automotive-playstore", Width: 1408, Height: 792, Density: 160, RAM: 2048},
	{ID: "automotive_distant_display", Name: "Automotive Distant Display", OEM: "Google", Tag: "android-automotive", Width: 1080, Height: 600, Density: 120, RAM: 2048},
	{ID: "automotive_distant_display_with_play", Name: "Automotive Distant Display with Google Play", OEM: "Google", Tag: "android-automotive-playstore", Width: 1080, Height: 600, Density: 120, RAM: 2048},
	{ID: "automotive_portrait", Name: "Automotive (1080p portrait)", OEM: "Google", Tag: "android-automotive", Width: 1080, Height: 1920, Density: 213, RAM: 2048},
	{ID: "automotive_ultrawide", Name: "Automotive Ultrawide", OEM: "Google", Tag: "android-automotive", Width: 2560, Height: 720, Density: 160, RAM: 2048},
	{ID: "desktop_large", Name: "Large Desktop", OEM: "Google", Tag: "android-desktop", Width: 1920, Height: 1080, Density: 160, RAM: 4096},
	{ID: "desktop_medium", Name: "Medium Desktop", OEM: "Google", Tag: "android-desktop", Width: 1366, Height: 768, Density: 160, RAM: 4096},
	{ID: "desktop_small", Name: "Small Desktop", OEM: "Google", Tag: "android-desktop", Width: 1280, Height: 720, Density: 160, RAM: 4096},
	{ID: "Galaxy Nexus", Name: "Galaxy Nexus", OEM: "Google", Width: 720, Height: 1280, Density: 320, RAM: 1024},
	{ID: "medium_phone", Name: "Medium Phone", OEM: "Generic", Width: 1080, Height: 2400, Density: 420, RAM: 2048},
	{ID: "medium_tablet", Name: "Medium Tablet", OEM: "Generic", Width: 2560, Height: 1600, Density: 320, RAM: 2048},
	{ID: "Nexus 10", Name: "Nexus 10", OEM: "Google", Width: 2560, Height: 1600, Density: 320, RAM: 2048},
	{ID: "Nexus 4", Name: "Nexus 4", OEM: "Google", Width: 768, Height: 1280, Density: 320, RAM: 2048},
	{ID: "Nexus 5", Name: "Nexus 5", OEM: "Google", Width: 1080, Height: 1920, Density: 480, RAM: 2048},
	{ID: "Nexus 5X", Name: "Nexus 5X", OEM: "Google", Width: 1080, Height: 1920, Density: 420, RAM: 2048},
	{ID: "Nexus 6", Name: "Nexus 6", OEM: "Google", Width: 1440, Height: 2560, Density: 560, RAM: 2048},
	{ID: "Nexus 6P", Name: "Nexus 6P", OEM: "Google", Width: 1440, Height: 2560, Density: 560, RAM: 2048},
	{ID: "Nexus 7", Name: "Nexus 7 (2012)", OEM: "Google", Width: 800, Height: 1280, Density: 213, RAM: 1024},
	{ID: "Nexus 7 2013", Name: "Nexus 7", OEM: "Google", Width: 1200, Height: 1920, Density: 320, RAM: 2048},
	{ID: "Nexus 9", Name: "Nexus 9", OEM: "Google", Width: 2048, Height: 1536, Density: 320, RAM: 2048},
	{ID: "Nexus One", Name: "Nexus One", OEM: "Google", Width: 480, Height: 800, Density: 240, RAM: 512},
	{ID: "Nexus S", Name: "Nexus S", OEM: "Google", Width: 480, Height: 800, Density: 240, RAM: 512},
	{ID: "pixel", Name: "Pixel", OEM: "Google", Width: 1080, Height: 1920, Density: 420, RAM: 1536},
	{ID: "pixel_2", Name: "Pixel 2", OEM: "Google", Width: 1080, Height: 1920, Density: 420, RAM: 1536},
	{ID: "pixel_2_xl", Name: "Pixel 2 XL", OEM: "Google", Width: 1440, Height: 2880, Density: 560, RAM: 1536},
	{ID: "pixel_3", Name: "Pixel 3", OEM: "Google", Width: 1080, Height: 2160, Density: 440, RAM: 1536},
	{ID: "pixel_3_xl", Name: "Pixel 3 XL", OEM: "Google", Width: 1440, Height: 2960, Density: 560, RAM: 1536},
	{ID: "pixel_3a", Name: "Pixel 3a", OEM: "Google", Width: 1080, Height: 2220, Density: 440, RAM: 1536},
	{ID: "pixel_3a_xl", Name: "Pixel 3a XL", OEM: "Google", Width: 1080, Height: 2160, Density: 400, RAM: 1536},
	{ID: "pixel_4", Name: "Pixel 4", OEM: "Google", Width: 1080, Height: 2280, Density: 440, RAM: 1536},
	{ID: "pixel_4_xl", Name: "Pixel 4 XL", OEM: "Google", Width: 1440, Height: 3040, Density: 560, RAM: 1536},
	{ID: "pixel_4a", Name: "Pixel 4a", OEM: "Google", Width: 1080, Height: 2340, Density: 440, RAM: 1536},
	{ID: "pixel_5", Name: "Pixel 5", OEM: "Google", Width: 1080, Height: 2340, Density: 440, RAM: 1536},
	{ID: "pixel_6", Name: "Pixel 6", OEM: "Google", Width: 1080, Height: 2400, Density: 420, RAM: 1536},
	{ID: "pixel_6_pro", Name: "Pixel 6 Pro", OEM: "Google", Width: 1440, Height: 3120, Density: 560, RAM: 1536},
	{ID: "pixel_6a", Name: "Pixel 6a", OEM: "Google", Width: 1080, Height: 2400, Density: 420, RAM: 1536},
	{ID: "pixel_7", Name: "Pixel 7", OEM: "Google", Width: 1080, Height: 2400, Density: 420, RAM: 2048},
	{ID: "pixel_7_pro", Name: "Pixel 7 Pro", OEM: "Google", Width: 1440, Height: 3120, Density: 560, RAM: 2048},
	{ID: "pixel_7a", Name: "Pixel 7a", OEM: "Google", Width: 1080, Height: 2400, Density: 420, RAM: 2048},
	{ID: "pixel_8", Name: "Pixel 8", OEM: "Google", Width: 1080, Height: 2400, Density: 420, RAM: 2048},
	{ID: "pixel_8_pro", Name: "Pixel 8 Pro", OEM: "Google", Width: 1344, Height: 2992, Density: 480, RAM: 2048},
	{ID: "pixel_8a", Name: "Pixel 8a", OEM: "Google", Width: 1080, Height: 2400, Density: 420, RAM: 2048},
	{ID: "pixel_9", Name: "Pixel 9", OEM: "Google", Width: 1080, Height: 2424, Density: 420, RAM: 2048},
	{ID: "pixel_9_pro", Name: "Pixel 9 Pro", OEM: "Google", Width: 1280, Height: 2856, Density: 480, RAM: 2048},
	{ID: "pixel_9_pro_fold", Name: "Pixel 9 Pro Fold", OEM: "Google", Width: 2076, Height: 2152, Density: 390, RAM: 2048},
	{ID: "pixel_9_pro_xl", Name: "Pixel 9 Pro XL", OEM: "Google", Width: 1344, Height: 2992, Density: 480, RAM: 2048},
	{ID: "pixel_c", Name: "Pixel C", OEM: "Google", Width: 2560, Height: 1800, Density: 320, RAM: 2048},
	{ID: "pixel_fold", Name: "Pixel Fold", OEM: "Google", Width: 2208, Height: 1840, Density: 420, RAM: 2048},
	{ID: "pixel_tablet", Name: "Pixel Tablet", OEM: "Google", Width: 2560, Height: 1600, Density: 320, RAM: 2048},
	{ID: "pixel_xl", Name: "Pixel XL", OEM: "Google", Width: 1440, Height: 2560, Density: 560, RAM: 1536},
	{ID: "resizable", Name: "Resizable (Experimental)", OEM: "Generic", Width: 1080, Height: 2340, Density: 420, RAM: 2048},
	{ID: "small_phone", Name: "Small Phone", OEM: "Generic", Width: 720, Height: 1280, Density: 320, RAM: 2048},
	{ID: "tv_1080p", Name: "Television (1080p)", OEM: "Google", Tag: "android-tv", Width: 1920, Height: 1080, Density: 320, RAM: 2048},
	{ID: "tv_4k", Name: "Television (4K)", OEM: "Google", Tag: "android-tv", Width: 3840, Height: 2160, Density: 640, RAM: 2048},
	{ID: "tv_720p", Name: "Television (720p)", OEM: "Google", Tag: "android-tv", Width: 1280, Height: 720, Density: 213, RAM: 2048},
	{ID: "wearos_large_round", Name: "Wear OS Large Round", OEM: "Google", Tag: "android-wear", Width: 454, Height: 454, Density: 320, RAM: 2048},
	{ID: "wearos_rect", Name: "Wear OS Rectangular", OEM: "Google", Tag: "android-wear", Width: 402, Height: 476, Density: 320, RAM: 2048},
	{ID: "wearos_small_round", Name: "Wear OS Small Round", OEM: "Google", Tag: "android-wear", Width: 384, Height: 384, Density: 320, RAM: 2048},
	{ID: "wearos_square", Name: "Wear OS Square", OEM: "Google", Tag: "android-wear", Width: 384, Height: 384, Density: 320, RAM: 2048},
}

// findProfile resolves avdmanager's --device: a profile id or its index.
func findProfile(ref string) (deviceProfile, bool) {
	for _, p := range androidProfiles {
		if p.ID == ref {
			return p, true
		}
	}
	if n, err := strconv.Atoi(ref); err == nil && n >= 0 && n < len(androidProfiles) {
		return androidProfiles[n], true
	}
	return deviceProfile{}, false
}
