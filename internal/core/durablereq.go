package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/ports"
)

// Durable lease requests (ADR 0017, amended by ADR 0092). A request with
// an idempotency key is stored before it joins the queue and before any
// driver work, keyed by (requester, key). A repeat under the same key
// returns the stored outcome, attaches to the request while it is pending,
// and never starts a second one; the receipt stays readable after a
// disconnect or a restart until the retention window or the count bound
// lets it go. A request without a key has nothing a repeat could replay:
// its receipt is kept in memory only (request.status reads it while the
// daemon runs, and a granted one is read back from its lease after a
// restart), so a warm grant pays one commit and a refusal none.

// RequestState is where a lease request stands.
type RequestState string

const (
	RequestQueued       RequestState = "queued"
	RequestProvisioning RequestState = "provisioning"
	RequestBooting      RequestState = "booting"
	RequestGranted      RequestState = "granted"
	RequestFailed       RequestState = "failed"
	RequestCancelled    RequestState = "cancelled"
	RequestExpired      RequestState = "expired"
)

// Terminal reports whether s is an outcome.
func (s RequestState) Terminal() bool {
	switch s {
	case RequestGranted, RequestFailed, RequestCancelled, RequestExpired:
		return true
	}
	return false
}

var (
	ErrIdempotencyMismatch = errors.New("idempotency key already used for a different request")
	ErrDaemonRestarted     = errors.New("the daemon restarted before the request was served")
	ErrUnknownRequest      = errors.New("unknown lease request")
)

// IdempotencyMismatchError refuses a body that differs from the one first
// stored under the same key.
type IdempotencyMismatchError struct{ RequestID string }

func (e *IdempotencyMismatchError) Error() string {
	return "this idempotency key was first used for a different request (" + e.RequestID + ")"
}
func (e *IdempotencyMismatchError) Unwrap() error { return ErrIdempotencyMismatch }

// GrantEndedError answers a repeat of a granted request whose lease has
// since ended: the grant is not repeated with another device.
type GrantEndedError struct{ RequestID, LeaseID string }

func (e *GrantEndedError) Error() string {
	return fmt.Sprintf("request %s was granted lease %s, which has since ended", e.RequestID, e.LeaseID)
}
func (e *GrantEndedError) Unwrap() error { return ErrUnknownLease }

// RequestError is a stored refusal in the daemon's vocabulary (the daemon's
// classifier names the code), so a replay after a restart answers the same
// code the first caller got.
type RequestError struct {
	Code      string
	Message   string
	Retryable bool
}

func (e *RequestError) Error() string { return e.Message }

// RequestRecord is one stored lease request: its receipt.
type RequestRecord struct {
	ID             string // req_<hex>
	RequesterID    string
	OwnerID        string
	IdempotencyKey string // empty: none
	Fingerprint    string // of the request body, to refuse a different body under the same key
	Platform       string
	State          RequestState
	LeaseID        string
	Error          *RequestError
	// Interrupted marks an outcome no caller received: the caller went
	// away, or the daemon stopped or restarted first. A repeat under the
	// same key admits such a request again instead of replaying it.
	Interrupted bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Seq         int64 // queue order number
	Timing      *Timing
}

// RequestStore persists receipts. PutRequest must be durable when it returns.
type RequestStore interface {
	LoadRequests(ctx context.Context) ([]RequestRecord, error)
	PutRequest(ctx context.Context, r RequestRecord) error
	DeleteRequests(ctx context.Context, ids []string) error
}

// DefaultRequestRetention keeps settled receipts this long.
const DefaultRequestRetention = 24 * time.Hour

// DefaultMaxReceipts bounds the receipts kept at once, whatever their age:
// a client polling with noWait must not grow the daemon's memory or its
// database for a whole retention window.
const DefaultMaxReceipts = 2000

// requestEntry is a receipt plus the live state of its current admission.
type requestEntry struct {
	id         string // rec.ID, fixed at creation (read without the decision section)
	rec        RequestRecord
	w          *waiter // while queued or being served
	timing     *timing
	downloaded func() bool
	out        *outcome // the current admission's outcome; nil for one loaded from the store
	committed  string   // the lease whose grant commit already stored this receipt as granted
	callers    int
	cancel     context.CancelFunc
	// firstErr is the error the first caller got, on a settled entry that
	// keeps only its receipt (settledLocked); out is nil there.
	firstErr error

	mu   sync.Mutex          // guards subs, nextSub, last: progress is pushed outside the decision section
	subs map[int]*subscriber // nil until a caller subscribes
	next int
	last *Progress
}

