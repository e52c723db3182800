package core

import "time"

// QuarantinePolicy governs retries of a quarantined device's triggering
// operation.
type QuarantinePolicy struct {
	Retries    int           // failed retries before the device is destroyed (default 3)
	Backoff    time.Duration // delay before the first retry (default 30s)
	Multiplier float64       // growth per retry (default 2)
	Cap        time.Duration // longest delay (default 10m)
}

func (p QuarantinePolicy) withDefaults() QuarantinePolicy {
	if p.Retries <= 0 {
		p.Retries = 3
	}
	if p.Backoff <= 0 {
		p.Backoff = 30 * time.Second
	}
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	if p.Cap <= 0 {
		p.Cap = 10 * time.Minute
	}
	return p
}

// delay is the wait before retry number attempt (0-based).
func (p QuarantinePolicy) delay(attempt int) time.Duration {
	d := float64(p.Backoff)
	for i := 0; i < attempt; i++ {
		d *= p.Multiplier
		if d > float64(p.Cap) {
			return p.Cap
		}
	}
	return min(time.Duration(d), p.Cap)
}

// HealthPolicy governs the leased-device health monitor.
type HealthPolicy struct {
	// Interval between polls (default 5s; negative disables the monitor).
	Interval time.Duration
	// StableObservations consecutive "stopped" (or "missing") reads confirm
	// a crash (default 2).
	StableObservations int
	// MaxRecoveryAttempts reboots per lease before giving up (default 3).
	MaxRecoveryAttempts int
}

func (p HealthPolicy) withDefaults() HealthPolicy {
	if p.Interval == 0 {
		p.Interval = 5 * time.Second
	}
	if p.StableObservations <= 0 {
		p.StableObservations = 2
	}
	if p.MaxRecoveryAttempts <= 0 {
		p.MaxRecoveryAttempts = 3
	}
	return p
}

// CleanupPolicy governs the idle-device reaper.
type CleanupPolicy struct {
	// Interval between periodic passes (default 60s; negative disables the tick).
	Interval time.Duration
	// IdleShutdown (T1): a warm device idle this long is shut down (default 30m).
	IdleShutdown time.Duration
	// IdleDestroy (T2): a device idle this long is destroyed (default 24h);
	// under disk pressure T1 is used instead.
	IdleDestroy time.Duration
	// DiskPressureFreeBytes: free space below this is disk pressure (default 10 GiB).
	DiskPressureFreeBytes uint64
}

func (p CleanupPolicy) withDefaults() CleanupPolicy {
	if p.Interval == 0 {
		p.Interval = time.Minute
	}
	if p.IdleShutdown <= 0 {
		p.IdleShutdown = 30 * time.Minute
	}
	if p.IdleDestroy <= 0 {
		p.IdleDestroy = 24 * time.Hour
	}
	if p.DiskPressureFreeBytes == 0 {
		p.DiskPressureFreeBytes = 10 << 30
	}
	return p
}

// WarmTarget asks the engine to keep Count ready devices of a spec.
type WarmTarget struct {
	Spec  SpecRequest
	Count int
}
