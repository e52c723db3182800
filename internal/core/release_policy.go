package core

import "time"

// ReleasePolicy says what releasing a lease does to its devices. The zero
// value is the pool's own purge (reset and keep the device for the next
// lease, as the reset choice decides); a session chooses its own (see
// contract.ResetDestroy and the other reset modes).
type ReleasePolicy struct {
	// Mode is "" (the pool's purge) or a contract reset mode: destroy,
	// erase (iOS), keep-booted or snapshot (Android).
	Mode string `json:"mode,omitempty"`
	// Fallback is what a failed keep-booted cleaning falls back to:
	// destroy ("" too) or snapshot.
	Fallback string `json:"fallback,omitempty"`
	// MaxUses retires a keep-booted device after this many leases (0:
	// the default, 20).
	MaxUses int `json:"maxUses,omitempty"`
	// Timeout bounds the whole reset (0: the default).
	Timeout time.Duration `json:"timeoutNs,omitempty"`
}

// IsZero reports the pool's own purge.
func (p ReleasePolicy) IsZero() bool { return p == ReleasePolicy{} }
