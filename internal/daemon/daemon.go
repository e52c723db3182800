package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/version"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/claims"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/resources"
	"github.com/simlock/simlock/internal/sessions"
	"github.com/simlock/simlock/internal/slots"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/transport/httpapi"
	"github.com/simlock/simlock/internal/transport/socket"
	"github.com/simlock/simlock/internal/transport/uplink"
	"github.com/simlock/simlock/internal/uploads"
)

// Options configure a daemon. Zero-valued ports get their real adapters.
type Options struct {
	Home    string
	Config  config.Config
	Version string
	Clock   ports.Clock
	Runner  ports.ProcessRunner
	Stats   ports.SystemStats
	FS      ports.Filesystem
	Logger  *slog.Logger
	Getenv  func(string) string
	// HostDir is the host registry's directory; "" means config.HostDir.
	HostDir string
	// Prober proves claim owners alive or dead; nil is the real system.
	Prober hostreg.Prober
	// Drivers, when set, replace the drivers built from config (tests).
	Drivers []core.Driver
}

// Daemon is one running worker daemon.
type Daemon struct {
	cfg        config.Config
	paths      config.Paths
	version    string
	pid        int
	instanceID string
	startedAt  time.Time
	clock      ports.Clock
	runner     ports.ProcessRunner
	log        *slog.Logger

	lock   *os.File
	ln     net.Listener
	srv    *socket.Server
	db     *store.DB
	uplink *uplink.Connector // to the fleet's gateways (nil: not joined)
	// host is the registry shared with every simlock daemon of the OS user
	// (worker mode); self is this daemon as a claim owner there.
	host     *hostreg.DB
	self     hostreg.Owner
	claims   *claims.System   // this home's claims and host capacity (internal/claims); nil in gateway mode
	slots    *slots.Manager   // managed slot executions (internal/slots)
	gw       *gateway.Gateway // gateway mode only
	http     *httpapi.Server
	httpDone chan struct{} // closed when the HTTP server has returned
	engine   *core.Engine
	bus      *events.Bus
	disp     *dispatch.Dispatcher
	journal  dispatch.Journal     // the events journal (the home database)
	rec      *recorder            // metrics, audit lines, journal writes (metrics.go)
	inv      *resources.Inventory // inventory reads within budgets (internal/resources)
	uploads  *uploads.Store       // per-lease scratch directories (internal/uploads)
	sessions *sessions.Broker     // the session broker (internal/sessions); nil in gateway mode
	// extraContracts are further contracts capabilities.get lists (a
	// configured feature appends its own, such as managed-slots/v1).
	extraContracts []string

	adminHash [32]byte
	// progressFor maps a requester with a lease request in flight to its
	// progress push, so a download its request caused shows up there.
	progressFor sync.Map
	// pending counts each owner's lease requests in flight, for
	// queue.maxPerPrincipal.
	pendingMu sync.Mutex
	pending   map[string]int

	readyOnce sync.Once
	readyCh   chan struct{}
	readyErr  error
	stopping  chan struct{}
	stopOnce  sync.Once
	stopped   chan struct{}
	stopErr   error
	cancel    context.CancelFunc
	// converged is closed when the startup convergence goroutine returns;
	// shutdown waits for it so the store is never closed under it.
	converged      chan struct{}
	httpAddr       string
	cancelConverge context.CancelFunc
}

// ErrAlreadyRunning is returned when another daemon owns the home.
var ErrAlreadyRunning = errors.New("a simlock daemon already owns this home")

// minSafeGo is the oldest Go release without the standard-library
// vulnerabilities govulncheck reports as reachable (go.mod's toolchain).
const minSafeGo = "go1.27.3"

