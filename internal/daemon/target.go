package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// resolveTarget turns lease.request's device selector into this daemon's
// device id and platform. The host registry is consulted before anything
// runs on the platform: a device another owner holds is DEVICE_IN_USE at
// once. A device of this daemon's root it has no record of (a home sharing
// the root made it) is claimed, taken into the registry shut down, and its
// claim dropped again until the boot takes it: a shut-down idle device
// holds none (ADR 0022).
func (d *Daemon) resolveTarget(ctx context.Context, platform, sel string) (id, plat string, err error) {
	key, plat, handle, err := d.targetKey(platform, sel)
	if err != nil {
		return "", "", err
	}
	var found *core.DeviceRecord
	for _, dev := range d.engine.Devices() {
		if dev.Platform != plat || dev.Handle == "" {
			continue
		}
		if k, kerr := d.claims.DeviceKey(dev.Platform, dev.Handle, dev.Attrs); kerr == nil && k == key {
			found = &dev
			break
		}
	}
	if !d.claims.Holds(key) {
		if err := d.refuseForeign(ctx, key); err != nil {
			return "", "", err
		}
	}
	if found != nil {
		return found.ID, plat, nil
	}
	// A shut-down slot device of a shared root holds no claim (ADR 0062):
	// the host registry's slot tables say whose it is.
	if err := d.slots.GuardHandle(ctx, handle); err != nil {
		return "", "", err
	}
	if err := d.claims.ClaimAdopted(ctx, key); err != nil {
		return "", "", err
	}
	rec, aerr := d.engine.OneDevice().AdoptDevice(ctx, plat, handle)
	if rerr := d.claims.ReleaseAdopted(ctx, key); rerr != nil {
		d.log.Warn("drop the claim taken to adopt a device", "key", key, "err", rerr)
	}
	if errors.Is(aerr, core.ErrDeviceNotFound) {
		// Named from a listing a moment old: the home sharing the root
		// deleted it since. The caller's selector names nothing now.
		return "", "", contract.Errorf(contract.CodeUnknownDevice, "%s is not in this home's %s device root (it never was, or a home sharing the root deleted it since it was listed)", sel, plat).
			WithNext("list the devices again (`simlock list`) and name one that exists, or lease by --platform and --model")
	}
	if aerr != nil {
		return "", "", fmt.Errorf("take device %s into this daemon: %w", sel, aerr)
	}
	d.log.Info("took in a device of the shared root", "device", rec.ID, "key", key)
	return rec.ID, plat, nil
}

// targetKey reads a selector that is not a device id: a host key, or a
// UDID / AVD name of platform.
func (d *Daemon) targetKey(platform, sel string) (key hostreg.Key, plat, handle string, err error) {
	if dev, ok := d.engine.Device(sel); ok {
		k, err := d.claims.DeviceKey(dev.Platform, dev.Handle, dev.Attrs)
		if err != nil {
			return "", "", "", contract.Errorf(contract.CodeBadRequest, "device %s has no host key: %v", sel, err)
		}
		return k, dev.Platform, dev.Handle, nil
	}
	if k, perr := hostreg.ParseKey(sel); perr == nil {
		plat = k.Platform()
		switch {
		case strings.HasPrefix(string(k), "ios:udid:"):
			return k, plat, strings.TrimPrefix(string(k), "ios:udid:"), nil
		case strings.HasPrefix(string(k), "android:avd:"):
			rest := strings.TrimPrefix(string(k), "android:avd:")
			name, root, _ := strings.Cut(rest, ":")
			if root != d.claims.Roots()["android"] {
				return "", "", "", contract.Errorf(contract.CodeUnknownDevice, "AVD %s lives in %s, not in this daemon's root %s", name, root, d.claims.Roots()["android"])
			}
			return k, plat, name, nil
		}
		return "", "", "", contract.Errorf(contract.CodeUnknownDevice, "device %s is not one this daemon can lease", sel)
	}
	switch platform {
	case "ios", "":
		k, err := hostreg.IOSSimulatorKey(sel)
		if err == nil {
			return k, "ios", strings.TrimPrefix(string(k), "ios:udid:"), nil
		}
		if platform == "ios" {
			return "", "", "", contract.Errorf(contract.CodeUnknownDevice, "%q is neither a device id of this daemon nor a simulator UDID", sel)
		}
		fallthrough // no platform named: an AVD name, then
	case "android":
		k, err := d.claims.DeviceKey("android", sel, nil)
		if err != nil {
			return "", "", "", contract.Errorf(contract.CodeUnknownDevice, "%q is neither a device id of this daemon nor an AVD name: %v", sel, err)
		}
		return k, "android", sel, nil
	}
	return "", "", "", contract.Errorf(contract.CodeUnsupportedPlatform, "no platform %q to find device %s on", platform, sel)
}

// refuseForeign fails with DEVICE_IN_USE when anyone but this daemon holds
// key: a live owner, a release under way, a dead owner's orphan (recovery
// is `device release --stale`) or an unreadable record. This home's own
// previous daemon's orphan is not refused: the first operation adopts it.
func (d *Daemon) refuseForeign(ctx context.Context, key hostreg.Key) error {
	st, err := d.host.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("read the host registry: %w", err)
	}
	for _, s := range st {
		if s.Key != key || s.Claim.Owner == d.self {
			continue
		}
		if s.Claim.Owner.Home == d.self.Home && s.Class == hostreg.ClassOrphaned {
			return nil
		}
		return fmt.Errorf("%w: %w", core.ErrHeldElsewhere, &hostreg.ConflictError{
			Reason: hostreg.ReasonHeld, Classification: s.Class, Liveness: s.Liveness, DeviceKey: s.Key,
			Owner: hostreg.ConflictOwner{Home: s.Claim.Owner.Home, LeaseID: s.Claim.LeaseID,
				DaemonPID: s.Claim.Owner.PID, DaemonStartTime: s.Claim.Owner.Start},
			Recovery: hostreg.RecoveryCommand(s), Detail: s.Detail})
	}
	return nil
}
