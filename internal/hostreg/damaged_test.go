package hostreg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A host.db that is not a database, and one whose pages are malformed,
// are *DamagedError from Open, from Inspect and from a running DB's
// calls, naming the file and the repair; the file is left untouched.
func TestDamagedRegistryIsTyped(t *testing.T) {
	ctx := context.Background()
	for name, scramble := range map[string]func(t *testing.T, path string){
		"not a database": func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("garbage!", 1024)), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"malformed": func(t *testing.T, path string) {
			// Keep the 100-byte header, wreck every page after the first.
			b, err := os.ReadFile(path)
			if err != nil || len(b) < 8192 {
				t.Fatalf("read %s: %d bytes, %v", path, len(b), err)
			}
			for i := 4096; i < len(b); i++ {
				b[i] = 0xA5
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := OpenWithProber(ctx, dir, &fakeProber{})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Claim(ctx, leaseClaim(mustKey(t, udid1), ownerA, "l1")); err != nil {
				t.Fatal(err)
			}
			db.Close()
			path := filepath.Join(dir, FileName)
			os.Remove(path + "-wal")
			os.Remove(path + "-shm")
			scramble(t, path)
			before, _ := os.ReadFile(path)

			var de *DamagedError
			_, err = OpenWithProber(ctx, dir, &fakeProber{})
			if !errors.As(err, &de) || de.Path != path || !strings.Contains(err.Error(), RepairCommand) {
				t.Fatalf("Open of a damaged registry: %v", err)
			}
			if _, err := Inspect(ctx, dir, &fakeProber{}); !errors.As(err, &de) || de.Path != path {
				t.Fatalf("Inspect of a damaged registry: %v", err)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatal("a refused open or inspect changed the damaged file")
			}
		})
	}
}

// Reopen moves a DB to the file now at its path: after the old file was
// moved aside, writes land in a fresh, migrated registry.
func TestReopenFollowsAReplacedFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := OpenWithProber(ctx, dir, &fakeProber{procs: map[int]string{100: "t100"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	path := db.File()
	id1, err := FileIdentity(path)
	if err != nil || id1 == "" {
		t.Fatalf("identity %q %v", id1, err)
	}
	if err := db.Claim(ctx, leaseClaim(mustKey(t, udid1), ownerA, "l1")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Rename(path+s, path+".aside"+s)
	}
	if err := db.Reopen(ctx); err != nil {
		t.Fatal(err)
	}
	if id2, _ := FileIdentity(path); id2 == "" || id2 == id1 {
		t.Fatalf("identity after reopen %q (was %q)", id2, id1)
	}
	sts, err := db.Inspect(ctx)
	if err != nil || len(sts) != 0 {
		t.Fatalf("fresh registry lists %+v, %v", sts, err)
	}
	if err := db.Claim(ctx, leaseClaim(mustKey(t, "99999999-2222-3333-4444-555555555555"), ownerA, "l1")); err != nil {
		t.Fatal(err)
	}
	if sts, err := db.Inspect(ctx); err != nil || len(sts) != 1 || sts[0].Key != mustKey(t, "99999999-2222-3333-4444-555555555555") {
		t.Fatalf("after a claim on the reopened registry: %+v, %v", sts, err)
	}
}