// withDefaults fills the ports a caller left out with the real adapters.
func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	if o.Runner == nil {
		o.Runner = ports.ExecRunner{}
	}
	if o.Stats == nil {
		o.Stats = ports.HostStats{}
	}
	if o.FS == nil {
		o.FS = ports.OSFilesystem{}
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Start claims the home (lock file, then socket) before any device work, so
// a second daemon fails fast; then it serves the socket while convergence
// runs behind the readiness gate.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	o = o.withDefaults()
	paths := config.PathsFor(o.Home)
	if err := os.MkdirAll(o.Home, 0o700); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: o.Config, paths: paths, version: o.Version, pid: os.Getpid(), clock: o.Clock,
		log: ports.Module(o.Logger, "daemon"), readyCh: make(chan struct{}), stopping: make(chan struct{}), stopped: make(chan struct{}), converged: make(chan struct{}),
		startedAt: o.Clock.Now(), runner: o.Runner, pending: map[string]int{}}

	// 1. Claim: an exclusive lock on the home, held for the daemon's life.
	lock, err := os.OpenFile(filepath.Join(o.Home, "daemon.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, contract.Errorf(contract.CodeDaemonAlreadyRunning, "another simlock daemon owns %s", o.Home)
	}
	d.lock = lock
	// A start that fails undoes what it made: a stale socket, pid file or
	// admin secret would tell the next client a daemon is there. Holding
	// the lock, every such file is ours to remove.
	var hln net.Listener
	fail := func(err error) (*Daemon, error) {
		if d.cancel != nil {
			d.cancel()
		}
		if hln != nil {
			hln.Close()
		}
		if d.ln != nil {
			d.ln.Close()
		}
		_ = os.Remove(paths.Socket)
		_ = os.Remove(paths.PID)
		_ = os.Remove(filepath.Join(o.Home, hostreg.DaemonRecordFile))
		_ = os.Remove(paths.AdminToken)
		d.closeResources()
		return nil, err
	}
	// A socket file left by a daemon that died is stale: we hold the lock,
	// so nobody else is serving it.
	_ = os.Remove(paths.Socket)
	ln, err := net.Listen("unix", paths.Socket)
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w", paths.Socket, err))
	}
	d.ln = ln
	if err := os.Chmod(paths.Socket, 0o600); err != nil {
		return fail(err)
	}
	// The HTTP port is claimed next, before anything is served or written:
	// a port already taken is the commonest failed start, and it must fail
	// before any client can connect and be cut off.
	if o.Config.HTTP.Enabled || o.Config.Mode == "gateway" {
		if hln, err = net.Listen("tcp", o.Config.HTTP.Listen); err != nil {
			return fail(fmt.Errorf("http listen on %s: %w", o.Config.HTTP.Listen, err))
		}
		// Known from here on, before the socket serves: status.get is
		// answered during startup and must already name the address.
		d.httpAddr = hln.Addr().String()
	}
	_ = os.WriteFile(paths.PID, []byte(fmt.Sprint(d.pid)), 0o600)
	// What `daemon stop` proves before it signals: pid and start identity.
	if err := claims.WriteDaemonRecord(o.Home, d.startedAt, d.log); err != nil {
		return fail(err)
	}

	// 2. A fresh admin secret per start; only its hash stays in memory.
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	plain := hex.EncodeToString(secret[:])
	d.adminHash = sha256.Sum256([]byte(plain))
	if err := ports.WriteFileAtomic(paths.AdminToken, []byte(plain+"\n")); err != nil {
		return fail(fmt.Errorf("write admin token: %w", err))
	}
	if d.instanceID, err = loadInstanceID(paths.Instance); err != nil {
		return fail(err)
	}

	// 3. Persistence, drivers, engine.
	if d.db, err = store.Open(ctx, paths.DB); err != nil {
		return fail(err)
	}
	d.bus = events.New(o.Config.EventBuffer.Size, o.Clock.Now)
	if err := d.startRecorder(ctx, o); err != nil {
		return fail(err)
	}
	if o.Config.Mode == "gateway" {
		if err := d.startGateway(o, ln, hln); err != nil {
			return fail(err)
		}
		return d, nil
	}
	// A worker shares the host registry with every other simlock daemon of
	// the user: claims, host capacity and Android ports are decided there.
	if err := d.openHost(ctx, o); err != nil {
		return fail(err)
	}
	drivers := o.Drivers
	if drivers == nil {
		if drivers, err = buildDrivers(o, d.diagnostic, d.androidPorts()); err != nil {
			return fail(err)
		}
	}
	fc := o.Config.Capacity.Fixed
	limits := core.Limits{MaxRunning: fc.MaxRunning, MaxManaged: fc.MaxManaged, Platforms: map[string]core.PlatformLimits{}}
	for p, pl := range fc.Platforms {
		limits.Platforms[p] = core.PlatformLimits{MaxRunning: pl.MaxRunning, MaxManaged: pl.MaxManaged}
	}
	strategy, err := core.NewStrategy(o.Config.Capacity.Strategy, core.StrategyInputs{Fixed: limits, Stats: o.Stats, Drivers: drivers})
	if err != nil {
		return fail(err)
	}
	stats := o.Stats
	d.engine = core.New(engineConfig(o.Config, "sdk-speed="+o.Getenv("SIMLOCK_SIMSDK_SPEED")), core.Deps{Clock: o.Clock, Store: d.db, Drivers: drivers, Strategy: strategy,
		Bus: d.bus, Logger: ports.Module(o.Logger, "engine"), Hooks: d.claims.Hooks(),
		DiskFree: func() (uint64, error) { return stats.FreeDiskBytes(o.Home) },
		Requests: d.db, Timings: d.db, Classify: classifyRefusal})
	d.claims.Bind(d.engine, d.engine.Host(), d.engine.Resets(), d.engine.OneDevice(), drivers) // host waiters, usage and admission
	d.sessions = d.newBroker(o)
	d.slots = newSlotManager(d, ports.Module(o.Logger, "slots"))
	// The daemon's life: the servers, the watchers and the shared reads.
	sctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.startInventory(sctx, o, stats)

	d.disp = dispatch.New(dispatch.Options{Log: ports.Module(o.Logger, "dispatcher"), Ready: d.awaitReady, ParkRefusal: d.parkRefusal, MapError: toContractError,
		LeaseOwner: func(_ context.Context, id string) (string, bool, error) {
			l, ok := d.engine.Lease(id)
			return l.OwnerID, ok, nil
		}})
	d.register(d.disp)

	// 4. Serve right away; everything but hello/status parks until ready.
	// Both servers are built before either serves: daemon.stop, over
	// either, closes the socket server and waits for the HTTP one.
	d.srv = &socket.Server{D: socketAdapter{d}, Log: ports.Module(o.Logger, "socket")}
	// The HTTP server serves first, before convergence; its requests park
	// on the same readiness gate as the socket's.
	if hln != nil {
		d.http = httpapi.New(httpapi.Options{Backend: httpAdapter{socketAdapter{d}},
			Logger: ports.Module(o.Logger, "http"), Clock: o.Clock, Version: o.Version, Metrics: d.MetricsHandler()})
		d.httpDone = make(chan struct{})
		go func() {
			defer close(d.httpDone)
			if err := d.http.Serve(sctx, hln); err != nil {
				d.log.Error("http server stopped", "err", err)
			}
		}()
		d.log.Info("http api listening", "addr", d.httpAddr)
	}
	// The socket serves last, once the HTTP server and its done channel,
	// which daemon.stop reads, are set.
	go func() {
		if err := d.srv.Serve(sctx, ln); err != nil {
			d.log.Error("socket server stopped", "err", err)
		}
	}()
	// Joining a fleet: dial out, serve the contract; the gateway is the client.
	if urls := o.Config.GatewayURLs(); len(urls) > 0 {
		c := &uplink.Connector{URLs: urls, Token: o.Config.Gateway.Token, ID: d.instanceID, Label: o.Config.Gateway.Label, Log: ports.Module(o.Logger, "uplink")}
		publish := func(typ, reason string, data map[string]any) {
			d.bus.Publish(events.Event{Type: typ, Reason: reason, Data: data})
		}
		if d.uplink, err = uplink.Fenced(ctx, d.db, c, uplinkAdapter{socketAdapter{d}}, publish); err == nil {
			go d.uplink.Run(sctx)
		} else {
			d.log.Error("gateway epoch unreadable; not joining the fleet", "err", err) // ADR 0103
		}
	}
	d.log.Info("daemon started", "pid", d.pid, "home", o.Home, "version", o.Version, "instance", d.instanceID, "go", runtime.Version())
	if v := runtime.Version(); version.IsValid(v) && version.Compare(v, minSafeGo) < 0 {
		d.log.Warn("built with a Go release that has known net/http and crypto/tls vulnerabilities; rebuild with GOTOOLCHAIN="+minSafeGo,
			"go", v, "want", minSafeGo)
	}

	// The lease-notice relay observes the bus from before convergence:
	// it only forwards facts, and a lease lost while the registry is being
	// restored (or the moment the gate opens) is still owed to its owner.
	d.startPushes(sctx)
	// The lease writer follows the bus from before convergence too, so a
	// restored or early lease reaches its claim record; the foreign
	// snapshot and the ownership check follow the host watcher.
	d.claims.FollowLeases(sctx)

	// 5. Converge in the background behind the readiness gate.
	cctx, cancelConverge := context.WithCancel(context.Background())
	d.cancelConverge = cancelConverge
	go func() {
		defer close(d.converged)
		err := d.engine.Converge(cctx)
		if err == nil {
			// Claims before the gate opens, and the restored leases whose
			// claims are not this home's end (ADR 0059).
			d.claims.Restore(sctx)
			// Slot devices leave the general pool before anyone is served.
			d.slots.Start(sctx)
			// Before the gate opens, so no upload races the sweep.
			d.uploads.Sweep(d.engine.Leases())
			// Session receipts are recovered before anyone may ask for
			// them: handed-off sessions adopted, a crash's sessions ended.
			d.sessions.Recover(sctx)
			// Published before the gate opens too, so whoever is let in
			// finds it in the buffer.
			d.bus.Publish(events.Event{Type: "daemon.started", Data: map[string]any{"version": o.Version, "pid": d.pid}})
		}
		d.readyOnce.Do(func() {
			d.readyErr = err
			close(d.readyCh)
		})
		if err != nil {
			d.log.Error("startup convergence failed; stopping", "err", err)
			d.stopErr = fmt.Errorf("startup convergence: %w", err)
			d.requestStop()
			return
		}
		// The health monitor and the reaper start only now: nothing may
		// observe or act on a half-restored registry.
		d.engine.Health().StartHealthMonitor()
		d.engine.Cleanup().StartReaper(sctx)
		// A commit the engine's writer failed fences the engine (ADR
		// 0044): stop with an error so the supervisor restarts the daemon
		// from what the disk holds.
		go func() {
			select {
			case <-d.engine.Writer().Failed():
				d.log.Error("registry commit failed; stopping so a restart recovers from disk")
				d.stopErr = core.ErrStoreFailed
				d.requestStop()
			case <-sctx.Done():
			}
		}()
		// The host watcher, the waiters' publisher, the orphan reclaimer
		// and the external-device probe.
		d.claims.StartLoops(sctx)
		d.log.Info("daemon ready")
		// Doctor reconnaissance: report-only, logged for the operator.
		go func() {
			findings, err := d.engine.Maintenance().Doctor(sctx, core.DoctorOptions{})
			if err != nil {
				return
			}
			for _, f := range findings {
				d.log.Warn("doctor finding at startup", "kind", f.Kind, "platform", f.Platform, "device", f.DeviceID, "handle", f.Handle, "detail", f.Detail)
			}
		}()
	}()
	return d, nil
}

