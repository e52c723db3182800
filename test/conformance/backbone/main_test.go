package backbone

import (
	"strings"
	"testing"

	"github.com/simlock/simlock/test/conformance"
	"github.com/simlock/simlock/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// Every statement of the architecture reference is proven by a test or
// decided by an ADR, every test the registry names exists, and every
// harness.Proves call names a statement the registry has.
func TestEveryBackboneStatementIsProvenOrDecided(t *testing.T) {
	root, err := conformance.Root()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := conformance.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range idx.Problems {
		t.Error(p)
	}
	if ps := conformance.Problems(Contract, idx); len(ps) > 0 {
		t.Errorf("the backbone registry (test/conformance/backbone/statements.go):\n%s", strings.Join(ps, "\n"))
	}
}
