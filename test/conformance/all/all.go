// Package all lists every contract's statement registry, in the order
// docs/conformance.md shows them. A contract whose suite is not written yet
// is listed with its reference and no statements.
package all

import (
	"github.com/simlock/simlock/test/conformance"
	"github.com/simlock/simlock/test/conformance/backbone"
	"github.com/simlock/simlock/test/conformance/claims"
)

// Contracts are the five reference contracts.
func Contracts() []conformance.Contract {
	return []conformance.Contract{
		{Name: "sessions", Title: "Session broker", Reference: "automobile-session-broker.txt"},
		{Name: "slots", Title: "Managed slots", Reference: "automobile-managed-device-slots.txt"},
		claims.Contract,
		{Name: "resources", Title: "Device resources", Reference: "automobile-device-resources.txt"},
		backbone.Contract,
	}
}

// DocPath is where the table is written, relative to the repository root.
const DocPath = "docs/conformance.md"
