package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

// A lease request over HTTP waits at most MaxWait inside one HTTP request.
// If the daemon has not answered by then, the client gets 202 and a handle
// (/v1/requests/{id}) to long-poll; the lease.request keeps running in the
// daemon's queue on the server's behalf. A handle nobody polls for
// AbandonAfter is cancelled (and a lease granted to it released), so a
// vanished client never holds a queue slot or a device. The handle is
// frontend state: the dispatcher sees one ordinary lease.request.

// PendingRequest is the body of a 202: the request is still waiting.
type PendingRequest struct {
	RequestID string `json:"requestId"`
	Status    string `json:"status"` // always "pending"
	// Progress is the latest push from the daemon (queue position, phase).
	Progress *contract.Progress `json:"progress,omitempty"`
	// AbandonAfterMs: poll again within this long or the request is
	// cancelled.
	AbandonAfterMs int64 `json:"abandonAfterMs"`
}

// DropReply is DELETE /v1/requests/{id}'s body.
type DropReply struct {
	RequestID string `json:"requestId"`
	// Cancelled is false when the request had already finished; its
	// outcome then stays collectable.
	Cancelled bool `json:"cancelled"`
}

type pending struct {
	id        string
	sess      contract.Session
	requester string        // the request's requesterId ("" is the principal's own)
	done      chan struct{} // closed when the dispatch has returned
	stored    chan struct{} // closed once the daemon has stored the request (its first push) or answered

	daemonID string // the daemon's lease request id, from its pushes (guarded by requestTable.mu)

	// guarded by requestTable.mu
	cancel    context.CancelFunc
	progress  *contract.Progress
	lease     contract.Lease
	err       *contract.Error
	finished  bool
	delivered bool // an outcome was answered at least once
	dropped   bool // given up (DELETE, abandonment or Close)
	polls     int
	timer     ports.Timer
}

type requestTable struct {
	s  *Server
	mu sync.Mutex
	m  map[string]*pending
}

func newRequestTable(s *Server) *requestTable { return &requestTable{s: s, m: map[string]*pending{}} }

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// start runs lease.request in the background for sess and returns once the
// daemon has stored the request (every push comes after that) or answered,
// so a cancel sent right after a 202 finds the request. The handle takes the
// daemon's request id when the daemon names it, so /v1/requests/{id} and
// /v1/lease-requests/{id} name the same request.
func (t *requestTable) start(sess contract.Session, params json.RawMessage) *pending {
	ctx, cancel := context.WithCancel(t.s.ctx)
	p := &pending{sess: sess, done: make(chan struct{}), stored: make(chan struct{}), cancel: cancel}
	var in contract.LeaseRequestIn
	if contract.Decode(params, &in) == nil {
		p.requester = in.RequesterID
	}
	var once sync.Once
	markStored := func() { once.Do(func() { close(p.stored) }) }
	t.s.wg.Add(1)
	go func() {
		defer t.s.wg.Done()
		defer cancel()
		notify := func(method string, params any) {
			if method != contract.NotifyProgress {
				return
			}
			if pr, ok := asProgress(params); ok {
				t.mu.Lock()
				p.progress = &pr
				if p.daemonID == "" {
					p.daemonID = pr.LeaseRequestID
				}
				t.mu.Unlock()
			}
			markStored()
		}
		res, after, err := t.s.b.Dispatch(ctx, sess, contract.LeaseRequest.Name, params, notify)
		var l contract.Lease
		if err == nil {
			var ok bool
			if l, ok = asLease(res); !ok {
				err = contract.Errorf(contract.CodeInternal, "lease.request answered %T", res)
			}
		}
		t.mu.Lock()
		p.lease, p.err, p.finished = l, err, true
		if p.daemonID == "" {
			p.daemonID = l.RequestID
		}
		orphan := p.dropped && err == nil
		t.mu.Unlock()
		markStored()
		close(p.done)
		runAfter(after)
		if orphan {
			t.release(sess, l.LeaseID)
		}
	}()
	select {
	case <-p.stored:
	case <-t.s.ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p.id = p.daemonID
	if _, taken := t.m[p.id]; p.id == "" || taken {
		p.id = newRequestID() // a second handle on one request (a repeated key) gets its own
	}
	t.m[p.id] = p
	return p
}

// release gives back a lease nobody will ever learn about.
func (t *requestTable) release(sess contract.Session, leaseID string) {
	params, _ := json.Marshal(contract.LeaseReleaseIn{LeaseID: leaseID})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, after, err := t.s.b.Dispatch(ctx, sess, contract.LeaseRelease.Name, params, nil)
	runAfter(after)
	if err != nil && err.Code != contract.CodeUnknownLease {
		t.s.log.Warn("releasing the lease of an abandoned HTTP request failed", "lease", leaseID, "err", err)
	} else {
		t.s.log.Info("released the lease of an abandoned HTTP request", "lease", leaseID)
	}
}

// lookup finds a handle for its owner (or an admin).
func (t *requestTable) lookup(id string, sess contract.Session) (*pending, *contract.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.m[id]
	if !ok {
		return nil, contract.Errorf(contract.CodeNoPendingRequest,
			"no lease request %q: it was never made, its outcome expired, or it was given up", id).
			WithNext("POST /v1/leases again")
	}
	if sess.Role != contract.RoleAdmin && sess.Principal != p.sess.Principal {
		return nil, contract.Errorf(contract.CodeForbidden, "lease request %s belongs to another principal", id)
	}
	return p, nil
}

// beginPoll holds the handle against abandonment while a poll waits.
func (t *requestTable) beginPoll(p *pending) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.polls++
	t.stopTimerLocked(p)
}

