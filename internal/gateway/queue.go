package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
)

// Request states in the fleet queue.
const (
	stQueued     = iota // waiting for routing
	stTrying            // sent to a worker (noWait), no answer and no progress yet
	stDispatched        // the worker has begun work: it is that worker's now
	// stPinned: restored after a restart while a worker had it; it waits
	// for that worker to answer the same attempt again (ADR 0101).
	stPinned
)

// pending is one lease request the gateway holds. Its place in the fleet
// queue (arrival time, deadline and timer, last position told) is kept by
// the queue, g.queue, a waitq.Queue.
type pending struct {
	id        uint64
	in        contract.LeaseRequestIn // the client's request, TTL resolved
	group     *groupRoute             // its members, for a multi-device request (group.go)
	requester string                  // client-side
	owner     string                  // client-side
	noWait    bool
	// calls are the callers waiting on it: one, several attached under
	// one idempotency key, or none for a request restored after a restart.
	calls []*dispatch.Call
	// rid names the request (its receipt); durable when the store has it.
	rid     string
	key     string
	fp      string
	durable bool
	// deadline is when timeoutMs ends the wait (zero: none).
	deadline time.Time
	// attemptN and attemptAt are the routing attempt under way; the
	// forwarded idempotency key is <rid>.<attemptN>.
	attemptN  int
	attemptAt time.Time
	unpin     ports.Timer // ends a pinned wait (stPinned)
	created   time.Time
	restored  bool // read back from the store, not asked for in this run

	state  int
	worker string
	// avoid holds, per worker that answered NO_CAPACITY, the view version
	// the request waits to exceed before it is routed there again.
	avoid     map[string]uint64
	cancelled bool // lease.cancel arrived while a worker had it
	abandoned bool // the caller went away while a worker had it
	finished  bool
	fin       chan struct{} // closed when out is set
	out       outcome

	pmu     sync.Mutex // orders the pushes to the caller
	working bool       // a worker's progress has been relayed (under pmu)
	pushed  uint64     // newest position decision pushed (under pmu)
}

type outcome struct {
	lease contract.Lease
	err   error
	// keepOpen leaves the stored receipt open: the gateway is stopping
	// and the next run takes the request back.
	keepOpen bool
}

func (p *pending) route() routeRequest {
	return routeRequest{Platform: p.in.Platform, Model: p.in.Model, OSVersion: p.in.OSVersion, AllowDownload: p.in.AllowDownload, group: p.group}
}

// push sends a progress push to the caller; a queue position never
// follows device work.
func (p *pending) push(pr contract.Progress, relayed bool) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if relayed {
		p.working = true
	} else if p.working {
		return
	}
	for _, c := range p.calls {
		c.Push(contract.NotifyProgress, pr)
	}
}

// pushPosition sends a queued push unless a later pass has already moved
// the request on.
func (p *pending) pushPosition(pos int, stamp uint64) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if p.working || stamp <= p.pushed {
		return
	}
	p.pushed = stamp
	for _, c := range p.calls {
		c.Push(contract.NotifyProgress, contract.Progress{Phase: "queued", QueuePosition: pos})
	}
}

