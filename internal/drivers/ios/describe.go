package ios

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/core"
)

var _ core.Describer = (*Driver)(nil)

// Describe reads one device of the device set from simctl's listing: its
// spec from the device type and runtime it was created with, so a daemon
// sharing the root with another home can take in a device that home made.
func (d *Driver) Describe(ctx context.Context, udid string) (core.Described, error) {
	lctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list")
	defer cancel()
	l, err := d.listAll(lctx)
	if err != nil {
		return core.Described{}, err
	}
	dev, ok := l.Device(udid)
	if !ok {
		return core.Described{}, fmt.Errorf("ios: %s is not in %s: %w", udid, d.root, core.ErrDeviceNotFound)
	}
	if proven, err := d.provenDevices(&List{Devices: []Device{dev}}); err != nil {
		return core.Described{}, err
	} else if len(proven) == 0 {
		return core.Described{}, fmt.Errorf("ios: %s of the default device set: %w", udid, ErrNotOwned)
	}
	spec := core.Spec{Platform: Platform, ModelID: dev.DeviceTypeIdentifier, RuntimeID: dev.RuntimeKey}
	for _, t := range l.DeviceTypes {
		if t.Identifier == dev.DeviceTypeIdentifier {
			spec.Model = t.Name
		}
	}
	for _, r := range l.Runtimes {
		if r.Identifier == dev.RuntimeKey {
			spec.OSVersion = r.Version
		}
	}
	if spec.Model == "" || spec.OSVersion == "" {
		return core.Described{}, fmt.Errorf("ios: device %s has a device type (%q) or runtime (%q) this Xcode does not list", udid, dev.DeviceTypeIdentifier, dev.RuntimeKey)
	}
	return core.Described{Spec: spec, Run: runState(dev.State), Provisioned: core.Provisioned{
		Handle: udid, Name: dev.Name, Simulated: d.isSimulated(ctx),
		Attrs: mergeAttrs(map[string]string{core.AttrUDID: udid, core.AttrDeviceSet: d.deviceSetDir(dev.DataPath)}, factsFor(l, dev.DeviceTypeIdentifier)),
	}}, nil
}
