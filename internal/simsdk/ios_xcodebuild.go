package simsdk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// xcodebuild's project actions, as far as a client of a leased simulator
// needs them:
//
//	xcodebuild -showdestinations -scheme S [-project P.xcodeproj | -workspace W.xcworkspace]
//	xcodebuild test|build|build-for-testing|test-without-building -scheme S
//	    [-project P | -workspace W] -destination SPEC [-destination-timeout N]
//	    [-sdk iphonesimulator] [-configuration C] [-derivedDataPath D] [-quiet] [KEY=VALUE...]
//
// The point the simulation keeps exact is where destinations come from:
// like the real tool, only the default CoreSimulator device set (no
// --set exists for xcodebuild), so a simulator in a private set is "Unable
// to find a destination", exit 70. The destination lines and the error
// block follow the format real xcodebuild prints (as quoted in public CI
// logs); no project is built: a test action "succeeds" on a found device.

// isProjectAction reports whether an xcodebuild command line is one of
// the project actions above rather than -version or -downloadPlatform.
func isProjectAction(args []string) bool {
	for _, a := range args {
		switch a {
		case "-showdestinations", "test", "build", "build-for-testing", "test-without-building":
			return true
		}
	}
	return false
}

// Real xcodebuild's exit statuses: 64 for a usage error, 66 for a missing
// project, 70 for an unmatched destination.
const (
	xcbExitUsage   = 64
	xcbExitNoInput = 66
	xcbExitNoDest  = 70
)

// simPlaceholders are the generic destinations every iOS scheme lists.
var simPlaceholders = []string{
	"{ platform:iOS, id:dvtdevice-DVTiPhonePlaceholder-iphoneos:placeholder, name:Any iOS Device }",
	"{ platform:iOS Simulator, id:dvtdevice-DVTiOSDeviceSimulatorPlaceholder-iphonesimulator:placeholder, name:Any iOS Simulator Device }",
}

type xcbInvocation struct {
	action       string // "showdestinations", "test", "build", ...
	scheme       string
	project      string
	workspace    string
	destinations []string
	xctestrun    string // a prebuilt test bundle's run file (test-without-building)
}

func (s *sdk) xcodebuildProject(ctx context.Context, args []string) int {
	var inv xcbInvocation
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func() (string, bool) {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") && args[i+1] != "-" {
				return "", false
			}
			i++
			return args[i], true
		}
		ok := true
		switch {
		case a == "-showdestinations":
			inv.action = "showdestinations"
		case a == "test" || a == "build" || a == "build-for-testing" || a == "test-without-building" || a == "clean":
			if a != "clean" {
				inv.action = a
			}
		case a == "-scheme":
			inv.scheme, ok = val()
		case a == "-project":
			inv.project, ok = val()
		case a == "-workspace":
			inv.workspace, ok = val()
		case a == "-destination":
			var d string
			d, ok = val()
			inv.destinations = append(inv.destinations, d)
		case a == "-xctestrun":
			inv.xctestrun, ok = val()
		case slices.Contains([]string{"-sdk", "-configuration", "-derivedDataPath", "-destination-timeout",
			"-resultBundlePath", "-testPlan", "-only-testing", "-skip-testing", "-arch"}, a):
			_, ok = val()
		case a == "-quiet" || a == "-json" || a == "-allowProvisioningUpdates" || a == "-parallel-testing-enabled":
		case !strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			// A build setting: KEY=VALUE.
		default:
			fmt.Fprintf(s.stderr, "xcodebuild: error: invalid option '%s'\n", a)
			return xcbExitUsage
		}
		if !ok {
			fmt.Fprintf(s.stderr, "xcodebuild: error: option '%s' requires at least one argument\n", a)
			return xcbExitUsage
		}
	}
	if inv.project != "" && inv.workspace != "" {
		fmt.Fprintln(s.stderr, "xcodebuild: error: The -project and -workspace options cannot be passed together.")
		return xcbExitUsage
	}
	if inv.xctestrun != "" {
		// A prebuilt test bundle's .xctestrun names its own targets: it
		// runs without a project or a scheme, and only with this action.
		if inv.action != "test-without-building" {
			fmt.Fprintln(s.stderr, "xcodebuild: error: The -xctestrun option can only be used with the test-without-building action.")
			return xcbExitUsage
		}
		if _, err := os.Stat(inv.xctestrun); err != nil {
			fmt.Fprintf(s.stderr, "xcodebuild: error: The file “%s” couldn’t be opened because there is no such file.\n", filepath.Base(inv.xctestrun))
			return xcbExitNoInput
		}
	} else if code, ok := s.checkProject(inv); !ok {
		return code
	}
	if inv.scheme == "" && inv.xctestrun == "" {
		if inv.action == "showdestinations" {
			fmt.Fprintln(s.stderr, "xcodebuild: error: The -showdestinations option requires a scheme to be specified.")
		} else {
			fmt.Fprintf(s.stderr, "xcodebuild: error: The %q action requires that the -scheme option be specified.\n", inv.action)
		}
		return xcbExitUsage
	}
	avail, err := s.simDestinations()
	if err != nil {
		return s.report(err)
	}
	if inv.action == "showdestinations" {
		fmt.Fprint(s.stdout, destinationsBlock(inv.scheme, avail))
		return 0
	}
	if len(inv.destinations) == 0 {
		fmt.Fprintf(s.stderr, "xcodebuild: error: Failed to build workspace %s with scheme %s.: The %q action requires a destination (-destination).\n", inv.scheme, inv.scheme, inv.action)
		return xcbExitUsage
	}
	for _, spec := range inv.destinations {
		if _, found := matchDestination(avail, spec); !found {
			fmt.Fprintf(s.stderr, "xcodebuild: error: Unable to find a destination matching the provided destination specifier:\n\t\t%s\n\n%s",
				specifierText(spec), destinationsBlock(inv.scheme, avail))
			return xcbExitNoDest
		}
	}
	if inv.action == "test" || inv.action == "test-without-building" {
		fmt.Fprintf(s.stdout, "Test Suite 'All tests' started.\nTest Suite 'All tests' passed.\n\n** TEST SUCCEEDED **\n\n")
	} else {
		fmt.Fprintf(s.stdout, "** %s SUCCEEDED **\n\n", strings.ToUpper(strings.ReplaceAll(inv.action, "-", " ")))
	}
	return 0
}

