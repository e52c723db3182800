package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestServerLifecycle starts a server (logging how long that took, the
// figure the package comment quotes), reads and writes a fresh database,
// and checks that terminating and cutting a role reach its connections
// and only its.
func TestServerLifecycle(t *testing.T) {
	began := time.Now()
	s := Start(t)
	t.Logf("server started in %v", time.Since(began))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	dsn := s.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "on" {
		t.Fatalf("fsync = %q, want on: the stores under test promise durable writes", fsync)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if other := s.NewDatabase(t); other == dsn {
		t.Fatalf("NewDatabase returned the same DSN twice: %s", dsn)
	}

	victimDSN := s.NewUser(t, dsn, "victim")
	victim, err := pgx.Connect(ctx, victimDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close(ctx)
	var x int
	if err := victim.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 1 {
		t.Fatalf("victim reads x=%d, %v; want 1", x, err)
	}
	n, err := s.TerminateUser(ctx, "victim")
	if err != nil || n != 1 {
		t.Fatalf("TerminateUser = %d, %v; want 1 connection", n, err)
	}
	if err := victim.Ping(ctx); err == nil {
		t.Fatal("a terminated connection still answers")
	}
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("the superuser's connection was hit too: %v", err)
	}

	if err := s.CutUser(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(ctx, victimDSN); err == nil {
		c.Close(ctx)
		t.Fatal("a cut role could log in again")
	}
	if err := s.RestoreUser(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, victimDSN)
	if err != nil {
		t.Fatalf("a restored role cannot log in: %v", err)
	}
	c.Close(ctx)
}

// TestStopEndsTheServer checks that the cleanup really stops the
// postmaster: after stop, its exit has been observed and connecting fails.
func TestStopEndsTheServer(t *testing.T) {
	s := Start(t)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	default:
		t.Fatal("stop returned before the postmaster exited")
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if c, err := pgx.Connect(ctx, s.DSN("postgres")); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
}
