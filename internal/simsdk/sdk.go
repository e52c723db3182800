package simsdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Tools are the program names the simlock binary answers to as the
// simulated SDK (through links made by Install).
var Tools = []string{"xcrun", "xcodebuild", "adb", "emulator", "avdmanager", "sdkmanager"}

// DeviceCommand is the hidden simlock subcommand that runs a booted device's
// process (DeviceProcessMain). The device process is spawned as
// "<simlock> __simsdk-device key=value ..."; the arguments carry no leading
// dashes, so a command-line parser passes them through untouched.
const DeviceCommand = "__simsdk-device"

// Environment variables read by the simulated SDK (through Main's env).
const (
	EnvHome   = "SIMLOCK_SIMSDK_HOME"
	EnvSpeed  = "SIMLOCK_SIMSDK_SPEED"
	EnvFaults = "SIMLOCK_SIMSDK_FAULTS"
	// EnvIOSRuntimes overrides which iOS/visionOS runtimes count as
	// preinstalled: a comma list of runtime identifiers, names ("iOS 17.5")
	// or versions ("17.5"); "none" means a fresh Xcode with no runtimes.
	EnvIOSRuntimes = "SIMLOCK_SIMSDK_IOS_RUNTIMES"
	// EnvCommandLog names a file every tool invocation appends one line
	// to: the tool and its arguments. Tests read it to prove which
	// platform commands a process ran (or did not run).
	EnvCommandLog = "SIMLOCK_SIMSDK_COMMAND_LOG"
)

// Home is the directory holding the simulated SDK's state:
// $SIMLOCK_SIMSDK_HOME, or ~/.simlock-simsdk.
func Home(env func(string) string) string {
	if env != nil {
		if h := env(EnvHome); h != "" {
			return h
		}
		if h := env("HOME"); h != "" {
			return filepath.Join(h, ".simlock-simsdk")
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".simlock-simsdk")
	}
	return ".simlock-simsdk"
}

// launcher says how to start a device process: the program, the arguments
// that precede the device arguments, and extra environment.
type launcher struct {
	path string
	args []string
	env  []string
}

// testLauncher replaces the simlock executable as the device-process
// program. Only tests set it (the test binary re-executes itself), because
// the package's tests run without a simlock binary.
var testLauncher *launcher

func defaultLauncher() (launcher, error) {
	if testLauncher != nil {
		return *testLauncher, nil
	}
	exe, err := selfExecutable()
	if err != nil {
		return launcher{}, err
	}
	return launcher{path: exe, args: []string{DeviceCommand}}, nil
}

// selfExecutable is the simlock binary itself with links resolved, so that
// a device started through the "xcrun" link runs the real binary.
func selfExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe, nil
}

// sdk is one tool invocation: its configuration (from the environment) and
// its standard streams. It is built per call, so nothing is shared between
// concurrent invocations in one process.
type sdk struct {
	home     string
	speed    float64
	faults   []fault
	env      func(string) string
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
	launcher launcher
	// launcherErr is why no launcher could be found; it only matters to
	// commands that start a device, so it is reported there.
	launcherErr error
	now         func() time.Time
}

func newSDK(env func(string) string, stdin io.Reader, stdout, stderr io.Writer) (*sdk, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	speed, err := parseSpeed(env(EnvSpeed))
	if err != nil {
		return nil, err
	}
	faults, err := parseFaults(env(EnvFaults))
	if err != nil {
		return nil, fmt.Errorf("invalid %s: %w", EnvFaults, err)
	}
	home, err := filepath.Abs(Home(env))
	if err != nil {
		return nil, err
	}
	l, lerr := defaultLauncher()
	return &sdk{
		home:        home,
		speed:       speed,
		faults:      faults,
		env:         env,
		stdin:       stdin,
		stdout:      stdout,
		stderr:      stderr,
		launcher:    l,
		launcherErr: lerr,
		now:         time.Now,
	}, nil
}

// scaled is a measured duration at this invocation's speed.
func (s *sdk) scaled(d time.Duration) time.Duration { return scale(d, s.speed) }

// Main runs one simulated SDK tool (tool is its name or path; args exclude
// the program name) and returns its exit code.
func Main(ctx context.Context, tool string, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	if stdin == nil {
		stdin = eofReader{}
	}
	name := filepath.Base(tool)
	if env != nil {
		if p := env(EnvCommandLog); p != "" {
			logCommand(p, name, args)
		}
	}
	s, err := newSDK(env, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: simlock simulated SDK: %v\n", name, err)
		return 2
	}
	if err := s.slowProbe(ctx, name, args); err != nil {
		fmt.Fprintf(stderr, "%s: simlock simulated SDK: %v\n", name, err)
		return 2
	}
	switch name {
	case "xcrun":
		return s.xcrun(ctx, args)
	case "xcodebuild":
		return s.xcodebuild(ctx, args)
	case "adb", "emulator", "avdmanager", "sdkmanager":
		return s.android(ctx, name, args)
	}
	fmt.Fprintf(stderr, "simlock simulated SDK: unknown tool %q (known: %v)\n", name, Tools)
	return 127
}

// logCommand appends "tool args..." to path. One write of one line to a
// file opened for appending, so concurrent tools never interleave a line;
// a log that cannot be written is no reason to fail the tool.
func logCommand(path, tool string, args []string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(strings.Join(append([]string{tool}, args...), " ") + "\n")
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// Install makes dir/<tool> -> simlock for every tool in Tools, replacing
// links it made before. It refuses to replace anything that is not a
// symlink, so it cannot clobber a real SDK binary.
func Install(dir string) error {
	exe, err := selfExecutable()
	if err != nil {
		return fmt.Errorf("simsdk install: %w", err)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("simsdk install: %w", err)
	}
	var errs []error
	for _, t := range Tools {
		p := filepath.Join(dir, t)
		if fi, err := os.Lstat(p); err == nil {
			if fi.Mode()&os.ModeSymlink == 0 {
				errs = append(errs, fmt.Errorf("simsdk install: %s exists and is not a symlink", p))
				continue
			}
			if cur, err := os.Readlink(p); err == nil && cur == exe {
				continue
			}
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("simsdk install: %w", err))
				continue
			}
		}
		if err := os.Symlink(exe, p); err != nil {
			errs = append(errs, fmt.Errorf("simsdk install: %w", err))
		}
	}
	return errors.Join(errs...)
}
