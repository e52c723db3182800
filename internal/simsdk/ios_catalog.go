package simsdk

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The simulated Xcode. Its device types are a real Xcode 16.0 capture and
// its runtimes real runtimes seen in captures (catalog/PROVENANCE.md).
const (
	xcodeVersion    = "26.3"
	xcodeBuild      = "17C529"
	xcodeDeveloper  = "/Applications/Xcode.app/Contents/Developer"
	runtimeVolumes  = "/Library/Developer/CoreSimulator/Volumes"
	unavailableNote = `runtime profile not found using "System" match policy`
)

//go:embed catalog/devicetypes-xcode16.0.json
var deviceTypesJSON []byte

type deviceType struct {
	Name            string `json:"name"`
	Identifier      string `json:"identifier"`
	ProductFamily   string `json:"productFamily"`
	ModelIdentifier string `json:"modelIdentifier"`
	Min             string `json:"min"`
	Max             string `json:"max"`
}

// iosDeviceTypes is decoded once from the embedded capture and never
// modified afterwards.
var iosDeviceTypes = mustDecodeDeviceTypes(deviceTypesJSON)

func mustDecodeDeviceTypes(data []byte) []deviceType {
	var out []deviceType
	if err := json.Unmarshal(data, &out); err != nil {
		panic("simsdk: embedded device types: " + err.Error())
	}
	for _, t := range out {
		if _, err := packVersion(t.Min); err != nil {
			panic("simsdk: embedded device types: " + err.Error())
		}
		if _, err := packVersion(t.Max); err != nil {
			panic("simsdk: embedded device types: " + err.Error())
		}
	}
	return out
}

// packVersion encodes "a.b.c" the way simctl's integer runtime versions do:
// a<<16 | b<<8 | c ("65535.255.255" is the unbounded 4294967295).
func packVersion(v string) (uint32, error) {
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return 0, fmt.Errorf("bad version %q", v)
	}
	var n [3]uint64
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("bad version %q", v)
		}
		n[i] = x
	}
	if n[0] > 65535 || n[1] > 255 || n[2] > 255 {
		return 0, fmt.Errorf("bad version %q", v)
	}
	return uint32(n[0]<<16 | n[1]<<8 | n[2]), nil
}

func mustPack(v string) uint32 {
	n, err := packVersion(v)
	if err != nil {
		panic("simsdk: " + err.Error())
	}
	return n
}

func (t deviceType) minVersion() uint32 { return mustPack(t.Min) }
func (t deviceType) maxVersion() uint32 { return mustPack(t.Max) }

var familyPlatformDir = map[string]string{
	"iPhone":       "iPhoneOS.platform",
	"iPad":         "iPhoneOS.platform",
	"Apple TV":     "AppleTVOS.platform",
	"Apple Watch":  "WatchOS.platform",
	"Apple Vision": "XROS.platform",
}

func (t deviceType) bundlePath() string {
	return xcodeDeveloper + "/Platforms/" + familyPlatformDir[t.ProductFamily] +
		"/Library/Developer/CoreSimulator/Profiles/DeviceTypes/" + t.Name + ".simdevicetype"
}

func findDeviceType(arg string) (deviceType, bool) {
	for _, t := range iosDeviceTypes {
		if t.Identifier == arg || t.Name == arg {
			return t, true
		}
	}
	for _, t := range iosDeviceTypes {
		if strings.EqualFold(t.Name, arg) || strings.EqualFold(t.Identifier, arg) {
			return t, true
		}
	}
	return deviceType{}, false
}

func deviceTypeIndex(id string) int {
	for i, t := range iosDeviceTypes {
		if t.Identifier == id {
			return i
		}
	}
	return len(iosDeviceTypes)
}

// simRuntime is a simulator runtime of the simulated Xcode.
type simRuntime struct {
	Name       string // "iOS 26.3"
	Version    string // "26.3.1" (may differ from the name)
	Build      string
	Platform   string // as simctl prints it: "iOS", "xrOS"
	Identifier string
	Families   []string
	// Dropped are device types whose open-ended range would include this
	// runtime but which it no longer supports.
	Dropped []string
	// Downloadable runtimes are not installed until xcodebuild
	// -downloadPlatform fetches them.
	Downloadable bool
	DownloadSize string
}

var iosFamilies = []string{"iPhone", "iPad"}

// iOS 26 dropped these models although their device types stay open-ended.
var droppedByIOS26 = []string{
	"com.apple.CoreSimulator.SimDeviceType.iPhone-XS",
	"com.apple.CoreSimulator.SimDeviceType.iPhone-XS-Max",
	"com.apple.CoreSimulator.SimDeviceType.iPhone-XR",
	"com.apple.CoreSimulator.SimDeviceType.iPad--7th-generation-",
}

