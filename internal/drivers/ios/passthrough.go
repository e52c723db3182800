package ios

import (
	"fmt"
	"strings"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

var (
	// ErrPassthroughRefused marks a passthrough command the driver will not
	// run because it would change a device's lifecycle behind the registry.
	ErrPassthroughRefused = core.ErrPassthroughRefused
	// ErrUnknownTool marks a passthrough for a tool this driver does not wrap.
	ErrUnknownTool = core.ErrUnknownTool
)

var _ core.Passthrougher = (*Driver)(nil)

// refusedVerbs change which devices exist, whether they run, or what they
// run on; only the core may do that, through the driver's own verbs.
// "runtime" is refused because `simctl runtime delete` removes a runtime
// for the whole machine.
var refusedVerbs = map[string]bool{
	"delete": true, "erase": true, "shutdown": true, "boot": true, "create": true, "clone": true,
	"rename": true, "upgrade": true, "runtime": true,
}

// PassthroughTools lists the tools this driver wraps.
func (d *Driver) PassthroughTools() []string { return []string{"simctl"} }

// ResolvePassthrough turns a lease holder's tool invocation into the
// root-scoped command to run. The caller spawns it: locally (the CLI, which
// has the terminal) or through the ProcessRunner (device.exec). No simctl
// verb needs a terminal, so scope.Terminal changes nothing here; a pinned
// device (device.exec) confines the command to that device's UDID.
func (d *Driver) ResolvePassthrough(tool string, args []string, scope core.PassthroughScope) (ports.Command, error) {
	if tool != "simctl" {
		return ports.Command{}, fmt.Errorf("ios: %w %q (this driver wraps simctl)", ErrUnknownTool, tool)
	}
	if len(args) > 0 {
		verb := args[0]
		// A leading option such as --set or --profiles would re-scope the
		// command outside the root.
		if strings.HasPrefix(verb, "-") {
			return ports.Command{}, fmt.Errorf("ios: simctl option %q: %w: the device set is fixed by simlock", verb, ErrPassthroughRefused)
		}
		if refusedVerbs[strings.ToLower(verb)] {
			return ports.Command{}, fmt.Errorf("ios: simctl %s: %w: it would change a device behind simlock's back; use simlock's own commands", verb, ErrPassthroughRefused)
		}
		switch {
		case scope.Pin != nil:
			udid := scope.Pin.Attrs[core.AttrUDID]
			if udid == "" {
				udid = scope.Pin.Handle
			}
			if err := checkPinned(args, udid); err != nil {
				return ports.Command{}, err
			}
		case d.defaultSet:
			// Unpinned, in the user's own set: the command may address only
			// a device simlock created.
			if err := d.checkRecorded(args); err != nil {
				return ports.Command{}, err
			}
		}
	}
	full := append(append([]string{"simctl"}, d.setArgs()...), args...)
	return ports.Command{Name: d.xcrun, Args: full}, nil
}

// Verbs by how they name devices. Every other verb takes one device as its
// first positional argument, after its own options ("launch --console
// <device> <bundle>", "io <device> screenshot"), which is simctl's
// convention.
var (
	// deviceFreeVerbs name no device.
	deviceFreeVerbs = map[string]bool{"list": true, "help": true}
	// pairVerbs join or split two devices; a lease holds one.
	pairVerbs = map[string]bool{"pair": true, "unpair": true, "pair_activate": true}
)

// checkPinned refuses a simctl command that addresses any device but udid.
// "booted" and device names are refused too: in simlock's set they can
// mean another lease's device.
func checkPinned(args []string, udid string) error {
	verb := strings.ToLower(args[0])
	var pos []string
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
		}
	}
	use := fmt.Sprintf("name the leased device by its UDID: simctl %s %s ...", args[0], udid)
	switch {
	case deviceFreeVerbs[verb]:
		return nil
	case pairVerbs[verb]:
		return pinRefusal(use, "simctl %s joins two devices and a lease holds one", args[0])
	case verb == "pbsync":
		// pbsync SOURCE DEST: either may be the host's pasteboard.
		for _, p := range pos[:min(2, len(pos))] {
			if !strings.EqualFold(p, "host") && !strings.EqualFold(p, udid) {
				return pinRefusal("sync with the leased device or the host: simctl pbsync "+udid+" host",
					"simctl pbsync %s names a device other than the lease's (%s)", p, udid)
			}
		}
		return nil
	case len(pos) == 0:
		return nil // simctl prints the verb's usage
	case strings.EqualFold(pos[0], udid):
		return nil
	case strings.EqualFold(pos[0], "booted"):
		return pinRefusal(use, "simctl %s booted may pick another lease's device", args[0])
	default:
		return pinRefusal(use, "simctl %s %s names a device other than the lease's (%s)", args[0], pos[0], udid)
	}
}

func pinRefusal(next, format string, a ...any) error {
	return &core.SpecError{Err: ErrPassthroughRefused, Next: next,
		Msg: "ios: " + fmt.Sprintf(format, a...) + ": " + ErrPassthroughRefused.Error()}
}

// checkRecorded refuses, in default device-set mode, a simctl command that
// addresses a device outside simlock's created-devices record: the set is
// the user's, so "booted", a name or another UDID may be the user's own
// simulator.
func (d *Driver) checkRecorded(args []string) error {
	verb := strings.ToLower(args[0])
	if deviceFreeVerbs[verb] {
		return nil
	}
	if pairVerbs[verb] {
		return pinRefusal("name a device simlock created by its UDID",
			"simctl %s joins two devices; in the default device set simlock does not pair devices", args[0])
	}
	var pos []string
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
		}
	}
	targets := pos[:min(1, len(pos))]
	if verb == "pbsync" {
		targets = pos[:min(2, len(pos))]
	}
	for _, p := range targets {
		if verb == "pbsync" && strings.EqualFold(p, "host") {
			continue
		}
		if !IsUDID(p) || !d.recorded(strings.ToUpper(p)) && !d.recorded(p) {
			return pinRefusal("name a device simlock created by its UDID (simlock device list)",
				"simctl %s %s: in the default device set simlock addresses only the simulators it created", args[0], p)
		}
	}
	return nil
}
