package store

import (
	"context"
	"maps"
	"testing"
	"time"
)

func TestMeta(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	if v, ok, err := db.GetMeta(ctx, "missing"); err != nil || ok || v != "" {
		t.Fatalf("GetMeta(missing) = %q, %v, %v", v, ok, err)
	}
	for _, v := range []string{"one", "", "two"} {
		if err := db.SetMeta(ctx, "k", v); err != nil {
			t.Fatal(err)
		}
		got, ok, err := db.GetMeta(ctx, "k")
		if err != nil || !ok || got != v {
			t.Fatalf("after SetMeta(%q): GetMeta = %q, %v, %v", v, got, ok, err)
		}
	}
}

// Timings survive a reopen of the home's database, to the millisecond.
func TestTimingsRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, path := newTestDB(t)
	if m, err := db.LoadTimings(ctx); err != nil || len(m) != 0 {
		t.Fatalf("a new home has timings %v, %v", m, err)
	}
	want := map[string]time.Duration{"ios/boot@sdk-speed=0": 12 * time.Millisecond, "android/provision": 31 * time.Second}
	if err := db.SaveTimings(ctx, want); err != nil {
		t.Fatal(err)
	}
	db.Close()
	got, err := openAt(t, path).LoadTimings(ctx)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("after reopening: %v, %v; want %v", got, err, want)
	}
}
