package store

import (
	"context"
	"testing"
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