func ownerData(owner string, kv ...any) map[string]any {
	m := map[string]any{"ownerId": owner}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func (p *pending) event(typ string, kv ...any) events.Event {
	return events.Event{Type: typ, RequesterID: p.requester, Platform: p.in.Platform, Data: ownerData(p.owner, kv...)}
}

// leaseRequest enters a request into the fleet queue and waits for its
// outcome. The queue has a worker's semantics: timeoutMs ends a wait with
// QUEUE_TIMEOUT, noWait refuses at once with NO_CAPACITY, lease.cancel
// withdraws it, and queued progress carries the position. With a store,
// a waiting or keyed request is stored before it joins the queue, and an
// idempotency key names it across repeats and restarts (ADR 0101).
func (g *Gateway) leaseRequest(ctx context.Context, call *dispatch.Call, in contract.LeaseRequestIn) (contract.Lease, error) {
	if in.Platform == "" && len(in.Devices) == 0 {
		return contract.Lease{}, contract.Errorf(contract.CodeBadRequest, "platform is required").
			WithNext("name a platform: ios or android")
	}
	if in.TimeoutMs < 0 {
		return contract.Lease{}, contract.Errorf(contract.CodeBadRequest, "ttlMs and timeoutMs must not be negative")
	}
	if in.IdempotencyKey != "" && g.o.Store == nil {
		// Without a store the gateway keeps no receipts: honouring the key
		// would be a promise (never a second device) it cannot keep.
		return contract.Lease{}, contract.Errorf(contract.CodeUnsupportedInGateway, "idempotencyKey: this gateway runs without a store and keeps no lease request receipts").
			WithNext("drop --idempotency-key, or run the gateway with its home store (the default)")
	}
	if in.TTLMs == 0 && g.o.DefaultTTL > 0 {
		in.TTLMs = g.o.DefaultTTL.Milliseconds()
	}
	if err := g.checkTTL(in.TTLMs); err != nil {
		return contract.Lease{}, err
	}
	requester := in.RequesterID
	if requester == "" {
		requester = call.Session.Principal
	}
	owner := call.Session.Principal
	if in.OwnerID != "" {
		if call.Session.Role != contract.RoleAdmin {
			return contract.Lease{}, contract.Errorf(contract.CodeForbidden, "only an admin session may set a lease's owner")
		}
		owner = in.OwnerID
	}
	fp := fingerprint(in)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return contract.Lease{}, contract.Errorf(contract.CodeDaemonStopping, "the gateway is stopping")
	}
	rid := ""
	if in.IdempotencyKey != "" {
		if p := g.byKey[keyOf(requester, in.IdempotencyKey)]; p != nil {
			if p.fp != fp {
				g.mu.Unlock()
				return contract.Lease{}, keyMismatch(p.rid)
			}
			return g.wait(ctx, g.attachAndUnlock(p, call), call)
		}
		r, ok, err := g.o.Store.ReceiptByKey(ctx, requester, in.IdempotencyKey)
		if err != nil {
			g.mu.Unlock()
			return contract.Lease{}, fmt.Errorf("gateway: read the request's receipt: %w", err)
		}
		if ok {
			if r.Fingerprint != fp {
				g.mu.Unlock()
				return contract.Lease{}, keyMismatch(r.ID)
			}
			if !r.Interrupted {
				l, err := g.replayLocked(r)
				g.mu.Unlock()
				return l, err
			}
			rid = r.ID // admitted again under its own id, at the back
		}
	}
	if q := g.pendingBy[requester]; q != nil && q.restored && q.key == in.IdempotencyKey && q.fp == fp && q.owner == owner && g.callersLocked(q) == 0 {
		// The same request again from the requester of a restored one that
		// nobody waits on: it is this caller's, in its old place. Checked
		// before the lease index, which a worker's grant event can reach
		// before the request has its outcome.
		return g.wait(ctx, g.attachAndUnlock(q, call), call)
	}
	if e := g.byReq[requester]; e != nil {
		if u, ok := g.uncollected[requester]; ok && u.fp == fp && u.lease.LeaseID == e.id && in.IdempotencyKey == "" {
			// A restored request was served while no caller waited; its
			// requester repeating the same request collects the lease.
			delete(g.uncollected, requester)
			g.mu.Unlock()
			return u.lease, nil
		}
		g.mu.Unlock()
		return contract.Lease{}, contract.Errorf(contract.CodeRequesterLeased, "this requester already holds lease %s", e.id).
			WithDetails("leaseId", e.id, "workerId", e.worker).
			WithNext("release " + e.id + " first (`simlock release " + e.id + "`), or use a different --requester")
	}
	if g.pendingBy[requester] != nil {
		g.mu.Unlock()
		return contract.Lease{}, contract.Errorf(contract.CodeRequesterQueued, "requester %s already has a pending request", requester)
	}
	if limit := g.o.MaxPerPrincipal; limit > 0 && g.perOwner[owner] >= limit {
		g.mu.Unlock()
		return contract.Lease{}, contract.Errorf(contract.CodeQueueLimit, "%s already has %d lease requests waiting in the fleet; at most %d may wait at once", owner, g.perOwner[owner], limit).
			WithDetails("limit", limit).WithRetryAfter(5000)
	}
	g.nextReq++
	now := g.clock.Now()
	p := &pending{id: g.nextReq, in: in, group: groupOf(in), requester: requester, owner: owner, noWait: in.NoWait,
		calls: []*dispatch.Call{call}, key: in.IdempotencyKey, fp: fp, created: now,
		avoid: map[string]uint64{}, fin: make(chan struct{})}
	if rid == "" {
		rid = requestID(p.id)
	}
	p.rid = rid
	var timeout time.Duration
	if !p.noWait && in.TimeoutMs > 0 {
		timeout = time.Duration(in.TimeoutMs) * time.Millisecond
		p.deadline = now.Add(timeout)
	}
	// A request that will wait, or that names itself with a key, is
	// stored before it can be served; a keyless noWait one is answered on
	// this pass and a restart has nothing to take back.
	if g.o.Store != nil && (p.key != "" || !p.noWait) {
		p.durable = true
		if err := g.o.Store.PutReceipt(ctx, g.receiptLocked(p, ReceiptQueued, now)); err != nil {
			g.mu.Unlock()
			return contract.Lease{}, fmt.Errorf("gateway: store the request before queueing it: %w", err)
		}
	}
	g.admitLocked(p, timeout)
	var evs []events.Event
	if !p.noWait {
		evs = append(evs, p.event("request.queued", "model", in.Model, "osVersion", in.OSVersion, "requestId", p.rid))
	}
	g.mu.Unlock()
	g.publishAll(evs)
	// Decide before returning to the caller's loop: a request that can go
	// now goes now, and noWait is answered on this pass.
	g.dispatchPass()
	return g.wait(ctx, p, call)
}

