package docstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every recipe says, before its first section, what it was checked with: a
// tool version that really ran, or, for a tool that cannot run on the CI
// machine, what stood in for it. A reader can then tell a recipe the suite
// runs from one that only follows the tool's documentation.
func TestEveryRecipeSaysWhatItWasCheckedWith(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "recipes", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recipes found: %v", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "README.md" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(raw), "\n## ")
		if !strings.Contains(head, "\nChecked with: ") {
			t.Errorf("%s: no \"Checked with:\" paragraph before its first section", filepath.Base(f))
		}
	}
}
