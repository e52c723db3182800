package simsdk

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Measured durations of the real tools (see the timing table in doc.go,
// which names the source of each figure). The simulated SDK waits this
// long multiplied by SIMLOCK_SIMSDK_SPEED, so the orchestration above it
// sees realistic latencies by default and none at all with speed 0.
const (
	// A first boot (after create or erase) builds the device's first-boot
	// data (dyld caches, data migration); a device that has that data,
	// because it booted before or was cloned from one that had, boots in
	// a fraction of the time.
	iosFirstBootTime = 30 * time.Second
	iosRebootTime    = 1500 * time.Millisecond
	iosShutdownTime  = 1500 * time.Millisecond
	iosEraseTime     = 300 * time.Millisecond
	iosCreateTime    = 400 * time.Millisecond
	// A clone is an APFS copy-on-write copy of the device directory.
	iosCloneTime    = 500 * time.Millisecond
	iosBootFailTime = 5 * time.Second // launchd gives up well before a full boot
	iosDownloadTime = 60 * time.Second
	downloadSteps   = 10
	statusInterval  = time.Second // bootstatus prints a status block this often
	pollInterval    = 25 * time.Millisecond
	killGrace       = 10 * time.Second // SIGTERM to SIGKILL
)

// parseSpeed reads SIMLOCK_SIMSDK_SPEED. Empty means 1 (real time). A bad
// value is an error rather than a silent default, so a typo in a test setup
// does not turn a one-second run into a thirty-second one unnoticed.
func parseSpeed(v string) (float64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid SIMLOCK_SIMSDK_SPEED %q: want a number >= 0", v)
	}
	return f, nil
}

// scale applies the speed factor to a measured duration.
func scale(d time.Duration, speed float64) time.Duration {
	if speed == 0 {
		return 0
	}
	return time.Duration(float64(d) * speed)
}

// sleepCtx waits d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
