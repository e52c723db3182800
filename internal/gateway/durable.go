package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
)

// The fleet queue's receipts (ADR 0101): what is stored when, how a
// restart takes requests back, and how repeats find their request.

// pruneEvery is how many settled receipts pass between two prunes: often
// enough to keep the table near its bound, rarely enough to cost nothing.
const pruneEvery = 64

// uncollectedLease is a lease granted to a restored request while no
// caller waited on it, kept until its requester repeats the request.
type uncollectedLease struct {
	fp    string
	lease contract.Lease
}

func keyOf(requester, key string) string { return requester + "\x00" + key }

// requestID names a gateway request by its admission number, which a
// restarted gateway continues from the store's highest.
func requestID(seq uint64) string { return fmt.Sprintf("greq_%08x", seq) }

// fingerprint identifies a request's body, so a repeat under the same key
// can be told from a different request. Who asks is not part of it.
func fingerprint(in contract.LeaseRequestIn) string {
	in.RequesterID, in.OwnerID, in.IdempotencyKey = "", "", ""
	b, _ := json.Marshal(in)
	return string(b)
}

func keyMismatch(rid string) error {
	return contract.Errorf(contract.CodeIdempotencyMismatch, "this idempotency key already names request %s, with a different body", rid).
		WithDetails("requestId", rid).
		WithNext("repeat the original request unchanged, or use a new idempotency key for a new request")
}

// attachAndUnlock adds call to p's callers and releases g.mu. Called with
// g.mu held.
func (g *Gateway) attachAndUnlock(p *pending, call *dispatch.Call) *pending {
	p.pmu.Lock()
	p.calls = append(p.calls, call)
	p.pmu.Unlock()
	g.mu.Unlock()
	return p
}

// detachCallLocked removes call from p's callers and reports how many are
// left.
func (g *Gateway) detachCallLocked(p *pending, call *dispatch.Call) int {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if i := slices.Index(p.calls, call); i >= 0 {
		p.calls = slices.Delete(p.calls, i, i+1)
	}
	return len(p.calls)
}

func (g *Gateway) callersLocked(p *pending) int {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return len(p.calls)
}

// receiptLocked is p as its store keeps it.
func (g *Gateway) receiptLocked(p *pending, state string, now time.Time) Receipt {
	r := Receipt{ID: p.rid, Seq: p.id, Requester: p.requester, Owner: p.owner, Key: p.key, Fingerprint: p.fp,
		In: p.in, State: state, Worker: p.worker, Attempt: p.attemptN, AttemptAt: p.attemptAt,
		Deadline: p.deadline, CreatedAt: p.created, UpdatedAt: now}
	return r
}

// settleLocked records p's outcome in its receipt. A keyless request whose
// outcome reached its caller leaves nothing behind; a keyed one, or one
// served while no caller waited, keeps its receipt for repeats. A failed
// write is logged, not returned: the outcome stands, and a restart that
// finds the receipt still open asks the worker again, which answers from
// its own receipt.
func (g *Gateway) settleLocked(p *pending, o outcome) {
	if !p.durable || o.keepOpen {
		return
	}
	ctx := context.WithoutCancel(g.ctx)
	callers := g.callersLocked(p)
	if p.key == "" && callers > 0 && !errors.Is(o.err, context.Canceled) {
		if err := g.o.Store.DeleteReceipt(ctx, p.rid); err != nil {
			g.log.Error("forget a settled request's receipt", "request", p.rid, "err", err)
		}
		return
	}
	now := g.clock.Now()
	r := g.receiptLocked(p, ReceiptFailed, now)
	switch ce := contract.AsError(o.err); {
	case o.err == nil:
		r.State = ReceiptGranted
		l := o.lease
		r.Lease = &l
		if callers == 0 && p.key == "" {
			g.uncollected[p.requester] = uncollectedLease{fp: p.fp, lease: l}
		}
	case errors.Is(o.err, context.Canceled):
		// Its caller went away: the outcome binds nothing (ADR 0017 rule 3).
		r.State, r.Interrupted = ReceiptCancelled, true
		r.Error = contract.Errorf(contract.CodeConnectionLost, "the caller went away before the request was served")
	case ce != nil && ce.Code == contract.CodeQueueTimeout:
		r.State, r.Error = ReceiptExpired, ce
	case ce != nil && ce.Code == contract.CodeRequestCancelled:
		r.State, r.Error = ReceiptCancelled, ce
	case ce != nil:
		r.Error = ce
	default:
		r.Error = contract.Errorf(contract.CodeInternal, "%s", o.err.Error())
	}
	if p.key == "" && r.State != ReceiptGranted {
		// Nobody can repeat a keyless request to read a refusal.
		if err := g.o.Store.DeleteReceipt(ctx, p.rid); err != nil {
			g.log.Error("forget a settled request's receipt", "request", p.rid, "err", err)
		}
		return
	}
	if err := g.o.Store.PutReceipt(ctx, r); err != nil {
		g.log.Error("settle a request's receipt", "request", p.rid, "err", err)
	}
	if g.settled++; g.settled%pruneEvery == 0 {
		g.spawnPrune()
	}
}

