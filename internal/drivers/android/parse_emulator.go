package android

import (
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// parseListAVDs decodes `emulator -list-avds`: one AVD name per line.
// Emulator 34.1.x prints an "INFO    | Storing crashdata in: ..." line first,
// and later versions print other "LEVEL | message" lines; AVD names never
// contain a "|" or whitespace, so such lines are dropped.
func parseListAVDs(out []byte) []string {
	var names []string
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		if t == "" || strings.Contains(t, "|") || strings.ContainsFunc(t, unicode.IsSpace) {
			continue
		}
		names = append(names, t)
	}
	return names
}

var emulatorVersionRE = regexp.MustCompile(`emulator version\s+(\S+)`)

// parseEmulatorVersion returns the version from `emulator -version`
// ("Android emulator version 36.1.9.0 (build_id ...)"). The banner also
// carries a crash-data line with the process id, so hashing the whole output
// would change on every run; only the version line is stable.
func parseEmulatorVersion(out []byte) string {
	for _, l := range lines(out) {
		if m := emulatorVersionRE.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	// An unknown layout: fall back to the first line that is not a log
	// line, which still changes when the emulator does.
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		if t != "" && !strings.Contains(t, "|") {
			return t
		}
	}
	return ""
}

// emulatorUnknownAVD reports the emulator's "Unknown AVD name" failure, which
// means the AVD is gone from the root rather than that the boot failed.
func emulatorUnknownAVD(out []byte) bool {
	return strings.Contains(string(out), "Unknown AVD name")
}

// iniFile is a parsed key=value file (config.ini, hardware-qemu.ini,
// quickbootChoice.ini, <name>.ini).
type iniFile map[string]string

// parseINI decodes the AVD key=value files. Android Studio writes
// "key=value", the emulator rewrites them as "key = value" (CR LF on
// Windows); values may be empty and keep inner spaces.
func parseINI(b []byte) iniFile {
	f := iniFile{}
	for _, l := range lines(b) {
		t := strings.TrimSpace(l)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		f[k] = strings.TrimSpace(v)
	}
	return f
}

// keys returns f's keys in sorted order, for stable hashing.
func (f iniFile) keys() []string {
	ks := make([]string, 0, len(f))
	for k := range f {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
