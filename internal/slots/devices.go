package slots

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// engineDevices is the reconciler's Devices port over the manager's engine.
type engineDevices struct{ m *Manager }

func (s engineDevices) Home() string { return s.m.self.Home }

func slotDevice(r core.DeviceRecord) Device {
	res := contract.SlotSpec{Runtime: r.Spec.RuntimeID, DeviceType: r.Spec.ModelID}
	if res.Runtime == "" {
		res.Runtime = r.Spec.OSVersion
	}
	if res.DeviceType == "" {
		res.DeviceType = r.Spec.Model
	}
	return Device{ID: r.ID, StableID: r.Handle, Name: r.Name, Platform: r.Platform, Resolved: res,
		Running: r.State != core.StateShutdown && r.State != core.StateProvisioning}
}

func (s engineDevices) List(ctx context.Context, platform string) (map[string]bool, bool) {
	return s.m.desk.HandlesPresent(ctx, platform)
}

func (s engineDevices) Find(ctx context.Context, platform, stable string, present bool) (Device, bool) {
	rec, found := s.m.named.FindDevice(platform, stable)
	if found && !present {
		// Deleted out of band: the record names nothing; drop it so it
		// never reaches the general pool as a ghost.
		if err := s.m.desk.DestroyAssigned(ctx, rec.ID); err != nil {
			s.m.log.Warn("drop the record of a slot device deleted out of band", "device", rec.ID, "err", err)
		}
		return Device{}, false
	}
	if !found {
		return Device{}, false
	}
	return slotDevice(rec), true
}

func (s engineDevices) ByID(id string) (Device, bool) {
	rec, ok := s.m.eng.Device(id)
	if !ok || rec.Handle == "" {
		return Device{}, false
	}
	return slotDevice(rec), true
}

func (s engineDevices) CheckSpec(ctx context.Context, platform string, spec contract.SlotSpec) error {
	if len(spec.Configuration) > 0 {
		return contract.Errorf(contract.CodeSpecUnsupported, "this daemon does not apply an Android configuration to a slot device yet").
			WithNext("omit requestedSpec.configuration")
	}
	if spec.DisplayCutout != "" {
		return contract.Errorf(contract.CodeSpecUnsupported, "this daemon does not apply a display cutout to a slot device yet").
			WithNext("omit requestedSpec.displayCutout")
	}
	drv, ok := s.m.eng.Driver(platform)
	if !ok {
		return contract.Errorf(contract.CodeSpecUnsupported, "this daemon serves no %s devices", platform)
	}
	if _, err := drv.ResolveSpec(ctx, slotSpecRequest(platform, spec)); err != nil {
		ce := s.m.toContract(err)
		switch ce.Code {
		case contract.CodeUnknownModel, contract.CodeRuntimeMissing, contract.CodeOSOutOfRange, contract.CodeUnsupportedPlatform, contract.CodeBadRequest:
			// What this host has not installed, or a spec it cannot read:
			// nothing was changed, and a retry cannot help.
			return contract.Errorf(contract.CodeSpecUnsupported, "requestedSpec %+v cannot be served on this host: %s", spec, ce.Message).
				WithNext("name an installed runtime and device type (`simlock catalog`)").WithDetails("cause", string(ce.Code))
		}
		return ce
	}
	return nil
}

func (s engineDevices) Create(ctx context.Context, platform string, spec contract.SlotSpec, key, namePrefix string, recorded func(string) error) (Device, error) {
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return Device{}, err
	}
	name := namePrefix + "-" + hex.EncodeToString(suffix[:])
	rec, err := s.m.desk.ProvisionAssigned(ctx, slotSpecRequest(platform, spec), key, name, recorded)
	if err != nil {
		if rec.ID != "" {
			return slotDevice(rec), err
		}
		return Device{}, err
	}
	return slotDevice(rec), nil
}

func (s engineDevices) Destroy(ctx context.Context, dev Device) error {
	return s.m.desk.DestroyAssigned(ctx, dev.ID)
}

// MayBoot makes running room for a new slot device (a create or a
// replacement) the way a waiting request gets it: an idle warm device, or
// another slot's idle device, is shut down when a running limit binds. With
// nothing to shut down it refuses at once, counting a device about to be
// deleted as already gone.
func (s engineDevices) MayBoot(ctx context.Context, platform string, spec contract.SlotSpec, freeing *Device) error {
	id := ""
	if freeing != nil {
		id = freeing.ID
	}
	binding, err := s.m.desk.MakeRoom(ctx, slotSpecRequest(platform, spec), id)
	if err != nil {
		return err
	}
	if len(binding) == 0 {
		return nil
	}
	limit, booted, ext := s.running(platform)
	if freeing != nil && freeing.Running {
		booted--
	}
	return slotCapacityRefusal(platform, limit, booted, ext, "a slot device cannot boot now").WithDetails("binding", binding[0])
}

// MayRestart refuses the boot of the slot's own shut-down device when a
// running limit binds and no idle device (warm, or another slot's with no
// live execution) could yield its room: the targeted boot would only wait,
// and the acquisition would end at its deadline instead of at once.
func (s engineDevices) MayRestart(d Device) error {
	binding := s.m.desk.BootBlocked(d.ID)
	if len(binding) == 0 {
		return nil
	}
	limit, booted, ext := s.running(d.Platform)
	return slotCapacityRefusal(d.Platform, limit, booted, ext, "the slot's shut-down device cannot boot again now").WithDetails("binding", binding[0])
}

// running is the limit that binds platform's boots, what it counts now and
// how many of those devices simlock did not start.
func (s engineDevices) running(platform string) (limit, booted, external int) {
	c := s.m.eng.Capacity()
	limit = c.Limits.MaxRunning
	if pl, ok := c.Limits.Platforms[platform]; ok && pl.MaxRunning > 0 {
		limit = pl.MaxRunning
	}
	booted = c.Platforms[platform].Running
	if limit == 0 {
		limit, booted = c.Limits.MaxRunning, c.Global.Running
	}
	return limit, booted, c.Host.External
}

// slotRetryAfterMs is the retry hint of a slot boot refused at a limit:
// about one device shutdown, the soonest room can free.
const slotRetryAfterMs = 5000

// DiscoveryRetryMs is the retry hint of an allocation refused because
// the slot tables were never read: a couple of host polls (1 s by default),
// each of which reads them again.
const DiscoveryRetryMs = 2000

func slotCapacityRefusal(platform string, limit, booted, external int, what string) *contract.Error {
	return contract.Errorf(contract.CodeCapacityExhausted, "%s already runs %d of %d devices; %s", platform, booted, limit, what).
		WithRetryAfter(slotRetryAfterMs).WithNext("retry after retryAfterMs, or end another execution or lease of "+platform).
		WithDetails("limit", limit, "booted", booted, "retryAfterMs", int64(slotRetryAfterMs), "externalDevices", external, "platform", platform)
}

// slotSpecRequest maps a slot spec to a core spec request: deviceType is
// the model, and the runtime's version part the OS (an iOS runtime id
// "...SimRuntime.iOS-27-0" or "iOS 27.0" is 27.0; an Android system image
// "system-images;android-36;..." is API 36).
func slotSpecRequest(platform string, spec contract.SlotSpec) core.SpecRequest {
	return core.SpecRequest{Platform: platform, Model: spec.DeviceType, OSVersion: slotOS(platform, spec.Runtime)}
}

func slotOS(platform, runtime string) string {
	os, _ := RuntimeOS(platform, runtime)
	return os
}
