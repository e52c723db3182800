package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/transport/socket"
)

// scriptedStartup answers hello, and status.get with health "starting"
// for its first `starting` calls and then `then`: a daemon whose startup
// convergence takes as long as the test says.
type scriptedStartup struct {
	starting int32
	then     string
	calls    atomic.Int32
}

func (s *scriptedStartup) Hello(_ context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	return contract.HelloOut{Protocol: in.Protocol, Selected: contract.ProtocolMax, Role: contract.RoleAgent, Principal: in.Principal, Mode: "worker"},
		contract.Session{Role: contract.RoleAgent, Principal: in.Principal}, nil
}

func (s *scriptedStartup) Dispatch(_ context.Context, _ contract.Session, method string, _ json.RawMessage, _ func(string, any)) (any, func(), *contract.Error) {
	if method != contract.StatusGet.Name {
		return nil, nil, contract.Errorf(contract.CodeBadRequest, "unexpected %s", method)
	}
	health := "starting"
	if s.calls.Add(1) > s.starting {
		health = s.then
	}
	return contract.StatusGetOut{Daemon: contract.DaemonInfo{PID: 4242, Health: health, Mode: "worker"}}, nil, nil
}

// shortHome is a home whose socket path fits a unix socket's limit.
func shortHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "slc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return home
}

func serveScripted(t *testing.T, home string, d *scriptedStartup) {
	t.Helper()
	ln, err := net.Listen("unix", config.PathsFor(home).Socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &socket.Server{D: d}
	go func() { _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); ln.Close() })
}

// `daemon start` finding a daemon still converging waits until it runs,
// says on stderr that it waits once past a second, and prints it running:
// the next command of a script meets a ready daemon.
func TestDaemonStartWaitsForTheStartupConvergence(t *testing.T) {
	home := shortHome(t)
	d := &scriptedStartup{starting: 30, then: "running"} // ~1.5 s of 50 ms polls
	serveScripted(t, home, d)
	r := runCLI(t, nil, false, "--home", home, "daemon", "start", "--json")
	var out struct{ Health string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Health != "running" {
		t.Fatalf("exit %d stdout %q stderr %q, want health running", r.code, r.stdout, r.stderr)
	}
	if n := d.calls.Load(); n <= 30 {
		t.Fatalf("status asked %d times: start returned before the daemon ran", n)
	}
	if !strings.Contains(r.stderr, "waiting for the daemon") {
		t.Fatalf("a wait past a second said nothing: %q", r.stderr)
	}
}

// A daemon whose convergence failed is reported by `daemon start` with
// DAEMON_STARTUP_FAILED and its exit code, not printed as started.
func TestDaemonStartReportsAFailedConvergence(t *testing.T) {
	home := shortHome(t)
	serveScripted(t, home, &scriptedStartup{starting: 2, then: "failed"})
	r := runCLI(t, nil, false, "--home", home, "daemon", "start")
	if r.code != contract.InfoFor(contract.CodeDaemonStartupFailed).ExitCode || !strings.Contains(r.stderr, "DAEMON_STARTUP_FAILED") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
