package simsdk

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// xcrunVersion is what `xcrun --version` prints. The word "simulated" is
// load-bearing: the iOS driver recognises the simulated SDK by it.
const xcrunVersion = "xcrun version 70 (simlock simulated SDK)."

// xcrun [options] <tool> [args], xcrun --version, xcrun --find <tool>.
func (s *sdk) xcrun(ctx context.Context, args []string) int {
	sdkName := ""
	for len(args) > 0 {
		a := args[0]
		switch a {
		case "--show-sdk-version", "-show-sdk-version", "--show-sdk-path", "-show-sdk-path",
			"--show-sdk-platform-path", "-show-sdk-platform-path", "--show-sdk-platform-version", "-show-sdk-platform-version":
			return s.xcrunShowSDK(sdkName, strings.TrimLeft(a, "-"))
		case "-sdk", "--sdk":
			if len(args) < 2 {
				fmt.Fprintf(s.stderr, "xcrun: error: missing argument for %s\n", a)
				return 1
			}
			sdkName, args = args[1], args[2:]
			continue
		case "--version", "-version":
			fmt.Fprintln(s.stdout, xcrunVersion)
			return 0
		case "--find", "-find", "-f":
			if len(args) < 2 {
				fmt.Fprintf(s.stderr, "xcrun: error: missing argument for %s\n", a)
				return 1
			}
			return s.xcrunFind(args[1])
		case "-toolchain", "--toolchain":
			if len(args) < 2 {
				fmt.Fprintf(s.stderr, "xcrun: error: missing argument for %s\n", a)
				return 1
			}
			args = args[2:]
			continue
		case "-v", "--verbose", "-l", "--log", "-n", "--no-cache", "-k", "--kill-cache", "-r", "--run":
			args = args[1:]
			continue
		case "-h", "--help":
			fmt.Fprintln(s.stdout, "Usage: xcrun [options] <tool name> ... arguments ...  (simlock simulated SDK)")
			return 0
		}
		if strings.HasPrefix(a, "-") {
			fmt.Fprintf(s.stderr, "xcrun: error: unrecognized option: %s\n", a)
			return 1
		}
		break
	}
	if len(args) == 0 {
		fmt.Fprintln(s.stderr, "Usage: xcrun [options] <tool name> ... arguments ...")
		return 1
	}
	switch args[0] {
	case "simctl":
		return s.simctl(ctx, args[1:])
	case "xcodebuild":
		return s.xcodebuild(ctx, args[1:])
	}
	fmt.Fprintf(s.stderr, "xcrun: error: unable to find utility %q, not a developer tool or in PATH\n", args[0])
	return 72
}

// sdkPlatforms maps the SDK names xcrun takes to their platform
// directories; every SDK of this Xcode has its version.
var sdkPlatforms = map[string]string{
	"iphonesimulator": "iPhoneSimulator", "iphoneos": "iPhoneOS", "macosx": "MacOSX",
	"appletvsimulator": "AppleTVSimulator", "appletvos": "AppleTVOS", "watchsimulator": "WatchSimulator",
	"watchos": "WatchOS", "xrsimulator": "XRSimulator", "xros": "XROS",
}

// xcrunShowSDK answers --show-sdk-version|path|platform-path|
// platform-version for an SDK name, optionally suffixed with its version
// (iphonesimulator26.3); macosx is xcrun's default. The simulated Xcode's
// SDKs all carry its own version.
func (s *sdk) xcrunShowSDK(name, what string) int {
	if name == "" {
		name = "macosx"
	}
	base := strings.ToLower(strings.TrimRight(name, "0123456789."))
	platform, ok := sdkPlatforms[base]
	if v := name[len(base):]; !ok || (v != "" && v != xcodeVersion) {
		item := map[string]string{"show-sdk-version": "SDKVersion", "show-sdk-path": "Path",
			"show-sdk-platform-path": "PlatformPath", "show-sdk-platform-version": "PlatformVersion"}[what]
		fmt.Fprintf(s.stderr, "xcrun: error: SDK \"%s\" cannot be located\nxcrun: error: unable to lookup item '%s' in SDK '%s'\n", name, item, name)
		return 1
	}
	platformPath := xcodeDeveloper + "/Platforms/" + platform + ".platform"
	switch what {
	case "show-sdk-version", "show-sdk-platform-version":
		fmt.Fprintln(s.stdout, xcodeVersion)
	case "show-sdk-path":
		fmt.Fprintf(s.stdout, "%s/Developer/SDKs/%s%s.sdk\n", platformPath, platform, xcodeVersion)
	case "show-sdk-platform-path":
		fmt.Fprintln(s.stdout, platformPath)
	}
	return 0
}

func (s *sdk) xcrunFind(tool string) int {
	if tool == "simctl" || tool == "xcodebuild" {
		fmt.Fprintln(s.stdout, xcodeDeveloper+"/usr/bin/"+tool)
		return 0
	}
	fmt.Fprintf(s.stderr, "xcrun: error: unable to find utility %q, not a developer tool or in PATH\n", tool)
	return 72
}

