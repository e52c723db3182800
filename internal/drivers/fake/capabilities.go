package fake

import (
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/drivers/ios"
)

// Capabilities implements core.Driver: Caps when a test set it, otherwise
// what the real driver of the fake's platform declares, so a fake "ios"
// erases and a fake "android" keeps booted, as the real ones do.
func (d *Driver) Capabilities() core.Capabilities {
	switch {
	case d.Caps != nil:
		return *d.Caps
	case d.platform == ios.Platform:
		return ios.Capabilities()
	case d.platform == android.Platform:
		return android.Capabilities()
	}
	return core.Capabilities{}
}
