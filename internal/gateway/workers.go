package gateway

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
)

// worker is what the gateway knows about one worker: the view (rebuilt on
// every connect, never persisted) and the current uplink, if any.
type worker struct {
	id, label string
	state     string // connected, disconnected, incompatible
	// known is false while a first connect is still building the view;
	// such a worker is not shown anywhere yet.
	known bool
	link  *link // nil unless an uplink is attached

	hello    contract.HelloOut
	status   contract.StatusGetOut
	devices  []contract.Device
	catalog  []contract.PlatformCatalog
	policy   string // the worker's effective downloads.policy
	lastSeen time.Time
	// disconnectedAt starts the retention clock.
	disconnectedAt time.Time
	retain         interface{ Stop() bool }

	// version counts applied refreshes; a request a worker refused waits
	// for a newer view before it is routed there again.
	version    uint64
	refreshing bool
	// inflight are the requests sent to this worker and not yet answered;
	// routing counts them against the view.
	inflight []*pending

	// lastSeq is the newest worker event seen in the worker's current run
	// (runStarted), so a reconnect to the same run replays what was missed.
	lastSeq    uint64
	runStarted time.Time
}

// link is one attached uplink.
type link struct {
	conn    WorkerConn
	gen     uint64
	ctx     context.Context
	cancel  context.CancelFunc
	refresh chan struct{}
	evmu    sync.Mutex // serializes event handling for this uplink
	up      bool       // the view went live on this uplink (under g.mu)
}

func (l *link) kick() {
	select {
	case l.refresh <- struct{}{}:
	default:
	}
}

func compatible(r contract.ProtocolRange) bool {
	return r.Min <= contract.ProtocolMax && r.Max >= contract.ProtocolMin && r.Min <= r.Max
}

// Attach takes over a worker's uplink once hello has run on it. It builds
// the worker's view (status.get, list.get, catalog.get, config.get,
// lease.list and a followed events.subscribe) before the worker is
// dispatched to, then returns; the gateway watches conn.Done() from then
// on. An uplink whose protocol range does not overlap the gateway's is kept
// visible as incompatible and never dispatched to. A second Attach for the
// same id supersedes (and closes) the first uplink. An error means the view
// could not be built; conn has been closed.
func (g *Gateway) Attach(ctx context.Context, id, label string, conn WorkerConn) error {
	if id == "" {
		_ = conn.Close()
		return contract.Errorf(contract.CodeBadRequest, "a worker needs an instance id")
	}
	hello := conn.Hello()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		_ = conn.Close()
		return contract.Errorf(contract.CodeDaemonStopping, "the gateway is stopping")
	}
	w := g.workers[id]
	if w == nil {
		w = &worker{id: id, label: label, state: contract.WorkerDisconnected}
		g.workers[id] = w
	}
	old := w.link
	g.gen++
	lk := &link{conn: conn, gen: g.gen, refresh: make(chan struct{}, 1)}
	lk.ctx, lk.cancel = context.WithCancel(g.ctx)
	w.link = lk
	if w.retain != nil {
		w.retain.Stop()
		w.retain = nil
	}
	g.mu.Unlock()
	if old != nil {
		old.cancel()
		_ = old.conn.Close()
	}
	watching := g.spawn(func() {
		select {
		case <-conn.Done():
		case <-lk.ctx.Done():
		}
		g.detach(id, lk)
	})
	if !watching {
		_ = conn.Close()
		return contract.Errorf(contract.CodeDaemonStopping, "the gateway is stopping")
	}

	if !compatible(hello.Protocol) {
		g.mu.Lock()
		if w.link == lk {
			w.label, w.hello, w.state, w.known, w.lastSeen = label, hello, contract.WorkerIncompatible, true, g.clock.Now()
			lk.up = true
		}
		g.mu.Unlock()
		g.publish(events.Event{Type: "worker.connected", Reason: contract.WorkerIncompatible, Data: map[string]any{
			"workerId": id, "label": label, "version": hello.Version, "state": contract.WorkerIncompatible,
			"protocol":        map[string]any{"min": hello.Protocol.Min, "max": hello.Protocol.Max},
			"gatewayProtocol": map[string]any{"min": contract.ProtocolMin, "max": contract.ProtocolMax}}})
		g.log.Warn("worker speaks an incompatible protocol", "worker", id, "min", hello.Protocol.Min, "max", hello.Protocol.Max)
		return nil
	}
	if err := g.build(ctx, w, lk, label, hello); err != nil {
		g.log.Warn("could not build a worker view", "worker", id, "err", err)
		lk.cancel()
		_ = conn.Close()
		return err
	}
	g.spawn(func() {
		for {
			select {
			case <-lk.ctx.Done():
				return
			case <-lk.refresh:
				g.refresh(id, lk)
			}
		}
	})
	g.publish(events.Event{Type: "worker.connected", Data: map[string]any{"workerId": id, "label": label,
		"version": hello.Version, "state": contract.WorkerConnected}})
	g.resendPinned(id, lk)
	g.kickDispatch()
	return nil
}

