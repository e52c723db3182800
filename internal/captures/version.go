package captures

import (
	"regexp"
	"strings"
)

var (
	xcodeVersionRe    = regexp.MustCompile(`(?m)^Xcode (\S+)`)
	adbToolsVersionRe = regexp.MustCompile(`(?m)^Version (\d+(?:\.\d+)*)`)
	adbVersionRe      = regexp.MustCompile(`(?m)^Android Debug Bridge version (\S+)`)
	emulatorVersionRe = regexp.MustCompile(`Android emulator version (\d+(?:\.\d+)*)`)
	cmdlineVersionRe  = regexp.MustCompile(`^\s*(\d+(?:\.\d+)+)\s*$`)
)

// XcodeVersion names the Xcode from `xcodebuild -version` ("xcode26.3").
func XcodeVersion(out []byte) string {
	if m := xcodeVersionRe.FindSubmatch(out); m != nil {
		return "xcode" + string(m[1])
	}
	return "unknown"
}

// ADBVersion names platform-tools from `adb version`: the platform-tools
// release when adb prints one ("platform-tools36.0.0"), else the protocol
// version old adbs print ("adb1.0.39").
func ADBVersion(out []byte) string {
	if m := adbToolsVersionRe.FindSubmatch(out); m != nil {
		return "platform-tools" + string(m[1])
	}
	if m := adbVersionRe.FindSubmatch(out); m != nil {
		return "adb" + string(m[1])
	}
	return "unknown"
}

// EmulatorVersion names the emulator from `emulator -version`.
func EmulatorVersion(out []byte) string {
	if m := emulatorVersionRe.FindSubmatch(out); m != nil {
		return "emulator" + string(m[1])
	}
	return "unknown"
}

// CmdlineToolsVersion names the command-line tools from
// `sdkmanager --version` (avdmanager prints no version of its own).
func CmdlineToolsVersion(out []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if m := cmdlineVersionRe.FindStringSubmatch(line); m != nil {
		return "cmdline-tools" + m[1]
	}
	return "unknown"
}