func loadInstanceID(path string) (string, error) {
	var inst struct {
		InstanceID string `json:"instanceId"`
	}
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &inst) == nil && inst.InstanceID != "" {
		return inst.InstanceID, nil
	}
	inst.InstanceID = uuid.NewString()
	b, _ := json.MarshalIndent(inst, "", "  ")
	if err := ports.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return "", fmt.Errorf("write instance id: %w", err)
	}
	return inst.InstanceID, nil
}

// awaitReady parks a request until startup has finished. Once a stop has
// begun every parked request is refused, ready or not (a select over both
// closed channels used to pick one at random), with the retry pacing of
// every stopping refusal; parkRefusal says it in the session broker's
// terms for its calls.
func (d *Daemon) awaitReady(ctx context.Context) error {
	if d.stopBegun() {
		return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping").WithRetryAfter(sessions.StoppingRetryMs)
	}
	select {
	case <-d.readyCh:
		if d.readyErr != nil {
			return contract.Errorf(contract.CodeDaemonStartupFailed, "startup convergence failed: %v", d.readyErr)
		}
		return nil
	case <-d.stopping:
		return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping").WithRetryAfter(sessions.StoppingRetryMs)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parkRefusal answers the session broker's prepare and abandon refused
// by a stop in the broker's terms: SESSION_BROKER_STOPPING, nothing
// stored, retry the same request after retryAfterMs.
func (d *Daemon) parkRefusal(method string, err *contract.Error) *contract.Error {
	if err.Code != contract.CodeDaemonStopping || !d.sessions.Configured() {
		return nil
	}
	if method != contract.SessionPrepare.Name && method != contract.SessionAbandon.Name {
		return nil
	}
	return contract.AsError(sessions.StoppingErr())
}

// stopBegun reports whether the daemon's graceful stop has begun.
func (d *Daemon) stopBegun() bool {
	select {
	case <-d.stopping:
		return true
	default:
		return false
	}
}

func (d *Daemon) isReady() bool {
	select {
	case <-d.readyCh:
		return d.readyErr == nil
	default:
		return false
	}
}

func (d *Daemon) health() string {
	select {
	case <-d.stopping:
		return "stopping"
	default:
	}
	select {
	case <-d.readyCh:
		if d.readyErr != nil {
			return "failed"
		}
		return "running"
	default:
		return "starting"
	}
}

// Dispatcher is the one dispatcher every frontend calls (HTTP calls it
// in-process).
func (d *Daemon) Dispatcher() *dispatch.Dispatcher { return d.disp }

// Engine exposes the lease engine (for benchmarks and in-process frontends).
func (d *Daemon) Engine() *core.Engine { return d.engine }

// Paths returns the daemon's file layout.
func (d *Daemon) Paths() config.Paths { return d.paths }

// Hello negotiates protocol and role.
func (d *Daemon) Hello(_ context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	role := contract.RoleAgent
	if in.Credential != "" {
		r, ok := d.credentialRole(in.Credential)
		if !ok {
			return contract.HelloOut{}, contract.Session{}, contract.Errorf(contract.CodeAdminAuthFailed, "the credential is not a valid admin secret or token")
		}
		role = r
	}
	for field, v := range map[string]string{"principal": in.Principal, "client": in.Client} {
		if err := contract.ValidateIdentifier(field, v); err != nil {
			return contract.HelloOut{}, contract.Session{}, contract.AsError(err)
		}
	}
	principal := in.Principal
	if principal == "" {
		principal = "anonymous"
	}
	sess := contract.Session{Principal: principal, Role: role, Compatible: true}
	out := contract.HelloOut{Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Role: role, Principal: principal, Version: d.version, InstanceID: d.instanceID, Mode: d.cfg.Mode}
	lo, hi := max(in.Protocol.Min, contract.ProtocolMin), min(in.Protocol.Max, contract.ProtocolMax)
	if in.Protocol.Min == 0 && in.Protocol.Max == 0 || lo > hi {
		sess.Compatible = false
		return out, sess, contract.Errorf(contract.CodeProtocolUnsupported,
			"client speaks protocol %d-%d, daemon speaks %d-%d", in.Protocol.Min, in.Protocol.Max, contract.ProtocolMin, contract.ProtocolMax).
			WithDetails("client", in.Protocol, "daemon", out.Protocol)
	}
	out.Selected = hi
	return out, sess, nil
}

// credentialRole checks the per-start admin secret, then stored tokens.
func (d *Daemon) credentialRole(cred string) (contract.Role, bool) {
	h := sha256.Sum256([]byte(cred))
	if subtle.ConstantTimeCompare(h[:], d.adminHash[:]) == 1 {
		return contract.RoleAdmin, true
	}
	t, ok, err := d.db.TokenByHash(context.Background(), hashSecret(cred))
	if err != nil || !ok {
		return "", false
	}
	switch t.Role {
	case contract.TokenRoleOperator:
		return contract.RoleAdmin, true
	case contract.TokenRoleAgent:
		return contract.RoleAgent, true
	}
	// A worker join token opens a gateway uplink and nothing else.
	return "", false
}

// VerifyToken resolves an API token for HTTP-style frontends.
func (d *Daemon) VerifyToken(ctx context.Context, secret string) (store.TokenRecord, bool, error) {
	return d.db.TokenByHash(ctx, hashSecret(secret))
}

func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// requestStop begins a graceful stop once.
func (d *Daemon) requestStop() {
	d.stopOnce.Do(func() {
		close(d.stopping)
		go d.shutdown()
	})
}

// Stop stops the daemon gracefully and waits for it.
func (d *Daemon) Stop() error {
	d.requestStop()
	<-d.stopped
	return d.stopErr
}

// Wait blocks until the daemon has stopped.
func (d *Daemon) Wait() error {
	<-d.stopped
	return d.stopErr
}

// Done is closed once the daemon has stopped.
func (d *Daemon) Done() <-chan struct{} { return d.stopped }

func (d *Daemon) shutdown() {
	d.log.Info("daemon stopping")
	// Stop accepting, then let in-flight purges settle (bounded) so the
	// pool is left in a settled shape.
	d.ln.Close()
	d.cancelConverge() // aborts a convergence still in flight
	<-d.converged
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if d.sessions != nil {
		// Before the engine stops: preparations end with their receipts
		// and live sessions are handed off while leases can be renewed.
		d.sessions.Stop()
	}
	if d.engine != nil {
		d.engine.Stop(ctx)
	}
	if d.sessions != nil {
		d.sessions.Wait(ctx)
	}
	if d.gw != nil {
		d.gw.Close()
	}
	cancel()
	d.cancel()
	if d.claims != nil {
		d.claims.Wait() // the lease writer and the waiters' publisher are done with the host registry
	}
	d.srv.CloseAll()
	if d.httpDone != nil {
		<-d.httpDone // no HTTP handler may touch the store once it closes
	}
	_ = os.Remove(d.paths.AdminToken)
	_ = os.Remove(d.paths.Socket)
	_ = os.Remove(d.paths.PID)
	_ = os.Remove(filepath.Join(d.paths.Home, hostreg.DaemonRecordFile))
	d.closeResources()
	d.log.Info("daemon stopped")
	close(d.stopped)
}

func (d *Daemon) closeResources() {
	d.stopRecorder() // journals what is queued, so before the store closes
	if d.db != nil {
		d.db.Close()
	}
	if d.host != nil {
		d.host.Close()
	}
	if d.lock != nil {
		_ = unix.Flock(int(d.lock.Fd()), unix.LOCK_UN)
		d.lock.Close()
	}
}

// socketAdapter satisfies socket.Dispatcher.
type socketAdapter struct{ d *Daemon }

func (a socketAdapter) Hello(ctx context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	return a.d.Hello(ctx, in)
}

func (a socketAdapter) Dispatch(ctx context.Context, sess contract.Session, method string, params json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	call := &dispatch.Call{Session: sess, Notify: notify}
	out, err := a.d.disp.Dispatch(ctx, call, method, params)
	return out, call.RunAfter, err
}

// engineConfig maps the configuration file onto the engine's policies;
// timingScope keeps ETAs measured at one simulated SDK speed from another's.
func engineConfig(c config.Config, timingScope string) core.Config {
	out := core.Config{
		DefaultTTL: ms(c.Lease.DefaultTTLMs),
		MaxTTL:     ms(c.Lease.MaxTTLMs),
		Quarantine: core.QuarantinePolicy{Retries: c.WarmPool.Quarantine.Retries, Backoff: ms(c.WarmPool.Quarantine.BackoffMs),
			Multiplier: c.WarmPool.Quarantine.Multiplier, Cap: ms(c.WarmPool.Quarantine.CapMs)},
		Health: core.HealthPolicy{Interval: ms(c.Health.IntervalMs), StableObservations: c.Health.StableObservations,
			MaxRecoveryAttempts: c.Health.MaxRecoveryAttempts},
		Cleanup: core.CleanupPolicy{Interval: ms(c.Cleanup.IntervalMs), IdleShutdown: ms(c.Cleanup.IdleShutdownMs),
			IdleDestroy: ms(c.Cleanup.IdleDestroyMs), DiskPressureFreeBytes: c.DiskPressure.FreeBytesThreshold},
		RequestRetention: ms(c.Requests.RetentionMs), RequestMaxReceipts: c.Requests.MaxReceipts,
		Demand: core.DemandPolicy{Enabled: c.WarmPool.Demand.Enabled, Window: ms(c.WarmPool.Demand.WindowMs),
			Sample: ms(c.WarmPool.Demand.SampleMs), Spare: c.WarmPool.Demand.Spare},
		MaxGroupSize: c.Queue.MaxGroupSize,
		GroupBypass:  c.Queue.GroupBypass, TimingScope: timingScope,
		// A slot execution's proxy re-binds after a restart (ADR 0062).
		SlotRebindWindow: ms(c.Slots.RebindWindowMs),
	}
	if c.Sessions != nil {
		out.MaxConcurrentResetBoots = c.Sessions.Limits.MaxConcurrentResetBoots // session resets (core/resetmodes.go)
	}
	for _, t := range c.WarmPool.Targets {
		out.WarmTargets = append(out.WarmTargets, core.WarmTarget{Count: t.Count,
			Spec: core.SpecRequest{Platform: t.Platform, Model: t.Model, OSVersion: t.OSVersion}})
	}
	return out
}

// startPushes relays lease-scoped facts to every live connection whose
// principal owns the lease (contract.NoticeFor decides which facts). It is
// a bus observer, not a follower: the bus queues every fact for it without
// bound, so however slowly the pushes go out, an owner is always told its
// lease was lost.
func (d *Daemon) startPushes(ctx context.Context) {
	observeBus(ctx, d.bus, func(e events.Event) {
		ce := dispatch.EventOut(e)
		method, ok := contract.NoticeFor(ce)
		owner := contract.OwnerOf(ce)
		if !ok || owner == "" {
			return
		}
		d.srv.Push(owner, method, contract.LeaseNotice{Type: method, LeaseID: e.LeaseID, DeviceID: e.DeviceID, Reason: e.Reason, At: e.At})
	})
}

// observeBus hands every fact published from now on to f, in order, on one
// goroutine, until ctx ends. It is an observer, so the bus never drops a
// fact for it, however slow f is.
func observeBus(ctx context.Context, bus *events.Bus, f func(events.Event)) {
	_, obs := bus.Observe(bus.LastSeq())
	go func() {
		defer obs.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-obs.C():
				if !ok {
					return
				}
				f(e)
			}
		}
	}()
}

