package all

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/conformance"
)

func scan(t *testing.T) (string, *conformance.Index) {
	t.Helper()
	root, err := conformance.Root()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := conformance.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, idx
}

// docs/conformance.md is what the generator writes from the registries and
// the tests as they are now.
func TestConformanceTableIsCurrent(t *testing.T) {
	root, idx := scan(t)
	want := conformance.Render(Contracts(), idx)
	got, err := os.ReadFile(filepath.Join(root, DocPath))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is stale (%v); run: go run ./internal/tools/conformance", DocPath, err)
	}
}

// Every registry holds (each statement proven or decided, every named test
// and ADR real), and every harness.Proves names a known contract's
// statement.
func TestEveryRegistryHoldsAndEveryProvesIsKnown(t *testing.T) {
	_, idx := scan(t)
	for _, p := range idx.Problems {
		t.Error(p)
	}
	known := map[string]bool{}
	for _, c := range Contracts() {
		known[c.Name] = true
		for _, p := range conformance.Problems(c, idx) {
			t.Errorf("%s: %s", c.Name, p)
		}
	}
	for id, tests := range idx.Proves {
		name, _, _ := strings.Cut(id, "/")
		if !known[name] {
			t.Errorf("%s names %q, of no known contract", strings.Join(tests, ", "), id)
		}
	}
}
