// Package conformance holds the machinery of the conformance suites: one
// statement registry per reference contract (test/conformance/<contract>),
// a scan of the repository's tests for what each proves, the check that
// every statement is proven or deliberately decided, and the renderer of
// docs/conformance.md.
//
// A statement is one requirement of a reference text, identified by the
// reference's own section structure ("claims/8.2": the contract, the
// section number in the reference's heading order, the item within it),
// and paraphrased, never quoted. It is proven by tests (conformance tests
// mark themselves with harness.Proves; other tests, e2e or unit, are named
// in the registry), or it is a deliberate deviation decided by an ADR.
// A statement with neither is open: the check fails on it unless its
// registry declares the gap (what is missing), which the table then shows.
package conformance

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Contract is one reference text and its statements.
type Contract struct {
	// Name prefixes every statement id ("claims").
	Name string
	// Title is how the docs name the contract ("Device claims").
	Title string
	// Reference is the reference text's file name.
	Reference string
	// Surface is what the contract's own suite drives, in a few words.
	Surface string
	// Sections are the reference's headings, numbered in their order.
	Sections []Section
	// Unlisted says why sections with no statement have none.
	Unlisted string
	// Statements are the reference's requirements, in section order.
	Statements []Statement
}

// Section is one heading of a reference, numbered by its position.
type Section struct {
	N       int
	Heading string
}

// Headings numbers a reference's headings in their order, from 1.
func Headings(headings ...string) []Section {
	out := make([]Section, len(headings))
	for i, h := range headings {
		out[i] = Section{N: i + 1, Heading: h}
	}
	return out
}

// Statement is one requirement of a reference.
type Statement struct {
	// ID is "<contract>/<section>.<item>".
	ID string
	// Says paraphrases the requirement in the project's own words.
	Says string
	// Tests prove it besides the conformance tests that name it with
	// harness.Proves: "<package dir>.<TestName>", e.g.
	// "test/e2e.TestCorruptClaimNeedsForce".
	Tests []string
	// ADR is the number ("0079") of the decision to deviate from it, in
	// whole or in part; Note then says how simlock differs.
	ADR string
	// Note says, briefly, how simlock meets or departs from it.
	Note string
	// Gap declares a statement simlock does not meet yet and says what is
	// missing. A declared gap keeps the check green and shows as open in
	// the table (and in its issue's count); an undeclared open statement
	// fails the check, and so does a gap next to a test or an ADR.
	Gap string
}

// Status is where a statement stands.
type Status string

const (
	Proven    Status = "proven"
	Deviating Status = "deviating"
	Open      Status = "open"
)

// StatusOf judges a statement given the tests the scan found naming it.
func StatusOf(s Statement, scanned []string) Status {
	switch {
	case s.ADR != "":
		return Deviating
	case len(s.Tests)+len(scanned) > 0:
		return Proven
	}
	return Open
}

// Index is what a scan of the repository's tests found.
type Index struct {
	// Tests holds every top-level test function as "<dir>.<Name>".
	Tests map[string]bool
	// Proves maps a statement id to the tests whose harness.Proves names it.
	Proves map[string][]string
	// Problems are Proves calls the scan could not attribute or read.
	Problems []string
	// ADRs maps an ADR number to its file name under docs/adr.
	ADRs map[string]string
}

