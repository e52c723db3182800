package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeEntry(t *testing.T, dir, id, modified string, modules ...string) {
	t.Helper()
	var affected []map[string]any
	for _, m := range modules {
		affected = append(affected, map[string]any{"package": map[string]string{"name": m, "ecosystem": "Go"},
			"ranges": []map[string]any{{"type": "SEMVER", "events": []map[string]string{{"introduced": "0"}, {"fixed": "1.2.3"}}}}})
	}
	b, _ := json.Marshal(map[string]any{"schema_version": "1.3.1", "id": id, "modified": modified, "affected": affected})
	if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBuildWritesTheV1Layout(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	writeEntry(t, src, "GO-2026-0002", "2026-03-01T00:00:00Z", "stdlib", "toolchain")
	writeEntry(t, src, "GO-2026-0001", "2026-05-01T00:00:00Z", "example.com/m", "stdlib")
	n, err := build(src, out)
	if err != nil || n != 2 {
		t.Fatalf("build = %d, %v", n, err)
	}
	var db dbMeta
	readJSON(t, filepath.Join(out, "index", "db.json"), &db)
	if want := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC); !db.Modified.Equal(want) {
		t.Errorf("db modified %v, want the newest entry's %v", db.Modified, want)
	}
	var mods []moduleMeta
	readJSON(t, filepath.Join(out, "index", "modules.json"), &mods)
	got := map[string][]string{}
	for _, m := range mods {
		for _, v := range m.Vulns {
			got[m.Path] = append(got[m.Path], v.ID)
		}
	}
	if len(mods) != 3 || len(got["stdlib"]) != 2 || got["stdlib"][0] != "GO-2026-0001" || got["toolchain"][0] != "GO-2026-0002" || got["example.com/m"][0] != "GO-2026-0001" {
		t.Errorf("modules index = %v", got)
	}
	for _, id := range []string{"GO-2026-0001", "GO-2026-0002"} {
		want, _ := os.ReadFile(filepath.Join(src, id+".json"))
		have, err := os.ReadFile(filepath.Join(out, "ID", id+".json"))
		if err != nil || string(have) != string(want) {
			t.Errorf("ID/%s.json not copied verbatim: %v", id, err)
		}
	}
}

func TestBuildRefusesBadEntries(t *testing.T) {
	for name, body := range map[string]string{
		"GO-1.json": `{"id": "GO-1", "modified": `,                        // truncated
		"GO-2.json": `{"id": "GO-3", "modified": "2026-01-01T00:00:00Z"}`, // id does not match the file
		"GO-4.json": `{"id": "", "modified": "2026-01-01T00:00:00Z"}`,
	} {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := build(src, t.TempDir()); err == nil {
			t.Errorf("%s: build accepted %s", name, body)
		}
	}
	if _, err := build(t.TempDir(), t.TempDir()); err == nil {
		t.Error("build accepted an empty source directory")
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
