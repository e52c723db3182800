package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
)

// leaseEntry is one lease this gateway issued, as its index knows it. The
// index is rebuilt from the workers (their lease lists, filtered by this
// gateway's requester prefix) and kept current from grants, releases and
// worker events; it is never persisted.
type leaseEntry struct {
	id          string // gateway lease id
	worker      string
	workerLease string
	requester   string // client-side
	owner       string // client-side
	expiresAt   time.Time
	// seq is when the gateway last learned something about this lease, so
	// a refresh that started earlier cannot undo it.
	seq uint64
}

func (g *Gateway) nextSeqLocked() uint64 {
	g.seq++
	return g.seq
}

// indexPutLocked records (or updates) a lease a worker reports, if this
// gateway issued it. l is in the worker's form.
func (g *Gateway) indexPutLocked(workerID string, l contract.Lease, seq uint64) *leaseEntry {
	req, ok := g.own(l.RequesterID)
	if !ok {
		return nil
	}
	owner, _ := g.own(l.OwnerID)
	gid := joinLeaseID(workerID, l.LeaseID)
	e := g.leases[gid]
	if e == nil {
		e = &leaseEntry{id: gid, worker: workerID, workerLease: l.LeaseID}
		g.leases[gid] = e
	}
	e.requester, e.owner, e.expiresAt, e.seq = req, owner, l.ExpiresAt, seq
	if cur := g.byReq[req]; cur == nil || cur == e || g.leases[cur.id] != cur {
		g.byReq[req] = e
	}
	if t := g.tombs[workerID]; t != nil {
		delete(t, l.LeaseID)
	}
	return e
}

// indexRemoveLocked forgets a lease without a tombstone.
func (g *Gateway) indexRemoveLocked(gid string) *leaseEntry {
	e := g.leases[gid]
	if e == nil {
		return nil
	}
	delete(g.leases, gid)
	if u, ok := g.uncollected[e.requester]; ok && u.lease.LeaseID == gid {
		// Nobody came for it; it ended on its own.
		delete(g.uncollected, e.requester)
	}
	if g.byReq[e.requester] == e {
		delete(g.byReq, e.requester)
		// Another entry for the same requester (an anomaly a restart can
		// surface) takes over the one-lease rule.
		for _, o := range g.leases {
			if o.requester == e.requester {
				g.byReq[e.requester] = o
				break
			}
		}
	}
	return e
}

// indexDropLocked forgets a lease that ended, leaving a tombstone so a
// refresh that started before the end cannot bring it back.
func (g *Gateway) indexDropLocked(gid string) {
	wid, lid, ok := splitLeaseID(gid)
	if !ok {
		return
	}
	g.indexRemoveLocked(gid)
	t := g.tombs[wid]
	if t == nil {
		t = map[string]uint64{}
		g.tombs[wid] = t
	}
	t[lid] = g.nextSeqLocked()
}

// syncIndexLocked reconciles the index with a worker's full lease list, as
// read by a call that started at seq start.
func (g *Gateway) syncIndexLocked(workerID string, leases []contract.Lease, start uint64) {
	present := map[string]bool{}
	tombs := g.tombs[workerID]
	for _, l := range leases {
		if _, ours := g.own(l.RequesterID); !ours {
			continue
		}
		gid := joinLeaseID(workerID, l.LeaseID)
		present[gid] = true
		if t, ok := tombs[l.LeaseID]; ok && t > start {
			continue // ended after the list was read
		}
		if e := g.leases[gid]; e != nil && e.seq > start {
			continue // newer knowledge (a renew) than the list
		}
		g.indexPutLocked(workerID, l, start)
	}
	for gid, e := range g.leases {
		if e.worker == workerID && !present[gid] && e.seq <= start {
			g.indexRemoveLocked(gid)
		}
	}
	for lid, t := range tombs {
		if t <= start {
			delete(tombs, lid)
		}
	}
}

// linkFor returns a worker's uplink and label, or WORKER_UNREACHABLE. A
// worker this gateway does not know at all is unreachable too: after a
// restart its leases exist until it reconnects, and the gateway never
// guesses a lease is gone.
func (g *Gateway) linkFor(workerID string) (*link, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.workers[workerID]
	if w == nil || w.link == nil || w.state != contract.WorkerConnected {
		return nil, "", unreachable(workerID)
	}
	label := w.label
	return w.link, label, nil
}

