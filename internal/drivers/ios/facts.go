package ios

import (
	"strings"

	"github.com/simlock/simlock/internal/core"
)

// The facts the iOS driver can state about a simulator (docs/adr/0039):
// the device type's model identifier and form factor from its product
// family. simctl says nothing about the screen, so the display stays
// unstated (null) rather than guessed from a model name.

// formFactor maps simctl's productFamily onto the description's values.
// Watch, TV and Vision devices are none of phone, tablet or foldable.
func formFactor(productFamily string) string {
	switch strings.ToLower(strings.TrimSpace(productFamily)) {
	case "iphone", "ipod":
		return "phone"
	case "ipad":
		return "tablet"
	default:
		return "unknown"
	}
}

// typeFacts are the fact attributes of a device of type t.
func typeFacts(t DeviceType) map[string]string {
	out := map[string]string{}
	if t.ModelIdentifier != "" {
		out[core.AttrFactPrefix+core.FactModelIdentifier] = t.ModelIdentifier
	}
	// An Xcode too old to list product families cannot say; "unknown" is
	// then the honest form factor, and the projection writes it.
	if t.ProductFamily != "" {
		out[core.AttrFactPrefix+core.FactFormFactor] = formFactor(t.ProductFamily)
	}
	return out
}

// factsFor finds the device type typeID in l and returns its facts; none
// when the listing does not show it.
func factsFor(l *List, typeID string) map[string]string {
	if l == nil {
		return nil
	}
	for _, t := range l.DeviceTypes {
		if t.Identifier == typeID {
			return typeFacts(t)
		}
	}
	return nil
}

// provisionFacts reads the facts of a new device from the last listing
// kept (the one its spec was resolved from), starting no process: a device
// type's identifier and family do not change as the listing ages. Without
// one the facts stay unstated, which beats a slower provision.
func (d *Driver) provisionFacts(typeID string) map[string]string {
	l, ok := d.listing.Last()
	if !ok {
		d.log.Info("no listing kept; device type facts unstated", "deviceType", typeID)
		return nil
	}
	return factsFor(l, typeID)
}

func mergeAttrs(dst, src map[string]string) map[string]string {
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
