package hostreg

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// snapshot reads every file in dir (the database and any -wal/-shm).
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func sameFiles(t *testing.T, before, after map[string][]byte) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			t.Fatalf("%s changed", name)
		}
	}
}

// Inspection with every daemon stopped writes nothing: the directory's
// files are byte-identical before and after, and it sees every class.
func TestInspectWritesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := liveAB()
	db := openTest(t, dir, p)
	k1, k2, k3 := mustKey(t, udid1), mustKey(t, "22222222-2222-3333-4444-555555555555"), mustKey(t, "33333333-2222-3333-4444-555555555555")
	for _, c := range []Claim{leaseClaim(k1, ownerA, "lse_1"), leaseClaim(k2, ownerB, "lse_2")} {
		if err := db.Claim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.sql.Exec(`INSERT INTO claims (`+selectColumns+`) VALUES (?, 9, 'lease', '', '/x', 1, 's', 'l', 5, 'claimed', NULL)`, string(k3)); err != nil {
		t.Fatal(err)
	}
	db.Close() // every daemon stopped
	delete(p.procs, 200)

	before := snapshot(t, dir)
	all, err := Inspect(ctx, dir, p)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, before, snapshot(t, dir))
	got := map[Key]Class{}
	for _, st := range all {
		got[st.Key] = st.Class
	}
	want := map[Key]Class{k1: ClassClaimed, k2: ClassOrphaned, k3: ClassInconsistent}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, c := range want {
		if got[k] != c {
			t.Errorf("%s: %s, want %s", k, got[k], c)
		}
	}

	// With a writer open too, a claim still only in the WAL is seen, and
	// the database and the WAL are unchanged. The -shm is not compared: it
	// is SQLite's shared-memory index, where every reader beside a live
	// writer records its read mark; it holds no data.
	db2 := openTest(t, dir, p)
	k4 := mustKey(t, "44444444-2222-3333-4444-555555555555")
	if err := db2.Claim(ctx, leaseClaim(k4, ownerA, "lse_4")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+"-wal")); err != nil {
		t.Fatalf("no WAL with a writer open: %v", err)
	}
	before = snapshot(t, dir)
	all, err = Inspect(ctx, dir, p)
	if err != nil || len(all) != 4 {
		t.Fatalf("inspect beside a writer: %d claims, %v", len(all), err)
	}
	after := snapshot(t, dir)
	delete(before, FileName+"-shm")
	delete(after, FileName+"-shm")
	sameFiles(t, before, after)
	db2.Close()
}

func TestInspectOfNoRegistryCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	all, err := Inspect(context.Background(), dir, liveAB())
	if err != nil || len(all) != 0 {
		t.Fatalf("%v, %v", all, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("inspect created the directory: %v", err)
	}
}
