package android

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/core"
)

var _ core.LiveObserver = (*Driver)(nil)

// liveProbeTimeout bounds one live-state read: the device-resources
// reference bounds each per-device inventory probe at 2 s.
const liveProbeTimeout = 2 * time.Second

// ObserveLive implements core.LiveObserver: one `dumpsys window` on the
// running emulator, decoded by parseDumpsysWindow (docs/adr/0090). What
// the dump does not settle stays unknown; a read that fails or outlasts
// liveProbeTimeout is an error the inventory turns into null facts.
func (d *Driver) ObserveLive(ctx context.Context, handle string) (core.LiveState, error) {
	st, err := d.loadState(handle)
	if err != nil {
		return core.LiveState{}, err
	}
	if st.ConsolePort == 0 {
		return core.LiveState{}, fmt.Errorf("android driver: %s has no console port: %w", handle, core.ErrDeviceNotFound)
	}
	cctx, cancel := context.WithTimeout(ctx, liveProbeTimeout)
	defer cancel()
	res, err := d.adbOn(cctx, serialFor(st.ConsolePort), "shell", "dumpsys", "window")
	if err != nil {
		return core.LiveState{}, fmt.Errorf("android driver: dumpsys window on %s: %w", handle, err)
	}
	ws := parseDumpsysWindow(res.Stdout)
	return core.LiveState{Locked: ws.Locked, Orientation: ws.Orientation}, nil
}