type subscriber struct {
	f       func(Progress)
	granted bool // saw the granted push
}

type outcome struct {
	done  chan struct{} // closed when settled
	grant Grant
	err   error
	// ticket is the settled receipt's commit, waited for before the
	// outcome is answered (ADR 0044).
	ticket uint64
}

// durableBook is the durable lease requests: every receipt, by id and by
// (requester, idempotency key), and the admissions being served. Its
// methods run only inside the decision section, as every book's do, but
// await, which waits for one caller outside it, and recoverRequests and
// pruneRequests (startup and the prune timer), which take the section's
// lock themselves; the engine owns the goroutine that serves an admission
// (Request), which enters the section to call the book.
type durableBook struct {
	store     RequestStore
	classify  func(error) RequestError
	retention time.Duration
	newID     func() string
	clock     ports.Clock
	log       *slog.Logger
	byID      map[string]*requestEntry
	byKey     map[string]*requestEntry
	seq       int64
	max       int                     // receipts kept at once (DefaultMaxReceipts)
	order     []string                // receipt ids, oldest admission first, for the count bound (trimLocked)
	grantOf   func(LeaseRecord) Grant // the grant a lease answers with (registry.grantOf)
	wg        sync.WaitGroup          // admissions being served

	// What the receipts' way to the disk and the prune timer reach (set
	// by New): the section's lock, the registry (its store, leases and
	// timers), the halt the prune timer respects, the single writer and
	// its fence, and the running section's ticket.
	mu       *sync.Mutex
	reg      *registry
	registry Store
	halt     *halt
	wr       *writer
	fence    *fence
	sec      *sectionState
	now      func() time.Time
}

// durableEngine is what the durable book asks of the engine inside the
// section: its clock and the section's facts.
type durableEngine interface {
	now() time.Time
	emitLocked(ev events.Event)
}

// newDurableBook is the book of d's receipt store (an in-memory one when
// d names none); d's logger and id source are already defaulted.
func newDurableBook(cfg Config, d Deps, reg *registry) *durableBook {
	b := &durableBook{store: d.Requests, classify: d.Classify, retention: cfg.RequestRetention, max: cfg.RequestMaxReceipts,
		newID: d.NewID, clock: d.Clock, log: d.Logger, grantOf: reg.grantOf,
		byID: map[string]*requestEntry{}, byKey: map[string]*requestEntry{}}
	if b.store == nil {
		b.store = NewMemoryRequests()
	}
	if b.classify == nil {
		b.classify = func(err error) RequestError { return RequestError{Message: err.Error()} }
	}
	if b.retention <= 0 {
		b.retention = DefaultRequestRetention
	}
	if b.max <= 0 {
		b.max = DefaultMaxReceipts
	}
	return b
}

// refusalData is a request event's data: its owner, and the refusal's code
// in the daemon's vocabulary (Deps.Classify) so observers such as metrics
// can count refusals by code without knowing the engine's errors.
func (b *durableBook) refusalData(owner string, err error) map[string]any {
	d := map[string]any{"ownerId": owner}
	if c := b.classify(err).Code; c != "" {
		d["code"] = c
	}
	return d
}

func keyOf(requester, key string) string { return requester + "\x00" + key }

