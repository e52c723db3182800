package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tiny repository: one test proving x/1.1, one naming an unknown x/1.9,
// and one ADR.
func fixture(t *testing.T) *Index {
	t.Helper()
	root := t.TempDir()
	write := func(path, body string) {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/adr/0007-a-choice.md", "# 7\n")
	write("suite/x_test.go", `package suite
func TestProvesOne(t *testing.T) { harness.Proves(t, "x/1.1") }
func TestProvesUnknown(t *testing.T) { harness.Proves(t, "x/1.9") }
func helper(t *testing.T) { harness.Proves(t, "x/1.1") }
`)
	write("other/y_test.go", "package other\nfunc TestElsewhere(t *testing.T) {}\n")
	idx, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestScanFindsTestsAndWhatTheyProve(t *testing.T) {
	idx := fixture(t)
	if !idx.Tests["other.TestElsewhere"] || !idx.Tests["suite.TestProvesOne"] {
		t.Fatalf("tests %v", idx.Tests)
	}
	if got := idx.Proves["x/1.1"]; len(got) != 1 || got[0] != "suite.TestProvesOne" {
		t.Fatalf("x/1.1 proven by %v", got)
	}
	if len(idx.Problems) != 1 || !strings.Contains(idx.Problems[0], "outside a test function") {
		t.Fatalf("problems %v", idx.Problems)
	}
	if idx.ADRs["0007"] != "0007-a-choice.md" {
		t.Fatalf("ADRs %v", idx.ADRs)
	}
}

// The check fails on an open statement, a test or ADR that does not exist,
// a deviation without its note, a bad or repeated id, and a Proves naming
// a statement the registry lacks; a proven and a decided statement pass.
func TestProblemsCatchEveryGap(t *testing.T) {
	idx := fixture(t)
	c := Contract{Name: "x", Sections: Headings("One", "Two"), Statements: []Statement{
		{ID: "x/1.1", Says: "proven by a conformance test"},
		{ID: "x/1.2", Says: "proven elsewhere", Tests: []string{"other.TestElsewhere"}},
		{ID: "x/1.3", Says: "decided", ADR: "0007", Note: "how it differs"},
		{ID: "x/1.4", Says: "open"},
		{ID: "x/1.6", Says: "a declared gap", Gap: "what is missing"},
		{ID: "x/1.7", Says: "a gap next to its proof", Gap: "stale", Tests: []string{"other.TestElsewhere"}},
		{ID: "x/1.5", Says: "a test that is gone", Tests: []string{"other.TestGone"}},
		{ID: "x/2.1", Says: "an ADR that is not there", ADR: "0999", Note: "n"},
		{ID: "x/2.2", Says: "a deviation that says nothing", ADR: "0007"},
		{ID: "x/3.1", Says: "no such section", Tests: []string{"other.TestElsewhere"}},
		{ID: "x/1.2", Says: "twice", Tests: []string{"other.TestElsewhere"}},
		{ID: "y/1.1", Says: "another contract's id"},
	}}
	got := strings.Join(Problems(c, idx), "\n")
	for _, want := range []string{
		"x/1.4 is open", "other.TestGone, which does not exist", "ADR 0999, which docs/adr does not have",
		"x/2.2 deviates (ADR 0007) but its note", "x/3.1: the reference has no section 3", "x/1.2: listed twice",
		"y/1.1: an id is", "names statement x/1.9, which the x registry does not have",
		"x/1.7 declares a gap but is proven",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	for _, ok := range []string{"x/1.1 ", "x/1.3 ", "x/1.6 "} {
		if strings.Contains(got, ok) {
			t.Errorf("%s should pass:\n%s", ok, got)
		}
	}
	n := Counts(Contract{Name: "x", Statements: c.Statements[:4]}, idx)
	if n[Proven] != 2 || n[Deviating] != 1 || n[Open] != 1 {
		t.Errorf("counts %v", n)
	}
}
