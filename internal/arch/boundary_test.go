package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const module = "github.com/simlock/simlock"

// deps returns the full (transitive) import graph of pkg as "path std" pairs.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", module+"/"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return parsePairs(out)
}

// imports returns pkg's direct, non-test imports.
func imports(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{range .Imports}}{{.}} x{{"\n"}}{{end}}`, module+"/"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return parsePairs(out)
}

func parsePairs(out []byte) map[string]bool {
	m := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			m[f[0]] = f[1] == "true"
		}
	}
	return m
}

func TestContractImportsOnlyTheStandardLibrary(t *testing.T) {
	for p, std := range deps(t, "contract") {
		if !std && p != module+"/contract" {
			t.Errorf("contract depends on %s; the contract must import only the standard library", p)
		}
	}
}

// The OS version parser is shared by config validation and requirement
// resolution, which import each other's neighbours; a leaf that imports
// nothing of ours is what keeps it from closing a cycle.
func TestOSVersionIsALeaf(t *testing.T) {
	for p, std := range deps(t, "internal/osversion") {
		if !std && p != module+"/internal/osversion" {
			t.Errorf("internal/osversion depends on %s; it must import only the standard library", p)
		}
	}
}

// The core may import the ports package (interfaces plus their real
// adapters) but never reach processes, sockets, SQL or files itself, and
// never reach an outer layer even transitively.
// The dispatcher serves workers and gateways alike, so it must not know
// what a device is.
func TestDispatchKnowsOnlyTheContract(t *testing.T) {
	for p, std := range deps(t, "internal/dispatch") {
		if !std && p != module+"/internal/dispatch" && p != module+"/contract" && p != module+"/internal/core/events" {
			t.Errorf("internal/dispatch depends on %s", p)
		}
	}
}

// The gateway owns no devices: it reads worker views and forwards over
// uplinks. It may use the contract, the dispatcher, the ports and the event
// bus, and nothing that could give it an opinion about device state (the
// registry, capacity and lifecycle in internal/core, the drivers, the
// worker daemon, the store, the simulated SDK), not even transitively.
func TestGatewayNeverSeesADriver(t *testing.T) {
	allowed := map[string]bool{module + "/contract": true, module + "/internal/dispatch": true,
		module + "/internal/ports": true, module + "/internal/core/events": true, module + "/internal/waitq": true}
	for p := range imports(t, "internal/gateway") {
		first, _, _ := strings.Cut(p, "/")
		switch {
		case strings.HasPrefix(p, module+"/"):
			if !allowed[p] {
				t.Errorf("internal/gateway imports %s; it may import only contract, dispatch, ports, core/events and waitq", p)
			}
		case strings.Contains(first, "."):
			t.Errorf("internal/gateway imports %s; outside the module it may use only the standard library", p)
		}
	}
	banned := []string{module + "/internal/core", module + "/internal/drivers/", module + "/internal/daemon",
		module + "/internal/store", module + "/internal/simsdk", module + "/internal/transport/", module + "/client",
		module + "/internal/cli", module + "/internal/config"}
	for p := range deps(t, "internal/gateway") {
		for _, b := range banned {
			if p == b || strings.HasSuffix(b, "/") && strings.HasPrefix(p, b) {
				t.Errorf("internal/gateway depends on %s", p)
			}
		}
	}
}

// The wait queue is shared by the core and the gateway, so it may know
// neither (nor anything else in the module): only the standard library.
// TestMetricsSeeOnlyFactsAndTheContract keeps the metrics package a
// consumer of the bus and of status snapshots: it never reaches into the
// engine or a driver to measure something a second time.
func TestMetricsSeeOnlyFactsAndTheContract(t *testing.T) {
	for p := range deps(t, "internal/metrics") {
		if strings.HasPrefix(p, module+"/") && p != module+"/internal/metrics" && p != module+"/contract" && p != module+"/internal/core/events" {
			t.Errorf("internal/metrics depends on %s; it may use only contract and core/events", p)
		}
	}
}

func TestWaitQueueImportsOnlyTheStandardLibrary(t *testing.T) {
	for p, std := range deps(t, "internal/waitq") {
		if !std && p != module+"/internal/waitq" {
			t.Errorf("internal/waitq depends on %s", p)
		}
	}
}

func TestCoreReachesTheWorldOnlyThroughPorts(t *testing.T) {
	direct := []string{"os/exec", "net", "net/http", "database/sql", "syscall", "io/fs", "os"}
	outer := []string{module + "/internal/drivers/", module + "/internal/transport/", module + "/internal/daemon",
		module + "/internal/store", module + "/internal/cli", module + "/client", module + "/internal/simsdk",
		module + "/internal/config"}
	for _, pkg := range []string{"internal/core", "internal/core/events"} {
		for p := range imports(t, pkg) {
			for _, f := range direct {
				if p == f {
					t.Errorf("%s imports %s directly; go through internal/ports", pkg, p)
				}
			}
		}
		for p := range deps(t, pkg) {
			for _, f := range outer {
				if p == f || strings.HasSuffix(f, "/") && strings.HasPrefix(p, f) {
					t.Errorf("%s depends on outer layer %s", pkg, p)
				}
			}
		}
	}
}

// The drivers may use contract for the resource vocabulary only (ADR 0032):
// core.ResourceController speaks those types, and contract imports nothing
// but the standard library.
func TestDriversNeverSeeTheEventBusOrTheDaemon(t *testing.T) {
	for _, pkg := range []string{"internal/drivers/ios", "internal/drivers/android", "internal/drivers/fake", "internal/drivers/devroot"} {
		for p := range imports(t, pkg) {
			for _, f := range []string{"/internal/core/events", "/internal/daemon", "/internal/transport", "/internal/store", "/contract", "/internal/config"} {
				if p == module+"/contract" && f == "/contract" {
					continue // the resource vocabulary only (ADR 0032); its subpackages stay out
				}
				if p == module+f || strings.HasPrefix(p, module+f+"/") {
					t.Errorf("%s depends on %s", pkg, p)
				}
			}
		}
	}
}

// Wall-clock calls outside the ports make decisions untestable with the
// fake clock. The core and the drivers must take time from ports.Clock.
func TestNoDirectClockInCoreOrDrivers(t *testing.T) {
	banned := map[string]bool{"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "NewTimer": true,
		"NewTicker": true, "Tick": true, "Since": true, "Until": true}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..")
	for _, dir := range []string{"core", "core/events", "gateway", "drivers/ios", "drivers/android", "drivers/devroot"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			alias := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == `"time"` {
					alias = "time"
					if imp.Name != nil {
						alias = imp.Name.Name
					}
				}
			}
			if alias == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == alias && banned[sel.Sel.Name] {
					t.Errorf("%s: time.%s; use the ports.Clock instead", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// The core is platform-agnostic (adding a driver needs no core change): a
// driver declares what it supports (core.Capabilities) and the core asks.
// No Go token of internal/core outside comments and tests may name a
// platform: no string literal "ios" or "android", no identifier with a
// platform or platform tool word in it (AndroidHardware, IOSDriver,
// simctlList, adbPort, emulatorOpts, avdName).
func TestCoreNamesNoPlatform(t *testing.T) {
	platforms := map[string]bool{"ios": true, "android": true}
	words := map[string]bool{"ios": true, "android": true, "simctl": true, "adb": true, "emulator": true, "avd": true, "xcrun": true}
	_, self, _, _ := runtime.Caller(0)
	core := filepath.Join(filepath.Dir(self), "..", "core")
	err := filepath.WalkDir(core, func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0) // comments are not parsed
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if v, err := strconv.Unquote(n.Value); err == nil && platforms[strings.ToLower(v)] {
						t.Errorf("%s: platform name %s in the core; ask the driver's Capabilities instead", fset.Position(n.Pos()), n.Value)
					}
				}
			case *ast.Ident:
				for _, w := range identWords(n.Name) {
					if words[strings.ToLower(w)] {
						t.Errorf("%s: identifier %s names a platform in the core", fset.Position(n.Pos()), n.Name)
						break
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// identWords splits a Go identifier into its words: "AndroidHardware" is
// Android, Hardware; "IOSDriver" is IOS, Driver; "adb_port" is adb, port.
func identWords(name string) []string {
	var out []string
	rs := []rune(name)
	start := 0
	for i := 1; i <= len(rs); i++ {
		switch {
		case i == len(rs):
		case rs[i] == '_':
		case unicode.IsUpper(rs[i]) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])):
		case unicode.IsUpper(rs[i]) && unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
		default:
			continue
		}
		if w := strings.Trim(string(rs[start:i]), "_"); w != "" {
			out = append(out, w)
		}
		start = i
	}
	return out
}

func TestIdentWords(t *testing.T) {
	for in, want := range map[string]string{"AndroidHardware": "Android Hardware", "IOSDriver": "IOS Driver",
		"adb_port": "adb port", "simctlList": "simctl List", "Ios": "Ios", "loadBaseline": "load Baseline", "x": "x"} {
		if got := strings.Join(identWords(in), " "); got != want {
			t.Errorf("identWords(%q) = %q, want %q", in, got, want)
		}
	}
}

// The host registry is read by the daemon and, with no daemon running, by
// the CLI (`simlock device status`), so it depends on no package of the
// module but the SQLite plumbing it shares with the home store: it cannot
// pull the core or a driver into a status command, and its records cannot
// come to depend on a home's types.
func TestHostRegistryKnowsNothingOfTheModule(t *testing.T) {
	for p := range deps(t, "internal/hostreg") {
		if strings.HasPrefix(p, module+"/") && p != module+"/internal/hostreg" && p != module+"/internal/sqlitedb" {
			t.Errorf("internal/hostreg depends on %s", p)
		}
	}
	for p := range deps(t, "internal/sqlitedb") {
		if strings.HasPrefix(p, module+"/") && p != module+"/internal/sqlitedb" {
			t.Errorf("internal/sqlitedb depends on %s", p)
		}
	}
}

// The managed-slots system (internal/slots) reaches the engine and the
// host registry through the interfaces it declares, and serves its
// operations in the dispatcher's handler shape: it never depends on the
// daemon that wires it, a driver, a transport, the CLI, the home store or
// the daemon's config, not even transitively.
func TestSlotsReachTheEngineOnlyThroughTheirPorts(t *testing.T) {
	noDepsOn(t, "internal/slots", "internal/daemon", "internal/drivers/", "internal/transport/",
		"internal/cli", "internal/store", "internal/config", "internal/simsdk", "client")
}

// The session broker is one system (internal/sessions): it reaches the
// core, the store, the bus and the daemon through interfaces it declares,
// and the daemon only builds it and serves its operations. So it depends
// on no daemon, no driver, no frontend and no store, not even
// transitively: whatever of theirs it needs comes in through its Config.
func TestSessionsReachTheDaemonOnlyThroughTheirInterfaces(t *testing.T) {
	noDepsOn(t, "internal/sessions", "internal/daemon", "internal/drivers/", "internal/transport/",
		"internal/cli", "internal/store", "internal/simsdk", "client")
}

// The device-claims system and host capacity (internal/claims) build on
// the host registry and reach the engine, the bus and the daemon's driver
// wiring through the interfaces and Config fields they declare: they
// depend on no daemon, no driver, no frontend, no CLI and neither of the
// other systems, not even transitively.
func TestClaimsReachTheDaemonOnlyThroughTheirPorts(t *testing.T) {
	noDepsOn(t, "internal/claims", "internal/daemon", "internal/drivers/", "internal/transport/",
		"internal/cli", "internal/sessions", "internal/slots", "internal/simsdk", "client")
}

// The device-resources system (internal/resources: descriptions, the
// inventory, the resources.* operations) reaches the engine through the
// interfaces it declares, and builds its shared reads on the listing
// cache; it depends on no daemon, no concrete driver, no transport, no CLI
// and none of the other systems, not even transitively.
func TestResourcesReachTheEngineOnlyThroughTheirPorts(t *testing.T) {
	noDepsOn(t, "internal/resources", "internal/daemon", "internal/drivers/ios", "internal/drivers/android",
		"internal/transport/", "internal/cli", "internal/sessions", "internal/slots", "internal/claims", "internal/simsdk", "client")
}

// The per-lease uploads (internal/uploads) reach the engine's lease book
// through the interface they declare: they depend on no daemon, driver,
// transport, CLI or other system, not even transitively.
func TestUploadsReachTheEngineOnlyThroughTheirPorts(t *testing.T) {
	noDepsOn(t, "internal/uploads", "internal/daemon", "internal/drivers/", "internal/transport/",
		"internal/cli", "internal/sessions", "internal/slots", "internal/claims", "internal/simsdk", "client")
}

// noDepsOn fails for each package of the module that pkg depends on,
// directly or not, and that banned names: a path, or a prefix when it ends
// in a slash.
func noDepsOn(t *testing.T, pkg string, banned ...string) {
	t.Helper()
	for p := range deps(t, pkg) {
		for _, b := range banned {
			b = module + "/" + b
			if p == b || strings.HasPrefix(p, b+"/") || strings.HasSuffix(b, "/") && strings.HasPrefix(p, b) {
				t.Errorf("%s depends on %s", pkg, p)
			}
		}
	}
}
