// Package all lists every contract's statement registry, in the order
// docs/conformance.md shows them. A contract whose suite is not written yet
// is listed with its reference and no statements.
package all

import (
	"github.com/simlock/simlock/test/conformance"
	"github.com/simlock/simlock/test/conformance/backbone"
	"github.com/simlock/simlock/test/conformance/claims"
	"github.com/simlock/simlock/test/conformance/resources"
	"github.com/simlock/simlock/test/conformance/sessions"
	"github.com/simlock/simlock/test/conformance/slots"
)

// Contracts are the five reference contracts.
func Contracts() []conformance.Contract {
	return []conformance.Contract{
		sessions.Contract,
		slots.Contract,
		claims.Contract,
		resources.Contract,
		backbone.Contract,
	}
}

// DocPath is where the table is written, relative to the repository root.
const DocPath = "docs/conformance.md"