func (g *Gateway) spawnPrune() {
	cutoff := g.clock.Now().Add(-g.o.Retention)
	keep := g.o.MaxReceipts
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if _, err := g.o.Store.PruneReceipts(context.WithoutCancel(g.ctx), cutoff, keep); err != nil {
			g.log.Warn("prune the gateway's receipts", "err", err)
		}
	}()
}

// replayLocked answers a repeat of a settled request from its receipt: the
// same lease while it lasts, otherwise UNKNOWN_LEASE naming it; the same
// refusal even if a device has become free.
func (g *Gateway) replayLocked(r Receipt) (contract.Lease, error) {
	if r.State == ReceiptGranted && r.Lease != nil {
		l := *r.Lease
		if e := g.leases[l.LeaseID]; e != nil {
			l.ExpiresAt = e.expiresAt
			return l, nil
		}
		wid, _, _ := splitLeaseID(l.LeaseID)
		if w := g.workers[wid]; (w == nil || !w.known) && g.clock.Now().Before(l.ExpiresAt) {
			// Its worker has not reconnected since the restart: the lease
			// is as the receipt last knew it.
			return l, nil
		}
		return contract.Lease{}, contract.Errorf(contract.CodeUnknownLease, "request %s was granted lease %s, which has ended", r.ID, l.LeaseID).
			WithDetails("requestId", r.ID, "leaseId", l.LeaseID)
	}
	if r.Error != nil {
		return contract.Lease{}, r.Error
	}
	return contract.Lease{}, contract.Errorf(contract.CodeInternal, "request %s settled without an outcome", r.ID)
}

// restore takes back the requests a previous run accepted and did not
// settle, in their order and with their deadlines (ADR 0101 rule 4).
func (g *Gateway) restore(ctx context.Context) error {
	if g.o.Store == nil {
		return nil
	}
	seq, err := g.o.Store.MaxSeq(ctx)
	if err != nil {
		return fmt.Errorf("gateway: read the request counter: %w", err)
	}
	open, err := g.o.Store.OpenReceipts(ctx)
	if err != nil {
		return fmt.Errorf("gateway: read the open requests: %w", err)
	}
	g.mu.Lock()
	g.nextReq = max(g.nextReq, seq)
	now := g.clock.Now()
	var evs []events.Event
	for _, r := range open {
		p := &pending{id: r.Seq, in: r.In, group: groupOf(r.In), requester: r.Requester, owner: r.Owner,
			noWait: r.In.NoWait, rid: r.ID, key: r.Key, fp: r.Fingerprint, durable: true, deadline: r.Deadline,
			created: r.CreatedAt, restored: true, attemptN: r.Attempt, avoid: map[string]uint64{}, fin: make(chan struct{})}
		if g.pendingBy[p.requester] != nil {
			// Two open requests of one requester cannot both have been
			// accepted; keep the older, end the newer.
			g.settleLocked(p, outcome{err: contract.Errorf(contract.CodeRequesterQueued, "requester %s already had a pending request", p.requester)})
			continue
		}
		var timeout time.Duration
		if !r.Deadline.IsZero() {
			if timeout = r.Deadline.Sub(now); timeout <= 0 {
				timeout = time.Millisecond // ends at once, through expire, unless pinned
			}
		}
		if r.State == ReceiptDispatched && r.Worker != "" {
			p.state, p.worker, p.attemptAt = stPinned, r.Worker, r.AttemptAt
			// Any lease the worker granted for this attempt and nobody
			// renewed has expired a TTL after it was sent.
			wait := r.AttemptAt.Add(time.Duration(r.In.TTLMs)*time.Millisecond + time.Second).Sub(now)
			p.unpin = g.clock.AfterFunc(max(wait, time.Millisecond), func() { g.unpin(p) })
		}
		g.admitLocked(p, timeout)
		evs = append(evs, p.event("request.restored", "requestId", p.rid, "pinnedTo", p.worker))
	}
	g.mu.Unlock()
	g.publishAll(evs)
	if len(open) > 0 {
		g.log.Info("requests taken back from the store", "count", len(open))
	}
	return nil
}

