package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
)

// RenewReply is POST /v1/leases/{id}/renew's body: the renewed lease and the
// notices buffered for it since the previous renew (always an array). A
// notice is the same contract.LeaseNotice a socket connection of the owner
// is pushed live; a polling client has no connection, so it reads them here.
type RenewReply struct {
	contract.Lease
	Notices []contract.LeaseNotice `json:"notices"`
}

const (
	noticesPerLease = 16   // a ring: the oldest notice of a lease goes first
	trackedLeases   = 4096 // the lease noticed longest ago is forgotten first
)

// noticeBuffer keeps, per lease, the notices not yet read. It is HTTP-side
// frontend state fed by one admin subscription to the daemon's events;
// nothing in it decides anything about a lease.
type noticeBuffer struct {
	mu     sync.Mutex
	leases map[string]*leaseNotes
	order  []string // lease ids, oldest first, for eviction
}

type leaseNotes struct {
	owner string
	ended bool
	notes []contract.LeaseNotice
}

func newNoticeBuffer() *noticeBuffer { return &noticeBuffer{leases: map[string]*leaseNotes{}} }

// apply folds one daemon event into the buffer.
func (b *noticeBuffer) apply(e contract.Event) {
	typ, ok := contract.NoticeFor(e)
	if !ok || e.LeaseID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.leases[e.LeaseID]
	if !ok {
		n = &leaseNotes{}
		b.leases[e.LeaseID] = n
		b.order = append(b.order, e.LeaseID)
		for len(b.order) > trackedLeases {
			delete(b.leases, b.order[0])
			b.order = b.order[1:]
		}
	}
	if owner, _ := e.Data["ownerId"].(string); owner != "" {
		n.owner = owner
	}
	n.ended = n.ended || typ == contract.NotifyLeaseLost
	n.notes = append(n.notes, contract.LeaseNotice{Type: typ, LeaseID: e.LeaseID, DeviceID: e.DeviceID, Reason: e.Reason, At: e.At})
	if len(n.notes) > noticesPerLease {
		n.notes = n.notes[len(n.notes)-noticesPerLease:]
	}
}

// take drains the notices of a lease the caller just renewed (the
// dispatcher has checked ownership).
func (b *noticeBuffer) take(id string) []contract.LeaseNotice {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []contract.LeaseNotice{}
	if n, ok := b.leases[id]; ok {
		out = append(out, n.notes...)
		n.notes = nil
	}
	return out
}

// takeLost drains the notices of a lease that has ended, for its owner (or
// an admin) only: the dispatcher cannot check ownership of a lease that no
// longer exists, so the owner the events named decides.
func (b *noticeBuffer) takeLost(id string, sess contract.Session) []contract.LeaseNotice {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.leases[id]
	if !ok || !n.ended || len(n.notes) == 0 {
		return nil
	}
	if sess.Role != contract.RoleAdmin && (n.owner == "" || n.owner != sess.Principal) {
		return nil
	}
	out := n.notes
	n.notes = nil
	return out
}

// serveRenew renews and attaches the lease's buffered notices; when the
// lease is gone, the error carries its lease-lost notice for the owner.
func (s *Server) serveRenew(w http.ResponseWriter, r *http.Request, rt route) {
	params, cerr := rt.input(w, r)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	lift(w)
	sess := sessionOf(r)
	res, after, err := s.b.Dispatch(r.Context(), sess, rt.op.Name, params, nil)
	defer runAfter(after)
	if err != nil {
		var lost []contract.LeaseNotice
		if err.Code == contract.CodeUnknownLease {
			lost = s.notices.takeLost(r.PathValue("id"), sess)
		}
		writeError(w, err, lost)
		return
	}
	l, ok := asLease(res)
	if !ok {
		writeError(w, contract.Errorf(contract.CodeInternal, "lease.renew answered %T", res), nil)
		return
	}
	writeJSON(w, http.StatusOK, RenewReply{Lease: l, Notices: s.notices.take(l.LeaseID)})
}

// asLease reads a dispatcher result as a Lease (a JSON round trip covers a
// backend that answers another Go type of the same shape).
func asLease(v any) (contract.Lease, bool) {
	if l, ok := v.(contract.Lease); ok {
		return l, true
	}
	var l contract.Lease
	b, err := json.Marshal(v)
	return l, err == nil && json.Unmarshal(b, &l) == nil && l.LeaseID != ""
}

// noticeSession is the frontend's own identity for its event subscription.
var noticeSession = contract.Session{Principal: "httpapi:notices", Role: contract.RoleAdmin, Compatible: true}

// EventSource is an optional Backend ability: an in-process feed of the
// daemon's events that never loses one, however far the reader falls
// behind. A Backend with one gives the notice buffer every lease-lost
// fact; without it the frontend follows events.subscribe like any client
// and can only log the gaps it is told about.
type EventSource interface {
	// ObserveEvents delivers every event after since in sequence order
	// until ctx ends. onGap is called at most once, first, for facts
	// after since that had already left the daemon's ring.
	ObserveEvents(ctx context.Context, since uint64, onGap func(contract.EventsGap), onEvent func(contract.Event))
}