// checkProject finds the project the action runs on: the one named, or
// the single .xcodeproj or .xcworkspace in the working directory.
func (s *sdk) checkProject(inv xcbInvocation) (int, bool) {
	named := inv.project
	if named == "" {
		named = inv.workspace
	}
	if named != "" {
		if st, err := os.Stat(named); err != nil || !st.IsDir() {
			fmt.Fprintf(s.stderr, "xcodebuild: error: '%s' does not exist.\n", named)
			return xcbExitNoInput, false
		}
		return 0, true
	}
	cwd, err := os.Getwd()
	if err != nil {
		return s.report(err), false
	}
	var found []string
	for _, pat := range []string{"*.xcworkspace", "*.xcodeproj"} {
		m, _ := filepath.Glob(filepath.Join(cwd, pat))
		found = append(found, m...)
	}
	if len(found) == 0 {
		fmt.Fprintf(s.stderr, "xcodebuild: error: The directory %s does not contain an Xcode project, workspace or package.\n", cwd)
		return xcbExitNoInput, false
	}
	return 0, true
}

// simDestination is one simulator xcodebuild can run on.
type simDestination struct {
	udid, os, name string
}

func (d simDestination) String() string {
	return fmt.Sprintf("{ platform:iOS Simulator, id:%s, OS:%s, name:%s }", d.udid, d.os, d.name)
}

// simDestinations lists the iOS simulators of the default device set, and
// only of it: xcodebuild has no way to read another set.
func (s *sdk) simDestinations() ([]simDestination, error) {
	ds, err := s.openSet("")
	if err != nil {
		return nil, err
	}
	devs, err := ds.loadAll()
	if err != nil {
		return nil, err
	}
	rts, err := s.installedRuntimes()
	if err != nil {
		return nil, err
	}
	var out []simDestination
	for _, d := range devs {
		if d.Creating {
			continue
		}
		i := slices.IndexFunc(rts, func(r simRuntime) bool { return r.Identifier == d.Runtime })
		if i < 0 || rts[i].Platform != "iOS" {
			continue
		}
		out = append(out, simDestination{udid: d.UDID, os: rts[i].nameVersion(), name: d.Name})
	}
	return out, nil
}

func destinationsBlock(scheme string, avail []simDestination) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\tAvailable destinations for the %q scheme:\n", scheme)
	for _, p := range simPlaceholders {
		b.WriteString("\t\t" + p + "\n")
	}
	for _, d := range avail {
		b.WriteString("\t\t" + d.String() + "\n")
	}
	return b.String()
}

// parseSpecifier reads "platform=iOS Simulator,id=UDID,OS=18.0" into its
// keys, lowercased.
func parseSpecifier(spec string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		out[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	return out
}

// specifierText is the specifier as xcodebuild echoes it: { key:value, ... }
// in the order given.
func specifierText(spec string) string {
	var parts []string
	for _, kv := range strings.Split(spec, ",") {
		k, v, _ := strings.Cut(kv, "=")
		parts = append(parts, strings.TrimSpace(k)+":"+strings.TrimSpace(v))
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// matchDestination finds the simulator a specifier names by id, or by
// name (and OS, when given). Only iOS Simulator destinations exist here.
func matchDestination(avail []simDestination, spec string) (simDestination, bool) {
	kv := parseSpecifier(spec)
	if p, ok := kv["platform"]; ok && !strings.EqualFold(p, "iOS Simulator") {
		return simDestination{}, false
	}
	for _, d := range avail {
		switch {
		case kv["id"] != "":
			if strings.EqualFold(kv["id"], d.udid) {
				return d, true
			}
		case kv["name"] != "":
			if kv["name"] == d.name && (kv["os"] == "" || kv["os"] == "latest" || kv["os"] == d.os) {
				return d, true
			}
		}
	}
	return simDestination{}, false
}
