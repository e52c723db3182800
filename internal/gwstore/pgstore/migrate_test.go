package pgstore

import (
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/simlock/simlock/internal/pgtest"
)

// TestOpenTogether opens one empty database from several stores at once,
// as gateways starting together do: the advisory lock lets one migrate
// and the others find the schema in place, applied once.
func TestOpenTogether(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	const gateways = 6
	var wg sync.WaitGroup
	errs := make(chan error, gateways)
	for range gateways {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(testCtx(t), dsn, 2)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Open: %v", err)
	}
	versions := queryInts(t, dsn, `SELECT version FROM schema_version ORDER BY version`)
	if len(versions) != len(migrations) || versions[len(versions)-1] != len(migrations) {
		t.Fatalf("schema_version rows %v; want 1..%d once each", versions, len(migrations))
	}
	// Reopening a current database changes nothing.
	openStore(t, dsn)
	if again := queryInts(t, dsn, `SELECT version FROM schema_version ORDER BY version`); len(again) != len(versions) {
		t.Fatalf("reopen added versions: %v", again)
	}
}

// TestNewerSchemaRefused: a database a newer simlock migrated is refused
// with the typed error, and nothing in it is changed.
func TestNewerSchemaRefused(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	s := openStore(t, dsn)
	s.Close()

	// A future binary's migration 2.
	future := append(append([]string(nil), migrations...), `CREATE TABLE from_the_future (x int)`)
	pool := openPool(t, dsn)
	if err := migrateTo(testCtx(t), pool, future); err != nil {
		t.Fatal(err)
	}
	before := queryInts(t, dsn, `SELECT version FROM schema_version ORDER BY version`)

	_, err := Open(testCtx(t), dsn, 2)
	var tooNew *SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Have != len(future) || tooNew.Know != len(migrations) {
		t.Fatalf("Open on a newer schema: %v; want SchemaTooNewError{Have: %d, Know: %d}", err, len(future), len(migrations))
	}
	if after := queryInts(t, dsn, `SELECT version FROM schema_version ORDER BY version`); len(after) != len(before) {
		t.Fatalf("the refused database changed: versions %v, then %v", before, after)
	}
	if n := queryInts(t, dsn, `SELECT count(*) FROM from_the_future`); n[0] != 0 {
		t.Fatalf("the future table changed")
	}
}

// TestMigrationIsAtomic: a migration that fails leaves no part of itself
// and no version row behind.
func TestMigrationIsAtomic(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	pool := openPool(t, dsn)
	broken := []string{`CREATE TABLE half_done (x int); SELECT no_such_function()`}
	if err := migrateTo(testCtx(t), pool, broken); err == nil {
		t.Fatal("a failing migration reported success")
	}
	if n := queryInts(t, dsn, `SELECT count(*) FROM pg_tables WHERE tablename IN ('half_done', 'schema_version')`); n[0] != 0 {
		t.Fatalf("a failed migration left %d tables behind", n[0])
	}
}

func queryInts(t *testing.T, dsn, sql string) []int {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