// build reads a freshly attached worker into its view.
func (g *Gateway) build(ctx context.Context, w *worker, lk *link, label string, hello contract.HelloOut) error {
	id := w.id
	var st contract.StatusGetOut
	if err := g.callWorker(ctx, id, lk, contract.StatusGet.Name, contract.StatusGetIn{}, &st, nil); err != nil {
		return err
	}
	// Events: a reconnect to the same worker run replays what was missed
	// while the uplink was down; a new run (or a first sighting) starts
	// from now, since its backlog says nothing this gateway has not seen.
	g.mu.Lock()
	replay := !w.runStarted.IsZero() && w.runStarted.Equal(st.Daemon.StartedAt) && w.hello.InstanceID == hello.InstanceID
	if !replay {
		w.lastSeq = 0
	}
	since := w.lastSeq
	g.mu.Unlock()
	var backlog contract.EventsSubscribeOut
	// Live pushes wait (on evmu) until the backlog has been applied, so
	// the gateway republishes the worker's facts in the worker's order.
	lk.evmu.Lock()
	err := lk.conn.Stream(lk.ctx, contract.EventsSubscribe.Name, contract.EventsSubscribeIn{Since: since, Follow: true}, &backlog,
		func(method string, raw json.RawMessage) { g.onWorkerPush(id, lk, method, raw) })
	if err != nil {
		lk.evmu.Unlock()
		return g.callErr(id, lk, err)
	}
	if backlog.Gap != nil {
		g.onWorkerGapLocked(id, lk, *backlog.Gap, replay)
	}
	for _, e := range backlog.Events {
		g.onWorkerEventLocked(id, lk, e, replay)
	}
	lk.evmu.Unlock()
	var list contract.ListGetOut
	if err := g.callWorker(ctx, id, lk, contract.ListGet.Name, contract.ListGetIn{}, &list, nil); err != nil {
		return err
	}
	var cat contract.CatalogGetOut
	if err := g.callWorker(ctx, id, lk, contract.CatalogGet.Name, contract.CatalogGetIn{}, &cat, nil); err != nil {
		return err
	}
	var cfg contract.ConfigGetOut
	if err := g.callWorker(ctx, id, lk, contract.ConfigGet.Name, contract.ConfigGetIn{}, &cfg, nil); err != nil {
		return err
	}
	policy := downloadPolicy(cfg.Config)
	g.mu.Lock()
	start := g.seq
	g.mu.Unlock()
	var leases contract.LeaseListOut
	if err := g.callWorker(ctx, id, lk, contract.LeaseList.Name, contract.LeaseListIn{}, &leases, nil); err != nil {
		return err
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if w.link != lk {
		return contract.Errorf(contract.CodeWorkerUnreachable, "worker %s reconnected while its view was being built", id)
	}
	w.label, w.hello, w.policy = label, hello, policy
	w.status, w.devices, w.catalog = st, list.Devices, cat.Platforms
	w.runStarted = st.Daemon.StartedAt
	w.state, w.known = contract.WorkerConnected, true
	lk.up = true
	w.lastSeen = g.clock.Now()
	w.disconnectedAt = time.Time{}
	w.version++
	g.syncIndexLocked(id, leases.Leases, start)
	lk.kick() // catch anything that changed while the view was being read
	return nil
}

// callErr maps a failed call on lk the way callWorker does.
func (g *Gateway) callErr(id string, lk *link, err error) error {
	ce := contract.AsError(err)
	if lk.ctx.Err() != nil || ce == nil || ce.Code == contract.CodeConnectionLost {
		return unreachable(id).WithDetails("cause", err.Error())
	}
	return g.remapError(id, ce)
}

// downloadPolicy keeps the one field of a worker's config routing needs.
func downloadPolicy(raw json.RawMessage) string {
	var c struct {
		Downloads struct {
			Policy string `json:"policy"`
		} `json:"downloads"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return ""
	}
	return c.Downloads.Policy
}

const refreshTimeout = time.Minute

// refresh re-reads a worker's status and devices (on its lease and device
// events, after a stale NO_CAPACITY, and on the backstop tick).
func (g *Gateway) refresh(id string, lk *link) {
	g.mu.Lock()
	w := g.workers[id]
	if w == nil || w.link != lk {
		g.mu.Unlock()
		return
	}
	w.refreshing = true
	start := g.seq
	g.mu.Unlock()
	var st contract.StatusGetOut
	var list contract.ListGetOut
	// A worker that stops answering must not wedge its refresher; its
	// uplink's own liveness is the transport's business.
	ctx, cancel := context.WithTimeout(lk.ctx, refreshTimeout)
	defer cancel()
	err := g.callWorker(ctx, id, lk, contract.StatusGet.Name, contract.StatusGetIn{}, &st, nil)
	if err == nil {
		err = g.callWorker(ctx, id, lk, contract.ListGet.Name, contract.ListGetIn{}, &list, nil)
	}
	g.mu.Lock()
	if w.link == lk {
		w.refreshing = false
	}
	if err != nil || w.link != lk {
		g.mu.Unlock()
		if err != nil && lk.ctx.Err() == nil {
			g.log.Warn("worker view refresh failed", "worker", id, "err", err)
		}
		return
	}
	st.Leases, list.Devices = g.mergeLeasesLocked(id, w.status.Leases, st.Leases, list.Devices, start)
	w.status, w.devices = st, list.Devices
	w.lastSeen = g.clock.Now()
	w.version++
	// An admin's status.get lists every lease on the worker: the index
	// follows it for the ones this gateway issued.
	g.syncIndexLocked(id, st.Leases, start)
	g.mu.Unlock()
	g.kickDispatch()
}

// mergeLeasesLocked protects what the gateway learned while a refresh was
// in flight (reads that started at seq start): a lease it granted since is
// kept, with its device shown leased (so it never looks warm); one it saw
// end since is dropped.
func (g *Gateway) mergeLeasesLocked(id string, old, fresh []contract.Lease, devices []contract.Device, start uint64) ([]contract.Lease, []contract.Device) {
	present := map[string]bool{}
	out := make([]contract.Lease, 0, len(fresh))
	tombs := g.tombs[id]
	for _, l := range fresh {
		present[l.LeaseID] = true
		if t, ok := tombs[l.LeaseID]; ok && t > start {
			continue
		}
		out = append(out, l)
	}
	held := map[string]string{} // device → lease, for grants newer than the read
	for _, l := range old {
		if present[l.LeaseID] {
			continue
		}
		if e := g.leases[joinLeaseID(id, l.LeaseID)]; e != nil && e.seq > start {
			out = append(out, l)
			held[l.DeviceID] = l.LeaseID
		}
	}
	for i := range devices {
		if lid, ok := held[devices[i].ID]; ok {
			devices[i].Runtime.Lifecycle, devices[i].Runtime.Lease = contract.StateLeased, &lid
		}
	}
	return out, devices
}

// onWorkerEventLocked handles one event from a worker's stream (lk.evmu
// held): it keeps the lease index current, republishes the fact on the
// gateway's bus with the worker's id, and refreshes the view on lease and
// device facts.
func (g *Gateway) onWorkerEventLocked(id string, lk *link, e contract.Event, publish bool) {
	g.mu.Lock()
	w := g.workers[id]
	if w == nil || w.link != lk || (e.Seq != 0 && e.Seq <= w.lastSeq) {
		g.mu.Unlock()
		return
	}
	if e.Seq > w.lastSeq {
		w.lastSeq = e.Seq
	}
	w.lastSeen = g.clock.Now()
	if !publish {
		g.mu.Unlock()
		return
	}
	if _, ours := g.own(e.RequesterID); ours && e.LeaseID != "" && (e.Type == "lease.released" || e.Type == "lease.expired") {
		g.indexDropLocked(joinLeaseID(id, e.LeaseID))
	}
	ev, keep := g.eventIn(id, e)
	g.mu.Unlock()
	if keep {
		g.publish(ev)
	}
	if hasPrefix(e.Type, "lease.") || hasPrefix(e.Type, "device.") {
		lk.kick()
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// eventIn rewrites a worker's event for the gateway's bus: gateway lease
// ids, client-side names, and the worker's id in the payload.
func (g *Gateway) eventIn(id string, e contract.Event) (events.Event, bool) {
	if _, ours := g.own(e.RequesterID); ours && (e.Type == "request.refused" || e.Type == "request.rejected") {
		// A noWait refusal (or a rejection) of a forwarded request is a
		// worker's answer to the gateway, not a fact about the client's
		// request, whose outcome the gateway's own queue reports.
		return events.Event{}, false
	}
	data := map[string]any{}
	for k, v := range e.Data {
		data[k] = v
	}
	if o, ok := data["ownerId"].(string); ok {
		data["ownerId"] = g.principalOut(id, o)
	}
	data["workerId"] = id
	return events.Event{Type: e.Type, At: e.At, DeviceID: e.DeviceID, LeaseID: joinLeaseID(id, e.LeaseID),
		RequesterID: g.principalOut(id, e.RequesterID), Platform: e.Platform, Reason: e.Reason, Data: data}, true
}

// applyGrant folds a grant into the view at once, ahead of the refresh
// the worker's event will cause (new slices: snapshots share the old).
func (w *worker) applyGrant(l contract.Lease) {
	leases := make([]contract.Lease, 0, len(w.status.Leases)+1)
	for _, x := range w.status.Leases {
		if x.LeaseID != l.LeaseID {
			leases = append(leases, x)
		}
	}
	bare := l
	bare.Device = nil
	w.status.Leases = append(leases, bare)
	devs := make([]contract.Device, 0, len(w.devices)+1)
	found := false
	for _, d := range w.devices {
		if d.ID == l.DeviceID {
			lid := l.LeaseID
			d.Runtime.Lifecycle, d.Runtime.Lease, found = contract.StateLeased, &lid, true
		}
		devs = append(devs, d)
	}
	if !found && l.Device != nil {
		d := *l.Device
		lid := l.LeaseID
		d.Runtime.Lifecycle, d.Runtime.Lease = contract.StateLeased, &lid
		devs = append(devs, d)
	}
	w.devices = devs
}

// detach runs when an uplink ends. The view stays, greyed, with its last
// state; nothing about its leases is guessed.
func (g *Gateway) detach(id string, lk *link) {
	lk.cancel()
	g.mu.Lock()
	w := g.workers[id]
	if w == nil || w.link != lk {
		g.mu.Unlock()
		return
	}
	w.link = nil
	w.refreshing = false
	if !w.known {
		delete(g.workers, id)
		g.mu.Unlock()
		return
	}
	// An incompatible worker stays marked so: that is what the operator
	// has to act on (upgrade it), connected or not.
	if w.state != contract.WorkerIncompatible {
		w.state = contract.WorkerDisconnected
	}
	if lk.up || w.disconnectedAt.IsZero() {
		w.disconnectedAt = g.clock.Now()
	}
	g.scheduleRetentionLocked(w)
	g.mu.Unlock()
	if lk.up {
		g.publish(events.Event{Type: "worker.disconnected", Data: map[string]any{"workerId": id, "label": w.label}})
	}
	g.kickDispatch()
}

// retentionDeadlineLocked is when a disconnected view may be forgotten:
// once the retention has elapsed and every lease this gateway issued on
// the worker has passed its deadline (a lease nobody can renew has
// expired on the worker's own clock).
func (g *Gateway) retentionDeadlineLocked(w *worker) time.Time {
	d := w.disconnectedAt.Add(g.o.DisconnectedRetention)
	for _, e := range g.leases {
		if e.worker == w.id && e.expiresAt.After(d) {
			d = e.expiresAt
		}
	}
	return d
}

func (g *Gateway) scheduleRetentionLocked(w *worker) {
	if g.closed {
		return
	}
	if w.retain != nil {
		w.retain.Stop()
	}
	wait := g.retentionDeadlineLocked(w).Sub(g.clock.Now())
	if wait < 0 {
		wait = 0
	}
	id := w.id
	w.retain = g.clock.AfterFunc(wait, func() { g.retentionDue(id, w) })
}

func (g *Gateway) retentionDue(id string, w *worker) {
	g.mu.Lock()
	if g.workers[id] != w || w.link != nil || g.closed {
		g.mu.Unlock()
		return
	}
	if g.clock.Now().Before(g.retentionDeadlineLocked(w)) {
		g.scheduleRetentionLocked(w)
		g.mu.Unlock()
		return
	}
	g.forgetLocked(w)
	g.mu.Unlock()
	g.publish(events.Event{Type: "worker.removed", Reason: "retention-elapsed", Data: map[string]any{"workerId": id, "label": w.label}})
}

// forgetLocked drops a worker's view and its index entries. Its drain, an
// operator's decision about the machine, stays until undrain.
func (g *Gateway) forgetLocked(w *worker) {
	if w.retain != nil {
		w.retain.Stop()
		w.retain = nil
	}
	delete(g.workers, w.id)
	for gid, e := range g.leases {
		if e.worker == w.id {
			g.indexRemoveLocked(gid)
		}
	}
	delete(g.tombs, w.id)
}

// ---- views ----

func (g *Gateway) viewLocked(w *worker) contract.WorkerView {
	_, drained := g.drained[w.id]
	v := contract.WorkerView{ID: w.id, Label: w.label, State: w.state, Drained: drained,
		Version: w.hello.Version, Protocol: w.hello.Protocol, Health: w.status.Daemon.Health,
		DownloadPolicy: w.policy, QueueDepth: w.status.QueueDepth, Devices: len(w.devices),
		Leases: len(w.status.Leases), LastSeenAt: w.lastSeen.UTC()}
	if v.Version == "" {
		v.Version = w.status.Daemon.Version
	}
	if len(w.status.Capacity.Platforms) > 0 {
		v.Capacity = map[string]contract.PlatformCapacity{}
		for p, c := range w.status.Capacity.Platforms {
			v.Capacity[p] = c
		}
	}
	return v
}

// knownLocked lists the workers that have a view, by label then id.
func (g *Gateway) knownLocked() []*worker {
	out := make([]*worker, 0, len(g.workers))
	for _, w := range g.workers {
		if w.known {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].label != out[j].label {
			return out[i].label < out[j].label
		}
		return out[i].id < out[j].id
	})
	return out
}

// Views returns every worker view the gateway holds.
func (g *Gateway) Views() []contract.WorkerView {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []contract.WorkerView{}
	for _, w := range g.knownLocked() {
		out = append(out, g.viewLocked(w))
	}
	return out
}

func (g *Gateway) deviceOut(w *worker, d contract.Device) contract.Device {
	d.WorkerID = w.id
	if d.Runtime.Lease != nil {
		// The fleet's lease id, as lease.* answers name it.
		lid := joinLeaseID(w.id, *d.Runtime.Lease)
		d.Runtime.Lease = &lid
	}
	// Where a device lives on its worker's machine means nothing to a
	// fleet client; it reaches the device through the gateway.
	d.DeviceSet = ""
	d.Env = nil
	return d
}

func (g *Gateway) leaseOut(workerID, label string, l contract.Lease) contract.Lease {
	l.LeaseID = joinLeaseID(workerID, l.LeaseID)
	l.RequesterID = g.principalOut(workerID, l.RequesterID)
	l.OwnerID = g.principalOut(workerID, l.OwnerID)
	l.Worker = &contract.WorkerRef{ID: workerID, Label: label}
	l.WorkerID = workerID
	if l.Device != nil {
		d := g.deviceOut(&worker{id: workerID}, *l.Device)
		l.Device = &d
	}
	if len(l.Devices) > 0 {
		// A group's members are all on this one worker (group.go).
		ds := make([]contract.Device, len(l.Devices))
		for i, d := range l.Devices {
			ds[i] = g.deviceOut(&worker{id: workerID}, d)
		}
		l.Devices = ds
	}
	return l
}

// devices lists every device of every view, tagged with its worker.
func (g *Gateway) devices() []contract.Device {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []contract.Device{}
	for _, w := range g.knownLocked() {
		for _, d := range w.devices {
			out = append(out, g.deviceOut(w, d))
		}
	}
	return out
}

// Status is status.get on a gateway: the worker's shape, summed over the
// fleet. base carries the daemon block; the gateway sets its mode.
func (g *Gateway) Status(s contract.Session, base contract.DaemonInfo) contract.StatusGetOut {
	base.Mode = "gateway"
	if base.InstanceID == "" {
		base.InstanceID = g.o.InstanceID
	}
	if base.Health == "" {
		base.Health = "running"
	}
	out := contract.StatusGetOut{Daemon: base, Workers: []contract.WorkerView{}, Devices: []contract.Device{},
		Leases: []contract.Lease{}, Queue: []contract.QueueEntry{},
		Capacity: contract.Capacity{Strategy: "fleet", Platforms: map[string]contract.PlatformCapacity{}}}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.knownLocked() {
		out.Workers = append(out.Workers, g.viewLocked(w))
		for _, d := range w.devices {
			out.Devices = append(out.Devices, g.deviceOut(w, d))
		}
		for _, l := range w.status.Leases {
			lo := g.leaseOut(w.id, w.label, l)
			if s.Role == contract.RoleAdmin || lo.OwnerID == s.Principal {
				out.Leases = append(out.Leases, lo)
			}
		}
		if w.state != contract.WorkerConnected {
			continue
		}
		c := w.status.Capacity
		out.Capacity.MaxRunning += c.MaxRunning
		out.Capacity.MaxManaged += c.MaxManaged
		out.Capacity.Running += c.Running
		out.Capacity.Managed += c.Managed
		out.Capacity.Reserved += c.Reserved
		out.Capacity.RAMBudgetBytes += c.RAMBudgetBytes
		out.Capacity.RAMUsedBytes += c.RAMUsedBytes
		out.Capacity.CPUBudgetMilli += c.CPUBudgetMilli
		out.Capacity.CPUUsedMilli += c.CPUUsedMilli
		mergeGoldens(&out, w.id, w.status.Goldens)
		for p, pc := range c.Platforms {
			sum := out.Capacity.Platforms[p]
			sum.MaxRunning += pc.MaxRunning
			sum.MaxManaged += pc.MaxManaged
			sum.Running += pc.Running
			sum.Managed += pc.Managed
			sum.Reserved += pc.Reserved
			sum.RAMUsedBytes += pc.RAMUsedBytes
			out.Capacity.Platforms[p] = sum
		}
	}
	page := g.queuePageLocked(0, contract.StatusQueueEntries)
	out.Queue, out.QueueDepth, out.QueueByPlatform, out.QueueNextCursor = page.Entries, page.Depth, page.byPlatform, page.NextCursor
	return out
}

// mergeGoldens adds a connected worker's goldens to the fleet's status,
// each named by its worker: they count in the managed figures summed
// above, so a reader (the console, the device gauges) must see them too.
func mergeGoldens(out *contract.StatusGetOut, worker string, g *contract.Goldens) {
	if g == nil || len(g.Devices)+len(g.NotBuilt) == 0 {
		return
	}
	if out.Goldens == nil {
		out.Goldens = &contract.Goldens{}
	}
	for _, d := range g.Devices {
		d.Worker = worker
		out.Goldens.Devices = append(out.Goldens.Devices, d)
	}
	for _, n := range g.NotBuilt {
		n.Worker = worker
		out.Goldens.NotBuilt = append(out.Goldens.NotBuilt, n)
	}
}

type queuePage struct {
	contract.QueueListOut
	byPlatform map[string]int
	last       *pending // the last entry listed
}

// queuePageLocked is up to limit of the fleet queue's waiting requests
// queued after cursor (0: from the head), with the depth and per-platform
// counts, as a worker's status.get and queue.list number them. A request
// a worker is answering right now is still queued here until that worker
// begins device work.
func (g *Gateway) queuePageLocked(cursor uint64, limit int) queuePage {
	if limit <= 0 {
		limit = contract.QueueListDefaultLimit
	}
	limit = min(limit, contract.QueueListMaxLimit)
	out := queuePage{QueueListOut: contract.QueueListOut{Entries: []contract.QueueEntry{}, Depth: g.waitingTotal}, byPlatform: map[string]int{}}
	for platform, n := range g.waiting {
		out.byPlatform[platform] = n
	}
	// The walk numbers positions as Positions(waits) would and stops one
	// entry past the page: a page costs its offset plus its length, not the
	// whole queue.
	pos := 0
	for p := range g.queue.All() {
		if !waits(p) {
			continue
		}
		pos++
		if g.queue.Seq(p) <= cursor {
			continue
		}
		if len(out.Entries) == limit {
			out.NextCursor = contract.QueueCursor(g.queue.Seq(out.last))
			break
		}
		out.Entries = append(out.Entries, contract.QueueEntry{Position: pos, RequesterID: p.requester, Platform: p.in.Platform,
			Model: p.in.Model, OSVersion: p.in.OSVersion, Phase: "queued", EnqueuedAt: g.queue.EnqueuedAt(p).UTC()})
		out.last = p
	}
	return out
}

// catalogGet is the union of the connected workers' catalogs, models and
// runtimes deduplicated by identifier, each naming the workers that have it.
func (g *Gateway) catalogGet(_ context.Context, _ *dispatch.Call, in contract.CatalogGetIn) (contract.CatalogGetOut, error) {
	g.mu.Lock()
	type acc struct {
		pc       contract.PlatformCatalog
		models   map[string]int
		runtimes map[string]int
		ok       bool
	}
	byPlat := map[string]*acc{}
	var order []string
	for _, w := range g.knownLocked() {
		if w.state != contract.WorkerConnected {
			continue
		}
		for _, pc := range w.catalog {
			if in.Platform != "" && pc.Platform != in.Platform {
				continue
			}
			a := byPlat[pc.Platform]
			if a == nil {
				a = &acc{pc: contract.PlatformCatalog{Platform: pc.Platform, Models: []contract.CatalogModel{}, Runtimes: []contract.CatalogRuntime{}},
					models: map[string]int{}, runtimes: map[string]int{}}
				byPlat[pc.Platform] = a
				order = append(order, pc.Platform)
			}
			if pc.Error != "" {
				if a.pc.Error == "" {
					a.pc.Error = w.id + ": " + pc.Error
				}
			} else {
				a.ok = true
			}
			for _, m := range pc.Models {
				key := m.Identifier
				if key == "" {
					key = m.Name
				}
				i, seen := a.models[key]
				if !seen {
					m.Workers = nil
					i = len(a.pc.Models)
					a.models[key] = i
					a.pc.Models = append(a.pc.Models, m)
				}
				a.pc.Models[i].Workers = addWorker(a.pc.Models[i].Workers, w.id)
			}
			for _, r := range pc.Runtimes {
				key := r.Identifier
				if key == "" {
					key = r.Name
				}
				i, seen := a.runtimes[key]
				if !seen {
					r.SupportedModels = append([]string(nil), r.SupportedModels...)
					r.Workers = []string{w.id}
					a.runtimes[key] = len(a.pc.Runtimes)
					a.pc.Runtimes = append(a.pc.Runtimes, r)
					continue
				}
				have := &a.pc.Runtimes[i]
				have.Workers = addWorker(have.Workers, w.id)
				have.Available = have.Available || r.Available
				for _, m := range r.SupportedModels {
					if !containsStr(have.SupportedModels, m) {
						have.SupportedModels = append(have.SupportedModels, m)
					}
				}
			}
		}
	}
	g.mu.Unlock()
	sort.Strings(order)
	out := contract.CatalogGetOut{Platforms: []contract.PlatformCatalog{}}
	for _, p := range order {
		a := byPlat[p]
		if a.ok {
			a.pc.Error = "" // some worker serves it; one worker's listing failure is its own
		}
		out.Platforms = append(out.Platforms, a.pc)
	}
	if in.Platform != "" && len(out.Platforms) == 0 {
		return out, contract.Errorf(contract.CodeUnsupportedPlatform, "no connected worker serves platform %s", in.Platform).
			WithDetails("platform", in.Platform)
	}
	return out, nil
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// addWorker appends id to ids once.
func addWorker(ids []string, id string) []string {
	if containsStr(ids, id) {
		return ids
	}
	return append(ids, id)
}
