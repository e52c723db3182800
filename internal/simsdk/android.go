package simsdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The simulated Android SDK: adb, emulator, avdmanager and sdkmanager.
//
// Where things live:
//
//	$ANDROID_AVD_HOME (or $ANDROID_USER_HOME/avd, else <home>/android/avd)
//	    <name>.ini, <name>.avd/config.ini    the AVDs, as avdmanager writes them
//	    <name>.avd/userdata/                  the data partition: /data on the device
//	    <name>.avd/snapshots/<snap>/          snapshots: a copy of userdata plus meta
//	    <name>.avd/multiinstance.lock         held by the emulator running the AVD
//	<home>/android/emulators/<console port>/  one running emulator: proc.lock, run.json
//	<home>/state.json                         installed packages, adb server state
//
// The default AVD home deliberately stays inside the simulated SDK's home
// rather than ~/.android/avd, so the simulation never touches a real
// developer's AVDs.

// Measured durations of the real tools (architecture reference: Android
// emulator 36.1.9) and, where nothing was measured, stated guesses.
const (
	androidColdBootTime        = 30 * time.Second        // measured: cold or -wipe-data boot
	androidSnapshotRestoreTime = 3700 * time.Millisecond // measured: quickboot restore
	// androidADBOnlineTime is when adbd answers during a cold boot, so adb
	// lists the emulator as "device" well before sys.boot_completed (as on
	// a real emulator). Not measured: a third of the boot.
	androidADBOnlineTime = androidColdBootTime / 3
	// androidBootFailTime is how long a failing boot takes to give up
	// (not measured; the same as the iOS figure).
	androidBootFailTime = 5 * time.Second
	// androidCreateTime is avdmanager's JVM start plus its work; the
	// driver's estimate, not a measurement.
	androidCreateTime = 2 * time.Second
	// androidDownloadTime is a system image download (not measured; the
	// iOS runtime figure).
	androidDownloadTime = 60 * time.Second
)

// Environment variables the Android tools read.
const (
	envAVDHome       = "ANDROID_AVD_HOME"
	envUserHome      = "ANDROID_USER_HOME"
	envSDKRoot       = "ANDROID_SDK_ROOT"
	envAndroidHome   = "ANDROID_HOME"
	envADBServerPort = "ANDROID_ADB_SERVER_PORT"
	envAndroidSerial = "ANDROID_SERIAL"
)

const (
	defaultADBServerPort = 5037
	// An adb server finds emulators two ways: an emulator announces itself
	// to the server on ANDROID_ADB_SERVER_PORT when it starts (if that
	// server runs), and a server probes the adb ports 5555–5585, i.e.
	// consoles 5554–5584, unless it was started with ADB_EMU=0 (see
	// android_adb.go). So an emulator in that range is visible to every
	// adb server on the host that scans.
	adbScanConsoleLow  = 5554
	adbScanConsoleHigh = 5584
	// The emulator's default console port and how many it tries.
	emulatorBasePort = 5554
	emulatorMaxTries = 64
)

// android dispatches the Android tools.
func (s *sdk) android(ctx context.Context, tool string, args []string) int {
	switch tool {
	case "adb":
		return s.adb(ctx, args)
	case "emulator":
		return s.emulator(ctx, args)
	case "avdmanager":
		return s.avdmanager(ctx, args)
	case "sdkmanager":
		return s.sdkmanager(ctx, args)
	}
	fmt.Fprintf(s.stderr, "%s: not an Android SDK tool (simlock simulated SDK)\n", tool)
	return 127
}

// androidReport prints err the way the Android tools fail and returns the
// exit status: captured texts for known failures, a plain message for a
// failure of the simulation itself.
func (s *sdk) androidReport(tool string, err error) int {
	if err == nil {
		return 0
	}
	var te *toolError
	if errors.As(err, &te) {
		fmt.Fprint(s.stderr, te.text)
		return te.exit
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(s.stderr, "%s: interrupted: %v\n", tool, err)
		return 130
	}
	fmt.Fprintf(s.stderr, "%s: simlock simulated SDK: %v\n", tool, err)
	return 1
}

func (s *sdk) androidDir() string { return filepath.Join(s.home, "android") }

// avdHome is where AVDs live, following the real tools' search order minus
// the user's real ~/.android (see above).
func (s *sdk) avdHome() string {
	if h := s.env(envAVDHome); h != "" {
		return absPath(h)
	}
	if h := s.env(envUserHome); h != "" {
		return filepath.Join(absPath(h), "avd")
	}
	return filepath.Join(s.androidDir(), "avd")
}

// sdkRootPath is the SDK root the tools report in messages. Nothing is read
// from it: the installed packages are recorded in the home state.
func (s *sdk) sdkRootPath() string {
	for _, k := range []string{envSDKRoot, envAndroidHome} {
		if v := s.env(k); v != "" {
			return absPath(v)
		}
	}
	return filepath.Join(s.androidDir(), "sdk")
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// hostABI is the system image ABI this host runs without translation.
func hostABI() string {
	if runtime.GOARCH == "arm64" {
		return "arm64-v8a"
	}
	return "x86_64"
}

// adbServerPort is the adb server an adb client talks to, or an emulator
// announces itself to: -P, else ANDROID_ADB_SERVER_PORT, else 5037.
func (s *sdk) adbServerPort(flag string) (int, error) {
	if flag != "" {
		p, err := strconv.Atoi(flag)
		if err != nil || p < 1 || p > 65535 {
			return 0, &toolError{text: fmt.Sprintf("adb: invalid port %q for -P\n", flag), exit: 1}
		}
		return p, nil
	}
	v := strings.TrimSpace(s.env(envADBServerPort))
	if v == "" {
		return defaultADBServerPort, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, &toolError{
			text: fmt.Sprintf("adb: Env var %s must be a positive number less than 65536. Got \"%s\"\n", envADBServerPort, v),
			exit: 1,
		}
	}
	return p, nil
}

// inADBScanRange reports whether a scanning adb server (default ceiling)
// finds the emulator on consolePort, whatever server it announced itself
// to.
func inADBScanRange(consolePort int) bool {
	return consolePort >= adbScanConsoleLow && consolePort <= adbScanConsoleHigh && consolePort%2 == 0
}

func emulatorSerial(consolePort int) string { return "emulator-" + strconv.Itoa(consolePort) }

// progressLine is one line of the non-terminal progress output of
// sdkmanager and avdmanager: a 39-column bar, the percentage and the
// message, padded to 80 columns as in the captures.
func progressLine(pct int, msg string) string {
	n := min(pct*39/100, 39)
	return pad80(fmt.Sprintf("[%-39s] %d%% %s", strings.Repeat("=", n), pct, msg))
}

func pad80(s string) string {
	if len(s) < 80 {
		s += strings.Repeat(" ", 80-len(s))
	}
	return s + "\n"
}

// repoLoadingLines are what sdkmanager and avdmanager print while they read
// the local repository and the remote catalog (capture:
// avdmanager/create-avd-invalid-tag-error-2025.txt).
func repoLoadingLines() string {
	return pad80("Loading local repository...") +
		progressLine(25, "Loading local repository...") +
		progressLine(25, "Fetch remote repository...") +
		progressLine(100, "Fetch remote repository...")
}

// userName is the login name the emulator puts in its temp paths.
func userName(env func(string) string) string {
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := env(k); v != "" {
			return v
		}
	}
	return strconv.Itoa(os.Getuid())
}