// admitLocked puts a new or restored request in the fleet queue and the
// indexes that name it.
func (g *Gateway) admitLocked(p *pending, timeout time.Duration) {
	g.enqueueLocked(p, timeout)
	if timeout > 0 {
		g.queue.SetTimer(p, g.clock.AfterFunc(timeout, func() { g.expire(p) }))
	}
	g.pendingBy[p.requester] = p
	g.byRID[p.rid] = p
	if p.key != "" {
		g.byKey[keyOf(p.requester, p.key)] = p
	}
	g.perOwner[p.owner]++
}

// wait blocks until p has its outcome, or withdraws this caller if ctx
// ends first.
func (g *Gateway) wait(ctx context.Context, p *pending, call *dispatch.Call) (contract.Lease, error) {
	select {
	case <-p.fin:
		return p.out.lease, p.out.err
	case <-ctx.Done():
		g.abandon(p, call)
		return contract.Lease{}, ctx.Err()
	}
}

// finishLocked ends a request once, with its outcome, and settles its
// receipt before any caller hears it.
func (g *Gateway) finishLocked(p *pending, o outcome) {
	if p.finished {
		return
	}
	p.finished = true
	g.dequeueLocked(p) // and stops its timeout
	if p.unpin != nil {
		p.unpin.Stop()
	}
	if g.pendingBy[p.requester] == p {
		delete(g.pendingBy, p.requester)
	}
	if g.byRID[p.rid] == p {
		delete(g.byRID, p.rid)
	}
	if p.key != "" && g.byKey[keyOf(p.requester, p.key)] == p {
		delete(g.byKey, keyOf(p.requester, p.key))
	}
	if g.perOwner[p.owner]--; g.perOwner[p.owner] <= 0 {
		delete(g.perOwner, p.owner)
	}
	g.dropInflightLocked(p)
	g.settleLocked(p, o)
	p.out = o
	close(p.fin)
}

func (g *Gateway) dropInflightLocked(p *pending) {
	if p.worker == "" {
		return
	}
	w := g.workers[p.worker]
	if w == nil {
		return
	}
	for i, q := range w.inflight {
		if q == p {
			w.inflight = append(w.inflight[:i:i], w.inflight[i+1:]...)
			return
		}
	}
}

// expire ends a request still waiting in the queue when its timeoutMs has
// passed. One that a worker is answering right now gets its outcome; if
// that is a stale NO_CAPACITY the deadline is checked then.
func (g *Gateway) expire(p *pending) {
	g.mu.Lock()
	if p.finished || p.state != stQueued {
		g.mu.Unlock()
		return
	}
	g.finishLocked(p, outcome{err: g.timeoutErr(p)})
	g.mu.Unlock()
	g.publish(p.event("request.timed-out"))
	g.kickDispatch()
}

func (g *Gateway) timeoutErr(p *pending) error {
	return contract.Errorf(contract.CodeQueueTimeout, "no device freed up in the fleet within %dms", p.in.TimeoutMs).
		WithDetails("timeoutMs", p.in.TimeoutMs)
}

