package ios

import (
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Capabilities implements core.Driver: a simulator is reset for a session
// by erasing it, and its resource profile is all-or-nothing (a group the
// driver cannot prove as asked fails the lease request).
func (d *Driver) Capabilities() core.Capabilities { return Capabilities() }

// Capabilities is what the iOS driver declares to the core.
func Capabilities() core.Capabilities {
	return core.Capabilities{
		Devices:         "iOS simulators",
		ResetModes:      []string{contract.ResetErase},
		StrictResources: true,
	}
}