// followNotices keeps one followed event subscription open for the server's
// life, retrying with backoff while the daemon refuses it (for example
// while startup convergence has failed).
func (s *Server) followNotices() {
	defer s.wg.Done()
	onGap := func(g contract.EventsGap) {
		s.log.Warn("lease notices: events were missed; their notices are lost", "fromSeq", g.FromSeq, "toSeq", g.ToSeq)
	}
	if src, ok := s.b.(EventSource); ok {
		// From the start of the daemon's ring: facts from before this
		// server started are still owed to their leases' owners.
		src.ObserveEvents(s.ctx, 0, onGap, s.notices.apply)
		return
	}
	backoff := time.Second
	params, _ := json.Marshal(contract.EventsSubscribeIn{Follow: true})
	for s.ctx.Err() == nil {
		sink := newEventSink(s.notices.apply, onGap)
		res, after, err := s.b.Dispatch(s.ctx, noticeSession, contract.EventsSubscribe.Name, params, sink.notify)
		if err == nil {
			out, _ := asSubscribeOut(res)
			sink.start(out)
			runAfter(after)
			<-s.ctx.Done()
			return
		}
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("lease notices: event subscription refused; retrying", "err", err, "in", backoff)
		select {
		case <-s.ctx.Done():
			return
		case <-s.clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// eventSink delivers events and gaps exactly once and in sequence order:
// pushes that arrive before the backlog has been delivered wait for it,
// and anything at or below the last delivered sequence number is dropped.
type eventSink struct {
	mu      sync.Mutex
	started bool
	held    []sinkItem
	last    uint64
	deliver func(contract.Event)
	gap     func(contract.EventsGap)
}

// sinkItem is an event, or a gap when gap is non-nil.
type sinkItem struct {
	e   contract.Event
	gap *contract.EventsGap
}

func (it sinkItem) seq() uint64 {
	if it.gap != nil {
		return it.gap.FromSeq
	}
	return it.e.Seq
}

const maxHeld = 4096

func newEventSink(deliver func(contract.Event), gap func(contract.EventsGap)) *eventSink {
	return &eventSink{deliver: deliver, gap: gap}
}

// notify is the push callback handed to Dispatch.
func (s *eventSink) notify(method string, params any) {
	var it sinkItem
	switch method {
	case contract.NotifyEvent:
		e, ok := asEvent(params)
		if !ok {
			return
		}
		it.e = e
	case contract.NotifyGap:
		g, ok := asGap(params)
		if !ok {
			return
		}
		it.gap = &g
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		if len(s.held) < maxHeld {
			s.held = append(s.held, it)
		}
		return
	}
	s.emit(it)
}

func (s *eventSink) emit(it sinkItem) {
	if it.gap != nil {
		if it.gap.ToSeq <= s.last {
			return
		}
		g := *it.gap
		g.FromSeq = max(g.FromSeq, s.last+1) // what was delivered is not lost
		s.last = g.ToSeq
		if s.gap != nil {
			s.gap(g)
		}
		return
	}
	if it.e.Seq != 0 && it.e.Seq <= s.last {
		return
	}
	s.last = max(s.last, it.e.Seq)
	s.deliver(it.e)
}

// start delivers the backlog's gap and events, then whatever was held,
// then opens the gate.
func (s *eventSink) start(out contract.EventsSubscribeOut) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out.Gap != nil {
		s.emit(sinkItem{gap: out.Gap})
	}
	for _, e := range out.Events {
		s.emit(sinkItem{e: e})
	}
	sort.SliceStable(s.held, func(i, j int) bool { return s.held[i].seq() < s.held[j].seq() })
	for _, it := range s.held {
		s.emit(it)
	}
	s.held = nil
	s.started = true
}

func asGap(v any) (contract.EventsGap, bool) {
	if g, ok := v.(contract.EventsGap); ok {
		return g, true
	}
	var g contract.EventsGap
	b, err := json.Marshal(v)
	return g, err == nil && json.Unmarshal(b, &g) == nil && g.FromSeq > 0 && g.ToSeq >= g.FromSeq
}

func asEvent(v any) (contract.Event, bool) {
	if e, ok := v.(contract.Event); ok {
		return e, true
	}
	var e contract.Event
	b, err := json.Marshal(v)
	return e, err == nil && json.Unmarshal(b, &e) == nil && e.Type != ""
}

func asSubscribeOut(v any) (contract.EventsSubscribeOut, bool) {
	if o, ok := v.(contract.EventsSubscribeOut); ok {
		return o, true
	}
	var o contract.EventsSubscribeOut
	b, err := json.Marshal(v)
	return o, err == nil && json.Unmarshal(b, &o) == nil
}