// LeaseOwner answers the dispatcher's ownership check for a gateway lease
// id: from the index when the gateway issued it, else from the worker. An
// owner that is not one of this gateway's clients is qualified by the
// worker (principalOut), so only an admin passes the check.
func (g *Gateway) LeaseOwner(ctx context.Context, leaseID string) (string, bool, error) {
	wid, lid, ok := splitLeaseID(leaseID)
	if !ok {
		return "", false, nil
	}
	g.mu.Lock()
	if e := g.leases[leaseID]; e != nil {
		owner := e.owner
		g.mu.Unlock()
		return owner, true, nil
	}
	g.mu.Unlock()
	lk, _, err := g.linkFor(wid)
	if err != nil {
		return "", false, err
	}
	var l contract.Lease
	if err := g.callWorker(ctx, wid, lk, contract.LeaseGet.Name, contract.LeaseGetIn{LeaseID: lid}, &l, nil); err != nil {
		if ce := contract.AsError(err); ce != nil && ce.Code == contract.CodeUnknownLease {
			return "", false, nil
		}
		return "", false, err
	}
	return g.principalOut(wid, l.OwnerID), true, nil
}

// forward runs a lease operation on the worker named by the lease id.
func (g *Gateway) forward(ctx context.Context, leaseID, method string, in func(workerLease string) any, out any) (wid, label string, err error) {
	wid, lid, ok := splitLeaseID(leaseID)
	if !ok {
		return "", "", contract.Errorf(contract.CodeUnknownLease, "no lease %q (a gateway lease id is <workerId>.<leaseId>)", leaseID)
	}
	lk, label, err := g.linkFor(wid)
	if err != nil {
		return wid, "", err
	}
	err = g.callWorker(ctx, wid, lk, method, in(lid), out, nil)
	if ce := contract.AsError(err); ce != nil && ce.Code == contract.CodeUnknownLease {
		// The worker is the authority: gone there is gone.
		g.mu.Lock()
		g.indexDropLocked(leaseID)
		g.mu.Unlock()
	}
	return wid, label, err
}

func (g *Gateway) checkTTL(ttlMs int64) error {
	if ttlMs < 0 {
		return contract.Errorf(contract.CodeBadRequest, "ttlMs must not be negative")
	}
	if g.o.MaxTTL > 0 && time.Duration(ttlMs)*time.Millisecond > g.o.MaxTTL {
		return contract.Errorf(contract.CodeBadRequest, "asked for a %s lease, at most %s", time.Duration(ttlMs)*time.Millisecond, g.o.MaxTTL).
			WithDetails("maxTtlMs", g.o.MaxTTL.Milliseconds())
	}
	return nil
}

func (g *Gateway) leaseRenew(ctx context.Context, _ *dispatch.Call, in contract.LeaseRenewIn) (contract.Lease, error) {
	if err := g.checkTTL(in.TTLMs); err != nil {
		return contract.Lease{}, err
	}
	var l contract.Lease
	wid, label, err := g.forward(ctx, in.LeaseID, contract.LeaseRenew.Name, func(lid string) any {
		return contract.LeaseRenewIn{LeaseID: lid, TTLMs: in.TTLMs}
	}, &l)
	if err != nil {
		return contract.Lease{}, err
	}
	g.mu.Lock()
	g.indexPutLocked(wid, l, g.nextSeqLocked())
	g.mu.Unlock()
	return g.leaseOut(wid, label, l), nil
}

func (g *Gateway) leaseRelease(ctx context.Context, _ *dispatch.Call, in contract.LeaseReleaseIn) (contract.LeaseReleaseOut, error) {
	var out contract.LeaseReleaseOut
	_, _, err := g.forward(ctx, in.LeaseID, contract.LeaseRelease.Name, func(lid string) any {
		return contract.LeaseReleaseIn{LeaseID: lid}
	}, &out)
	if err != nil {
		return contract.LeaseReleaseOut{}, err
	}
	g.mu.Lock()
	g.indexDropLocked(in.LeaseID)
	g.mu.Unlock()
	g.kickDispatch()
	return contract.LeaseReleaseOut{LeaseID: in.LeaseID, Released: out.Released}, nil
}

