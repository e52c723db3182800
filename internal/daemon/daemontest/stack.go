// Package daemontest starts a real worker daemon for tests of the
// frontends: the real dispatcher, handlers, engine and store (in a fresh
// temporary home), driven by the scripted fake driver and a fake clock, so
// a frontend test exercises the code that serves production and nothing
// moves unless the test says so.
//
// One constructor, Start; everything else is a small convenience over the
// daemon's exported API. It is a test helper: nothing outside tests may
// import it.
package daemontest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/dispatch"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// Epoch is the time the fake clock reads when a stack starts.
func Epoch() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// Options shape a stack. The zero value is one iOS device slot.
type Options struct {
	// Devices is the fixed capacity (maxRunning and maxManaged) of the
	// iOS driver; 0 means 1. Devices are provisioned on first demand.
	Devices int
	// Config, when set, edits the configuration before the daemon starts
	// (capacity, TTLs, the event ring and so on).
	Config func(*config.Config)
	// Extra drivers serve other platforms beside the iOS fake (an
	// "android" fake, say).
	Extra []core.Driver
}

// Stack is one running daemon. Its fields are the handles a test scripts.
type Stack struct {
	T      testing.TB
	Daemon *daemon.Daemon
	// Clock drives the engine (TTLs, queue timeouts, health ticks, the
	// reaper). Pass it to a frontend too so both move together.
	Clock *fake.Clock
	// Driver is the iOS fake driver: crash, vanish, gate or fail devices.
	Driver *fakedrv.Driver
	// Runner runs device.exec commands. The fake driver's tool "fakectl"
	// echoes its own arguments (after the driver's --root prefix) on
	// stdout and its stdin on stderr; a first argument "fail" exits 3.
	Runner *fake.Runner
	Home   string
	// Config is the configuration the daemon started with.
	Config config.Config
}

// Start starts a daemon and waits until it is ready; it stops when the
// test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	if o.Devices <= 0 {
		o.Devices = 1
	}
	// Not t.TempDir: the unix socket lives in the home, and a path under a
	// long test name can exceed the socket path limit.
	home, err := os.MkdirTemp("", "slt-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: o.Devices, MaxManaged: o.Devices}
	if o.Config != nil {
		o.Config(&cfg)
	}
	s := &Stack{T: t, Clock: fake.NewClock(Epoch()), Driver: fakedrv.New("ios"), Runner: fake.NewRunner(), Home: home, Config: cfg}
	s.Runner.Always(fake.Step{Match: "fakectl --root /fake/ios fail*", Do: echo, ExitCode: 3})
	s.Runner.Always(fake.Step{Match: "fakectl *", Do: echo})
	d, err := daemon.Start(context.Background(), daemon.Options{Home: home, Config: cfg, Version: "test", HostDir: filepath.Join(home, "hostreg"),
		Clock: s.Clock, Runner: s.Runner, Stats: &fake.Stats{CPUs: 8, TotalRAM: 16 << 30, FreeRAM: 8 << 30, FreeDisk: 100 << 30},
		Drivers: append([]core.Driver{s.Driver}, o.Extra...)})
	if err != nil {
		os.RemoveAll(home)
		t.Fatal(err)
	}
	s.Daemon = d
	t.Cleanup(func() {
		d.Stop()
		os.RemoveAll(home)
	})
	// Any gated operation parks until the daemon is ready; status.get
	// answers before, so wait on an operation that parks.
	s.Admin(contract.LeaseList.Name, contract.LeaseListIn{}, nil)
	return s
}

// echo is the fake tool's behaviour (see Stack.Runner).
func echo(_ context.Context, c ports.Command) error {
	args := c.Args
	if len(args) >= 2 && args[0] == "--root" {
		args = args[2:]
	}
	if c.Stdout != nil {
		fmt.Fprintln(c.Stdout, strings.Join(args, " "))
	}
	if c.Stdin != nil && c.Stderr != nil {
		b := make([]byte, 1<<16)
		n, _ := c.Stdin.Read(b)
		c.Stderr.Write(b[:n])
	}
	return nil
}

// Backend is the daemon's own HTTP backend, to put an httpapi.Server in
// front of the stack.
func (s *Stack) Backend() httpapi.Backend { return s.Daemon.HTTPBackend() }

// AdminSession is the session Admin dispatches with.
func AdminSession() contract.Session {
	return contract.Session{Principal: "test-admin", Role: contract.RoleAdmin, Compatible: true}
}

// Admin runs one operation through the real dispatcher as an admin and
// decodes its result into out (when non-nil); a refusal fails the test.
func (s *Stack) Admin(method string, in, out any) {
	s.T.Helper()
	if err := s.Dispatch(AdminSession(), method, in, out); err != nil {
		s.T.Fatalf("%s: %v", method, err)
	}
}

// Dispatch runs one operation through the real dispatcher as sess.
func (s *Stack) Dispatch(sess contract.Session, method string, in, out any) *contract.Error {
	params, err := json.Marshal(in)
	if err != nil {
		s.T.Fatal(err)
	}
	call := &dispatch.Call{Session: sess, Notify: func(string, any) {}}
	res, cerr := s.Daemon.Dispatcher().Dispatch(context.Background(), call, method, params)
	call.RunAfter()
	if cerr != nil {
		return cerr
	}
	if out != nil {
		b, _ := json.Marshal(res)
		if err := json.Unmarshal(b, out); err != nil {
			s.T.Fatal(err)
		}
	}
	return nil
}

// Token mints an API token of role (agent, operator, worker) named name
// and returns its secret and the principal a bearer of it acts as.
func (s *Stack) Token(role, name string) (secret, principal string) {
	s.T.Helper()
	var out contract.TokenCreateOut
	s.Admin(contract.TokenCreate.Name, contract.TokenCreateIn{Role: role, Name: name}, &out)
	return out.Token, "token:" + out.ID
}

// Queued reports how many lease requests wait in the engine's queue.
func (s *Stack) Queued() int { return len(s.Daemon.Engine().Queue()) }

// Handle returns the driver handle of a device (what the fake driver's
// Crash and Vanish take).
func (s *Stack) Handle(deviceID string) string {
	s.T.Helper()
	d, ok := s.Daemon.Engine().Device(deviceID)
	if !ok {
		s.T.Fatalf("no device %s", deviceID)
	}
	return d.Handle
}

// HealthTicks advances the clock by n health-monitor intervals, one at a
// time: the health monitor re-arms only after a tick's pass, so each
// Advance runs exactly one. The monitor's debounce needs
// Config.Health.StableObservations ticks to call a device crashed or
// missing.
func (s *Stack) HealthTicks(n int) {
	for range n {
		s.Clock.Advance(time.Duration(s.Config.Health.IntervalMs) * time.Millisecond)
	}
}
