package daemon

import (
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
)

// checkGroupIn refuses a multi-device request that also names a single
// device's fields: the two shapes are exclusive (ADR 0043).
func checkGroupIn(in contract.LeaseRequestIn) error {
	if in.Platform != "" || in.Model != "" || in.OSVersion != "" || in.Device != "" || len(in.Resources) > 0 || in.Hardware != nil {
		return contract.Errorf(contract.CodeBadRequest, "devices is exclusive with platform, model, osVersion, device, resources and hardware").
			WithNext("name every device inside devices[]")
	}
	for i, m := range in.Devices {
		if m.Platform == "" {
			return contract.Errorf(contract.CodeBadRequest, "devices[%d]: platform is required", i).
				WithNext("name a platform: ios or android")
		}
	}
	return nil
}

// groupIn is the engine's form of a multi-device request's members.
func groupIn(ds []contract.DeviceSpec, allowDownload bool) []core.SpecRequest {
	if len(ds) == 0 {
		return nil
	}
	out := make([]core.SpecRequest, len(ds))
	for i, m := range ds {
		out[i] = core.SpecRequest{Platform: m.Platform, Model: m.Model, OSVersion: m.OSVersion, AllowDownload: allowDownload}
	}
	return out
}

// eventDevices lists the devices a lease event is about: every member of a
// multi-device lease (data.devices), or its one device.
func eventDevices(e events.Event) []string {
	switch ds := e.Data["devices"].(type) {
	case []string:
		return ds
	case []any:
		var out []string
		for _, d := range ds {
			if s, ok := d.(string); ok {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{e.DeviceID}
}
