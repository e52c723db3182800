package claims

import (
	"testing"

	"github.com/simlock/simlock/test/conformance"
	"github.com/simlock/simlock/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// Every statement of the ownership reference is proven by a test or
// decided by an ADR, every test the registry names exists, and every
// harness.Proves call names a statement the registry has.
func TestEveryClaimsStatementIsProvenOrDecided(t *testing.T) { conformance.Check(t, Contract) }
