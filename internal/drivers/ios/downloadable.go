package ios

import (
	"fmt"
	"sort"
	"strings"
)

// downloadableRuntime is an iOS simulator runtime Apple publishes for
// `xcodebuild -downloadPlatform iOS -buildVersion <build>`.
type downloadableRuntime struct {
	Version Version
	Build   string
}

// knownDownloadable are the iOS simulator runtime builds simlock knows to
// exist, each one seen in a captured simctl listing (testdata) or in the
// simulated SDK's catalogue, which copies real builds. xcodebuild takes a
// build, not a version prefix: asked for "18" it finds nothing, so a
// request is turned into the newest known build it matches. A version
// newer than every entry is still passed through as written when it has a
// minor version, so an Xcode newer than this table can serve it.
var knownDownloadable = []downloadableRuntime{
	{Version{17, 0, 0}, "21A328"},
	{Version{17, 0, 1}, "21A342"},
	{Version{17, 5, 0}, "21F79"},
	{Version{18, 0, 0}, "22A3351"},
	{Version{18, 4, 0}, "22E238"},
	{Version{26, 3, 1}, "23D8133"},
	{Version{26, 5, 0}, "23F77"},
}

// downloadTarget is what installRuntime asks xcodebuild for: the newest
// known build matching want, or want as written when the table has none
// and it names a minor version. ok is false when nothing can be asked
// for (a major-only request no known runtime matches).
func downloadTarget(want *versionPrefix) (arg, label string, ok bool) {
	if want == nil {
		return "", "latest", true
	}
	var best *downloadableRuntime
	for i := range knownDownloadable {
		r := knownDownloadable[i]
		if want.matches(r.Version) && (best == nil || r.Version.Compare(best.Version) > 0) {
			best = &r
		}
	}
	if best != nil {
		return best.Build, fmt.Sprintf("%s (%s)", best.Version, best.Build), true
	}
	if want.n >= 2 {
		return want.String(), want.String(), true
	}
	return "", want.String(), false
}

// existingVersions lists the iOS versions that exist for the message of a
// request for one that does not: the installed runtimes and the known
// downloadable ones, oldest first, without repeats.
func existingVersions(installed []Runtime) (have, downloadable []string) {
	seen := map[string]bool{}
	var inst []Version
	for _, r := range installed {
		if !isIOSRuntime(r) {
			continue
		}
		if v, ok := runtimeVersion(r); ok && !seen[v.String()] {
			seen[v.String()] = true
			inst = append(inst, v)
		}
	}
	var dl []Version
	for _, r := range knownDownloadable {
		if !seen[r.Version.String()] {
			seen[r.Version.String()] = true
			dl = append(dl, r.Version)
		}
	}
	str := func(vs []Version) []string {
		sort.Slice(vs, func(i, j int) bool { return vs[i].Compare(vs[j]) < 0 })
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = v.String()
		}
		return out
	}
	return str(inst), str(dl)
}

// beyondKnown reports whether want is newer than every iOS version simlock
// knows of (installed or downloadable): no download could serve it.
func beyondKnown(want versionPrefix, installed []Runtime) bool {
	var newest Version
	for _, r := range knownDownloadable {
		if r.Version.Compare(newest) > 0 {
			newest = r.Version
		}
	}
	for _, r := range installed {
		if v, ok := runtimeVersion(r); ok && isIOSRuntime(r) && v.Compare(newest) > 0 {
			newest = v
		}
	}
	return want.low().Major > newest.Major
}

// noSuchVersion is the message naming what exists instead.
func noSuchVersion(want versionPrefix, installed []Runtime) string {
	have, dl := existingVersions(installed)
	msg := fmt.Sprintf("no iOS %s simulator runtime exists", want)
	if len(have) > 0 {
		msg += "; installed: " + strings.Join(have, ", ")
	}
	if len(dl) > 0 {
		msg += "; downloadable with --allow-download: " + strings.Join(dl, ", ")
	}
	return msg
}