// abandon withdraws call from p. When no caller is left the request is
// withdrawn: work a worker has already begun completes, and a lease it
// grants is indexed and lives on its TTL, since a closing connection
// releases nothing.
func (g *Gateway) abandon(p *pending, call *dispatch.Call) {
	g.mu.Lock()
	if p.finished {
		g.mu.Unlock()
		return
	}
	if g.detachCallLocked(p, call) > 0 {
		g.mu.Unlock()
		return
	}
	// A pinned request is withdrawn too: whatever its worker granted
	// before the restart reached no one and expires unrenewed.
	if p.state != stQueued && p.state != stPinned {
		p.abandoned = true
		g.mu.Unlock()
		return
	}
	g.finishLocked(p, outcome{err: context.Canceled})
	g.mu.Unlock()
	g.publish(p.event("request.abandoned"))
	g.kickDispatch()
}

func (g *Gateway) leaseCancel(ctx context.Context, call *dispatch.Call, in contract.LeaseCancelIn) (contract.LeaseCancelOut, error) {
	req := in.RequesterID
	if req == "" {
		req = call.Session.Principal
	}
	g.mu.Lock()
	p := g.pendingBy[req]
	if p == nil {
		g.mu.Unlock()
		return contract.LeaseCancelOut{}, contract.Errorf(contract.CodeNoPendingRequest, "requester %s has no pending request", req)
	}
	if call.Session.Role != contract.RoleAdmin && p.owner != call.Session.Principal {
		g.mu.Unlock()
		return contract.LeaseCancelOut{}, contract.Errorf(contract.CodeForbidden, "the pending request of %s belongs to another principal", req)
	}
	if p.state == stQueued || p.state == stPinned {
		g.finishLocked(p, outcome{err: contract.Errorf(contract.CodeRequestCancelled, "the request was cancelled")})
		g.mu.Unlock()
		g.publish(p.event("request.cancelled"))
		g.kickDispatch()
		return contract.LeaseCancelOut{Cancelled: true}, nil
	}
	// A worker has it: withdraw it there too. Whatever the worker answers
	// the forwarded request, the caller gets REQUEST_CANCELLED (a lease
	// granted in the race is given back).
	p.cancelled = true
	wid := p.worker
	var lk *link
	if w := g.workers[wid]; w != nil {
		lk = w.link
	}
	state := p.state
	g.mu.Unlock()
	err := g.callWorker(ctx, wid, lk, contract.LeaseCancel.Name, contract.LeaseCancelIn{RequesterID: g.ns(req)}, &contract.LeaseCancelOut{}, nil)
	if err != nil && state == stDispatched {
		// NO_PENDING_REQUEST is the grant racing the cancel: the attempt
		// gives the lease back. Anything else (an unreachable worker) the
		// caller must hear.
		if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeNoPendingRequest {
			return contract.LeaseCancelOut{}, err
		}
	}
	return contract.LeaseCancelOut{Cancelled: true}, nil
}

func (g *Gateway) dispatchLoop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-g.kickCh:
			g.dispatchPass()
		}
	}
}