// endPoll records the poll's outcome and arms the right timer: a
// delivered outcome is kept KeepOutcome for retries; an unanswered one
// is abandoned if nobody polls within AbandonAfter.
func (t *requestTable) endPoll(p *pending, delivered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.polls--
	if delivered {
		p.delivered = true
	}
	if p.polls > 0 || p.dropped {
		return
	}
	if p.delivered {
		p.timer = t.s.clock.AfterFunc(KeepOutcome, func() { t.forget(p) })
		return
	}
	p.timer = t.s.clock.AfterFunc(AbandonAfter, func() { t.abandon(p) })
}

func (t *requestTable) stopTimerLocked(p *pending) {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

func (t *requestTable) forget(p *pending) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.polls == 0 && t.m[p.id] == p {
		delete(t.m, p.id)
	}
}

// abandon gives up a handle nobody polls: the dispatch is cancelled, and a
// lease it was granted but never handed out is released.
func (t *requestTable) abandon(p *pending) {
	t.mu.Lock()
	if p.polls > 0 || t.m[p.id] != p {
		t.mu.Unlock()
		return
	}
	t.s.log.Info("abandoning an HTTP lease request nobody polls", "request", p.id, "principal", p.sess.Principal)
	orphan := t.dropLocked(p)
	t.mu.Unlock()
	if orphan != "" {
		t.release(p.sess, orphan)
	}
}

// dropLocked removes p and cancels its dispatch. It returns the id of a
// lease already granted to it and never delivered, which the caller must
// release; a grant still to come is released by the dispatch goroutine.
func (t *requestTable) dropLocked(p *pending) (orphan string) {
	delete(t.m, p.id)
	t.stopTimerLocked(p)
	p.dropped = true
	p.cancel()
	if p.finished && p.err == nil && !p.delivered {
		return p.lease.LeaseID
	}
	return ""
}

func (t *requestTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.m {
		t.stopTimerLocked(p)
		p.cancel()
	}
	t.m = map[string]*pending{}
}

func asProgress(v any) (contract.Progress, bool) {
	if p, ok := v.(contract.Progress); ok {
		return p, true
	}
	var p contract.Progress
	b, err := json.Marshal(v)
	return p, err == nil && json.Unmarshal(b, &p) == nil
}

// serveLeaseRequest: POST /v1/leases. The body is LeaseRequestIn. With
// Accept: application/x-ndjson the call runs in the request (progress lines,
// then the lease); otherwise it waits per Prefer (wait=N, capped at MaxWait;
// respond-async = 0; default DefaultWait) and answers 201 with the lease, an
// error, or 202 with a handle.
func (s *Server) serveLeaseRequest(w http.ResponseWriter, r *http.Request, rt route) {
	params, cerr := rt.input(w, r)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	if params, cerr = withIdempotencyKey(r, params); cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	// Decode here too (the same strict decoder the dispatcher uses) so a
	// malformed body is 400 now rather than on the first poll.
	var in contract.LeaseRequestIn
	if err := contract.Decode(params, &in); err != nil {
		writeError(w, contract.AsError(err), nil)
		return
	}
	if accepts(r, mediaNDJSON) {
		// 201 when the lease is the first line; a stream that pushed first
		// has sent 200 already. The :stream twin answers 200 throughout.
		s.call(w, r, rt.op.Name, params, rt.successStatus())
		return
	}
	wait := DefaultWait
	pref := parsePrefer(r.Header)
	switch {
	case pref.hasWait:
		wait = pref.wait
		w.Header().Set("Preference-Applied", "wait="+strconv.FormatInt(int64(wait/time.Second), 10))
	case pref.respondAsync:
		wait = 0
		w.Header().Set("Preference-Applied", "respond-async")
	}
	lift(w)
	p := s.requests.start(sessionOf(r), params)
	s.await(w, r, p, wait, http.StatusCreated, true)
}

