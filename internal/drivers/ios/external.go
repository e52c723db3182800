package ios

import (
	"context"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

var _ core.ExternalCounter = (*Driver)(nil)

// ExternalRunning counts the simulators running outside simlock: those
// booted (or booting) in the default device set, where Xcode, `xcrun simctl
// boot` and other tools put theirs. simlock's own live in private sets
// (--set), so they never appear there; should the configured root be the
// default set after all, the devices of simlock's own set are left out
// rather than counted twice.
func (d *Driver) ExternalRunning(ctx context.Context) (int, error) {
	ctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list devices booted")
	defer cancel()
	res, err := d.runner.Run(ctx, ports.Command{Name: d.xcrun, Args: []string{"simctl", "list", "devices", "booted", "-j"}})
	if err != nil {
		return 0, d.commandError(ctx, "simctl list (default set)", res, err)
	}
	l, err := ParseListJSON(res.Stdout)
	if err != nil {
		return 0, err
	}
	running := map[string]bool{}
	for _, dev := range l.Devices {
		if dev.State == StateBooted || dev.State == StateBooting {
			running[dev.UDID] = true
		}
	}
	if len(running) == 0 {
		return 0, nil
	}
	if d.defaultSet {
		// The default set is simlock's set too: its proven devices are
		// simlock's, everything else running there is someone else's.
		own, err := d.provenDevices(l)
		if err != nil {
			return 0, err
		}
		for _, dev := range own {
			delete(running, dev.UDID)
		}
		return len(running), nil
	}
	own, err := d.listDevices(ctx)
	if err != nil {
		return 0, err
	}
	for _, dev := range own.Devices {
		delete(running, dev.UDID)
	}
	return len(running), nil
}