// unpin returns a pinned request to the queue once its worker can no
// longer hold a lease granted for the attempt that was under way.
func (g *Gateway) unpin(p *pending) {
	g.mu.Lock()
	if p.finished || p.state != stPinned {
		g.mu.Unlock()
		return
	}
	p.state, p.worker = stQueued, ""
	overdue := g.queue.Overdue(p, g.clock.Now())
	if overdue {
		g.finishLocked(p, outcome{err: g.timeoutErr(p)})
	}
	g.mu.Unlock()
	if overdue {
		g.publish(p.event("request.timed-out"))
	}
	g.kickDispatch()
}

// resendPinned repeats, on a worker that has just attached, the attempt
// each request pinned to it was making when the previous run stopped. The
// worker answers from its own receipt of that attempt.
func (g *Gateway) resendPinned(wid string, lk *link) {
	g.mu.Lock()
	w := g.workers[wid]
	var starts []*pending
	for p := range g.queue.All() {
		if p.state == stPinned && p.worker == wid && !p.finished {
			p.state = stTrying
			if p.unpin != nil {
				p.unpin.Stop()
			}
			if w != nil {
				w.inflight = append(w.inflight, p)
			}
			starts = append(starts, p)
		}
	}
	g.mu.Unlock()
	for _, p := range starts {
		g.spawn(func() { g.send(p, wid, lk) })
	}
}

// requestStatus reads one request's receipt: from the queue while it is
// there, then from the store.
func (g *Gateway) requestStatus(ctx context.Context, call *dispatch.Call, in contract.LeaseRequestStatusIn) (contract.LeaseRequestReceipt, error) {
	if g.o.Store == nil {
		return contract.LeaseRequestReceipt{}, contract.Errorf(contract.CodeUnsupportedInGateway, "this gateway runs without a store and keeps no lease request receipts")
	}
	g.mu.Lock()
	if p := g.byRID[in.RequestID]; p != nil {
		defer g.mu.Unlock()
		if call.Session.Role != contract.RoleAdmin && p.owner != call.Session.Principal {
			return contract.LeaseRequestReceipt{}, contract.Errorf(contract.CodeForbidden, "lease request %s belongs to another principal", p.rid)
		}
		out := contract.LeaseRequestReceipt{RequestID: p.rid, RequesterID: p.requester, OwnerID: p.owner, IdempotencyKey: p.key,
			Platform: p.in.Platform, State: contract.RequestQueued, CreatedAt: p.created.UTC(), UpdatedAt: g.clock.Now().UTC()}
		switch p.state {
		case stQueued, stPinned:
			for _, qp := range g.queue.Positions(waits) {
				if qp.Entry == p {
					out.QueuePosition = qp.Pos
				}
			}
		default:
			out.State = contract.RequestProvisioning
		}
		return out, nil
	}
	g.mu.Unlock()
	r, ok, err := g.o.Store.Receipt(ctx, in.RequestID)
	if err != nil {
		return contract.LeaseRequestReceipt{}, fmt.Errorf("gateway: read request %s: %w", in.RequestID, err)
	}
	if !ok {
		return contract.LeaseRequestReceipt{}, contract.Errorf(contract.CodeUnknownRequest, "this gateway has no lease request %s", in.RequestID).
			WithDetails("requestId", in.RequestID)
	}
	if call.Session.Role != contract.RoleAdmin && r.Owner != call.Session.Principal {
		return contract.LeaseRequestReceipt{}, contract.Errorf(contract.CodeForbidden, "lease request %s belongs to another principal", r.ID)
	}
	out := contract.LeaseRequestReceipt{RequestID: r.ID, RequesterID: r.Requester, OwnerID: r.Owner, IdempotencyKey: r.Key,
		Platform: r.In.Platform, State: r.State, Error: r.Error, Interrupted: r.Interrupted,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.State == ReceiptDispatched {
		out.State = contract.RequestProvisioning
	}
	if r.Lease != nil {
		out.LeaseID = r.Lease.LeaseID
		g.mu.Lock()
		if e := g.leases[r.Lease.LeaseID]; e != nil {
			l := *r.Lease
			l.ExpiresAt = e.expiresAt
			out.Lease = &l
		}
		g.mu.Unlock()
	}
	return out, nil
}

// attemptKey is the idempotency key a forwarded attempt carries.
func attemptKey(rid string, n int) string { return rid + "." + strconv.Itoa(n) }