// fingerprint digests what the caller asked for. The key and the requester
// are the identity, not the body; the owner is the caller's session (a CLI
// process, a token), which a retry may legitimately change.
func fingerprint(r Request) string {
	b, _ := json.Marshal(struct {
		Platform, Model, OSVersion string
		AllowDownload, NoWait      bool
		TTL, Timeout               int64
		Device                     string   `json:",omitempty"` // omitted when unset: older receipts keep their fingerprint
		Profile                    string   `json:",omitempty"` // the resources and hardware asked for, likewise
		Group                      []string `json:",omitempty"` // a group's members, in order
	}{r.Spec.Platform, r.Spec.Model, r.Spec.OSVersion, r.Spec.AllowDownload, r.NoWait,
		r.TTL.Milliseconds(), r.Timeout.Milliseconds(), r.DeviceID, ProfileOf(r.Spec.Resources, r.Spec.Hardware), groupPrint(r.Group)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// admit stores a new request (or re-admits an interrupted one), to be
// served (serve), or finds the pending request the key names (attach to
// rq.out) or the settled one it answers with (replay).
func (b *durableBook) admit(eng durableEngine, r Request, fp string, leases map[string]*LeaseRecord) (rq *requestEntry, replay *result, serve bool, err error) {
	now := eng.now()
	if r.IdempotencyKey != "" {
		if x := b.byKey[keyOf(r.RequesterID, r.IdempotencyKey)]; x != nil {
			switch {
			case x.rec.Fingerprint != fp:
				return nil, nil, false, &IdempotencyMismatchError{RequestID: x.rec.ID}
			case !x.rec.State.Terminal():
				x.callers++
				return x, nil, false, nil
			case !x.rec.Interrupted:
				res := b.replay(x, leases, b.grantOf)
				return nil, &res, false, nil
			}
			rq = x // interrupted: admit it again under the same id
		}
	}
	fresh := rq == nil
	rec := RequestRecord{}
	if fresh {
		rec = RequestRecord{ID: "req_" + b.newID(), RequesterID: r.RequesterID, OwnerID: r.OwnerID,
			IdempotencyKey: r.IdempotencyKey, Fingerprint: fp, Platform: requestPlatform(r), CreatedAt: now}
	} else {
		rec = rq.rec
		rec.LeaseID, rec.Error, rec.Interrupted, rec.Timing = "", nil, false, nil
	}
	rec.State, rec.UpdatedAt, rec.Seq = RequestQueued, now, b.seq+1
	var doomed []string
	if fresh {
		doomed = b.trimLocked(leases)
	}
	// A keyed request is stored before anything else happens: if this
	// fails the caller is told so, and no outcome is claimed.
	if _, err := b.putReceiptLocked(rec, doomed); err != nil {
		return nil, nil, false, fmt.Errorf("store the lease request: %w", err)
	}
	b.seq++
	if fresh {
		rq = &requestEntry{id: rec.ID, subs: map[int]*subscriber{}}
		b.byID[rec.ID] = rq
		b.order = append(b.order, rec.ID)
		if rec.IdempotencyKey != "" {
			b.byKey[keyOf(rec.RequesterID, rec.IdempotencyKey)] = rq
		}
	}
	rq.rec, rq.callers, rq.w, rq.committed = rec, 1, nil, ""
	rq.timing, rq.downloaded = newTiming(now), r.Downloaded
	rq.out, rq.firstErr = &outcome{done: make(chan struct{})}, nil
	return rq, nil, true, nil
}

// await waits for one caller. A caller that goes away detaches; the
// last one to go withdraws the request, exactly as a disconnect always has,
// and waits until that is settled. It runs outside the section: durable
// waits for the outcome's commit, detach enters the section.
func (b *durableBook) await(ctx context.Context, rq *requestEntry, out *outcome, progress func(Progress), durable func(ticket uint64) error, detach func() bool) (Grant, error) {
	id := rq.subscribe(progress)
	defer rq.unsubscribe(id)
	select {
	case <-out.done:
		if err := durable(out.ticket); err != nil {
			return Grant{}, err
		}
		if out.err == nil {
			rq.grantedPush(id, out.grant)
		}
		return out.grant, out.err
	case <-ctx.Done():
	}
	if detach() {
		rq.cancel()
		<-out.done
	}
	return Grant{}, ctx.Err()
}

// detach is one caller of out going away: it reports whether it was the
// last, so the request is withdrawn.
func (b *durableBook) detach(rq *requestEntry, out *outcome) bool {
	rq.callers--
	return rq.callers == 0 && rq.out == out && !rq.rec.State.Terminal()
}

// awaitSettled waits until w's request has recorded its outcome, so a read
// right after a cancel sees it. Call it outside the decision section.
func (w *waiter) awaitSettled() {
	if w != nil && w.rq != nil && w.out != nil {
		<-w.out.done
	}
}

// bind ties a queued waiter to its request (called where the waiter is
// admitted to the queue).
func (b *durableBook) bind(eng durableEngine, w *waiter) {
	rq := w.rq
	if rq == nil {
		return
	}
	now := eng.now()
	rq.w, w.out = w, rq.out
	rq.timing.admit(now)
	if rq.downloaded != nil && rq.downloaded() {
		rq.timing.mu.Lock()
		rq.timing.downloaded = true
		rq.timing.phases[PhaseDownload] = now.Sub(rq.timing.arrived)
		rq.timing.mu.Unlock()
	}
}

// settle records the outcome of one admission and hands it to every
// attached caller.
func (b *durableBook) settle(eng durableEngine, rq *requestEntry, out *outcome, g Grant, err error) {
	rec := rq.rec
	rec.UpdatedAt = eng.now()
	switch {
	case err == nil:
		rec.State, rec.LeaseID, rec.Timing = RequestGranted, g.Lease.ID, g.Lease.Timing
	case errors.Is(err, ErrQueueTimeout):
		rec.State = RequestExpired
	case errors.Is(err, ErrCancelled):
		rec.State = RequestCancelled
	case errors.Is(err, context.Canceled):
		rec.State, rec.Interrupted = RequestCancelled, true
	case errors.Is(err, ErrStopping), errors.Is(err, ErrMaintenance), errors.Is(err, ErrAssignedUnknown):
		// Nothing about the request itself was refused: a retry under the
		// same key is admitted again rather than replaying this.
		rec.State, rec.Interrupted = RequestFailed, true
	default:
		rec.State = RequestFailed
	}
	if err != nil {
		re := b.classify(err)
		rec.Error = &re
		if !rq.timing.wasAdmitted() && !errors.Is(err, context.Canceled) {
			// Refused before it reached the queue (its spec, its TTL, a
			// lease its requester already holds): no request.* fact has
			// told anyone, and the refusal counts all the same.
			eng.emitLocked(events.Event{Type: "request.rejected", RequesterID: rec.RequesterID, Platform: rec.Platform, Reason: re.Message,
				Data: map[string]any{"ownerId": rec.OwnerID, "code": re.Code}})
		}
	}
	if (err == nil && rq.committed == g.Lease.ID) || rec.IdempotencyKey == "" {
		// Stored with the grant, in one transaction; or a receipt kept in
		// memory only.
	} else if t, perr := b.putReceiptLocked(rec, nil); perr != nil {
		// The outcome still reaches the callers; after a restart the
		// receipt reads as interrupted, or as granted when its lease was
		// committed (the lease row names the request).
		b.log.Error("store a lease request's outcome", "request", rec.ID, "err", perr)
	} else {
		out.ticket = t
	}
	rq.rec, rq.w = rec, nil
	out.grant, out.err = g, err
	close(out.done)
	b.settledLocked(rq, out)
}

// settledLocked swaps a settled request's entry in the book for one that
// holds only the receipt. The receipt stays for the retention window (a
// repeat is answered from it, request.status reads it), but the admission's
// live state does not need to: its context, progress subscribers and last
// progress, timing clock, download probe and the full grant. Kept, they
// cost a settled receipt about 1.5 KiB more each, and a busy daemon keeps
// every receipt of the last requests.retentionMs. The old entry stays valid
// for the callers and goroutines still holding it and is collected when
// they let go.
func (b *durableBook) settledLocked(rq *requestEntry, out *outcome) {
	if b.byID[rq.id] != rq || !rq.rec.State.Terminal() {
		return
	}
	// No outcome (it embeds a whole Grant): replay answers a repeat
	// of a refusal with the very error the first caller got, kept alone.
	slim := &requestEntry{id: rq.id, rec: rq.rec, committed: rq.committed, firstErr: out.err}
	b.byID[rq.id] = slim
	if k := keyOf(rq.rec.RequesterID, rq.rec.IdempotencyKey); rq.rec.IdempotencyKey != "" && b.byKey[k] == rq {
		b.byKey[k] = slim
	}
}

// grantedReceipt is the receipt to commit with w's grant of l: one
// transaction for both when the registry store also keeps receipts (the
// daemon's database does), nothing otherwise (settle writes it).
func (b *durableBook) grantedReceipt(registry Store, w *waiter, l LeaseRecord) []RequestRecord {
	if w == nil || w.rq == nil || w.rq.rec.IdempotencyKey == "" {
		return nil
	}
	if rs, ok := registry.(RequestStore); !ok || rs != b.store {
		return nil
	}
	rec := w.rq.rec
	rec.State, rec.LeaseID, rec.Timing, rec.UpdatedAt = RequestGranted, l.ID, l.Timing, l.GrantedAt
	w.rq.committed = l.ID
	return []RequestRecord{rec}
}

// replay answers a repeat of a settled request with its outcome.
func (b *durableBook) replay(x *requestEntry, leases map[string]*LeaseRecord, grantOf func(LeaseRecord) Grant) result {
	if x.rec.State == RequestGranted {
		if l, ok := leases[x.rec.LeaseID]; ok && l.RequestID == x.rec.ID {
			return result{grant: grantOf(*l)}
		}
		return result{err: &GrantEndedError{RequestID: x.rec.ID, LeaseID: x.rec.LeaseID}}
	}
	if x.out != nil && x.out.err != nil {
		return result{err: x.out.err} // the very error the first caller got
	}
	if x.firstErr != nil {
		return result{err: x.firstErr} // the same, kept by a settled entry
	}
	if x.rec.Error != nil {
		re := *x.rec.Error
		return result{err: &re}
	}
	return result{err: ErrUnknownRequest}
}

func (rq *requestEntry) subscribe(f func(Progress)) int {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	rq.next++
	if f != nil {
		if rq.subs == nil {
			rq.subs = map[int]*subscriber{} // a settled entry admitted again
		}
		sub := &subscriber{f: f}
		rq.subs[rq.next] = sub
		if rq.last != nil && rq.last.Phase != "granted" {
			f(*rq.last) // a caller that attaches late learns where the request stands
		}
	}
	return rq.next
}

// grantedPush makes sure a caller sees the granted progress before its
// answer: the engine pushes it after leaving the decision section, which
// may be after the outcome reached this caller.
func (rq *requestEntry) grantedPush(id int, g Grant) {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if sub := rq.subs[id]; sub != nil && !sub.granted {
		sub.granted = true
		sub.f(Progress{Phase: "granted", DeviceID: g.Device.ID, RequestID: rq.id})
	}
}

func (rq *requestEntry) unsubscribe(id int) {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	delete(rq.subs, id)
}

// push fans a progress report out to every attached caller.
func (rq *requestEntry) push(p Progress) {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if p.RequestID == "" {
		p.RequestID = rq.id
	}
	rq.last = &p
	for _, sub := range rq.subs {
		if p.Phase == "granted" {
			if sub.granted {
				continue
			}
			sub.granted = true
		}
		sub.f(p)
	}
}

// RequestStatus is what a read of a request reports.
type RequestStatus struct {
	Record        RequestRecord
	QueuePosition int          // 1-based while queued and not yet served
	Lease         *LeaseRecord // the granted lease while it lasts
	Callers       int          // callers waiting on the current admission
}

// RequestDesk is the durable requests' counter: lease.requestStatus reads
// a receipt through it.
type RequestDesk struct{ e *Engine }

// Requests is the durable requests' desk.
func (e *Engine) Requests() RequestDesk { return RequestDesk{e} }

// RequestStatus reads one request's receipt, with its live phase while it
// is pending.
func (rd RequestDesk) RequestStatus(id string) (RequestStatus, error) {
	e := rd.e
	e.mu.Lock()
	defer e.mu.Unlock()
	rq, ok := e.reqs.byID[id]
	if !ok {
		// A keyless grant's receipt is kept in memory only; while its
		// lease lasts the lease row still names the request.
		for _, l := range e.reg.leases {
			if l.RequestID == id {
				lc := *l
				rec := RequestRecord{ID: id, RequesterID: l.RequesterID, OwnerID: l.OwnerID, Platform: l.Platform, State: RequestGranted,
					LeaseID: l.ID, CreatedAt: l.GrantedAt, UpdatedAt: l.GrantedAt, Timing: l.Timing}
				return RequestStatus{Record: rec, Lease: &lc}, nil
			}
		}
		return RequestStatus{}, ErrUnknownRequest
	}
	st := RequestStatus{Record: rq.rec}
	if !rq.rec.State.Terminal() {
		st.Callers = rq.callers
	}
	if w := rq.w; w != nil && !rq.rec.State.Terminal() {
		switch w.phase {
		case "provisioning":
			st.Record.State = RequestProvisioning
		case "booting":
			st.Record.State = RequestBooting
		}
		pos := 0
		for _, x := range e.queue.Entries() {
			if !x.working {
				pos++
			}
			if x == w && !w.working {
				st.QueuePosition = pos
			}
		}
	}
	if st.Record.State == RequestGranted {
		if l, ok := e.reg.leases[rq.rec.LeaseID]; ok && l.RequestID == id {
			lc := *l
			st.Lease = &lc
		}
	}
	return st, nil
}

// recoverRequests loads the receipts at startup. A request that was not
// settled when the previous daemon died is granted if its lease was
// committed (the lease row names it) and otherwise failed as interrupted by
// the restart: every caller's connection died with the daemon, and a
// request nobody waits for is withdrawn (ADR 0017).
func (b *durableBook) recoverRequests(ctx context.Context) error {
	recs, err := b.store.LoadRequests(ctx)
	if err != nil {
		return fmt.Errorf("load lease requests: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.recover(ctx, recs, b.now(), b.reg.leases); err != nil {
		return err
	}
	b.arm(b.reg.timers, b.pruneRequests)
	return nil
}

// recover indexes the loaded receipts recs, in queue order, settling the
// ones a restart cut off.
func (b *durableBook) recover(ctx context.Context, recs []RequestRecord, now time.Time, leases map[string]*LeaseRecord) error {
	byRequest := map[string]*LeaseRecord{}
	for _, l := range leases {
		if l.RequestID != "" {
			byRequest[l.RequestID] = l
		}
	}
	for _, rec := range recs {
		if !rec.State.Terminal() {
			if l, ok := byRequest[rec.ID]; ok {
				rec.State, rec.LeaseID, rec.Timing = RequestGranted, l.ID, l.Timing
			} else {
				re := b.classify(ErrDaemonRestarted)
				rec.State, rec.Error, rec.Interrupted = RequestFailed, &re, true
			}
			rec.UpdatedAt = now
			if err := b.store.PutRequest(ctx, rec); err != nil {
				return fmt.Errorf("settle an interrupted lease request: %w", err)
			}
		}
		rq := &requestEntry{id: rec.ID, rec: rec}
		b.byID[rec.ID] = rq
		b.order = append(b.order, rec.ID)
		if rec.IdempotencyKey != "" {
			b.byKey[keyOf(rec.RequesterID, rec.IdempotencyKey)] = rq
		}
		if rec.Seq > b.seq {
			b.seq = rec.Seq
		}
	}
	// A database written before the count bound (or under a larger one)
	// is brought within it at once.
	if doomed := b.trimLocked(leases); len(doomed) > 0 {
		if err := b.store.DeleteRequests(ctx, doomed); err != nil {
			return fmt.Errorf("forget lease requests past the count bound: %w", err)
		}
	}
	return nil
}

// putReceiptLocked stores a lease request receipt. When the registry's
// store also keeps receipts it goes through the single writer, so it shares
// a transaction (one fsync) with the grant decided right after it; the
// returned ticket is what an answer naming it waits for. Another receipt
// store is written directly.
func (b *durableBook) putReceiptLocked(rec RequestRecord, doomed []string) (uint64, error) {
	var puts []RequestRecord
	if rec.IdempotencyKey != "" {
		puts = []RequestRecord{rec}
	}
	if len(puts) == 0 && len(doomed) == 0 {
		return 0, nil
	}
	if rs, ok := b.registry.(RequestStore); !ok || rs != b.store {
		if err := b.store.DeleteRequests(context.Background(), doomed); err != nil {
			b.log.Warn("forget lease requests past the count bound", "err", err)
		}
		if len(puts) == 0 {
			return 0, nil
		}
		return 0, b.store.PutRequest(context.Background(), rec)
	}
	if b.fence.broken != nil {
		return 0, b.fence.broken
	}
	// Not kicked: the grant (or refusal) decided next carries it.
	en, err := b.wr.enqueueKick(&Changes{PutRequests: puts, DeleteRequests: doomed}, nil, false, false)
	if err != nil {
		return 0, err
	}
	if b.sec.inSection && en.ticket > b.sec.secTicket {
		b.sec.secTicket = en.ticket
	}
	return en.ticket, nil
}

// trimLocked makes room for one more receipt under the count bound: it
// forgets the oldest settled receipts past it and returns the ids of the
// stored ones, for the caller's next commit to delete. A pending request
// and a keyed grant whose lease still lasts (the lease's answer to a
// repeat) are kept, so the bound may be passed by as many as there are
// leases and queued requests; a keyless grant is read back from its lease
// (RequestStatus) and may go.
func (b *durableBook) trimLocked(leases map[string]*LeaseRecord) []string {
	var doomed []string
	for n := len(b.order); len(b.byID) >= b.max && n > 0; n-- {
		id := b.order[0]
		b.order = b.order[1:]
		rq, ok := b.byID[id]
		if !ok {
			continue // pruned by age already
		}
		if l, live := leases[rq.rec.LeaseID]; !rq.rec.State.Terminal() || (live && l.RequestID == id && rq.rec.IdempotencyKey != "") {
			b.order = append(b.order, id)
			continue
		}
		b.forget(rq)
		if rq.rec.IdempotencyKey != "" {
			doomed = append(doomed, id)
		}
	}
	return doomed
}

// forget drops rq from the book's indexes.
func (b *durableBook) forget(rq *requestEntry) {
	delete(b.byID, rq.id)
	if rq.rec.IdempotencyKey != "" && b.byKey[keyOf(rq.rec.RequesterID, rq.rec.IdempotencyKey)] == rq {
		delete(b.byKey, keyOf(rq.rec.RequesterID, rq.rec.IdempotencyKey))
	}
}

// pruneTimer is the key of the receipt pruning timer among the engine's
// timers, so Stop stops it with the lease timers.
const pruneTimer = "requests.prune"

// arm schedules the next prune, fire, among the engine's timers.
func (b *durableBook) arm(timers map[string]ports.Timer, fire func()) {
	every := b.retention / 10
	every = max(time.Minute, min(every, time.Hour))
	if t, ok := timers[pruneTimer]; ok {
		t.Stop()
	}
	timers[pruneTimer] = b.clock.AfterFunc(every, fire)
}

// pruneRequests is the prune timer: it forgets settled receipts older
// than the retention window, unless the engine is stopping.
func (b *durableBook) pruneRequests() {
	b.mu.Lock()
	if b.halt.stopping {
		b.mu.Unlock()
		return
	}
	b.prune(b.now(), b.reg.leases)
	b.arm(b.reg.timers, b.pruneRequests)
	b.mu.Unlock()
}

// prune forgets settled receipts older than the retention window. A
// granted receipt whose lease still lasts is kept: it is the lease's
// answer to a repeat.
func (b *durableBook) prune(now time.Time, leases map[string]*LeaseRecord) {
	cutoff := now.Add(-b.retention)
	var ids []string
	for id, rq := range b.byID {
		if !rq.rec.State.Terminal() || !rq.rec.UpdatedAt.Before(cutoff) {
			continue
		}
		if l, ok := leases[rq.rec.LeaseID]; ok && l.RequestID == id {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) > 0 {
		if err := b.store.DeleteRequests(context.Background(), ids); err != nil {
			b.log.Warn("prune lease requests", "err", err)
			ids = nil
		}
	}
	for _, id := range ids {
		b.forget(b.byID[id])
	}
	if len(b.order) > 2*len(b.byID)+64 {
		// Ids pruned by age linger in the bound's order until trimLocked
		// reaches them; compact it so it cannot outgrow the book.
		kept := make([]string, 0, len(b.byID))
		for _, id := range b.order {
			if _, ok := b.byID[id]; ok {
				kept = append(kept, id)
			}
		}
		b.order = kept
	}
}

// MemoryRequests is a RequestStore in memory: the engine's own when it is
// given no store, and a test's that outlives an engine so a restart sees
// the same receipts.
type MemoryRequests struct {
	mu sync.Mutex
	m  map[string]RequestRecord
}

// NewMemoryRequests returns an empty in-memory store.
func NewMemoryRequests() *MemoryRequests { return &MemoryRequests{m: map[string]RequestRecord{}} }

func (s *MemoryRequests) LoadRequests(context.Context) ([]RequestRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RequestRecord, 0, len(s.m))
	for _, r := range s.m {
		out = append(out, r)
	}
	return out, nil
}

func (s *MemoryRequests) PutRequest(_ context.Context, r RequestRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[r.ID] = r
	return nil
}

func (s *MemoryRequests) DeleteRequests(_ context.Context, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.m, id)
	}
	return nil
}
