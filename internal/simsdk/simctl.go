package simsdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// toolError is a failure with the exact stderr text and exit status the
// real tool produces for it.
type toolError struct {
	text string // printed to stderr as is
	exit int
}

func (e *toolError) Error() string { return strings.TrimRight(e.text, "\n") }

const simErrDomain = "com.apple.CoreSimulator.SimError"

// simErr is simctl's standard error: a header naming the NSError domain and
// code, then the reason lines. simctl exits with the code truncated to a
// byte (code 405 exits 149, as captured).
func simErr(code int, reasons ...string) *toolError {
	return domainErr(simErrDomain, code, code&0xff, reasons...)
}

func domainErr(domain string, code, exit int, reasons ...string) *toolError {
	var b strings.Builder
	fmt.Fprintf(&b, "An error was encountered processing the command (domain=%s, code=%d):\n", domain, code)
	for _, r := range reasons {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	return &toolError{text: b.String(), exit: exit}
}

// stateErr is simctl's "wrong state" refusal, e.g. "Unable to boot device
// in current state: Booted" (code 405 since Xcode 11.4/12).
func stateErr(action, state string) *toolError {
	return simErr(405, fmt.Sprintf("Unable to %s in current state: %s", action, state))
}

// Lookup failures print a bare line. No capture shows their exit status;
// 148 is what simctl's code 404 ("not found") truncates to, matching how
// the captured 405 becomes 149.
const exitNotFound = 148

func errInvalidDevice(ref string) *toolError {
	return &toolError{text: "Invalid device: " + ref + "\n", exit: exitNotFound}
}

// errInvalidDeviceOrPair is boot's lookup failure: boot also accepts a
// watch pair, and says so.
func errInvalidDeviceOrPair(ref string) *toolError {
	return &toolError{text: "Invalid device or device pair: " + ref + "\n", exit: exitNotFound}
}

func errInvalidDeviceType(ref string) *toolError {
	return &toolError{text: "Invalid device type: " + ref + "\n", exit: exitNotFound}
}

func errInvalidRuntime(ref string) *toolError {
	return &toolError{text: "Invalid runtime: " + ref + "\n", exit: exitNotFound}
}

// errNoBooted answers the "booted" device alias when nothing is booted
// (exit status not captured; the state-error status is used).
func errNoBooted() *toolError {
	return &toolError{text: "No devices are booted.\n", exit: 149}
}

// errUnsupportedCombination reproduces the captured Xcode 16.3 text, whose
// reason comes before the header and nothing follows it.
func errUnsupportedCombination(t deviceType, r simRuntime) *toolError {
	text := fmt.Sprintf("Unable to create a device for device type: %s (%s), runtime: %s\n"+
		"An error was encountered processing the command (domain=%s, code=403):\n",
		t.Name, t.Identifier, r.describe(), simErrDomain)
	return &toolError{text: text, exit: 403 & 0xff}
}

// faultNote marks an injected failure in the tool's output, so a human
// reading a log can tell a simulated fault from a bug.
func faultNote(name string) string { return "(simlock simulated fault " + name + ")" }

// subcommandFlags are the options each simulated subcommand takes (names
// ending in "=" take a value) and its usage line; until is how many
// positional arguments may precede an option: after that the arguments
// belong to the launched program (launch, spawn), so they are not checked.
var subcommandFlags = map[string]struct {
	allowed []string
	usage   string
	until   int
}{
	"create":            {nil, "create <name> <device type id> [<runtime id>]", 0},
	"boot":              {[]string{"--arch=", "--disabledJob=", "--enabledJob="}, "boot <device> [--arch=<arch>] [--disabledJob=<job>] [--enabledJob=<job>]", 0},
	"bootstatus":        {[]string{"-b", "-c", "-d"}, "bootstatus <device> [-bcd]", 0},
	"shutdown":          {nil, "shutdown <device> | all", 0},
	"erase":             {nil, "erase <device> [... <device n>] | all", 0},
	"delete":            {nil, "delete <device> [... <device n>] | unavailable | all", 0},
	"clone":             {nil, "clone <device> <new name> [<destination device set path>]", 0},
	"rename":            {nil, "rename <device> <name>", 0},
	"install":           {nil, "install <device> <path>", 0},
	"uninstall":         {nil, "uninstall <device> <app bundle identifier>", 0},
	"terminate":         {nil, "terminate <device> <app bundle identifier>", 0},
	"launch":            {[]string{"-w", "--wait-for-debugger", "--console", "--console-pty", "--stdout=", "--stderr=", "--terminate-running-process"}, "launch [-w | --wait-for-debugger] [--console|--console-pty] [--stdout=<path>] [--stderr=<path>] [--terminate-running-process] <device> <app bundle identifier> [<argv 1> <argv 2> ... <argv n>]", 2},
	"spawn":             {[]string{"-w", "--wait-for-debugger", "-s", "--standalone", "-a", "--arch="}, "spawn [-w | --wait-for-debugger] [-s | --standalone] [-a <arch> | --arch=<arch>] <device> <path to executable> [<argv 1> <argv 2> ... <argv n>]", 1},
	"getenv":            {nil, "getenv <device> <variable name>", 0},
	"openurl":           {nil, "openurl <device> <URL>", 0},
	"listapps":          {nil, "listapps <device>", 0},
	"get_app_container": {nil, "get_app_container <device> <app bundle identifier> [<container>]", 0},
}

// checkSubcommandFlags refuses an option sub does not take with its usage,
// as simctl does (list checks its own).
func checkSubcommandFlags(sub string, args []string) error {
	spec, ok := subcommandFlags[sub]
	if !ok {
		return nil
	}
	pos := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if spec.until > 0 && pos >= spec.until {
			return nil
		}
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			pos++
			continue
		}
		if err := rejectFlags([]string{a}, spec.allowed, spec.usage); err != nil {
			return err
		}
		if sub == "spawn" && a == "-a" {
			i++ // -a's value is not a positional argument
		}
	}
	return nil
}

