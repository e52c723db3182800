package sessions

import (
	"time"
)

// Retention defaults (sessions.receiptRetentionMs, sessions.exportMaxAgeMs).
const (
	DefaultReceiptRetention = 30 * 24 * time.Hour
	DefaultExportMaxAge     = 180 * 24 * time.Hour
)

// Export is a receipt's export link as the pruning rule sees it.
type Export struct {
	PrepareID     string
	RequestDigest string
	Identity      string
	CreatedAt     time.Time
	// AcknowledgedAt is zero until session.acknowledgeExport.
	AcknowledgedAt time.Time
}

// Prunable reports whether a stored receipt may be deleted at now: only a
// terminal one whose cleanup is confirmed, after the retention, unless an
// unacknowledged export still pins it (up to exportMaxAge from the
// export's creation).
func Prunable(r Record, exp *Export, now time.Time, retention, exportMaxAge time.Duration) bool {
	if !Terminal(r.Receipt.Status) || r.Receipt.CleanupPending {
		return false
	}
	if now.Sub(time.UnixMilli(r.Receipt.UpdatedAtMs)) < retention {
		return false
	}
	if exp != nil && exp.AcknowledgedAt.IsZero() && now.Sub(exp.CreatedAt) < exportMaxAge {
		return false
	}
	return true
}

// Limits are the broker's caps (config sessions.limits); zero is no cap.
type Limits struct {
	SessionCap     int
	TotalDeviceCap int
}

// Usage is what the broker holds when a prepare asks for admission.
type Usage struct {
	// Live sessions: admitted and not yet released or failed.
	Live int
	// CleanupPending counts session devices whose teardown is not yet
	// confirmed; they still hold device capacity.
	CleanupPending int
	// Devices counts the broker's devices in the registry (the session
	// owner-system mark) in every state: preparing, leased, resetting,
	// idle, quarantined (ADR 0063).
	Devices int
	// Preparing counts admitted sessions whose device is not in the
	// registry yet: each will add one.
	Preparing int
	// Idle counts session devices no session holds and no operation
	// touches, which admission may destroy to make room.
	Idle int
	// Fitting counts the idle session devices that fit the prepare's
	// profile: while there are more of them than preparations that might
	// take one first, the prepare takes one and creates nothing.
	Fitting int
}

// DeviceCount is what totalDeviceCap is charged: every session device in
// any state plus the devices admitted preparations are about to make, and
// never less than the sessions that hold or tear one down.
func (u Usage) DeviceCount() int {
	return max(u.Live+u.CleanupPending, u.Devices+u.Preparing)
}

// Refusal names why admission said no.
type Refusal int

const (
	Admit Refusal = iota
	// SessionCapReached: as many live sessions as sessionCap allows.
	SessionCapReached
	// EvictionPending: the device cap is full only because an earlier
	// session's device is still being destroyed; it frees soon.
	EvictionPending
	// DeviceCapReached: the device cap is full with live sessions.
	DeviceCapReached
	// EvictIdle: the device cap is full, and an idle session device
	// that does not fit the prepare can be destroyed to make room; the
	// broker destroys it, waits for the destruction, and decides again.
	EvictIdle
)

// Decide is the admission rule: a new session needs room under
// sessionCap, and a device under totalDeviceCap counting every session
// device in any state (Usage.DeviceCount), so capacity is offered again
// only once a device's absence is confirmed. An idle device that fits is
// reused rather than counted twice; one that does not is evicted first.
func Decide(l Limits, u Usage) Refusal {
	if l.SessionCap > 0 && u.Live >= l.SessionCap {
		return SessionCapReached
	}
	if l.TotalDeviceCap > 0 && u.DeviceCount() >= l.TotalDeviceCap {
		switch {
		case u.Fitting > u.Preparing:
			return Admit
		case u.Idle > 0:
			return EvictIdle
		case u.Live < l.TotalDeviceCap:
			return EvictionPending
		}
		return DeviceCapReached
	}
	return Admit
}
