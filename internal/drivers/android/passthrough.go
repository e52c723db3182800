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
// knows which of those tools' verbs simlock will not proxy. Without a
// terminal behind the caller an interactive `adb shell` would wait forever
// for input nobody can type. With a pinned device (device.exec) adb may
// address only that device: the driver adds its serial itself and refuses
// any selector naming another.
func (d *Driver) ResolvePassthrough(tool string, args []string, scope core.PassthroughScope) (ports.Command, error) {
	args = append([]string(nil), args...)
	switch tool {
	case "adb":
		pin := ""
		if scope.Pin != nil {
			pin = scope.Pin.Attrs[core.AttrSerial]
			if pin == "" {
				return ports.Command{}, refused("the leased device %s has no adb serial to pin the command to", scope.Pin.ID)
			}
		}
		if err := checkADB(args, scope.Terminal, pin); err != nil {
			return ports.Command{}, err
		}
		if pin == "" {
			return d.command(d.tools.ADB, d.adbArgs(args...)...), nil
		}
		cmd := d.command(d.tools.ADB, d.adbArgs(append([]string{"-s", pin}, args...)...)...)
		// argv's -s already wins over the environment; the variable keeps a
		// nested adb (a script the command runs) on the same device.
		cmd.Env = append(cmd.Env, "ANDROID_SERIAL="+pin)
		return cmd, nil
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

// refusedNext is a refusal with the step that gets the caller going.
func refusedNext(next, format string, a ...any) error {
	return &core.SpecError{Err: ErrPassthroughRefused, Msg: refused(format, a...).Error(), Next: next}
}

// adbOption is one of adb's global options, as adb itself parses them: a
// value either follows as the next argument or is attached ("-s5554",
// "-P5038", "-Hhost"). adb accepts an attached -s or -t value only when
// it starts with a digit.
type adbOption struct {
	name  string // "-s", "-t", "-H", "-P", "-L", "-p", or the whole flag
	value string
}

// adbValueOpts are adb's global options that take a value.
var adbValueOpts = map[string]bool{"-s": true, "-t": true, "-H": true, "-P": true, "-L": true, "-p": true, "--one-device": true}

// parseADBGlobals splits adb's global options from the verb and its
// arguments. Like adb it stops at the first word that is not an option.
func parseADBGlobals(args []string) (opts []adbOption, rest []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" {
		a := args[i]
		i++
		if adbValueOpts[a] {
			o := adbOption{name: a}
			if i < len(args) {
				o.value = args[i]
				i++
			}
			opts = append(opts, o)
			continue
		}
		if len(a) > 2 && !strings.HasPrefix(a, "--") {
			switch p := a[:2]; {
			case p == "-H" || p == "-P":
				opts = append(opts, adbOption{name: p, value: a[2:]})
				continue
			case (p == "-s" || p == "-t") && a[2] >= '0' && a[2] <= '9':
				opts = append(opts, adbOption{name: p, value: a[2:]})
				continue
			}
		}
		opts = append(opts, adbOption{name: a})
	}
	return opts, args[i:]
}

// checkADB applies the adb refusal list. Global options come before the
// verb; those that pick another server would escape the private one. pin,
// when set, is the serial of the only device the command may address.
func checkADB(args []string, terminal bool, pin string) error {
	opts, rest := parseADBGlobals(args)
	for _, o := range opts {
		switch o.name {
		case "-H", "-P", "-L":
			return refused("adb %s would leave simlock's private adb server", o.name)
		}
		if pin == "" {
			continue
		}
		keep := "drop it: the command already runs on the leased device " + pin
		switch o.name {
		case "-s":
			if o.value != pin {
				return refusedNext("use the lease's own serial (adb -s "+pin+") or no -s at all",
					"adb -s %s names another device; this lease's device is %s", o.value, pin)
			}
		case "-t":
			return refusedNext(keep, "adb -t picks a device by transport id, which a lease does not pin")
		case "-d", "-e", "--one-device":
			return refusedNext(keep, "adb %s picks a device other than by the lease's serial", o.name)
		}
	}
	if len(rest) == 0 {
		return nil // "adb", "adb -s X": adb prints its help
	}
	verb, rest := rest[0], rest[1:]
	switch {
	case verb == "kill-server":
		return refused("adb kill-server would cut every simlock emulator off from the daemon")
	case verb == "connect" || verb == "disconnect" || verb == "pair":
		return refused("adb %s would change which devices simlock's private adb server holds; lease a device instead", verb)
	case verb == "reboot" || strings.HasPrefix(verb, "reboot-"):
		return refused("adb %s would restart the device behind simlock's back; release the lease instead", verb)
	case verb == "emu":
		return checkEmu(rest)
	case verb == "shell" && !terminal && shellIsInteractive(rest):
		return refused("a bare `adb shell` needs a terminal, which simlock does not give; pass the command to run after shell (shell getprop)")
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
