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
// has the terminal) or through the ProcessRunner (device.exec). terminal
// says whether a terminal is attached; no simctl verb needs one today, so it
// changes nothing for this driver.
func (d *Driver) ResolvePassthrough(tool string, args []string, terminal bool) (ports.Command, error) {
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
	}
	full := append([]string{"simctl", "--set", d.root}, args...)
	return ports.Command{Name: d.xcrun, Args: full}, nil
}
