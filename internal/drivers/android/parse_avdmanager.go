package android

import (
	"regexp"
	"strconv"
	"strings"
)

// deviceProfile is one hardware profile from `avdmanager list device`.
type deviceProfile struct {
	Index int    // the "id: N" number; changes between SDK releases
	ID    string // the stable id, "pixel_6" (older profiles: "Nexus 9")
	Name  string // display name, "Pixel 6"
	OEM   string
	// Tag is set for profiles bound to one image family (android-tv,
	// android-wear, android-automotive...); phones have none.
	Tag string
}

var profileHeader = regexp.MustCompile(`^id:\s*(\d+)\s+or\s+"(.*)"\s*$`)

// parseDeviceList decodes `avdmanager list device`. Entries start with
// `id: N or "ident"`, followed by indented "Name:", "OEM :" and optional
// "Tag :" lines, and are separated by "---------" rules.
func parseDeviceList(out []byte) []deviceProfile {
	var profs []deviceProfile
	cur := -1
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		if m := profileHeader.FindStringSubmatch(t); m != nil {
			n, _ := strconv.Atoi(m[1])
			profs = append(profs, deviceProfile{Index: n, ID: m[2]})
			cur = len(profs) - 1
			continue
		}
		if cur < 0 || isSeparator(t) {
			continue
		}
		k, v, ok := cutField(t)
		if !ok {
			continue
		}
		switch k {
		case "Name":
			profs[cur].Name = v
		case "OEM":
			profs[cur].OEM = v
		case "Tag":
			profs[cur].Tag = v
		}
	}
	return profs
}

// avdEntry is one AVD from `avdmanager list avd` (or the legacy
// `android list avd`, which shares the layout).
type avdEntry struct {
	Name      string
	Device    string // profile id, "pixel_4"
	DeviceOEM string
	Path      string
	Target    string
	BasedOn   string // "Android 13.0 (Tiramisu)", "Android API 35"
	Tag       string
	ABI       string
	Skin      string
	Sdcard    string
	// APILevel is derived from Target/BasedOn when they name it; 0 if not.
	APILevel int
	// Error is set for entries under "could not be loaded".
	Error string
}

const avdBrokenHeader = "The following Android Virtual Devices could not be loaded:"

var (
	apiLevelInText = regexp.MustCompile(`API(?: level)?\s+(\d+)`)
	releaseInText  = regexp.MustCompile(`Android\s+(\d+(?:\.\d+)?)`)
)

// parseAVDList decodes `avdmanager list avd`. Entries are blocks of
// right-aligned "Key: value" lines separated by "---------"; a second section
// lists the AVDs that could not be loaded, each with an "Error:" line. Newer
// tools put "Tag/ABI:" on the "Based on:" line, older ones on its own line.
func parseAVDList(out []byte) (loaded, broken []avdEntry) {
	var cur *avdEntry
	inBroken := false
	flush := func() {
		if cur == nil {
			return
		}
		cur.APILevel = avdAPILevel(cur.Target, cur.BasedOn)
		if inBroken || cur.Error != "" {
			broken = append(broken, *cur)
		} else {
			loaded = append(loaded, *cur)
		}
		cur = nil
	}
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		switch {
		case t == avdBrokenHeader:
			flush()
			inBroken = true
			continue
		case t == "" || isSeparator(t):
			flush()
			continue
		}
		k, v, ok := cutField(t)
		if !ok {
			continue
		}
		if k == "Name" {
			flush()
			if v != "" {
				cur = &avdEntry{Name: v}
			}
			continue
		}
		if cur == nil {
			continue
		}
		switch k {
		case "Device":
			cur.Device, cur.DeviceOEM = splitParen(v)
		case "Path":
			cur.Path = v
		case "Target":
			cur.Target = v
		case "Based on":
			base, tagABI, _ := strings.Cut(v, "Tag/ABI:")
			cur.BasedOn = strings.TrimSpace(base)
			cur.Tag, cur.ABI = splitTagABI(tagABI)
		case "Tag/ABI":
			cur.Tag, cur.ABI = splitTagABI(v)
		case "Skin":
			cur.Skin = v
		case "Sdcard":
			cur.Sdcard = v
		case "Error":
			cur.Error = v
		}
	}
	flush()
	return loaded, broken
}

// splitParen turns "pixel_4 (Google)" into "pixel_4", "Google".
func splitParen(v string) (name, paren string) {
	i := strings.LastIndex(v, " (")
	if i < 0 || !strings.HasSuffix(v, ")") {
		return v, ""
	}
	return v[:i], v[i+2 : len(v)-1]
}

func splitTagABI(v string) (tag, abi string) {
	tag, abi, _ = strings.Cut(strings.TrimSpace(v), "/")
	return strings.TrimSpace(tag), strings.TrimSpace(abi)
}

// avdAPILevel reads the API level from "Android 4.1.2 (API level 16)",
// "Android API 35" or, failing those, the release in
// "Android 13.0 (Tiramisu)".
func avdAPILevel(target, basedOn string) int {
	for _, s := range []string{basedOn, target} {
		if m := apiLevelInText.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	for _, s := range []string{basedOn, target} {
		if m := releaseInText.FindStringSubmatch(s); m != nil {
			if api, ok := apiForRelease(m[1]); ok {
				return api
			}
		}
	}
	return 0
}

// avdmanagerError extracts the reason from a failed avdmanager run: its
// "Error: ..." line, or the Java exception it dies with when the custom
// hardware profile prompt reads a closed stdin.
func avdmanagerError(out []byte) string {
	var exc string
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		if e, ok := strings.CutPrefix(t, "Error: "); ok {
			return e
		}
		if exc == "" && strings.HasPrefix(t, "Exception in thread") {
			exc = t
		}
	}
	return exc
}
