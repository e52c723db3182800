package ios

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/devroot"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

func newAt(t *testing.T, root string) (*Driver, error) {
	t.Helper()
	return New(Options{
		Root:   root,
		Runner: fake.NewRunner(),
		FS:     ports.OSFilesystem{},
		Clock:  fake.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)),
	})
}

func readMarkerFile(t *testing.T, root string) devroot.Marker {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, devroot.MarkerFile))
	if err != nil {
		t.Fatal(err)
	}
	var m devroot.Marker
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRootClaim(t *testing.T) {
	t.Run("creates and marks a missing root", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "a", "ios")
		d, err := newAt(t, root)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(root)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("root %v %v", st, err)
		}
		m := readMarkerFile(t, root)
		if m.Owner != "simlock" || m.Platform != "ios" || m.ID == "" || !m.CreatedAt.Equal(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)) {
			t.Fatalf("marker %+v", m)
		}
		if fi, _ := os.Stat(filepath.Join(root, devroot.MarkerFile)); fi.Mode().Perm() != 0o600 {
			t.Fatalf("marker mode %v", fi.Mode())
		}
		if err := d.RevalidateRoot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d.Root() != root {
			t.Fatal(d.Root())
		}
	})
	t.Run("marks an existing empty directory", func(t *testing.T) {
		root := t.TempDir()
		if _, err := newAt(t, root); err != nil {
			t.Fatal(err)
		}
		readMarkerFile(t, root)
	})
	t.Run("re-adopts its own marked root", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "ios")
		if _, err := newAt(t, root); err != nil {
			t.Fatal(err)
		}
		first := readMarkerFile(t, root)
		// A device set simctl populated meanwhile.
		if err := os.WriteFile(filepath.Join(root, "device_set.plist"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := newAt(t, root)
		if err != nil {
			t.Fatal(err)
		}
		if readMarkerFile(t, root).ID != first.ID || d.devRoot.ID() != first.ID {
			t.Fatal("marker rewritten")
		}
	})
	t.Run("refuses a non-empty unmarked directory", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "device_set.plist"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := newAt(t, root)
		if !errors.Is(err, core.ErrRootNotOwned) {
			t.Fatalf("error %v", err)
		}
		if _, statErr := os.Stat(filepath.Join(root, devroot.MarkerFile)); !errors.Is(statErr, os.ErrNotExist) {
			t.Fatal("marker written into a foreign directory")
		}
	})
	t.Run("refuses a foreign marker", func(t *testing.T) {
		root := t.TempDir()
		b, _ := json.Marshal(devroot.Marker{Owner: "simlock", Platform: "android", ID: "x"})
		if err := os.WriteFile(filepath.Join(root, devroot.MarkerFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newAt(t, root); !errors.Is(err, core.ErrRootNotOwned) {
			t.Fatalf("error %v", err)
		}
		// An id-less marker is not one the iOS driver ever wrote.
		b, _ = json.Marshal(devroot.Marker{Owner: "simlock", Platform: "ios"})
		if err := os.WriteFile(filepath.Join(root, devroot.MarkerFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newAt(t, root); !errors.Is(err, core.ErrRootNotOwned) {
			t.Fatalf("error %v", err)
		}
		if err := os.WriteFile(filepath.Join(root, devroot.MarkerFile), []byte("not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newAt(t, root); !errors.Is(err, core.ErrRootNotOwned) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("refuses a file and a relative path", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newAt(t, f); !errors.Is(err, core.ErrRootNotOwned) {
			t.Fatalf("error %v", err)
		}
		if _, err := newAt(t, "relative/ios"); err == nil {
			t.Fatal("relative root accepted")
		}
		if _, err := newAt(t, ""); err == nil {
			t.Fatal("empty root accepted")
		}
	})
}

func TestRevalidateRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ios")
	d, err := newAt(t, root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	marker := filepath.Join(root, devroot.MarkerFile)

	// Replaced by another claim (new id): not the root this driver proved.
	b, _ := json.Marshal(devroot.Marker{Owner: "simlock", Platform: "ios", ID: "someone-else"})
	if err := os.WriteFile(marker, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.RevalidateRoot(ctx); !errors.Is(err, core.ErrRootNotOwned) {
		t.Fatalf("error %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := d.RevalidateRoot(ctx); !errors.Is(err, core.ErrRootNotOwned) {
		t.Fatalf("error %v", err)
	}
}