// plannerLocked builds a pass's planner over the current views, with the
// requests still in flight booked against them. Views are shared, not
// copied: booking copies a view before it marks it.
func (g *Gateway) plannerLocked() *planner {
	snaps := make([]viewSnapshot, 0, len(g.workers))
	ids := make([]string, 0, len(g.workers))
	for id, w := range g.workers {
		if w.known {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		w := g.workers[id]
		_, drained := g.drained[id]
		state := w.state
		if w.link == nil {
			state = contract.WorkerDisconnected
		}
		snaps = append(snaps, viewSnapshot{ID: id, State: state, Drained: drained, Policy: w.policy,
			Capacity: w.status.Capacity, Devices: w.devices, Catalog: w.catalog})
	}
	pl := newPlanner(g.route, snaps)
	for _, id := range ids {
		for _, p := range g.workers[id].inflight {
			pl.book(id, p.route())
		}
	}
	return pl
}

// attemptStart is a routing decision to carry out outside the lock.
type attemptStart struct {
	p  *pending
	w  string
	lk *link
}

type positionPush struct {
	p     *pending
	pos   int
	stamp uint64
}

// dispatchPass runs the queue once, oldest first: each waiting request is
// routed over the current views (passed over when nothing can serve it
// now), booked against the chosen view, and sent. It runs whenever the
// queue or a view changes.
func (g *Gateway) dispatchPass() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	pl := g.plannerLocked()
	var starts []attemptStart
	var pushes []positionPush
	var evs []events.Event
	for _, p := range g.queue.Entries() {
		if p.finished {
			continue
		}
		if p.state == stQueued {
			var skip func(string) bool
			if len(p.avoid) > 0 {
				skip = func(id string) bool {
					until, ok := p.avoid[id]
					w := g.workers[id]
					return ok && w != nil && w.version <= until
				}
			}
			if wid, ok := pl.place(p.route(), skip); ok {
				w := g.workers[wid]
				p.state, p.worker = stTrying, wid
				w.inflight = append(w.inflight, p)
				starts = append(starts, attemptStart{p: p, w: wid, lk: w.link})
			} else if p.noWait {
				g.finishLocked(p, outcome{err: noCapacity(p)})
				evs = append(evs, p.event("request.refused", "reason", "no-capacity"))
			}
		}
	}
	// Positions count every request that waits (noWait ones never do),
	// including one a worker is answering; only a request still waiting
	// for routing is told its place.
	for _, qp := range g.queue.Renumber(waits, func(p *pending) bool { return p.state == stQueued }) {
		pushes = append(pushes, positionPush{qp.Entry, qp.Pos, qp.Stamp})
	}
	g.mu.Unlock()
	g.publishAll(evs)
	for _, pp := range pushes {
		pp.p.pushPosition(pp.pos, pp.stamp)
	}
	for _, s := range starts {
		g.spawn(func() { g.attempt(s.p, s.w, s.lk) })
	}
}

// waits reports whether p takes a queue position.
func waits(p *pending) bool { return !p.noWait }

// enqueueLocked puts p at the queue's tail and counts it if it waits.
func (g *Gateway) enqueueLocked(p *pending, timeout time.Duration) {
	if g.queue.Push(p, g.clock.Now(), timeout) && waits(p) {
		if g.waiting == nil {
			g.waiting = map[string]int{}
		}
		g.waiting[p.in.Platform]++
		g.waitingTotal++
	}
}

// dequeueLocked takes p out of the queue (stopping its timeout), once:
// only a request that was still there is uncounted.
func (g *Gateway) dequeueLocked(p *pending) {
	if g.queue.Remove(p) && waits(p) {
		g.waitingTotal--
		if g.waiting[p.in.Platform]--; g.waiting[p.in.Platform] == 0 {
			delete(g.waiting, p.in.Platform)
		}
	}
}

func noCapacity(p *pending) error {
	return contract.Errorf(contract.CodeNoCapacity, "no worker in the fleet can serve a %s device right now", p.in.Platform).
		WithRetryAfter(5000)
}

// attempt carries out one routing decision: with a store, the receipt
// first records the worker and the attempt's number, so a restart can
// ask that worker about exactly this attempt; then the request is sent.
func (g *Gateway) attempt(p *pending, wid string, lk *link) {
	if p.durable {
		g.mu.Lock()
		if p.finished {
			g.mu.Unlock()
			return
		}
		p.attemptN++
		p.attemptAt = g.clock.Now()
		err := g.o.Store.PutReceipt(context.WithoutCancel(g.ctx), g.receiptLocked(p, ReceiptDispatched, p.attemptAt))
		g.mu.Unlock()
		if err != nil {
			g.attemptDone(p, wid, lk, contract.Lease{}, fmt.Errorf("gateway: record the request's attempt before sending it: %w", err))
			return
		}
	}
	g.send(p, wid, lk)
}

// send forwards p to its worker with noWait and follows it to an outcome.
// A stored request carries its attempt's idempotency key, so the worker
// answers a repeat of the same attempt from its own receipt.
func (g *Gateway) send(p *pending, wid string, lk *link) {
	fwd := contract.LeaseRequestIn{Platform: p.in.Platform, Model: p.in.Model, OSVersion: p.in.OSVersion,
		TTLMs: p.in.TTLMs, NoWait: true, RequesterID: g.ns(p.requester), AllowDownload: p.in.AllowDownload,
		OwnerID: g.ns(p.owner), Devices: p.in.Devices}
	g.mu.Lock()
	if p.durable {
		fwd.IdempotencyKey = attemptKey(p.rid, p.attemptN)
	}
	g.mu.Unlock()
	var l contract.Lease
	var err error
	if lk == nil {
		err = unreachable(wid)
	} else {
		err = lk.conn.Call(lk.ctx, contract.LeaseRequest.Name, fwd, &l, func(method string, raw json.RawMessage) {
			if method != contract.NotifyProgress {
				return
			}
			var pr contract.Progress
			if json.Unmarshal(raw, &pr) != nil || pr.Phase == "queued" {
				return
			}
			g.markDispatched(p, wid, lk)
			p.push(pr, true)
		})
		if err != nil {
			err = g.callErr(wid, lk, err)
		}
	}
	g.attemptDone(p, wid, lk, l, err)
}

