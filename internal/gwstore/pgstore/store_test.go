package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/gateway/gatewaystoretest"
	"github.com/simlock/simlock/internal/pgtest"
)

// hangGuard bounds a test's waits; it is no performance bound.
const hangGuard = 2 * time.Minute

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn, 4)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestContract(t *testing.T) {
	srv := pgtest.Start(t)
	gatewaystoretest.Run(t, func(t *testing.T) gateway.Store {
		return openStore(t, srv.NewDatabase(t))
	})
}

func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
