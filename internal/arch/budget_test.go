package arch

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Size budgets (ADR 0091). Issue 24 sets the goal: core.Engine at most 80
// methods and 25 fields, internal/daemon at most 3,500 lines of non-test
// Go. The restructure gets there in steps, so each budget is a ratchet: the
// figure the code has reached, which no change may grow. Lower a figure in
// the change that shrinks the code; never raise it to let a feature land
// on the engine or in the daemon: give the feature a book or a package.
const (
	engineMethodBudget = 80   // goal 80: met
	engineFieldBudget  = 19   // goal 25: met
	daemonLineBudget   = 3016 // goal 3,500: met
)

func TestEngineStaysWithinItsMethodAndFieldBudget(t *testing.T) {
	methods, fields := typeSize(t, "internal/core", "Engine")
	t.Logf("core.Engine: %d methods (budget %d), %d fields (budget %d)", methods, engineMethodBudget, fields, engineFieldBudget)
	if methods > engineMethodBudget {
		t.Errorf("core.Engine has %d methods, over its budget of %d: put the feature's methods on its book (ADR 0091)", methods, engineMethodBudget)
	}
	if fields > engineFieldBudget {
		t.Errorf("core.Engine has %d fields, over its budget of %d: a feature's state belongs to its book (ADR 0091)", fields, engineFieldBudget)
	}
}

func TestDaemonStaysWiring(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "internal", "daemon")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			lines++
		}
	}
	t.Logf("internal/daemon: %d lines of non-test Go (budget %d)", lines, daemonLineBudget)
	if lines > daemonLineBudget {
		t.Errorf("internal/daemon has %d lines of non-test Go, over its budget of %d: a system's rules belong in its own package (ADR 0091)", lines, daemonLineBudget)
	}
}

// typeSize counts the methods declared on typ (value or pointer receiver)
// in pkg's non-test files, and the fields of its struct.
func typeSize(t *testing.T, pkg, typ string) (methods, fields int) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), filepath.FromSlash(pkg))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 && recvName(d.Recv.List[0].Type) == typ {
					methods++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != typ {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						t.Fatalf("%s.%s is not a struct", pkg, typ)
					}
					found = true
					for _, fl := range st.Fields.List {
						fields += max(len(fl.Names), 1) // an embedded field has no names
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("no struct %s in %s", typ, pkg)
	}
	return methods, fields
}

func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if g, ok := e.(*ast.IndexExpr); ok {
		e = g.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// The daemon is the wiring (ADR 0091): it builds the systems, serves the
// handler table, and runs start and stop. Each file it may hold is named
// here with what it is for, so a system's rules cannot grow back into it
// unnoticed: a new file needs a row, and a reviewer who reads why.
var daemonFiles = map[string]string{
	"doc.go":          "the package doc: what the daemon is and is not",
	"daemon.go":       "start, readiness, stop: the order the systems come up and go down",
	"handlers.go":     "the handler table and the backbone's own operations (lease, status, events)",
	"errors.go":       "the one mapping of errors onto contract codes",
	"drivers.go":      "building the drivers from the configuration",
	"gateway_mode.go": "a daemon that fronts a fleet instead of devices",
	"metrics.go":      "the recorder: metrics, audit lines and journal writes behind the bus",
	"audit.go":        "the audit line format",
	"httpbackend.go":  "the HTTP transport's view of the daemon",
	"exec.go":         "device.exec and passthrough: running a tool for a lease holder",
	"target.go":       "lease.request's device selector, resolved through the claims system",
	"group.go":        "the shape check of a multi-device lease request",
	"warmpool.go":     "status.get's account of the warm targets",
	"sessions.go":     "wiring: the session broker (internal/sessions)",
	"slots.go":        "wiring: the slot manager (internal/slots)",
	"claims.go":       "wiring: the claims system (internal/claims)",
	"resources.go":    "wiring: the inventory and resources.* (internal/resources), uploads (internal/uploads)",
}

func TestDaemonHoldsOnlyTheFilesItNames(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "internal", "daemon", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		seen[name] = true
		if _, ok := daemonFiles[name]; !ok {
			t.Errorf("internal/daemon/%s is not a file the daemon holds: put a system's rules in its package, or name the file in daemonFiles with what it is for", name)
		}
	}
	for name := range daemonFiles {
		if !seen[name] {
			t.Errorf("daemonFiles names %s, which is gone: drop its row", name)
		}
	}
}