// markDispatched: the worker has begun device work for p, so the request
// is that worker's and leaves the fleet queue.
func (g *Gateway) markDispatched(p *pending, wid string, lk *link) {
	g.mu.Lock()
	if p.finished || p.state != stTrying {
		g.mu.Unlock()
		return
	}
	p.state = stDispatched
	g.dequeueLocked(p)
	g.dropInflightLocked(p)
	g.mu.Unlock()
	g.publish(p.event("request.dispatched", "workerId", wid))
	lk.kick()
	g.kickDispatch()
}

func (g *Gateway) attemptDone(p *pending, wid string, lk *link, l contract.Lease, err error) {
	var evs []events.Event
	var giveBack *contract.Lease
	g.mu.Lock()
	g.dropInflightLocked(p)
	ce := contract.AsError(err)
	label := wid
	if w := g.workers[wid]; w != nil {
		label = w.label
	}
	switch {
	case err == nil:
		g.indexPutLocked(wid, l, g.nextSeqLocked())
		if w := g.workers[wid]; w != nil && w.link == lk {
			w.applyGrant(l)
		}
		if p.state == stTrying {
			evs = append(evs, p.event("request.dispatched", "workerId", wid))
		}
		p.state = stDispatched
		if p.cancelled {
			lc := l
			giveBack = &lc
			g.finishLocked(p, outcome{err: contract.Errorf(contract.CodeRequestCancelled, "the request was cancelled")})
		} else {
			g.finishLocked(p, outcome{lease: g.leaseOut(wid, label, l)})
		}
	case ce != nil && (ce.Code == contract.CodeNoCapacity || ce.Code == contract.CodeCapacityExhausted) && p.state == stTrying:
		// The view was stale: refresh it; the request waits, no worse off.
		// A worker whose host is full (CAPACITY_EXHAUSTED) is no different.
		w := g.workers[wid]
		switch {
		case p.cancelled:
			g.finishLocked(p, outcome{err: contract.Errorf(contract.CodeRequestCancelled, "the request was cancelled")})
		case p.abandoned:
			g.finishLocked(p, outcome{err: context.Canceled})
			evs = append(evs, p.event("request.abandoned"))
		case p.noWait:
			g.finishLocked(p, outcome{err: noCapacity(p)})
			evs = append(evs, p.event("request.refused", "reason", "no-capacity"))
		case g.queue.Overdue(p, g.clock.Now()):
			g.finishLocked(p, outcome{err: g.timeoutErr(p)})
			evs = append(evs, p.event("request.timed-out"))
		default:
			p.state, p.worker = stQueued, ""
			if w != nil {
				until := w.version + 1
				if w.refreshing {
					until++
				}
				p.avoid[wid] = until
			}
		}
		if lk != nil {
			lk.kick()
		}
	default:
		// A failure once work began (or any refusal but NO_CAPACITY) is the
		// request's own outcome, not a return to the queue. The worker
		// records failures of work it began; the gateway records the rest.
		g.finishLocked(p, outcome{err: err})
		if p.state == stTrying || (ce != nil && ce.Code == contract.CodeWorkerUnreachable) {
			evs = append(evs, p.event("request.failed", "workerId", wid, "reason", errText(err)))
		}
	}
	g.mu.Unlock()
	g.publishAll(evs)
	if giveBack != nil && lk != nil {
		g.spawn(func() {
			err := g.callWorker(lk.ctx, wid, lk, contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: giveBack.LeaseID}, &contract.LeaseReleaseOut{}, nil)
			if err == nil {
				g.mu.Lock()
				g.indexDropLocked(joinLeaseID(wid, giveBack.LeaseID))
				g.mu.Unlock()
			}
		})
	}
	if err == nil && lk != nil {
		lk.kick()
	}
	g.kickDispatch()
}

func errText(err error) string {
	if ce := contract.AsError(err); ce != nil {
		return string(ce.Code)
	}
	return err.Error()
}