func usageErr(usage string) *toolError {
	return &toolError{text: "Usage: simctl " + usage + "\n", exit: 64}
}

const simctlUsage = `usage: simctl [--set <path>] [--noxpc] <subcommand> ...
Command line utility to control the Simulator (simlock simulated SDK)

Subcommands:
	create      Create a new device.
	delete      Delete specified devices, unavailable devices, or all devices.
	erase       Erase a device's contents and settings.
	boot        Boot a device.
	bootstatus  Checks the boot status of a device.
	shutdown    Shutdown a device.
	clone       Clone an existing device.
	rename      Rename a device.
	install     Install an app on a device.
	uninstall   Uninstall an app from a device.
	launch      Launch an application by identifier on a device.
	terminate   Terminate an application by identifier on a device.
	list        List available devices, device types, runtimes, or device pairs.
	spawn       Spawn a process by executing a given executable on a device.
	getenv      Print an environment variable from a running device.
	openurl     Open a URL in a device.
	listapps    Show the installed applications.
	get_app_container Print the path of the installed app's container
	help        Prints the usage for a given subcommand.
`

// simctl runs "xcrun simctl <args>".
func (s *sdk) simctl(ctx context.Context, args []string) int {
	set := ""
options:
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--set":
			if len(args) < 2 {
				fmt.Fprint(s.stderr, "simctl: --set needs a path\n")
				return 64
			}
			set, args = args[1], args[2:]
			continue
		case strings.HasPrefix(a, "--set="):
			set = strings.TrimPrefix(a, "--set=")
		case a == "--noxpc" || a == "--profiles":
		default:
			break options
		}
		args = args[1:]
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(s.stdout, simctlUsage)
		return 0
	}
	ds, err := s.openSet(set)
	if err != nil {
		return s.report(err)
	}
	sub, rest := args[0], args[1:]
	if err := checkSubcommandFlags(sub, rest); err != nil {
		return s.report(err)
	}
	switch sub {
	case "list":
		err = s.simctlList(ds, rest)
	case "create":
		err = s.simctlCreate(ctx, ds, rest)
	case "boot":
		err = s.simctlBoot(ctx, ds, rest)
	case "bootstatus":
		err = s.simctlBootstatus(ctx, ds, rest)
	case "shutdown":
		err = s.simctlShutdown(ctx, ds, rest)
	case "erase":
		err = s.simctlErase(ctx, ds, rest)
	case "delete":
		err = s.simctlDelete(ctx, ds, rest)
	case "clone":
		err = s.simctlClone(ctx, ds, rest)
	case "rename":
		err = s.simctlRename(ds, rest)
	case "install":
		err = s.simctlInstall(ds, rest)
	case "uninstall":
		err = s.simctlUninstall(ds, rest)
	case "launch":
		err = s.simctlLaunch(ds, rest)
	case "terminate":
		err = s.simctlTerminate(ds, rest)
	case "spawn":
		return s.simctlSpawn(ctx, ds, rest)
	case "io":
		err = s.simctlIO(ds, rest)
	case "getenv":
		err = s.simctlGetenv(ds, rest)
	case "openurl":
		err = s.simctlOpenURL(ds, rest)
	case "listapps":
		err = s.simctlListApps(ds, rest)
	case "get_app_container":
		err = s.simctlGetAppContainer(ds, rest)
	default:
		err = &toolError{
			text: fmt.Sprintf("Unknown subcommand '%s' (not simulated by the simlock simulated SDK)\n", sub),
			exit: 64,
		}
	}
	return s.report(err)
}

// report prints err the way the tool would and returns the exit status.
func (s *sdk) report(err error) int {
	if err == nil {
		return 0
	}
	var te *toolError
	if errors.As(err, &te) {
		fmt.Fprint(s.stderr, te.text)
		return te.exit
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(s.stderr, "Interrupted: %v\n", err)
		return 130
	}
	// Unexpected failures of the simulation itself (I/O on its state).
	fmt.Fprintf(s.stderr, "An error was encountered processing the command (domain=NSPOSIXErrorDomain, code=5):\n%v\n", err)
	return 5
}

// splitFlags separates dash arguments from positional ones; simctl
// subcommands accept their options anywhere on the line.
func splitFlags(args []string) (flags map[string]bool, pos []string) {
	flags = map[string]bool{}
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name, _, _ := strings.Cut(a, "=")
			flags[name] = true
			continue
		}
		pos = append(pos, a)
	}
	return flags, pos
}