// Root is the repository's root directory.
func Root() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if ok {
		root := filepath.Join(filepath.Dir(self), "..", "..")
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Clean(root), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Scan reads every _test.go file under root for test functions and the
// statements their harness.Proves calls name, and lists docs/adr.
func Scan(root string) (*Index, error) {
	idx := &Index{Tests: map[string]bool{}, Proves: map[string][]string{}, ADRs: map[string]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil {
				continue
			}
			name := rel + "." + fn.Name.Name
			isTest := strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain"
			if isTest {
				idx.Tests[name] = true
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Proves" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "harness" {
					return true
				}
				pos := fset.Position(call.Pos())
				if !isTest {
					idx.Problems = append(idx.Problems, fmt.Sprintf("%s: harness.Proves outside a test function (%s)", pos, fn.Name.Name))
					return true
				}
				if len(call.Args) < 2 {
					idx.Problems = append(idx.Problems, fmt.Sprintf("%s: harness.Proves names no statement", pos))
					return true
				}
				for _, a := range call.Args[1:] {
					lit, ok := a.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						idx.Problems = append(idx.Problems, fmt.Sprintf("%s: harness.Proves takes string literals, so the check can read them", pos))
						continue
					}
					id, _ := strconv.Unquote(lit.Value)
					if !slices.Contains(idx.Proves[id], name) {
						idx.Proves[id] = append(idx.Proves[id], name)
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id := range idx.Proves {
		sort.Strings(idx.Proves[id])
	}
	adrs, err := os.ReadDir(filepath.Join(root, "docs", "adr"))
	if err != nil {
		return nil, err
	}
	for _, e := range adrs {
		if m := adrName.FindStringSubmatch(e.Name()); m != nil {
			idx.ADRs[m[1]] = e.Name()
		}
	}
	return idx, nil
}

var (
	adrName = regexp.MustCompile(`^(\d{4})-.*\.md$`)
	idShape = regexp.MustCompile(`^([a-z]+)/(\d+)\.(\d+)$`)
)

// Problems lists everything wrong with one contract's registry against the
// scan: malformed or repeated ids, a statement with neither a test nor an
// ADR, a named test or ADR that does not exist, and a Proves call naming
// a statement of this contract that the registry does not have.
func Problems(c Contract, idx *Index) []string {
	var out []string
	sections := map[int]bool{}
	for _, s := range c.Sections {
		sections[s.N] = true
	}
	seen := map[string]bool{}
	for _, s := range c.Statements {
		m := idShape.FindStringSubmatch(s.ID)
		switch {
		case m == nil || m[1] != c.Name:
			out = append(out, fmt.Sprintf("%s: an id is <%s>/<section>.<item>", s.ID, c.Name))
			continue
		case seen[s.ID]:
			out = append(out, fmt.Sprintf("%s: listed twice", s.ID))
		}
		seen[s.ID] = true
		if n, _ := strconv.Atoi(m[2]); !sections[n] {
			out = append(out, fmt.Sprintf("%s: the reference has no section %d", s.ID, n))
		}
		if strings.TrimSpace(s.Says) == "" {
			out = append(out, fmt.Sprintf("%s: says nothing", s.ID))
		}
		switch st := StatusOf(s, idx.Proves[s.ID]); {
		case st == Open && strings.TrimSpace(s.Gap) == "":
			out = append(out, fmt.Sprintf("%s is open: no test proves it, no ADR decides a deviation and no gap is declared", s.ID))
		case st != Open && s.Gap != "":
			out = append(out, fmt.Sprintf("%s declares a gap but is %s: clear the gap", s.ID, st))
		}
		for _, t := range s.Tests {
			if !idx.Tests[t] {
				out = append(out, fmt.Sprintf("%s names test %s, which does not exist", s.ID, t))
			}
		}
		if s.ADR != "" && idx.ADRs[s.ADR] == "" {
			out = append(out, fmt.Sprintf("%s names ADR %s, which docs/adr does not have", s.ID, s.ADR))
		}
		if s.ADR != "" && strings.TrimSpace(s.Note) == "" {
			out = append(out, fmt.Sprintf("%s deviates (ADR %s) but its note does not say how", s.ID, s.ADR))
		}
	}
	for id, tests := range idx.Proves {
		if strings.HasPrefix(id, c.Name+"/") && !seen[id] {
			out = append(out, fmt.Sprintf("%s names statement %s, which the %s registry does not have", strings.Join(tests, ", "), id, c.Name))
		}
	}
	sort.Strings(out)
	return out
}

// Counts tallies a contract's statements by status.
func Counts(c Contract, idx *Index) map[Status]int {
	n := map[Status]int{}
	for _, s := range c.Statements {
		n[StatusOf(s, idx.Proves[s.ID])]++
	}
	return n
}
