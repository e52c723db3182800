package android

import (
	"fmt"
	"strings"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

var (
	// ErrPassthroughRefused marks a passthrough command that would change a
	// device's lifecycle behind the registry's back, escape the root's
	// scoping, or need a terminal the caller does not have. It is the core's
	// sentinel, so the daemon maps every driver's refusals in one place.
	ErrPassthroughRefused = core.ErrPassthroughRefused
	// ErrUnknownTool marks a passthrough for a tool this driver does not wrap.
	ErrUnknownTool = core.ErrUnknownTool
)

var _ core.Passthrougher = (*Driver)(nil)

// PassthroughTools lists the tools ResolvePassthrough wraps.
func (d *Driver) PassthroughTools() []string { return []string{"adb", "emulator", "avdmanager"} }

// ResolvePassthrough builds the root-scoped command for a lease holder's
// `adb`, `emulator` or `avdmanager` invocation. It is the one place that
// knows which of those tools' verbs simlock will not proxy. terminal says
// whether a terminal is behind the caller: without one, an interactive
// `adb shell` would wait forever for input nobody can type.
func (d *Driver) ResolvePassthrough(tool string, args []string, terminal bool) (ports.Command, error) {
	args = append([]string(nil), args...)
	switch tool {
	case "adb":
		if err := checkADB(args, terminal); err != nil {
			return ports.Command{}, err
		}
		return d.command(d.tools.ADB, d.adbArgs(args...)...), nil
	case "emulator":
		if err := checkEmulator(args); err != nil {
			return ports.Command{}, err
		}
		return d.command(d.tools.Emulator, args...), nil
	case "avdmanager":
		if err := checkAVDManager(args); err != nil {
			return ports.Command{}, err
		}
		return d.command(d.tools.AVDManager, args...), nil
	default:
		return ports.Command{}, fmt.Errorf("%w: %q (the android driver wraps adb, emulator and avdmanager)", ErrUnknownTool, tool)
	}
}

func refused(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrPassthroughRefused}, a...)...)
}

// adbOptsWithValue are adb's global options that take a value.
var adbOptsWithValue = map[string]bool{"-s": true, "-t": true, "-H": true, "-P": true, "-L": true}

// checkADB applies the adb refusal list. Global options come before the
// verb; those that pick another server would escape the private one.
func checkADB(args []string, terminal bool) error {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		opt := args[i]
		switch opt {
		case "-H", "-P", "-L":
			return refused("adb %s would leave simlock's private adb server", opt)
		}
		if adbOptsWithValue[opt] {
			i++
		}
		i++
	}
	if i >= len(args) {
		return nil // "adb", "adb -s X": adb prints its help
	}
	verb, rest := args[i], args[i+1:]
	switch {
	case verb == "kill-server":
		return refused("adb kill-server would cut every simlock emulator off from the daemon")
	case verb == "reboot" || strings.HasPrefix(verb, "reboot-"):
		return refused("adb %s would restart the device behind simlock's back; release the lease instead", verb)
	case verb == "emu":
		return checkEmu(rest)
	case verb == "shell" && !terminal && shellIsInteractive(rest):
		return refused("a bare adb shell needs a terminal; pass the command to run, e.g. `adb shell getprop`")
	}
	return nil
}

// checkEmu refuses console commands that end the emulator or touch the
// baseline snapshot reclaims restore.
func checkEmu(rest []string) error {
	if len(rest) == 0 {
		return nil
	}
	cmd := strings.ToLower(rest[0])
	switch {
	case cmd == "kill":
		return refused("adb emu kill would stop the emulator behind simlock's back; release the lease instead")
	case cmd == "avd" && len(rest) > 1 && strings.EqualFold(rest[1], "stop"):
		return refused("adb emu avd stop would stop the emulator behind simlock's back")
	case cmd == "avd" && len(rest) > 3 && strings.EqualFold(rest[1], "snapshot") && rest[3] == baselineSnapshot:
		return refused("snapshot %s belongs to simlock's reclaim", baselineSnapshot)
	}
	return nil
}

// shellIsInteractive reports an `adb shell` with no command after its
// own options (-e C, -n, -T, -t, -x).
func shellIsInteractive(rest []string) bool {
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case "-e":
			i++ // escape character
		case "-n", "-T", "-t", "-x", "-tt":
		default:
			return false
		}
	}
	return true
}

// checkEmulator refuses launching an emulator: a device that runs outside
// the registry would hold ports and RAM simlock does not account for.
// Queries (-list-avds, -version, -help, -accel-check) pass.
func checkEmulator(args []string) error {
	for _, a := range args {
		if a == "-avd" || a == "--avd" || (strings.HasPrefix(a, "@") && len(a) > 1) {
			return refused("starting an emulator bypasses simlock; lease a device instead")
		}
	}
	return nil
}

// checkAVDManager refuses creating, deleting or moving AVDs: the root's
// membership is simlock's device inventory.
func checkAVDManager(args []string) error {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		switch a {
		case "create", "delete", "move":
			return refused("avdmanager %s changes simlock's device inventory; use simlock's own commands", a)
		}
		return nil // the first word is the verb
	}
	return nil
}
