package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

func TestTokens(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	ci := TokenRecord{ID: "t1", Name: "ci", Role: "admin", Hash: "h1", CreatedAt: ms(1700000000000)}
	anon1 := TokenRecord{ID: "t2", Role: "client", Hash: "h2", CreatedAt: ms(1700000000001)}
	anon2 := TokenRecord{ID: "t3", Role: "client", Hash: "h3"} // zero CreatedAt sorts first
	for _, tok := range []TokenRecord{ci, anon1, anon2} {
		if err := db.CreateToken(ctx, tok); err != nil {
			t.Fatalf("CreateToken(%s): %v", tok.ID, err)
		}
	}

	dup := TokenRecord{ID: "t4", Name: "ci", Role: "client", Hash: "h4"}
	if err := db.CreateToken(ctx, dup); !errors.Is(err, ErrTokenNameTaken) {
		t.Fatalf("duplicate name: got %v, want ErrTokenNameTaken", err)
	}
	for _, bad := range []TokenRecord{
		{ID: "t1", Role: "client", Hash: "h5"}, // duplicate ID
		{ID: "t5", Role: "client", Hash: "h1"}, // duplicate hash
		{ID: "", Role: "client", Hash: "h6"},
		{ID: "t6", Role: "client", Hash: ""},
	} {
		err := db.CreateToken(ctx, bad)
		if err == nil || errors.Is(err, ErrTokenNameTaken) {
			t.Errorf("CreateToken(%+v) = %v, want a non-name error", bad, err)
		}
	}

	list, err := db.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []TokenRecord{anon2, ci, anon1}; !reflect.DeepEqual(list, want) {
		t.Errorf("ListTokens:\n got %+v\nwant %+v", list, want)
	}

	if got, ok, err := db.TokenByHash(ctx, "h1"); err != nil || !ok || got != ci {
		t.Errorf("TokenByHash(h1) = %+v, %v, %v", got, ok, err)
	}
	for _, h := range []string{"nope", ""} {
		if _, ok, err := db.TokenByHash(ctx, h); err != nil || ok {
			t.Errorf("TokenByHash(%q) = %v, %v", h, ok, err)
		}
	}

	if ok, err := db.RevokeToken(ctx, "t1"); err != nil || !ok {
		t.Fatalf("RevokeToken(t1) = %v, %v", ok, err)
	}
	if ok, err := db.RevokeToken(ctx, "t1"); err != nil || ok {
		t.Errorf("second RevokeToken(t1) = %v, %v", ok, err)
	}
	if _, ok, err := db.TokenByHash(ctx, "h1"); err != nil || ok {
		t.Errorf("revoked token still found: %v, %v", ok, err)
	}
	// Revoking frees the name.
	if err := db.CreateToken(ctx, dup); err != nil {
		t.Errorf("reuse of a revoked name: %v", err)
	}
}

// Racing creators of one name across two handles (two processes, in effect)
// must see exactly one winner and clean ErrTokenNameTaken for the rest. This
// is the read-decide-write case BEGIN IMMEDIATE exists for: a deferred
// transaction would fail with SQLITE_BUSY_SNAPSHOT instead.
func TestCreateTokenNameRace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "simlock.db")
	handles := []*DB{openAt(t, path), openAt(t, path)}
	const perHandle = 8
	var wg sync.WaitGroup
	results := make(chan error, len(handles)*perHandle)
	for h, db := range handles {
		for g := range perHandle {
			wg.Go(func() {
				id := fmt.Sprintf("t%d-%d", h, g)
				results <- db.CreateToken(ctx, TokenRecord{ID: id, Name: "shared", Role: "client", Hash: "hash-" + id})
			})
		}
	}
	wg.Wait()
	close(results)
	wins := 0
	for err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrTokenNameTaken):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d creators won, want 1", wins)
	}
}
