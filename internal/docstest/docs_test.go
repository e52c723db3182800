package docstest

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/cli"
	"github.com/simlock/simlock/internal/config"
)

func readDoc(t *testing.T, name string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the part of doc from the heading line to the next
// heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no heading %q", heading)
	}
	rest := doc[i+1+len(heading):]
	level := strings.SplitN(heading, " ", 2)[0]
	for _, l := range []string{"\n# ", "\n## ", "\n### "} {
		if len(strings.TrimSpace(l)) > len(level) {
			break
		}
		if j := strings.Index(rest, l); j >= 0 {
			rest = rest[:j]
		}
	}
	return rest
}

// compare fails for each name in one set and not the other.
func compare(t *testing.T, what, docName string, code, doc []string) {
	t.Helper()
	for _, c := range code {
		if !slices.Contains(doc, c) {
			t.Errorf("%s %q exists in the code but %s does not document it", what, c, docName)
		}
	}
	for _, d := range doc {
		if !slices.Contains(code, d) {
			t.Errorf("%s documents %s %q, which the code does not have", docName, what, d)
		}
	}
}

func tableCodes() []string {
	var out []string
	for c := range contract.ErrorTable {
		out = append(out, string(c))
	}
	sort.Strings(out)
	return out
}

// The user guide's troubleshooting table names every code once, with the
// CLI exit code the error table gives it.
func TestUserGuideErrorTableMatchesTheContract(t *testing.T) {
	sec := section(t, readDoc(t, "user-guide.md"), "## Troubleshooting by error code")
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| .* \\| (\\d+) \\| .* \\|$")
	var doc []string
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		if slices.Contains(doc, m[1]) {
			t.Errorf("user-guide.md lists %s twice", m[1])
		}
		doc = append(doc, m[1])
		if info, ok := contract.ErrorTable[contract.Code(m[1])]; ok && strconv.Itoa(info.ExitCode) != m[2] {
			t.Errorf("user-guide.md gives %s exit code %s; the error table says %d", m[1], m[2], info.ExitCode)
		}
	}
	compare(t, "error code", "docs/user-guide.md", tableCodes(), doc)
}

// The protocol's code table names every code once with its kind, HTTP
// status and default retryability.
func TestProtocolErrorTableMatchesTheContract(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| (transport|protocol|domain|internal) \\| (\\d{3}) \\| (yes|no) \\|$")
	var doc []string
	for _, m := range row.FindAllStringSubmatch(readDoc(t, "protocol.md"), -1) {
		if slices.Contains(doc, m[1]) {
			t.Errorf("protocol.md lists %s twice", m[1])
		}
		doc = append(doc, m[1])
		info, ok := contract.ErrorTable[contract.Code(m[1])]
		if !ok {
			continue
		}
		if got := m[2] + " " + m[3] + " " + m[4]; got != string(info.Kind)+" "+strconv.Itoa(info.HTTPStatus)+" "+map[bool]string{true: "yes", false: "no"}[info.Retryable] {
			t.Errorf("protocol.md: %s is %q; the error table says %s %d retryable=%v", m[1], got, info.Kind, info.HTTPStatus, info.Retryable)
		}
	}
	compare(t, "error code", "docs/protocol.md", tableCodes(), doc)
}

// configKeys walks t's json tags: a nested struct is a group, a map of
// structs is keyed by a placeholder, anything else is one key.
func configKeys(t reflect.Type, prefix string, out *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			configKeys(f.Type, prefix, out) // encoding/json promotes its fields
			continue
		}
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		key := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			configKeys(ft, key+".", out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			configKeys(ft.Elem(), key+".<>.", out)
		default:
			*out = append(*out, key)
		}
	}
}

// The user guide's configuration table lists exactly the keys the daemon
// reads.
func TestUserGuideConfigTableMatchesTheConfig(t *testing.T) {
	var code []string
	configKeys(reflect.TypeOf(config.Default()), "", &code)
	sec := section(t, readDoc(t, "user-guide.md"), "## Configuration reference")
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z.<>]+)` \\|")
	placeholder := regexp.MustCompile("<[a-z]+>")
	var doc []string
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		doc = append(doc, placeholder.ReplaceAllString(m[1], "<>"))
	}
	if len(doc) < 20 {
		t.Fatalf("only %d rows found in the configuration table", len(doc))
	}
	compare(t, "config key", "docs/user-guide.md", code, doc)
}

// docCommands reads command paths from docs/cli.md: the headings
// ("### simlock lease renew", "### simlock simctl and simlock adb") and
// the first column of the Commands table (`token create/list/revoke`,
// `release ID` / `release --all`).
func docCommands(t *testing.T, doc string) []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	// words keeps the leading lower-case words of a command line: the
	// path, before any argument, flag or placeholder.
	word := regexp.MustCompile(`^[a-z][a-z/-]*$`)
	words := func(s string) []string {
		var w []string
		for _, f := range strings.Fields(s) {
			if !word.MatchString(f) {
				break
			}
			w = append(w, f)
		}
		return w
	}
	expand := func(w []string) {
		if len(w) == 0 {
			return
		}
		last := w[len(w)-1]
		for _, alt := range strings.Split(last, "/") {
			add(strings.Join(append(slices.Clone(w[:len(w)-1]), alt), " "))
		}
		for i := 1; i < len(w); i++ {
			add(strings.Join(w[:i], " "))
		}
	}
	heading := regexp.MustCompile("(?m)^### (simlock .*)$")
	for _, m := range heading.FindAllStringSubmatch(doc, -1) {
		for _, part := range strings.Split(m[1], " and ") {
			expand(words(strings.TrimPrefix(part, "simlock ")))
		}
	}
	sec := section(t, doc, "## Commands")
	if i := strings.Index(sec, "\n#"); i >= 0 {
		sec = sec[:i] // the table only, not the sections after it
	}
	row := regexp.MustCompile(`(?m)^\| ([^|]+) \|`)
	cell := regexp.MustCompile("`([^`]+)`")
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		for _, c := range cell.FindAllStringSubmatch(m[1], -1) {
			expand(words(c[1]))
		}
	}
	return out
}

// docs/cli.md documents exactly the commands the CLI has.
func TestCLIDocMatchesTheCommandTree(t *testing.T) {
	code := append(cli.CommandPaths(), "completion") // cobra adds completion at execution
	doc := docCommands(t, readDoc(t, "cli.md"))
	if len(doc) < 20 {
		t.Fatalf("only %d commands found in docs/cli.md", len(doc))
	}
	compare(t, "command", "docs/cli.md", code, doc)
}

// docs/cli.md's exit-code table puts every error code on the row of the
// exit code the error table gives it, and only there.
func TestCLIExitCodeTableMatchesTheErrorTable(t *testing.T) {
	sec := section(t, readDoc(t, "cli.md"), "## Exit codes")
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (.*) \|$`)
	code := regexp.MustCompile("`([A-Z][A-Z_]+)`")
	seen := map[contract.Code]int{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		exit, _ := strconv.Atoi(m[1])
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			cc := contract.Code(c[1])
			info, known := contract.ErrorTable[cc]
			if !known {
				t.Errorf("cli.md lists unknown code %s under exit %d", cc, exit)
				continue
			}
			if info.ExitCode != exit {
				t.Errorf("cli.md lists %s under exit %d; the error table says %d", cc, exit, info.ExitCode)
			}
			seen[cc] = exit
		}
	}
	for c := range contract.ErrorTable {
		if _, ok := seen[c]; !ok {
			t.Errorf("cli.md's exit-code table misses %s (exit %d)", c, contract.ErrorTable[c].ExitCode)
		}
	}
}
