package fake

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// Resetting is the fake with every session reset ability (resetbook.go in
// core): erase and verify, keep-booted cleaning against a baseline, and
// a data wipe. Each verb is recorded ("verify", "capture", "clean",
// "health", "wipe-data") and fails as SetFail scripts it.
type Resetting struct{ Erasing }

// NewResetting wraps d.
func NewResetting(d *Driver) Resetting { return Resetting{Erasing{d}} }

var (
	_ core.EraseVerifier     = Resetting{}
	_ core.KeepBootedCleaner = Resetting{}
	_ core.DataWiper         = Resetting{}
)

// VerifyErased fails for a device that is not running (an erase that did
// not boot it again), as a fresh read would.
func (d Resetting) VerifyErased(_ context.Context, r core.DeviceRef) error {
	if err := d.record("verify", r.Handle); err != nil {
		return err
	}
	if !d.Running(r.Handle) {
		return fmt.Errorf("fake: %s is not booted after its erase", r.Handle)
	}
	return nil
}

// CaptureBaseline marks the device as having a baseline.
func (d Resetting) CaptureBaseline(_ context.Context, r core.DeviceRef) error {
	if err := d.record("capture", r.Handle); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.devices[r.Handle]
	if !ok {
		return core.ErrDeviceNotFound
	}
	dev.baseline = true
	return nil
}

// CleanToBaseline fails without a baseline, as the real cleaner does. It
// waits at the Gate first, like a boot, so a test can hold it in flight.
func (d Resetting) CleanToBaseline(ctx context.Context, r core.DeviceRef) (map[string]time.Duration, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	if err := d.record("clean", r.Handle); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.devices[r.Handle]
	switch {
	case !ok:
		return nil, core.ErrDeviceNotFound
	case !dev.baseline:
		return nil, fmt.Errorf("fake: no baseline for %s", r.Handle)
	case !dev.running:
		return nil, fmt.Errorf("fake: %s is not booted", r.Handle)
	}
	return map[string]time.Duration{"uninstall": 0, "grants": 0, "settings": 0, "files": 0, "clipboard": 0}, nil
}

// CheckHealth fails for a device that is not running.
func (d Resetting) CheckHealth(_ context.Context, r core.DeviceRef) error {
	if err := d.record("health", r.Handle); err != nil {
		return err
	}
	if !d.Running(r.Handle) {
		return fmt.Errorf("fake: %s is not booted", r.Handle)
	}
	return nil
}

// WipeData boots the device again with nothing kept; a new boot has no
// baseline yet.
func (d Resetting) WipeData(ctx context.Context, r core.DeviceRef) error {
	return d.bringUp(ctx, "wipe-data", r) // bringUp drops the resources and the baseline
}
