package android

import (
	"context"

	"github.com/simlock/simlock/internal/core"
)

// The snapshot session reset and the keep-booted fallback take the two
// halves of Reclaim one at a time, so the reset record can say which one
// left the device clean: the snapshot restore alone, then -wipe-data.

var (
	_ core.SnapshotRestorer = (*Driver)(nil)
	_ core.DataWiper        = (*Driver)(nil)
)

// RestoreSnapshot implements core.SnapshotRestorer: the baseline snapshot
// is loaded (or booted, for a stopped emulator); without a valid one, or
// when the load fails, it fails and wipes nothing.
func (d *Driver) RestoreSnapshot(ctx context.Context, dev core.DeviceRef) error {
	_, err := d.restoreBaseline(ctx, dev)
	return err
}

// WipeData implements core.DataWiper: the emulator is restarted with its
// data partition wiped (and a new baseline snapshot captured).
func (d *Driver) WipeData(ctx context.Context, dev core.DeviceRef) error {
	name, port, _, err := d.device(ctx, dev)
	if err != nil {
		return err
	}
	return d.wipeData(ctx, dev, name, port, "a session reset asked for -wipe-data")
}
