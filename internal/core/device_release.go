package core

import (
	"context"
	"errors"
	"fmt"
)

// ErrDeviceBusy refuses to shut down a device that is leased, in a device
// operation, or in a state a shutdown does not apply to.
var ErrDeviceBusy = errors.New("device busy")

// ShutdownIdle shuts down one idle running device (ready, unleased, no
// operation in flight) through the op executor, so the hooks see it and
// the host claim is dropped by the ordinary teardown. A device already
// shut down is left alone (stopped=false). lock labels the operation
// ("device-release", "clean").
func (dd DeviceDesk) ShutdownIdle(ctx context.Context, id, lock string) (stopped bool, err error) {
	e := dd.e
	var o *deviceOp
	e.section(func() {
		if err = e.reg.untouched(id); err != nil {
			return
		}
		cur := e.reg.devices[id]
		switch {
		case cur.State == StateShutdown:
			// nothing runs
		case cur.State != StateReady:
			err = fmt.Errorf("%w: %s is %s", ErrDeviceBusy, id, cur.State)
		case e.drivers[cur.Platform] == nil:
			err = fmt.Errorf("%w: no %s driver", ErrUnsupportedPlatform, cur.Platform)
		default:
			o = e.shutdownOp(id, lock, lock+"-shutdown-failed", nil)
		}
	})
	if o == nil || err != nil {
		return false, err
	}
	begun, err := e.runOp(ctx, o)
	if !begun {
		return false, fmt.Errorf("%w: %v", ErrDeviceBusy, err)
	}
	return err == nil, err
}
