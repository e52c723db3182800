package ios

import (
	"context"
	"fmt"
	"strings"

	"github.com/simlock/simlock/internal/core"
)

var _ core.EraseVerifier = (*Driver)(nil)

// VerifyErased implements core.EraseVerifier for the erase-and-reuse
// session reset: after the erase and the boot, a fresh `simctl list
// devices` must show the same simulator with exactly the device type and
// runtime its spec names, available and booted. Anything else (a device
// the erase lost, a runtime that went unavailable, a boot that did not
// stick) fails, and the core destroys the device instead of reusing it.
func (d *Driver) VerifyErased(ctx context.Context, dev core.DeviceRef) error {
	udid, err := handle(dev)
	if err != nil {
		return err
	}
	lctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list devices")
	defer cancel()
	l, err := d.listDevices(lctx)
	if err != nil {
		return fmt.Errorf("ios: verify %s after its erase: %w", udid, err)
	}
	got, ok := l.Device(udid)
	if !ok {
		return fmt.Errorf("ios: verify %s after its erase: not listed: %w", udid, core.ErrDeviceNotFound)
	}
	var bad []string
	if want := dev.Spec.ModelID; want != "" && got.DeviceTypeIdentifier != want {
		bad = append(bad, fmt.Sprintf("device type %q, want %q", got.DeviceTypeIdentifier, want))
	}
	if want := dev.Spec.RuntimeID; want != "" && got.RuntimeKey != want {
		bad = append(bad, fmt.Sprintf("runtime %q, want %q", got.RuntimeKey, want))
	}
	if !got.Available {
		bad = append(bad, "unavailable: "+got.AvailabilityError)
	}
	if got.State != StateBooted {
		bad = append(bad, fmt.Sprintf("state %s, want %s", got.State, StateBooted))
	}
	if len(bad) > 0 {
		return fmt.Errorf("ios: verify %s after its erase: %s", udid, strings.Join(bad, "; "))
	}
	return nil
}
