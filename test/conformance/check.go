package conformance

import (
	"strings"
	"testing"
)

// Check is a contract suite's own registry check: every statement proven,
// decided or declared a gap, every named test and ADR present, and every
// harness.Proves call naming a statement the registry has. Each suite's
// TestEvery…StatementIsProvenOrDecided calls it, so a suite run alone says
// what is wrong with its registry.
func Check(t testing.TB, c Contract) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range idx.Problems {
		if strings.Contains(p, c.Name+"/") {
			t.Error(p)
		}
	}
	if ps := Problems(c, idx); len(ps) > 0 {
		t.Errorf("the %s registry (test/conformance/%s/statements.go):\n%s", c.Name, c.Name, strings.Join(ps, "\n"))
	}
}
