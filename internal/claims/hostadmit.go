package claims

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// Host admission (ADR 0065): a boot or provision of a device this home does
// not yet hold is admitted by the host registry first, inside one
// transaction that counts every home's claims and starts in flight, so two
// homes deciding within one watcher poll cannot both take the host's last
// room. The refusal reaches the engine as a core.HostFullError, which waits
// for room instead of failing the boot.

// startsDevice reports whether op may make a device run that this home's
// claims do not cover yet.
func startsDevice(k core.OpKind) bool { return k == core.OpKindProvision || k == core.OpKindBoot }

// admitStart admits op's start when it needs it: a provision always (its
// device has no key yet), a boot of a device this daemon holds no claim on.
func (c *claims) admitStart(ctx context.Context, op core.OpInfo) error {
	if c.admit == nil || !startsDevice(op.Kind) || op.DeviceID == "" {
		return nil
	}
	if op.Handle != "" {
		if key, err := c.key(op.Platform, op.Handle, op.Attrs); err == nil && c.holds(key) {
			return nil // running or changed for this home already: counted
		}
	}
	if err := c.admit(ctx, op); err != nil {
		return err
	}
	c.smu.Lock()
	c.starting[op.DeviceID] = true
	c.smu.Unlock()
	return nil
}

// finishStart ends device's start row, if this daemon recorded one.
func (c *claims) finishStart(device string) {
	c.smu.Lock()
	started := c.starting[device]
	delete(c.starting, device)
	c.smu.Unlock()
	if started && c.endStart != nil {
		c.endStart(device)
	}
}

// setupHostAdmission gives the claim hooks the registry's admission, with
// the host limits the engine plans with and the external devices this
// daemon last counted.
func (s *System) setupHostAdmission() {
	c := s.claims
	c.starting = map[string]bool{}
	c.admit = func(ctx context.Context, op core.OpInfo) error {
		max, platforms := s.hostDesk.HostLimits()
		if max <= 0 && len(platforms) == 0 {
			return nil
		}
		var external map[string]int
		if u := s.hostUse; u != nil {
			u.mu.Lock()
			external = maps.Clone(u.external)
			u.mu.Unlock()
		}
		err := s.host.Admit(ctx, hostreg.Admission{Owner: s.self, DeviceID: op.DeviceID, Platform: op.Platform, At: s.clock.Now(),
			MaxRunning: max, Platforms: platforms, External: external})
		var hf *hostreg.HostFullError
		if !errors.As(err, &hf) {
			if err != nil {
				return fmt.Errorf("admit a start on the host: %w", err)
			}
			return nil
		}
		he := &core.HostCapacityError{Limit: core.LimitHost, Max: hf.Max, Booted: hf.Counted, Platform: op.Platform,
			RetryAfter: 2 * s.externalEvery() / 5} // two watcher polls: another home's change is seen by then
		if hf.Limit != "host" {
			he.Limit = core.HostPlatformLimit(hf.Limit)
		}
		for p, n := range external {
			if he.Limit == core.LimitHost || p == op.Platform {
				he.External += n
			}
		}
		return &core.HostFullError{Others: hf.Others, Capacity: he}
	}
	c.endStart = func(device string) {
		ctx, cancel := context.WithTimeout(context.Background(), claimWriteTimeout)
		defer cancel()
		if err := s.host.EndStart(ctx, s.self, device); err != nil {
			// A live owner's stale row only narrows the host until this
			// daemon stops; the next admission of the device replaces it.
			s.log.Warn("end a start in the host registry", "device", device, "err", err)
		}
	}
}
