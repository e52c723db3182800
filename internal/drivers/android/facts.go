package android

import (
	"path/filepath"
	"strings"

	"github.com/simlock/simlock/internal/core"
)

// The facts the Android driver can state about an AVD (docs/adr/0039),
// all read from the AVD's own config.ini: its device profile, the screen
// the profile configured, the form factor the profile implies, and where
// its system image comes from. A key the file lacks leaves the fact
// unstated (null on the wire).

// tabletProfiles are the stock tablet profiles whose id does not say so.
var tabletProfiles = map[string]bool{"pixel_c": true, "nexus_7": true, "nexus_7_2013": true, "nexus_9": true, "nexus_10": true}

// profileFormFactor reads the form factor from the AVD's profile: a hinge
// sensor (or a fold profile) is a foldable, a tablet profile a tablet, a
// profile tagged for TV, Wear or Automotive is none of the three, and any
// other handset profile is a phone.
func profileFormFactor(ini iniFile) string {
	id := strings.ToLower(ini["hw.device.name"])
	tag := strings.ToLower(ini["tag.id"])
	switch {
	case id == "":
		return "unknown"
	case yes(ini["hw.sensor.hinge"]) || strings.Contains(id, "fold"):
		return "foldable"
	case strings.Contains(id, "tablet") || tabletProfiles[id]:
		return "tablet"
	case strings.Contains(tag, "tv") || strings.Contains(tag, "wear") || strings.Contains(tag, "automotive") ||
		strings.Contains(id, "tv_") || strings.Contains(id, "wear") || strings.Contains(id, "automotive"):
		return "unknown"
	default:
		return "phone"
	}
}

func yes(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "yes" || v == "true"
}

// iniFacts are the fact attributes config.ini supports; basedOn is the
// SDK package the AVD was created from (the spec's system image).
func iniFacts(ini iniFile, basedOn string) map[string]string {
	out := map[string]string{}
	set := func(fact, v string) {
		if v = strings.TrimSpace(v); v != "" {
			out[core.AttrFactPrefix+fact] = v
		}
	}
	set(core.FactModelIdentifier, ini["hw.device.name"])
	out[core.AttrFactPrefix+core.FactFormFactor] = profileFormFactor(ini)
	set(core.FactDisplayWidthPx, ini["hw.lcd.width"])
	set(core.FactDisplayHeightPx, ini["hw.lcd.height"])
	set(core.FactDisplayDensity, ini["hw.lcd.density"])
	sysdir := ini["image.sysdir.1"]
	set(core.FactImagePath, sysdir)
	set(core.FactImageTarget, imageTarget(sysdir))
	set(core.FactImageBasedOn, basedOn)
	return out
}

// imageTarget is the API directory of a system image path
// ("system-images/android-35/google_apis/x86_64/" → "android-35").
func imageTarget(sysdir string) string {
	// Android Studio on Windows writes the path with backslashes.
	parts := strings.Split(strings.ReplaceAll(sysdir, `\`, "/"), "/")
	for i, p := range parts {
		if p == "system-images" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

// avdFacts reads the AVD's config.ini. An unreadable file states nothing.
func (d *Driver) avdFacts(name, basedOn string) map[string]string {
	b, err := d.fs.ReadFile(filepath.Join(d.avdDir(name), "config.ini"))
	if err != nil {
		d.log.Warn("AVD facts unavailable", "avd", name, "err", err)
		return nil
	}
	return iniFacts(parseINI(b), basedOn)
}
