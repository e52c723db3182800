// Command vulndbindex turns a flat directory of OSV entries (the data/osv
// folder of the golang.org/x/vulndb module, which ships no index) into the
// v1 layout `govulncheck -db file://DIR` reads: index/db.json,
// index/modules.json and ID/<id>.json. CI runs it so govulncheck works
// offline against a pinned copy of the database.
//
//	go run ./internal/tools/vulndbindex -src "$VULNDB/data/osv" -out "$TMP/vulndb"
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	src := flag.String("src", "", "directory holding <id>.json OSV entries")
	out := flag.String("out", "", "directory to write the v1 database into (created)")
	flag.Parse()
	if *src == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: vulndbindex -src OSV_DIR -out DB_DIR")
		os.Exit(2)
	}
	n, err := build(*src, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndbindex:", err)
		os.Exit(1)
	}
	fmt.Printf("vulndbindex: %d entries indexed into %s\n", n, *out)
}

// entry is the part of an OSV record the index needs.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

type dbMeta struct {
	Modified time.Time `json:"modified"`
}

// moduleVuln leaves out the optional "fixed" version: it only lets the
// client skip fetching entries a module version is past, and getting it
// wrong would hide a vulnerability. Without it the client reads every
// entry of the module and decides from the entry's own ranges.
type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
}

type moduleMeta struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

// build indexes every *.json in src into out and returns how many entries
// it wrote. An unreadable or malformed entry fails the whole run: a
// silently partial database would under-report.
func build(src, out string) (int, error) {
	files, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV entries in %s", src)
	}
	if err := os.MkdirAll(filepath.Join(out, "index"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(out, "ID"), 0o755); err != nil {
		return 0, err
	}
	var db dbMeta
	modules := map[string]*moduleMeta{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" || strings.ContainsAny(e.ID, `/\`) {
			return 0, fmt.Errorf("%s: missing or unusable id %q", f, e.ID)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".json"); want != e.ID {
			return 0, fmt.Errorf("%s: holds id %q", f, e.ID)
		}
		if e.Modified.After(db.Modified) {
			db.Modified = e.Modified
		}
		seen := map[string]bool{}
		for _, a := range e.Affected {
			p := a.Package.Name
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			m := modules[p]
			if m == nil {
				m = &moduleMeta{Path: p}
				modules[p] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), b, 0o644); err != nil {
			return 0, err
		}
	}
	list := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		sort.Slice(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		list = append(list, m)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	if err := writeJSON(filepath.Join(out, "index", "db.json"), db); err != nil {
		return 0, err
	}
	if err := writeJSON(filepath.Join(out, "index", "modules.json"), list); err != nil {
		return 0, err
	}
	return len(files), nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