// servePoll: GET /v1/requests/{id}?wait=N long-polls a handle.
func (s *Server) servePoll(w http.ResponseWriter, r *http.Request) {
	wait := DefaultWait
	for key, vals := range r.URL.Query() {
		if key != "wait" || len(vals) != 1 {
			writeError(w, contract.Errorf(contract.CodeBadRequest, "GET /v1/requests/{id} takes only ?wait=<seconds>"), nil)
			return
		}
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || n < 0 {
			writeError(w, contract.Errorf(contract.CodeBadRequest, "wait=%q is not a number of seconds", vals[0]), nil)
			return
		}
		wait = capWait(n)
	}
	if _, ok := r.URL.Query()["wait"]; !ok {
		if pref := parsePrefer(r.Header); pref.hasWait {
			wait = pref.wait
			w.Header().Set("Preference-Applied", "wait="+strconv.FormatInt(int64(wait/time.Second), 10))
		}
	}
	p, err := s.requests.lookup(r.PathValue("id"), sessionOf(r))
	if err != nil && err.Code == contract.CodeNoPendingRequest && strings.HasPrefix(r.PathValue("id"), "req_") && s.serveReceipt(w, r) {
		// No handle here (forgotten, or the daemon restarted): the
		// daemon's stored receipt answered.
		return
	}
	if err != nil {
		writeError(w, err, nil)
		return
	}
	lift(w)
	s.await(w, r, p, wait, http.StatusOK, false)
}

// serveReceipt answers a poll from the daemon's receipt: the lease once
// granted, the stored refusal once failed, 202 while it is still pending.
// It reports false, answering nothing, when the daemon has no receipt.
func (s *Server) serveReceipt(w http.ResponseWriter, r *http.Request) bool {
	params, _ := json.Marshal(contract.LeaseRequestStatusIn{RequestID: r.PathValue("id")})
	res, after, err := s.b.Dispatch(r.Context(), sessionOf(r), contract.LeaseRequestStatus.Name, params, nil)
	runAfter(after)
	if err != nil && (err.Code == contract.CodeUnknownRequest || err.Code == contract.CodeUnknownOperation) {
		return false
	}
	if err != nil {
		writeError(w, err, nil)
		return true
	}
	rc, ok := res.(contract.LeaseRequestReceipt)
	switch {
	case !ok:
		writeError(w, contract.Errorf(contract.CodeInternal, "lease.requestStatus answered %T", res), nil)
	case rc.Lease != nil:
		w.Header().Set("Location", "/v1/leases/"+url.PathEscape(rc.Lease.LeaseID))
		writeJSON(w, http.StatusOK, *rc.Lease)
	case rc.Error != nil:
		writeError(w, rc.Error, nil)
	case rc.State == contract.RequestGranted:
		writeError(w, contract.Errorf(contract.CodeUnknownLease, "request %s was granted lease %s, which has since ended", rc.RequestID, rc.LeaseID), nil)
	default:
		w.Header().Set("Location", "/v1/lease-requests/"+url.PathEscape(rc.RequestID))
		writeJSON(w, http.StatusAccepted, PendingRequest{RequestID: rc.RequestID, Status: "pending",
			Progress:       &contract.Progress{Phase: rc.State, QueuePosition: rc.QueuePosition, LeaseRequestID: rc.RequestID},
			AbandonAfterMs: AbandonAfter.Milliseconds()})
	}
	return true
}