// xcodebuild -version | -downloadPlatform iOS [-buildVersion V]
func (s *sdk) xcodebuild(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(s.stderr, "xcodebuild: error: only -version and -downloadPlatform are simulated (simlock simulated SDK)")
		return 64
	}
	if isProjectAction(args) {
		return s.xcodebuildProject(ctx, args) // ios_xcodebuild.go
	}
	var platform, buildVersion string
	download := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, bool) {
			if i+1 >= len(args) {
				return "", false
			}
			i++
			return args[i], true
		}
		var ok = true
		switch a {
		case "-version":
			fmt.Fprintf(s.stdout, "Xcode %s\nBuild version %s\n", xcodeVersion, xcodeBuild)
			return 0
		case "-downloadPlatform":
			download = true
			platform, ok = next()
		case "-downloadAllPlatforms":
			download, platform = true, "iOS"
		case "-buildVersion":
			buildVersion, ok = next()
		case "-exportPath", "-architectureVariant":
			_, ok = next()
		case "-quiet":
		default:
			fmt.Fprintf(s.stderr, "xcodebuild: error: invalid option '%s' (simlock simulated SDK)\n", a)
			return 64
		}
		if !ok {
			fmt.Fprintf(s.stderr, "xcodebuild: error: option '%s' requires an argument\n", a)
			return 64
		}
	}
	if !download {
		fmt.Fprintln(s.stderr, "xcodebuild: error: only -version and -downloadPlatform are simulated (simlock simulated SDK)")
		return 64
	}
	if !strings.EqualFold(platform, "iOS") {
		fmt.Fprintf(s.stderr, "xcodebuild: error: %s is not a platform the simlock simulated SDK can download (only iOS)\n", platform)
		return 70
	}
	return s.report(s.downloadIOS(ctx, buildVersion))
}

// downloadIOS installs a downloadable iOS runtime: the one whose version or
// build is buildVersion, or else the newest one not yet installed. It
// takes the measured download time and then shows up in simctl list.
func (s *sdk) downloadIOS(ctx context.Context, buildVersion string) error {
	fmt.Fprintln(s.stdout, "Finding content...")
	rts, err := s.installedRuntimes()
	if err != nil {
		return err
	}
	isInstalled := func(r simRuntime) bool {
		return slices.ContainsFunc(rts, func(x simRuntime) bool { return x.Identifier == r.Identifier })
	}
	var target *simRuntime
	if buildVersion == "" {
		// Like the real one, the platform of this Xcode's own SDK comes
		// first; once it is there, the newest other downloadable runtime.
		if own, ok := findRuntime(iosRuntimes, "iOS "+xcodeVersion); ok && !isInstalled(own) {
			target = &own
		}
	}
	for i := len(iosRuntimes) - 1; i >= 0 && target == nil; i-- {
		r := iosRuntimes[i]
		switch {
		case r.Platform != "iOS":
		case buildVersion != "":
			if r.Build == buildVersion || r.Version == buildVersion || r.nameVersion() == buildVersion {
				target = &r
			}
		case r.Downloadable && !isInstalled(r):
			target = &r
		}
	}
	if target == nil {
		if buildVersion != "" {
			return &toolError{
				text: fmt.Sprintf("xcodebuild: error: Unable to find a downloadable iOS Simulator runtime matching build version %s.\n", buildVersion),
				exit: 70,
			}
		}
		fmt.Fprintln(s.stdout, "All downloadable iOS Simulator runtimes are already installed.")
		return nil
	}
	label := fmt.Sprintf("iOS %s Simulator (%s)", target.nameVersion(), target.Build)
	if isInstalled(*target) {
		fmt.Fprintf(s.stdout, "%s is already installed.\n", label)
		return nil
	}
	_, failNow, err := s.fire(faultInstallFail)
	if err != nil {
		return err
	}
	step := s.scaled(iosDownloadTime) / downloadSteps
	for i := 0; i < downloadSteps; i++ {
		fmt.Fprintf(s.stdout, "Downloading %s: %d.0%% (of %s)\n", label, i*100/downloadSteps, target.DownloadSize)
		if failNow && i == downloadSteps/2 {
			return &toolError{
				text: fmt.Sprintf("xcodebuild: error: Failed to download %s: The network connection was lost. %s\n", label, faultNote(faultInstallFail)),
				exit: 70,
			}
		}
		if err := sleepCtx(ctx, step); err != nil {
			return err
		}
	}
	if _, noop, err := s.fire(faultInstallNoop); err != nil {
		return err
	} else if noop {
		fmt.Fprintf(s.stdout, "Downloading %s: Done.\n", label)
		return nil
	}
	err = updateHomeState(s.home, func(st *homeState) (bool, error) {
		if slices.Contains(st.InstalledRuntimes, target.Identifier) {
			return false, nil
		}
		st.InstalledRuntimes = append(st.InstalledRuntimes, target.Identifier)
		return true, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "Downloading %s: Done.\n", label)
	return nil
}
