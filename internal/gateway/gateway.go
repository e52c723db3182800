// Package gateway is the second implementation of the contract's handlers:
// a daemon in gateway mode owns no devices, only demand. It keeps a view of
// every worker connected to it over an uplink, one fleet-wide FIFO of lease
// requests, a routing policy that matches the two, and an index of the
// leases it issued (rebuilt from the workers, never persisted). Every
// operation that touches a device is forwarded to the worker that owns it.
//
// The package knows the contract, the dispatcher, the ports and the event
// bus, and nothing about drivers, registries or capacity strategies; a
// boundary test keeps it that way.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/waitq"
)

// WorkerConn is the gateway's end of one worker's uplink: a protocol
// client on which the gateway holds an admin session. *client.Client
// satisfies it.
type WorkerConn interface {
	Hello() contract.HelloOut
	Call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error
	Stream(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error
	Done() <-chan struct{}
	Close() error
}

// Routing policy names (gateway.routing).
const RoutingWarmThenFree = "warm-then-free"

// Options configure a gateway. Zero durations take the documented defaults.
type Options struct {
	// InstanceID is the gateway's own stable identity; it namespaces every
	// requester and owner it forwards (gw:<InstanceID>:<name>), which is
	// how its leases are recognised again after a restart. Required.
	InstanceID string
	Clock      ports.Clock
	Log        *slog.Logger
	// Bus receives the gateway's own facts and the workers' republished
	// ones. Nil builds a private bus of 1000 events.
	Bus *events.Bus
	// Journal replays events.subscribe history the ring no longer holds
	// (nil: the ring only).
	Journal dispatch.Journal
	// DrainFile is workers.json, the one persisted piece of gateway state.
	// Empty keeps the drained set in memory only.
	DrainFile string
	// FS writes and reads DrainFile (default: the real filesystem).
	FS ports.Filesystem
	// Routing names the routing policy (default warm-then-free).
	Routing string
	// DisconnectedRetention is how long a disconnected worker's view stays
	// once its gateway-issued leases have expired (default 24h).
	DisconnectedRetention time.Duration
	// ExecTimeout is the gateway's backstop on device.exec (default 11m),
	// longer than the worker's own exec timeout on purpose.
	ExecTimeout time.Duration
	// RefreshInterval is the slow backstop tick refreshing every connected
	// worker's view (default 30s).
	RefreshInterval time.Duration
	// DefaultTTL is forwarded when a request names no TTL; MaxTTL bounds
	// requested and renewed TTLs. Zero leaves both to the workers.
	DefaultTTL, MaxTTL time.Duration
	// DaemonInfo supplies the daemon block of status.get (version, pid,
	// addresses); the gateway sets mode and fills the instance id.
	DaemonInfo func() contract.DaemonInfo
	// Store keeps the requests the gateway accepted and its drained set
	// (ADR 0101); New takes back the open requests it holds. Nil keeps
	// both in memory (DrainFile then persists the drained set), refuses
	// idempotency keys and lease.requestStatus, and a restart loses the
	// queue.
	Store Store
	// CloseStore, when set, is called once Close has stopped everything
	// that writes to Store.
	CloseStore func()
	// Retention and MaxReceipts bound settled receipts by age and count
	// (defaults 24h and 2000, as requests.* on a worker).
	Retention   time.Duration
	MaxReceipts int
	// MaxPerPrincipal caps the requests one owner may have in the fleet
	// queue at once (queue.maxPerPrincipal; 0: no cap).
	MaxPerPrincipal int
}

// Gateway is the fleet's coordinator. Build it with New, register its
// handlers with Register, and hand it each worker's uplink with Attach.
type Gateway struct {
	o      Options
	route  routeFunc
	clock  ports.Clock
	log    *slog.Logger
	bus    *events.Bus
	prefix string // "gw:<instance id>:"

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kickCh chan struct{}

	mu      sync.Mutex
	closed  bool
	gen     uint64
	workers map[string]*worker
	drained map[string]string     // worker id → label, persisted
	queue   waitq.Queue[*pending] // queued and being-tried requests, oldest first
	// waiting counts the queue's waiting requests (noWait ones never
	// wait) per platform, kept as requests enter and leave, so status.get
	// and queue.list report the depth without walking the whole queue.
	waiting      map[string]int
	waitingTotal int
	pendingBy    map[string]*pending
	leases       map[string]*leaseEntry // gateway lease id → entry
	byReq        map[string]*leaseEntry // client requester → entry
	tombs        map[string]map[string]uint64
	seq          uint64
	nextReq      uint64
	tick         ports.Timer
	// byRID and byKey name the requests in the queue by id and by
	// (requester, idempotency key); perOwner counts them per owner.
	byRID       map[string]*pending
	byKey       map[string]*pending
	perOwner    map[string]int
	uncollected map[string]uncollectedLease // client requester → lease
	settled     uint64
}

// New builds a gateway and loads its drained set.
func New(o Options) (*Gateway, error) {
	if strings.TrimSpace(o.InstanceID) == "" {
		return nil, errors.New("gateway: an instance id is required")
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Bus == nil {
		o.Bus = events.New(1000, o.Clock.Now)
	}
	if o.FS == nil {
		o.FS = ports.OSFilesystem{}
	}
	if o.Routing == "" {
		o.Routing = RoutingWarmThenFree
	}
	if o.DisconnectedRetention <= 0 {
		o.DisconnectedRetention = 24 * time.Hour
	}
	if o.ExecTimeout <= 0 {
		o.ExecTimeout = 11 * time.Minute
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 30 * time.Second
	}
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	if o.MaxReceipts <= 0 {
		o.MaxReceipts = 2000
	}
	r, ok := routingPolicies[o.Routing]
	if !ok {
		names := make([]string, 0, len(routingPolicies))
		for n := range routingPolicies {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("gateway: unknown routing policy %q (known: %s)", o.Routing, strings.Join(names, ", "))
	}
	g := &Gateway{o: o, route: r, clock: o.Clock, log: o.Log, bus: o.Bus, prefix: "gw:" + o.InstanceID + ":",
		kickCh: make(chan struct{}, 1), workers: map[string]*worker{}, drained: map[string]string{},
		pendingBy: map[string]*pending{}, leases: map[string]*leaseEntry{}, byReq: map[string]*leaseEntry{},
		tombs: map[string]map[string]uint64{}, byRID: map[string]*pending{}, byKey: map[string]*pending{},
		perOwner: map[string]int{}, uncollected: map[string]uncollectedLease{}}
	if err := g.loadDrained(); err != nil {
		return nil, err
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if err := g.restore(g.ctx); err != nil {
		g.cancel()
		return nil, err
	}
	g.wg.Add(1)
	go g.dispatchLoop()
	g.mu.Lock()
	g.armTickLocked()
	g.mu.Unlock()
	return g, nil
}

// Bus is the gateway's event bus (its own facts and the fleet's).
func (g *Gateway) Bus() *events.Bus { return g.bus }

// Close stops the gateway: every uplink is closed, every request still
// waiting fails with DAEMON_STOPPING, and Close returns once the
// gateway's goroutines have ended. Leases live on; they belong to workers.
func (g *Gateway) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	if g.tick != nil {
		g.tick.Stop()
	}
	var conns []WorkerConn
	for _, w := range g.workers {
		if w.retain != nil {
			w.retain.Stop()
		}
		if w.link != nil {
			conns = append(conns, w.link.conn)
		}
	}
	for _, p := range append([]*pending(nil), g.allPendingLocked()...) {
		g.finishLocked(p, outcome{err: contract.Errorf(contract.CodeDaemonStopping, "the gateway is stopping"), keepOpen: true})
	}
	g.mu.Unlock()
	g.cancel()
	for _, c := range conns {
		_ = c.Close()
	}
	g.wg.Wait()
	if g.o.CloseStore != nil {
		g.o.CloseStore()
	}
}

// spawn runs f on a goroutine Close waits for, unless the gateway is
// closing (then f does not run at all).
func (g *Gateway) spawn(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

func (g *Gateway) allPendingLocked() []*pending {
	out := make([]*pending, 0, len(g.pendingBy))
	for _, p := range g.pendingBy {
		out = append(out, p)
	}
	return out
}

// Rejected records an uplink the gateway refused (a missing, unknown or
// wrong-role token) as a worker.rejected fact.
func (g *Gateway) Rejected(reason, detail string) {
	g.publish(events.Event{Type: "worker.rejected", Reason: reason, Data: map[string]any{"detail": detail}})
}

// Register installs the gateway's handlers: every contract operation
// except hello, token.*, config.get and daemon.stop, which belong to the
// daemon's startup code. Worker-only operations answer
// UNSUPPORTED_IN_GATEWAY_MODE.
func (g *Gateway) Register(d *dispatch.Dispatcher) {
	dispatch.Handle(d, contract.StatusGet, func(_ context.Context, call *dispatch.Call, _ contract.StatusGetIn) (contract.StatusGetOut, error) {
		base := contract.DaemonInfo{}
		if g.o.DaemonInfo != nil {
			base = g.o.DaemonInfo()
		}
		return g.Status(call.Session, base), nil
	})
	dispatch.Handle(d, contract.QueueList, func(_ context.Context, _ *dispatch.Call, in contract.QueueListIn) (contract.QueueListOut, error) {
		cursor, err := contract.ParseQueueCursor(in.Cursor)
		if err != nil {
			return contract.QueueListOut{}, err
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.queuePageLocked(cursor, in.Limit).QueueListOut, nil
	})
	dispatch.Handle(d, contract.ListGet, func(_ context.Context, _ *dispatch.Call, in contract.ListGetIn) (contract.ListGetOut, error) {
		devs := g.devices()
		if in.Booted {
			// The fleet's booted view from the workers' own views: a device
			// a worker holds ready or leased is running there.
			devs = slices.DeleteFunc(devs, func(d contract.Device) bool {
				return d.Runtime.Lifecycle != contract.StateReady && d.Runtime.Lifecycle != contract.StateLeased
			})
		}
		return contract.ListGetOut{Devices: devs}, nil
	})
	dispatch.Handle(d, contract.CatalogGet, g.catalogGet)
	dispatch.Handle(d, contract.LeaseRequest, g.leaseRequest)
	dispatch.Handle(d, contract.LeaseRenew, g.leaseRenew)
	dispatch.Handle(d, contract.LeaseRelease, g.leaseRelease)
	dispatch.Handle(d, contract.LeaseReleaseAll, g.leaseReleaseAll)
	dispatch.Handle(d, contract.LeaseCancel, g.leaseCancel)
	dispatch.Handle(d, contract.LeaseGet, g.leaseGet)
	dispatch.Handle(d, contract.LeaseList, g.leaseList)
	dispatch.Handle(d, contract.EventsSubscribe, g.eventsSubscribe)
	dispatch.Handle(d, contract.DeviceExec, g.deviceExec)
	dispatch.Handle(d, contract.ResourcesGet, g.resourcesGet)
	dispatch.Handle(d, contract.ResourcesSet, g.resourcesSet)
	dispatch.Handle(d, contract.ResourcesReconcile, g.resourcesReconcile)
	dispatch.Handle(d, contract.DeviceUpload, g.deviceUpload)
	dispatch.Handle(d, contract.WorkerList, func(context.Context, *dispatch.Call, contract.WorkerListIn) (contract.WorkerListOut, error) {
		return contract.WorkerListOut{Workers: g.Views()}, nil
	})
	dispatch.Handle(d, contract.WorkerDrain, func(_ context.Context, _ *dispatch.Call, in contract.WorkerIn) (contract.WorkerOut, error) {
		return g.setDrain(in.ID, true)
	})
	dispatch.Handle(d, contract.WorkerUndrain, func(_ context.Context, _ *dispatch.Call, in contract.WorkerIn) (contract.WorkerOut, error) {
		return g.setDrain(in.ID, false)
	})
	dispatch.Handle(d, contract.WorkerRemove, func(_ context.Context, _ *dispatch.Call, in contract.WorkerIn) (contract.WorkerOut, error) {
		return g.remove(in.ID)
	})
	unsupported(d, contract.NukeRun)
	unsupported(d, contract.CleanupRun)
	unsupported(d, contract.DoctorRun)
	unsupported(d, contract.Passthrough)
	dispatch.Handle(d, contract.LeaseRequestStatus, g.requestStatus)
	unsupported(d, contract.DeviceRelease)
	// Sessions are one worker's receipts and devices; a gateway serves no
	// contract of its own yet, so its capabilities list is empty.
	dispatch.Handle(d, contract.CapabilitiesGet, func(context.Context, *dispatch.Call, contract.CapabilitiesGetIn) (contract.CapabilitiesGetOut, error) {
		return contract.CapabilitiesGetOut{Contracts: []string{}}, nil
	})
	unsupported(d, contract.SessionPrepare)
	unsupported(d, contract.SessionStatus)
	unsupported(d, contract.SessionAbandon)
	unsupported(d, contract.SessionRelease)
	unsupported(d, contract.SessionHeartbeat)
	unsupported(d, contract.SessionInfo)
	unsupported(d, contract.SessionStats)
	unsupported(d, contract.SessionGetExport)
	unsupported(d, contract.SessionAcknowledgeExport)
	// Slots live in one host's registry: a runner talks to that host.
	unsupported(d, contract.SlotAcquire)
	unsupported(d, contract.SlotHeartbeat)
	unsupported(d, contract.SlotRelease)
	unsupported(d, contract.SlotResetScope)
	unsupported(d, contract.SlotList)
}

// unsupported registers op as refused for good on a gateway: it acts on one
// machine's devices and stays per-worker.
func unsupported[In, Out any](d *dispatch.Dispatcher, op contract.Operation[In, Out]) {
	dispatch.Handle(d, op, func(context.Context, *dispatch.Call, In) (Out, error) {
		var zero Out
		return zero, contract.Errorf(contract.CodeUnsupportedInGateway, "%s acts on one machine's devices; a gateway does not run it", op.Name)
	})
}

// MapError turns a gateway handler's error into a contract error; it is
// the MapError the gateway's dispatcher should use.
func MapError(err error) *contract.Error {
	if err == nil {
		return nil
	}
	if ce := contract.AsError(err); ce != nil {
		return ce
	}
	if errors.Is(err, context.Canceled) {
		return contract.Errorf(contract.CodeConnectionLost, "the caller went away: %v", err)
	}
	return contract.Errorf(contract.CodeInternal, "%s", err.Error())
}

// ---- identity helpers ----

// splitLeaseID splits a gateway lease id on its first '.'.
func splitLeaseID(id string) (workerID, workerLease string, ok bool) {
	w, l, found := strings.Cut(id, ".")
	if !found || w == "" || l == "" {
		return "", "", false
	}
	return w, l, true
}

func joinLeaseID(workerID, workerLease string) string {
	if workerLease == "" {
		return ""
	}
	return workerID + "." + workerLease
}

// ns namespaces a client-side name for a worker.
func (g *Gateway) ns(name string) string { return g.prefix + name }

// own reports whether a worker-side name was stamped by this gateway, and
// the client-side name under it.
func (g *Gateway) own(name string) (string, bool) {
	return strings.CutPrefix(name, g.prefix)
}

// principalOut is how a worker-side requester or owner reads on the
// gateway: its own clients by their own names; anyone else (a worker's
// local agent, another gateway's client) qualified by the worker, so a
// gateway client can never be mistaken for them.
func (g *Gateway) principalOut(workerID, name string) string {
	if name == "" {
		return ""
	}
	if n, ok := g.own(name); ok {
		return n
	}
	return "worker:" + workerID + ":" + name
}

func (g *Gateway) publish(e events.Event) {
	if e.Type == "" {
		return
	}
	g.bus.Publish(e)
}

func (g *Gateway) publishAll(evs []events.Event) {
	for _, e := range evs {
		g.publish(e)
	}
}

func (g *Gateway) kickDispatch() {
	select {
	case g.kickCh <- struct{}{}:
	default:
	}
}

// armTickLocked schedules the backstop refresh of every connected view.
func (g *Gateway) armTickLocked() {
	if g.closed {
		return
	}
	g.tick = g.clock.AfterFunc(g.o.RefreshInterval, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, w := range g.workers {
			if w.link != nil {
				w.link.kick()
			}
		}
		g.armTickLocked()
	})
}

// callWorker runs one operation on a worker over its uplink and turns a
// lost uplink into WORKER_UNREACHABLE.
func (g *Gateway) callWorker(ctx context.Context, workerID string, lk *link, method string, in, out any, notify func(string, json.RawMessage)) error {
	if lk == nil {
		return unreachable(workerID)
	}
	err := lk.conn.Call(ctx, method, in, out, notify)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	ce := contract.AsError(err)
	if lk.ctx.Err() != nil || ce == nil || ce.Code == contract.CodeConnectionLost || ce.Code == contract.CodeDaemonNotRunning {
		return unreachable(workerID).WithDetails("cause", err.Error())
	}
	return g.remapError(workerID, ce)
}

func unreachable(workerID string) *contract.Error {
	return contract.Errorf(contract.CodeWorkerUnreachable, "worker %s is not connected to the gateway", workerID).
		WithDetails("workerId", workerID)
}

// remapError rewrites the worker-side lease ids a worker's error names into
// gateway lease ids.
func (g *Gateway) remapError(workerID string, ce *contract.Error) *contract.Error {
	if ce.Code != contract.CodeRequesterLeased {
		return ce
	}
	out := *ce
	out.Details = map[string]any{}
	for k, v := range ce.Details {
		out.Details[k] = v
	}
	if id, ok := ce.Details["leaseId"].(string); ok && id != "" {
		gid := joinLeaseID(workerID, id)
		out.Details["leaseId"] = gid
		out.Message = fmt.Sprintf("this requester already holds lease %s", gid)
		out.NextAction = "release " + gid + " first (`simlock release " + gid + "`), or use a different --requester"
	}
	return &out
}