// HTTPAddr is the address the HTTP API listens on ("" when disabled).
func (d *Daemon) HTTPAddr() string { return d.httpAddr }

// httpAdapter satisfies httpapi.Backend: the socket adapter's Hello and
// Dispatch (the same dispatcher, in-process) plus bearer tokens. A token's
// principal is "token:<id>"; the frontend maps its role.
type httpAdapter struct{ socketAdapter }

func (a httpAdapter) Authenticate(ctx context.Context, bearer string) (role, principal string, ok bool, err error) {
	t, ok, err := a.d.VerifyToken(ctx, bearer)
	if err != nil || !ok {
		return "", "", false, err
	}
	return t.Role, "token:" + t.ID, true, nil
}

var _ httpapi.EventSource = httpAdapter{}

// ObserveEvents feeds the HTTP frontend's lease notices from a bus
// observer (httpapi.EventSource), so they lose no fact however busy the
// daemon is, unlike a followed events.subscribe.
func (a httpAdapter) ObserveEvents(ctx context.Context, since uint64, onGap func(contract.EventsGap), onEvent func(contract.Event)) {
	gap, obs := a.d.bus.Observe(since)
	defer obs.Close()
	if g := dispatch.GapOut(gap); g != nil {
		onGap(*g)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-obs.C():
			if !ok {
				return
			}
			onEvent(dispatch.EventOut(e))
		}
	}
}

// uplinkAdapter serves a gateway over the uplink this daemon dialled: admin
// without a credential, since this daemon's own configuration chose the
// gateway and presented the token. Nothing inbound is trusted for it.
type uplinkAdapter struct{ socketAdapter }

func (a uplinkAdapter) Hello(ctx context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	in.Credential = ""
	out, sess, err := a.d.Hello(ctx, in)
	if sess.Role != "" {
		sess.Role, out.Role, sess.Principal, out.Principal = contract.RoleAdmin, contract.RoleAdmin, "gateway", "gateway"
	}
	return out, sess, err
}

// ms reads a configuration figure in milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
