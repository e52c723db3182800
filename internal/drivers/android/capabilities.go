package android

import (
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Capabilities implements core.Driver: an emulator is reset for a session
// by keeping it booted and cleaning it to its baseline, or by restoring
// its snapshot; its resource profile is granted with what it observed.
func (d *Driver) Capabilities() core.Capabilities { return Capabilities() }

// Capabilities is what the Android driver declares to the core.
func Capabilities() core.Capabilities {
	return core.Capabilities{
		Devices:    "Android emulators",
		ResetModes: []string{contract.ResetKeepBooted, contract.ResetSnapshot},
	}
}