func (g *Gateway) leaseGet(ctx context.Context, _ *dispatch.Call, in contract.LeaseGetIn) (contract.Lease, error) {
	var l contract.Lease
	wid, label, err := g.forward(ctx, in.LeaseID, contract.LeaseGet.Name, func(lid string) any {
		return contract.LeaseGetIn{LeaseID: lid}
	}, &l)
	if err != nil {
		return contract.Lease{}, err
	}
	return g.leaseOut(wid, label, l), nil
}

// workerLeases is one connected worker's answer to lease.list.
type workerLeases struct {
	id, label string
	lk        *link
	leases    []contract.Lease
}

// fanOutLeases asks every connected worker for its leases and keeps the
// ones this gateway issued that the session may see.
func (g *Gateway) fanOutLeases(ctx context.Context, s contract.Session) []workerLeases {
	g.mu.Lock()
	var targets []workerLeases
	for _, w := range g.knownLocked() {
		if w.link != nil && w.state == contract.WorkerConnected {
			targets = append(targets, workerLeases{id: w.id, label: w.label, lk: w.link})
		}
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for i := range targets {
		wg.Add(1)
		go func(t *workerLeases) {
			defer wg.Done()
			var out contract.LeaseListOut
			if err := g.callWorker(ctx, t.id, t.lk, contract.LeaseList.Name, contract.LeaseListIn{}, &out, nil); err != nil {
				g.log.Warn("lease.list on a worker failed", "worker", t.id, "err", err)
				return
			}
			for _, l := range out.Leases {
				owner, ours := g.own(l.OwnerID)
				if _, issued := g.own(l.RequesterID); !issued {
					continue
				}
				if s.Role == contract.RoleAdmin || (ours && owner == s.Principal) {
					t.leases = append(t.leases, l)
				}
			}
		}(&targets[i])
	}
	wg.Wait()
	return targets
}

func (g *Gateway) leaseList(ctx context.Context, call *dispatch.Call, _ contract.LeaseListIn) (contract.LeaseListOut, error) {
	out := contract.LeaseListOut{Leases: []contract.Lease{}}
	for _, t := range g.fanOutLeases(ctx, call.Session) {
		for _, l := range t.leases {
			out.Leases = append(out.Leases, g.leaseOut(t.id, t.label, l))
		}
	}
	sort.Slice(out.Leases, func(i, j int) bool {
		a, b := out.Leases[i], out.Leases[j]
		if !a.GrantedAt.Equal(b.GrantedAt) {
			return a.GrantedAt.Before(b.GrantedAt)
		}
		return a.LeaseID < b.LeaseID
	})
	return out, nil
}

// leaseReleaseAll releases, on every connected worker, the leases this
// gateway issued to one requester namespace that the caller may act on
// (every issued lease with everyone, admin only), as on a worker. It never
// touches a lease another gateway or a worker's local agent holds.
func (g *Gateway) leaseReleaseAll(ctx context.Context, call *dispatch.Call, in contract.LeaseReleaseAllIn) (contract.LeaseReleaseAllOut, error) {
	if in.Everyone && call.Session.Role != contract.RoleAdmin {
		return contract.LeaseReleaseAllOut{}, contract.Errorf(contract.CodeForbidden, "releasing every requester's leases needs the admin role").
			WithNext("drop --everyone to release your own leases, or use an operator token")
	}
	req := in.RequesterID
	if req == "" {
		req = call.Session.Principal
	}
	match := func(l contract.Lease) bool {
		r, _ := g.own(l.RequesterID)
		return in.Everyone || r == req || strings.HasPrefix(r, req+"/")
	}
	out := contract.LeaseReleaseAllOut{Released: []string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range g.fanOutLeases(ctx, call.Session) {
		wg.Add(1)
		go func(t workerLeases) {
			defer wg.Done()
			for _, l := range t.leases {
				if !match(l) {
					continue
				}
				var r contract.LeaseReleaseOut
				err := g.callWorker(ctx, t.id, t.lk, contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, &r, nil)
				gid := joinLeaseID(t.id, l.LeaseID)
				if err != nil {
					if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeUnknownLease {
						g.log.Warn("release on a worker failed", "worker", t.id, "lease", gid, "err", err)
						continue
					}
				}
				g.mu.Lock()
				g.indexDropLocked(gid)
				g.mu.Unlock()
				if err == nil {
					mu.Lock()
					out.Released = append(out.Released, gid)
					mu.Unlock()
				}
			}
		}(t)
	}
	wg.Wait()
	sort.Strings(out.Released)
	g.kickDispatch()
	return out, nil
}

var errExecBackstop = errors.New("gateway exec backstop")

// deviceExec proxies device.exec to the worker holding the lease. Both hops
// check ownership: here against the gateway's own index (admin does not
// bypass it: the requester must be the lease's), there by the worker
// against the namespaced requester the gateway forwards. Output pushes are
// relayed as they come.
func (g *Gateway) deviceExec(ctx context.Context, call *dispatch.Call, in contract.DeviceExecIn) (contract.DeviceExecOut, error) {
	wid, lid, ok := splitLeaseID(in.LeaseID)
	if !ok {
		return contract.DeviceExecOut{}, contract.Errorf(contract.CodeUnknownLease, "no lease %q", in.LeaseID)
	}
	req := in.RequesterID
	if req == "" {
		req = call.Session.Principal
	}
	lk, _, err := g.linkFor(wid)
	if err != nil {
		return contract.DeviceExecOut{}, err
	}
	g.mu.Lock()
	e := g.leases[in.LeaseID]
	var requester string
	if e != nil {
		requester = e.requester
	}
	g.mu.Unlock()
	if e == nil {
		var l contract.Lease
		if err := g.callWorker(ctx, wid, lk, contract.LeaseGet.Name, contract.LeaseGetIn{LeaseID: lid}, &l, nil); err != nil {
			return contract.DeviceExecOut{}, err
		}
		r, ours := g.own(l.RequesterID)
		if !ours {
			return contract.DeviceExecOut{}, contract.Errorf(contract.CodeForbidden,
				"lease %s was not issued through this gateway; run the command against its worker", in.LeaseID)
		}
		g.mu.Lock()
		g.indexPutLocked(wid, l, g.nextSeqLocked())
		g.mu.Unlock()
		requester = r
	}
	if requester != req {
		return contract.DeviceExecOut{}, contract.Errorf(contract.CodeForbidden,
			"lease %s belongs to requester %q, not %q", in.LeaseID, requester, req).
			WithNext("pass the lease's requesterId (simlock exec --requester)")
	}
	ectx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	backstop := g.clock.AfterFunc(g.o.ExecTimeout, func() { cancel(errExecBackstop) })
	defer backstop.Stop()
	fwd := in
	fwd.LeaseID = lid
	fwd.RequesterID = g.ns(req)
	// {leaseId} is the id the client knows, the fleet's; the worker
	// expands the device's placeholders.
	fwd.Args, _ = contract.ExpandPlaceholders(in.Args, contract.PlaceholderValues{LeaseID: in.LeaseID})
	var out contract.DeviceExecOut
	err = lk.conn.Call(ectx, contract.DeviceExec.Name, fwd, &out, func(method string, raw json.RawMessage) {
		if method != contract.NotifyOutput {
			return
		}
		var o contract.ExecOutput
		if json.Unmarshal(raw, &o) == nil {
			call.Push(contract.NotifyOutput, o)
		}
	})
	if err != nil {
		if errors.Is(context.Cause(ectx), errExecBackstop) && ctx.Err() == nil {
			return contract.DeviceExecOut{}, contract.Errorf(contract.CodeExecTimeout,
				"worker %s did not finish the command within gateway.execTimeoutMs (%s)", wid, g.o.ExecTimeout).
				WithDetails("workerId", wid)
		}
		if ctx.Err() != nil {
			return contract.DeviceExecOut{}, ctx.Err()
		}
		return contract.DeviceExecOut{}, g.callErr(wid, lk, err)
	}
	return out, nil
}
