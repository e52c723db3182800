package uploads

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// endsOn is a lease book whose every lease ends when the channel closes.
type endsOn chan struct{}

func (endsOn) Lease(id string) (core.LeaseRecord, bool) { return core.LeaseRecord{ID: id}, true }
func (c endsOn) LeaseEnded(string) <-chan struct{}      { return c }

// waitGone waits (bounded) for the watcher goroutine to remove a path.
func waitGone(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s still exists", path)
}

func TestUploadSweepKeepsOnlyLiveLeasesCommittedFiles(t *testing.T) {
	home := t.TempDir()
	root := filepath.Join(home, "uploads")
	for _, p := range []string{"lse_live/app.apk", "lse_live/" + PartialPrefix + "app.apk-1", "lse_gone/app.apk"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u := New(ctx, Config{Home: home, MaxBytes: 1 << 20, Leases: endsOn(live), Ends: endsOn(live), Log: slog.New(slog.DiscardHandler)})
	u.Sweep([]core.LeaseRecord{{ID: "lse_live"}})
	if _, err := os.Stat(filepath.Join(root, "lse_gone")); !os.IsNotExist(err) {
		t.Fatalf("an ended lease's uploads survived the sweep: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "lse_live"))
	if len(ents) != 1 || ents[0].Name() != "app.apk" {
		t.Fatalf("the live lease keeps %v", ents)
	}
	if p, err := u.path("lse_live", "app.apk"); err != nil || p != filepath.Join(root, "lse_live", "app.apk") {
		t.Fatalf("path after the sweep: %q %v", p, err)
	}
	// The swept lease is watched again: its end removes the directory.
	close(live)
	waitGone(t, filepath.Join(root, "lse_live"))
}