// serveDrop: DELETE /v1/requests/{id} gives a handle up. It is the
// caller's own cancel, not a caller that went away: the request is
// withdrawn through lease.cancel, so it ends as REQUEST_CANCELLED with a
// request.cancelled fact, the same as a cancel over the socket. Only when
// the daemon has nothing queued to withdraw is the dispatch cancelled,
// which the daemon reads as an abandoned request.
func (s *Server) serveDrop(w http.ResponseWriter, r *http.Request) {
	p, err := s.requests.lookup(r.PathValue("id"), sessionOf(r))
	if err != nil {
		writeError(w, err, nil)
		return
	}
	t := s.requests
	t.mu.Lock()
	finished := p.finished
	t.mu.Unlock()
	if finished {
		writeJSON(w, http.StatusOK, DropReply{RequestID: p.id, Cancelled: false})
		return
	}
	params, _ := json.Marshal(contract.LeaseCancelIn{RequesterID: p.requester})
	_, after, cerr := s.b.Dispatch(r.Context(), p.sess, contract.LeaseCancel.Name, params, nil)
	runAfter(after)
	if cerr == nil {
		// The outcome is settled as cancelled; wait for the dispatch to
		// record it, so a poll that follows reads it.
		select {
		case <-p.done:
		case <-r.Context().Done():
		}
	}
	t.mu.Lock()
	if p.finished && (cerr != nil || p.err == nil || p.err.Code != contract.CodeRequestCancelled) {
		// It ended on its own first (a grant, a refusal): that outcome
		// stays collectable.
		t.mu.Unlock()
		writeJSON(w, http.StatusOK, DropReply{RequestID: p.id, Cancelled: false})
		return
	}
	orphan := t.dropLocked(p)
	t.mu.Unlock()
	if orphan != "" {
		t.release(p.sess, orphan)
	}
	writeJSON(w, http.StatusOK, DropReply{RequestID: p.id, Cancelled: true})
}

// await waits up to wait for p's outcome and answers it, or answers 202.
// When the initial POST's client leaves before learning the handle, nobody
// can ever collect it, so it is dropped at once.
func (s *Server) await(w http.ResponseWriter, r *http.Request, p *pending, wait time.Duration, okStatus int, initial bool) {
	t := s.requests
	var timeout <-chan time.Time
	if wait > 0 {
		timeout = s.clock.After(wait)
	} else {
		closed := make(chan time.Time)
		close(closed)
		timeout = closed
	}
	t.beginPoll(p)
	select {
	case <-p.done:
	case <-timeout:
	case <-r.Context().Done():
		if initial {
			t.mu.Lock()
			orphan := ""
			if t.m[p.id] == p {
				orphan = t.dropLocked(p)
			}
			p.polls--
			t.mu.Unlock()
			if orphan != "" {
				t.release(p.sess, orphan)
			}
			return
		}
		t.endPoll(p, false)
		return
	}
	t.mu.Lock()
	finished, l, err, progress, daemonID := p.finished, p.lease, p.err, p.progress, p.daemonID
	t.mu.Unlock()
	t.endPoll(p, finished)
	if finished && !initial && daemonID == p.id && s.serveReceipt(w, r) {
		// A later poll of a finished request answers from the daemon's
		// stored receipt, the one record of it: a lease released since
		// reads as ended there. The handle's own copy only serves a
		// backend that keeps no receipts (a gateway).
		return
	}
	switch {
	case finished && err != nil:
		writeError(w, err, nil)
	case finished:
		w.Header().Set("Location", "/v1/leases/"+url.PathEscape(l.LeaseID))
		writeJSON(w, okStatus, l)
	default:
		w.Header().Set("Location", "/v1/requests/"+p.id)
		writeJSON(w, http.StatusAccepted, PendingRequest{RequestID: p.id, Status: "pending", Progress: progress,
			AbandonAfterMs: AbandonAfter.Milliseconds()})
	}
}

// withIdempotencyKey carries the Idempotency-Key header into the body's
// idempotencyKey; both may be given only if they agree.
func withIdempotencyKey(r *http.Request, params json.RawMessage) (json.RawMessage, *contract.Error) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return params, nil
	}
	if len(vals) > 1 {
		return nil, contract.Errorf(contract.CodeBadRequest, "Idempotency-Key is given %d times", len(vals))
	}
	obj := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, contract.Errorf(contract.CodeBadRequest, "invalid input: %v", err)
		}
	}
	v, _ := json.Marshal(vals[0])
	if prev, ok := obj["idempotencyKey"]; ok && string(prev) != string(v) {
		return nil, contract.Errorf(contract.CodeBadRequest, "the Idempotency-Key header and the body's idempotencyKey disagree")
	}
	obj["idempotencyKey"] = v
	b, _ := json.Marshal(obj)
	return b, nil
}