// iosRuntimes is the whole runtime catalog in listing order (iOS by
// version, then visionOS). It is never modified.
var iosRuntimes = []simRuntime{
	{Name: "iOS 17.5", Version: "17.5", Build: "21F79", Platform: "iOS",
		Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-17-5", Families: iosFamilies},
	{Name: "iOS 18.0", Version: "18.0", Build: "22A3351", Platform: "iOS",
		Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-18-0", Families: iosFamilies},
	{Name: "iOS 18.4", Version: "18.4", Build: "22E238", Platform: "iOS",
		Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-18-4", Families: iosFamilies,
		Downloadable: true, DownloadSize: "8.43 GB"},
	{Name: "iOS 26.3", Version: "26.3.1", Build: "23D8133", Platform: "iOS",
		Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-26-3", Families: iosFamilies,
		Dropped: droppedByIOS26},
	{Name: "iOS 26.5", Version: "26.5", Build: "23F77", Platform: "iOS",
		Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-26-5", Families: iosFamilies,
		Dropped: droppedByIOS26, Downloadable: true, DownloadSize: "8.86 GB"},
	{Name: "visionOS 1.2", Version: "1.2", Build: "21O5565d", Platform: "xrOS",
		Identifier: "com.apple.CoreSimulator.SimRuntime.xrOS-1-2", Families: []string{"Apple Vision"}},
}

// shortName is the "<platform> <version>" used in runtime bundle paths
// ("iOS 17.5", "xrOS 1.2"), taken from the name's version.
func (r simRuntime) shortName() string { return r.Platform + " " + r.nameVersion() }

// nameVersion is the version in the runtime's name ("26.3" for "iOS 26.3",
// whose full version is 26.3.1).
func (r simRuntime) nameVersion() string { return r.Name[strings.LastIndexByte(r.Name, ' ')+1:] }

func (r simRuntime) bundlePath() string {
	return runtimeVolumes + "/" + r.Platform + "_" + r.Build +
		"/Library/Developer/CoreSimulator/Profiles/Runtimes/" + r.shortName() + ".simruntime"
}

func (r simRuntime) runtimeRoot() string { return r.bundlePath() + "/Contents/Resources/RuntimeRoot" }

// describe is the runtime as simctl names it in text output and errors:
// "iOS 18.4 (18.4 - 22E238) - com.apple.CoreSimulator.SimRuntime.iOS-18-4".
func (r simRuntime) describe() string {
	return fmt.Sprintf("%s (%s - %s) - %s", r.Name, r.Version, r.Build, r.Identifier)
}

// supports says whether a device of type t can be created on r: the
// family matches, r's version is inside t's range, and r has not dropped t.
func (r simRuntime) supports(t deviceType) bool {
	if !slices.Contains(r.Families, t.ProductFamily) || slices.Contains(r.Dropped, t.Identifier) {
		return false
	}
	v := mustPack(r.Version)
	return t.minVersion() <= v && v <= t.maxVersion()
}

func (r simRuntime) supportedDeviceTypes() []deviceType {
	var out []deviceType
	for _, t := range iosDeviceTypes {
		if r.supports(t) {
			out = append(out, t)
		}
	}
	return out
}

// matches reports whether a user-supplied runtime reference names r:
// identifier, name ("iOS 17.5" or "iOS17.5"), version, or the identifier's
// tail ("iOS-17-5").
func (r simRuntime) matches(ref string) bool {
	ref = strings.TrimSpace(ref)
	return ref == r.Identifier ||
		strings.EqualFold(ref, r.Name) ||
		strings.EqualFold(ref, strings.ReplaceAll(r.Name, " ", "")) ||
		ref == r.Version || ref == r.nameVersion() ||
		ref == strings.TrimPrefix(r.Identifier, "com.apple.CoreSimulator.SimRuntime.")
}

// installedRuntimes is the preinstalled set (or the EnvIOSRuntimes
// override) plus whatever xcodebuild -downloadPlatform installed, in
// catalog order.
func (s *sdk) installedRuntimes() ([]simRuntime, error) {
	installed := map[string]bool{}
	if spec := strings.TrimSpace(s.env(EnvIOSRuntimes)); spec != "" {
		if spec != "none" {
			for _, ref := range strings.Split(spec, ",") {
				ref = strings.TrimSpace(ref)
				if ref == "" {
					continue
				}
				found := false
				for _, r := range iosRuntimes {
					if r.matches(ref) {
						installed[r.Identifier] = true
						found = true
					}
				}
				if !found {
					return nil, fmt.Errorf("%s: unknown runtime %q", EnvIOSRuntimes, ref)
				}
			}
		}
	} else {
		for _, r := range iosRuntimes {
			if !r.Downloadable {
				installed[r.Identifier] = true
			}
		}
	}
	st, err := loadHomeState(s.home)
	if err != nil {
		return nil, err
	}
	for _, id := range st.InstalledRuntimes {
		installed[id] = true
	}
	var out []simRuntime
	for _, r := range iosRuntimes {
		if installed[r.Identifier] {
			out = append(out, r)
		}
	}
	return out, nil
}

func findRuntime(rts []simRuntime, ref string) (simRuntime, bool) {
	for _, r := range rts {
		if r.matches(ref) {
			return r, true
		}
	}
	return simRuntime{}, false
}

func runtimeByID(rts []simRuntime, id string) (simRuntime, bool) {
	for _, r := range rts {
		if r.Identifier == id {
			return r, true
		}
	}
	return simRuntime{}, false
}

// newestRuntimeFor picks the newest installed runtime that supports t, as
// simctl create does when no runtime is given.
func newestRuntimeFor(rts []simRuntime, t deviceType) (simRuntime, bool) {
	var best simRuntime
	found := false
	for _, r := range rts {
		if r.supports(t) && (!found || mustPack(r.Version) > mustPack(best.Version)) {
			best, found = r, true
		}
	}
	return best, found
}
