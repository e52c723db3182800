package fake

import (
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Capabilities implements core.Driver: Caps when a test set it, otherwise
// what the real driver of the fake's platform declares, so a fake "ios"
// erases and a fake "android" keeps booted, as the real ones do.
func (d *Driver) Capabilities() core.Capabilities {
	if d.Caps != nil {
		return *d.Caps
	}
	switch d.platform {
	case "ios":
		return core.Capabilities{Devices: "iOS simulators", ResetModes: []string{contract.ResetErase}, StrictResources: true}
	case "android":
		return core.Capabilities{Devices: "Android emulators", ResetModes: []string{contract.ResetKeepBooted, contract.ResetSnapshot}}
	}
	return core.Capabilities{}
}
