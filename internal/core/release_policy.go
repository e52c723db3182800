package core

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/simlock/simlock/contract"
)

// ReleasePolicy says what releasing a lease does to its devices. The zero
// value is the pool's own purge (reset and keep the device for the next
// lease, as the reset choice decides); a session chooses its own (see
// contract.ResetDestroy and the other reset modes).
type ReleasePolicy struct {
	// Mode is "" (the pool's purge) or a contract reset mode: destroy,
	// erase (iOS), keep-booted or snapshot (Android), or none (the device
	// is kept as it is: only for a managed slot's execution, whose device
	// no one but that slot is ever given).
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

// Validate checks that the policy's mode applies to platform, by what its
// driver declares (caps holds every driver's Capabilities by platform; the
// iOS driver runs erase, the Android driver keep-booted and snapshot), and
// that only keep-booted takes a fallback (destroy or snapshot) and a use
// limit. A request with a policy its device cannot run is refused at
// admission rather than destroyed at release.
func (p ReleasePolicy) Validate(platform string, caps map[string]Capabilities) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: release policy: %s", ErrBadRequest, fmt.Sprintf(format, a...))
	}
	switch p.Mode {
	case "", contract.ResetDestroy, contract.ResetNone:
	case contract.ResetErase, contract.ResetKeepBooted, contract.ResetSnapshot:
		// A platform with no driver has no declaration to ask: the
		// unsupported-platform refusal that follows answers it.
		if c, ok := caps[platform]; ok && !c.RunsReset(p.Mode) {
			return bad("%s is for %s, not %s", p.Mode, devicesRunning(caps, p.Mode), platform)
		}
	default:
		return bad("unknown mode %q", p.Mode)
	}
	if p.Mode != contract.ResetKeepBooted && (p.Fallback != "" || p.MaxUses != 0) {
		return bad("fallback and maxUses apply only to keep-booted")
	}
	if p.Fallback != "" && p.Fallback != contract.ResetDestroy && p.Fallback != contract.ResetSnapshot {
		return bad("fallback %q is neither destroy nor snapshot", p.Fallback)
	}
	if p.MaxUses < 0 || p.Timeout < 0 {
		return bad("maxUses and the timeout must not be negative")
	}
	return nil
}

// devicesRunning names, for a refusal, the devices whose driver runs reset
// mode (the first platform's, in name order, when several do).
func devicesRunning(caps map[string]Capabilities, mode string) string {
	for _, p := range slices.Sorted(maps.Keys(caps)) {
		if caps[p].RunsReset(mode) && caps[p].Devices != "" {
			return caps[p].Devices
		}
	}
	return "no configured platform"
}

// capabilitiesOf is every driver's declaration, by platform.
func capabilitiesOf(drivers map[string]Driver) map[string]Capabilities {
	caps := make(map[string]Capabilities, len(drivers))
	for p, d := range drivers {
		caps[p] = d.Capabilities()
	}
	return caps
}
