package android

import (
	"strconv"
	"strings"
)

// sdkPackage is one row of an sdkmanager package table.
type sdkPackage struct {
	Path        string // "system-images;android-35;google_apis;x86_64"
	Version     string
	Description string
	Location    string // installed packages only
}

// sdkUpdate is one row of the "Available Updates" table.
type sdkUpdate struct {
	ID        string
	Installed string
	Available string
}

// sdkList is what `sdkmanager --list` or `--list_installed` printed.
type sdkList struct {
	Installed []sdkPackage
	Available []sdkPackage
	Updates   []sdkUpdate
}

// parseSDKList decodes sdkmanager's package tables. Off a terminal,
// sdkmanager prints progress lines ("[====   ] 25% Fetch remote
// repository...", "Loading package information...") before, and sometimes
// after, a section header; on a terminal the last progress redraw can end up
// glued to the header ("Installed packages:=====...] 100% Computing
// updates..."). So a section starts at any line beginning with its title,
// and inside a section only "|"-separated rows count.
func parseSDKList(out []byte) sdkList {
	var res sdkList
	section := ""
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "Installed packages:"):
			section = "installed"
			continue
		case strings.HasPrefix(t, "Available Packages:"):
			section = "available"
			continue
		case strings.HasPrefix(t, "Available Updates:"):
			section = "updates"
			continue
		}
		if section == "" || !strings.Contains(t, "|") || strings.HasPrefix(t, "[") {
			continue
		}
		cols := strings.Split(t, "|")
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		first := cols[0]
		if first == "" || first == "Path" || first == "ID" || strings.Trim(first, "-") == "" {
			continue // header or its "-------" underline
		}
		col := func(i int) string {
			if i < len(cols) {
				return cols[i]
			}
			return ""
		}
		switch section {
		case "installed":
			res.Installed = append(res.Installed, sdkPackage{Path: first, Version: col(1), Description: col(2), Location: col(3)})
		case "available":
			res.Available = append(res.Available, sdkPackage{Path: first, Version: col(1), Description: col(2)})
		case "updates":
			res.Updates = append(res.Updates, sdkUpdate{ID: first, Installed: col(1), Available: col(2)})
		}
	}
	return res
}

// systemImage is a parsed "system-images;android-<level>;<tag>;<abi>" path.
type systemImage struct {
	Package string
	// APILevel is 0 for preview images named by codename only
	// ("android-CANARY", "android-CinnamonBun").
	APILevel int
	Minor    int    // "android-36.1" → 1
	Ext      int    // "android-35-ext15" → 15
	Codename string // "android-36.0-Baklava" → "Baklava"
	Tag      string // google_apis, google_apis_playstore, default, android-tv, ...
	ABI      string // x86_64, arm64-v8a, ...
}

// parseImagePackage decodes a system image package path; ok is false for
// any other package.
func parseImagePackage(pkg string) (systemImage, bool) {
	parts := strings.Split(pkg, ";")
	if len(parts) != 4 || parts[0] != "system-images" || parts[2] == "" || parts[3] == "" {
		return systemImage{}, false
	}
	img := systemImage{Package: pkg, Tag: parts[2], ABI: parts[3]}
	platform, ok := strings.CutPrefix(parts[1], "android-")
	if !ok || platform == "" {
		return systemImage{}, false
	}
	// platform is "35", "36.1", "35-ext15", "36.0-Baklava" or "CANARY".
	level, suffix, _ := strings.Cut(platform, "-")
	if level == "" {
		return systemImage{}, false
	}
	if e, ok := strings.CutPrefix(suffix, "ext"); ok {
		n, err := strconv.Atoi(e)
		if err != nil || n < 0 {
			return systemImage{}, false
		}
		img.Ext = n
	} else {
		img.Codename = suffix
	}
	major, minor, hasMinor := strings.Cut(level, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n <= 0 {
		// A codename-only preview: no level to compare against.
		if img.Codename == "" {
			img.Codename = level
		}
		return img, true
	}
	img.APILevel = n
	if hasMinor {
		m, err := strconv.Atoi(minor)
		if err != nil || m < 0 {
			return systemImage{}, false
		}
		img.Minor = m
	}
	return img, true
}
