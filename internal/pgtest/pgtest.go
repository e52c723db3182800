// Package pgtest starts a throwaway PostgreSQL server for a test: initdb
// into a temporary directory, a postmaster listening on a unix socket only,
// and a fresh database per caller. Tests that need PostgreSQL call Start;
// without the server binaries they skip, unless SIMLOCK_PG_TESTS=require
// (CI), where a missing server is a failure.
//
// Starting a server costs initdb plus the postmaster's start: 0.8 s
// measured on an idle 2-core machine, 2.7 s with other test binaries
// running beside it (TestServerLifecycle logs the figure). That is cheap
// enough for a server per test; a test that needs several databases calls
// NewDatabase on one server.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that turns a missing PostgreSQL into a
// test failure instead of a skip.
const RequireEnv = "SIMLOCK_PG_TESTS"

// Superuser is the role initdb creates; the harness connects as it.
const Superuser = "postgres"

// hangGuard bounds the waits for the server to start and to stop. It is a
// guard against a hung server, not a performance bound: a machine ten
// times slower than usual still starts PostgreSQL well within it.
const hangGuard = 2 * time.Minute

// Server is one running postmaster owned by a test.
type Server struct {
	root      string // temporary directory holding data, socket and log
	socketDir string
	logPath   string
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the postmaster has exited
	waitErr   error         // the postmaster's exit, valid after exited

	mu     sync.Mutex
	nextDB int
}

// Binaries finds initdb and postgres: on PATH first, then under Debian's
// /usr/lib/postgresql/<version>/bin (highest version first).
func Binaries() (initdb, postgres string, err error) {
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return initdb, postgres, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		in, pg := filepath.Join(dirs[i], "initdb"), filepath.Join(dirs[i], "postgres")
		if isExecutable(in) && isExecutable(pg) {
			return in, pg, nil
		}
	}
	return "", "", errors.New("pgtest: initdb and postgres are neither on PATH nor under /usr/lib/postgresql/*/bin")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start runs a new server for tb and stops it when tb ends. It skips tb
// when the binaries are missing (fails it under SIMLOCK_PG_TESTS=require).
func Start(tb testing.TB) *Server {
	tb.Helper()
	initdb, postgres, err := Binaries()
	if err != nil {
		if os.Getenv(RequireEnv) == "require" {
			tb.Fatalf("%s=require but PostgreSQL is missing: %v", RequireEnv, err)
		}
		tb.Skipf("PostgreSQL not installed (%v); set %s=require to make this a failure", err, RequireEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := start(ctx, initdb, postgres)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.stop(); err != nil {
			tb.Errorf("pgtest: stopping the server: %v", err)
		}
		if err := os.RemoveAll(s.root); err != nil {
			tb.Errorf("pgtest: removing %s: %v", s.root, err)
		}
	})
	return s
}

func start(ctx context.Context, initdb, postgres string) (_ *Server, err error) {
	// Not tb.TempDir: its parent is private to the test's user, and when
	// the test runs as root the server runs as another user that must
	// reach the socket and data directories.
	root, err := os.MkdirTemp("", "simlock-pg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(root)
		}
	}()
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", root, err)
	}
	s := &Server{
		root:      root,
		socketDir: filepath.Join(root, "sock"),
		logPath:   filepath.Join(root, "postgres.log"),
		exited:    make(chan struct{}),
	}
	dataDir := filepath.Join(root, "data")
	as, err := serverUser()
	if err != nil {
		return nil, err
	}
	for _, d := range []string{s.socketDir, dataDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("mkdir: %w", err)
		}
		if err := as.own(d); err != nil {
			return nil, err
		}
	}

	// --no-sync only skips initdb's final flush of the template files; the
	// server itself keeps fsync on, since the stores tested here promise
	// that a write is durable when it returns.
	var out bytes.Buffer
	init := exec.CommandContext(ctx, initdb, "-D", dataDir, "-U", Superuser, "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	init.Stdout, init.Stderr = &out, &out
	init.Env = as.env()
	as.apply(init)
	if err := init.Run(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out.String())
	}

	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer logf.Close() // the child holds its own copy of the descriptor
	s.cmd = exec.Command(postgres, "-D", dataDir, "-k", s.socketDir,
		"-c", "listen_addresses=", "-c", "fsync=on", "-c", "shared_buffers=32MB",
		"-c", "max_connections=200")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = as.env()
	as.apply(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.stop()
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, s.logTail())
	}
	return s, nil
}

// waitReady polls until the server accepts a connection, the postmaster
// exits, or ctx ends. Polling is the only signal PostgreSQL gives: the
// socket file appears before the server accepts logins.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited before accepting connections: %v", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections: %w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop asks for a fast shutdown (SIGINT: roll back open transactions,
// close sessions, checkpoint) and waits; a server that hangs past the
// guard is killed.
func (s *Server) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("signal: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(hangGuard):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("postgres ignored SIGINT for %v and was killed", hangGuard)
	}
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// SocketDir is the directory holding the server's unix socket.
func (s *Server) SocketDir() string { return s.socketDir }

// DSN is the pgx connection string for database db as the superuser.
func (s *Server) DSN(db string) string { return s.UserDSN(db, Superuser) }

// UserDSN is the pgx connection string for database db as role user.
func (s *Server) UserDSN(db, user string) string {
	return fmt.Sprintf("host=%s user=%s dbname=%s sslmode=disable", s.socketDir, user, db)
}

// NewDatabase creates an empty database and returns its superuser DSN.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	s.nextDB++
	name := fmt.Sprintf("db%d", s.nextDB)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := s.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return s.DSN(name)
}

// NewUser creates a login role and returns its DSN for the database in
// dsn. The role is a superuser so that objects one role creates are usable
// by another without grants; what a test wants from separate roles is to
// cut one client off (CutUser) while another stays connected.
func (s *Server) NewUser(tb testing.TB, dsn, user string) string {
	tb.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := s.Exec(ctx, "CREATE ROLE "+pgx.Identifier{user}.Sanitize()+" LOGIN SUPERUSER"); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return s.UserDSN(cfg.Database, user)
}

// Exec runs one statement on the server's maintenance database as the
// superuser, on a connection of its own.
func (s *Server) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", firstWord(sql), err)
	}
	return nil
}

func firstWord(sql string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	return w
}

// TerminateUser ends every server process serving role user
// (pg_terminate_backend), as if the connections had been killed, and
// reports how many there were. The client may reconnect at once.
func (s *Server) TerminateUser(ctx context.Context, user string) (int, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE usename = $1 AND pid <> pg_backend_pid()`, user).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("terminate %s: %w", user, err)
	}
	return n, nil
}

// CutUser cuts role user off the server: new logins are refused and its
// open connections are terminated, so the client sees the database gone
// while every other role keeps working. RestoreUser lets it back in.
func (s *Server) CutUser(ctx context.Context, user string) error {
	if err := s.Exec(ctx, "ALTER ROLE "+pgx.Identifier{user}.Sanitize()+" NOLOGIN"); err != nil {
		return err
	}
	_, err := s.TerminateUser(ctx, user)
	return err
}

// RestoreUser undoes CutUser.
func (s *Server) RestoreUser(ctx context.Context, user string) error {
	return s.Exec(ctx, "ALTER ROLE "+pgx.Identifier{user}.Sanitize()+" LOGIN")
}
