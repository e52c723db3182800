package listcache

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/ports/fake"
)

// A change to a watched directory (an install behind the driver's back)
// is seen within StampEvery with no process: the next Get reads again;
// an unchanged directory keeps the cached value.
func TestDirectoryChangeInvalidatesTheCachedListing(t *testing.T) {
	dir := t.TempDir()
	runtimes := filepath.Join(dir, "Runtimes")
	if err := os.Mkdir(runtimes, 0o755); err != nil {
		t.Fatal(err)
	}
	clock := fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := &source{value: "iOS 26.3"}
	c := New(Options[string]{TTL: time.Hour, Clock: clock, Read: s.read, Stamp: DirStamp(runtimes, filepath.Join(dir, "absent"))})
	ctx := context.Background()
	if v, _, _ := c.Get(ctx); v != "iOS 26.3" {
		t.Fatal(v)
	}
	clock.Advance(2 * time.Second)
	if _, cached, _ := c.Get(ctx); !cached || s.reads.Load() != 1 {
		t.Fatalf("unchanged directories re-read (reads %d)", s.reads.Load())
	}
	s.set("iOS 26.3, iOS 27.0", nil)
	if err := os.Mkdir(filepath.Join(runtimes, "iOS 27.0.simruntime"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Force a distinct mtime even on a coarse file system.
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(runtimes, future, future); err != nil {
		t.Fatal(err)
	}
	if _, cached, _ := c.Get(ctx); !cached {
		t.Fatal("stamp checked before StampEvery passed")
	}
	clock.Advance(2 * time.Second)
	v, cached, _ := c.Get(ctx)
	if cached || v != "iOS 26.3, iOS 27.0" || s.reads.Load() != 2 {
		t.Fatalf("after an install: %q cached=%v reads=%d", v, cached, s.reads.Load())
	}
}
