package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

// memStore is a Store in memory that survives a gateway's restart the
// way a file would: the tests build a second gateway on the same one.
// Every write round-trips through JSON so no pointer is shared.
type memStore struct {
	mu       sync.Mutex
	receipts map[string][]byte
	drained  map[string]string
	puts     int
}

func newMemStore() *memStore {
	return &memStore{receipts: map[string][]byte{}, drained: map[string]string{}}
}

func (m *memStore) PutReceipt(_ context.Context, r Receipt) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Key != "" {
		for id, b := range m.receipts {
			var o Receipt
			_ = json.Unmarshal(b, &o)
			if id != r.ID && o.Requester == r.Requester && o.Key == r.Key {
				return ErrDuplicateKey
			}
		}
	}
	b, _ := json.Marshal(r)
	m.receipts[r.ID] = b
	m.puts++
	return nil
}

func (m *memStore) DeleteReceipt(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.receipts, id)
	return nil
}

func (m *memStore) all() []Receipt {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Receipt
	for _, b := range m.receipts {
		var r Receipt
		_ = json.Unmarshal(b, &r)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

func (m *memStore) Receipt(_ context.Context, id string) (Receipt, bool, error) {
	for _, r := range m.all() {
		if r.ID == id {
			return r, true, nil
		}
	}
	return Receipt{}, false, nil
}

func (m *memStore) ReceiptByKey(_ context.Context, requester, key string) (Receipt, bool, error) {
	for _, r := range m.all() {
		if r.Requester == requester && r.Key == key {
			return r, true, nil
		}
	}
	return Receipt{}, false, nil
}

func (m *memStore) OpenReceipts(context.Context) ([]Receipt, error) {
	var out []Receipt
	for _, r := range m.all() {
		if r.Open() {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memStore) MaxSeq(context.Context) (uint64, error) {
	var n uint64
	for _, r := range m.all() {
		n = max(n, r.Seq)
	}
	return n, nil
}

func (m *memStore) PruneReceipts(_ context.Context, cutoff time.Time, keep int) (int, error) {
	return 0, nil
}

func (m *memStore) Drained(context.Context) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for k, v := range m.drained {
		out[k] = v
	}
	return out, nil
}

func (m *memStore) SetDrained(_ context.Context, id, label string, drained bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if drained {
		m.drained[id] = label
	} else {
		delete(m.drained, id)
	}
	return nil
}

func withStore(st Store) func(*Options) { return func(o *Options) { o.Store = st } }

// restart stops the gateway as a crash would leave it for its store (a
// stop settles nothing) and builds a new one on the same store and clock.
func (h *harness) restart(st Store) {
	h.g.Close()
	h.start(withStore(st))
}

func ios(requester, key string) contract.LeaseRequestIn {
	return contract.LeaseRequestIn{Platform: "ios", RequesterID: requester, IdempotencyKey: key}
}

// A restarted gateway takes back every request it had queued, in order:
// each is served in turn while no caller waits, and its caller collects
// the lease by repeating the request, with its key or, without one, the
// same body from the same requester.
func TestARestartedGatewayServesItsQueueInOrderAndRepeatsCollectTheLeases(t *testing.T) {
	st := newMemStore()
	h := newHarness(t, withStore(st))
	w := newFakeWorker("w1", h.clock)
	w.maxRun["ios"] = 1
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w1")
	holder := h.lease(agent("a"), ios("holder", ""))

	const n = 5
	var chans []<-chan leaseResult
	for i := range n {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("k%d", i)
		}
		chans = append(chans, h.request(agent("a"), ios(fmt.Sprintf("r%d", i), key), nil))
		eventually(t, "request queued", func() bool { return h.waiting(fmt.Sprintf("a/r%d", i)) })
	}
	h.restart(st)
	for _, ch := range chans {
		if r := wait(t, ch); r.err == nil || r.err.Code != contract.CodeDaemonStopping {
			t.Fatalf("a caller of the stopped gateway: %+v", r)
		}
	}
	if got := h.queueDepth(); got != n {
		t.Fatalf("queue depth after the restart: %d, want %d", got, n)
	}
	h.attach(w)
	h.settle("w1")

	release := func(id string) {
		t.Helper()
		var out contract.LeaseReleaseOut
		if err := h.do(context.Background(), agent("a"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: id}, &out, nil); err != nil {
			t.Fatal(err)
		}
	}
	release(holder.LeaseID)
	for i := range n {
		req := fmt.Sprintf("r%d", i)
		eventually(t, req+" served", func() bool {
			h.g.mu.Lock()
			defer h.g.mu.Unlock()
			return h.g.byReq["a/"+req] != nil
		})
		// Nobody after it was served first.
		for j := i + 1; j < n; j++ {
			if !h.waiting(fmt.Sprintf("a/r%d", j)) {
				t.Fatalf("r%d left the queue before r%d was collected", j, i)
			}
		}
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("k%d", i)
		}
		l := h.lease(agent("a"), ios(req, key))
		h.g.mu.Lock()
		e := h.g.byReq["a/"+req]
		h.g.mu.Unlock()
		if l.LeaseID != e.id {
			t.Fatalf("%s's repeat: lease %s, the gateway served it %s", req, l.LeaseID, e.id)
		}
		release(l.LeaseID)
	}
	if got := h.queueDepth(); got != 0 {
		t.Fatalf("queue depth at the end: %d", got)
	}
}

// Two callers under one key get one request and one lease; a repeat after
// it settled replays that lease; another body under the key is refused.
func TestOneKeyOneRequest(t *testing.T) {
	st := newMemStore()
	h := newHarness(t, withStore(st))
	w := newFakeWorker("w1", h.clock)
	w.maxRun["ios"] = 1
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w1")
	holder := h.lease(agent("a"), ios("holder", ""))

	first := h.request(agent("a"), ios("r", "k"), nil)
	eventually(t, "queued", func() bool { return h.waiting("a/r") })
	second := h.request(agent("a"), ios("r", "k"), nil)
	eventually(t, "the second caller attached", func() bool {
		h.g.mu.Lock()
		defer h.g.mu.Unlock()
		return h.g.callersLocked(h.g.pendingBy["a/r"]) == 2
	})
	if got := h.queueDepth(); got != 1 {
		t.Fatalf("queue depth with two callers on one key: %d", got)
	}
	var out contract.LeaseReleaseOut
	if err := h.do(context.Background(), agent("a"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: holder.LeaseID}, &out, nil); err != nil {
		t.Fatal(err)
	}
	a, b := wait(t, first), wait(t, second)
	if a.err != nil || b.err != nil || a.lease.LeaseID != b.lease.LeaseID {
		t.Fatalf("two callers on one key: %+v / %+v", a, b)
	}
	if l := h.lease(agent("a"), ios("r", "k")); l.LeaseID != a.lease.LeaseID {
		t.Fatalf("a repeat after the grant: %s, want %s", l.LeaseID, a.lease.LeaseID)
	}
	other := ios("r", "k")
	other.Model = "iPad Air"
	if r := wait(t, h.request(agent("a"), other, nil)); r.err == nil || r.err.Code != contract.CodeIdempotencyMismatch {
		t.Fatalf("another body under the key: %+v", r)
	}
	if got := len(w.called(contract.LeaseRequest.Name)); got != 2 {
		t.Fatalf("the worker saw %d lease requests, want 2 (holder and r)", got)
	}
}

// A request a worker had when the gateway died is asked again at that
// worker, under the same attempt key, and gets the lease the worker
// granted: never a second one.
func TestARequestAtAWorkerWhenTheGatewayDiedGetsTheLeaseThatWorkerGranted(t *testing.T) {
	st := newMemStore()
	h := newHarness(t, withStore(st))
	w := newFakeWorker("w1", h.clock)
	w.addDevice("ios", "iPhone 16", "18.2")
	w.addDevice("ios", "iPhone 16", "18.2")
	// What the previous run left: the worker granted attempt 1 and the
	// gateway died before it recorded the grant.
	in := ios("r", "k")
	in.TTLMs = 600_000
	w.mu.Lock()
	fwd := contract.LeaseRequestIn{Platform: "ios", TTLMs: in.TTLMs, NoWait: true, RequesterID: "gw:gw1:a/r", OwnerID: "gw:gw1:a",
		IdempotencyKey: attemptKey(requestID(7), 1)}
	granted := w.grantLocked(w.devices[0], fwd)
	w.keyed[fwd.RequesterID+"\x00"+fwd.IdempotencyKey] = keyedOutcome{lease: granted}
	w.mu.Unlock()
	_ = st.PutReceipt(context.Background(), Receipt{ID: requestID(7), Seq: 7, Requester: "a/r", Owner: "a", Key: "k",
		Fingerprint: fingerprint(in), In: in, State: ReceiptDispatched, Worker: "w1", Attempt: 1,
		AttemptAt: h.clock.Now(), CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now()})
	h.restart(st)
	if got := h.queueDepth(); got != 1 {
		t.Fatalf("queue depth after the restart: %d", got)
	}
	h.attach(w)
	l := h.lease(agent("a"), in)
	if want := joinLeaseID("w1", granted.LeaseID); l.LeaseID != want {
		t.Fatalf("the repeat got %s, want the worker's %s", l.LeaseID, want)
	}
	w.mu.Lock()
	leases := len(w.leases)
	w.mu.Unlock()
	if leases != 1 {
		t.Fatalf("the worker holds %d leases, want 1", leases)
	}
	r, _, _ := st.Receipt(context.Background(), requestID(7))
	if r.State != ReceiptGranted || r.Lease == nil || r.Lease.LeaseID != l.LeaseID {
		t.Fatalf("the receipt after the resend: %+v", r)
	}
}

// A pinned request whose worker never comes back returns to the queue
// once any lease granted for its attempt has expired, and another worker
// serves it.
func TestAPinnedRequestGoesBackToTheQueueAfterItsTTL(t *testing.T) {
	st := newMemStore()
	in := ios("r", "k")
	in.TTLMs = 60_000
	h := newHarness(t, withStore(st))
	_ = st.PutReceipt(context.Background(), Receipt{ID: requestID(3), Seq: 3, Requester: "a/r", Owner: "a", Key: "k",
		Fingerprint: fingerprint(in), In: in, State: ReceiptDispatched, Worker: "gone", Attempt: 2,
		AttemptAt: h.clock.Now(), CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now()})
	h.restart(st)
	w := newFakeWorker("w2", h.clock)
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w2")
	if len(w.called(contract.LeaseRequest.Name)) != 0 {
		t.Fatal("a request pinned to another worker was sent to w2 before its TTL passed")
	}
	h.clock.Advance(61 * time.Second)
	l := h.lease(agent("a"), in)
	if wid, _, _ := splitLeaseID(l.LeaseID); wid != "w2" {
		t.Fatalf("served by %s", wid)
	}
	r, _, _ := st.Receipt(context.Background(), requestID(3))
	if r.Attempt != 3 {
		t.Fatalf("the new attempt's number: %d, want 3", r.Attempt)
	}
}

// queue.maxPerPrincipal applies on a gateway.
func TestAGatewayCapsTheRequestsOneOwnerHasWaiting(t *testing.T) {
	h := newHarness(t, withStore(newMemStore()), func(o *Options) { o.MaxPerPrincipal = 2 })
	w := newFakeWorker("w1", h.clock)
	w.maxRun["ios"] = 1
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w1")
	h.lease(agent("a"), ios("holder", ""))
	for _, r := range []string{"r1", "r2"} {
		h.request(agent("a"), ios(r, ""), nil)
		eventually(t, "queued", func() bool { return h.waiting("a/" + r) })
	}
	r := wait(t, h.request(agent("a"), ios("r3", ""), nil))
	if r.err == nil || r.err.Code != contract.CodeQueueLimit {
		t.Fatalf("a third waiting request of one owner: %+v", r)
	}
	h.request(agent("b"), ios("r4", ""), nil)
	eventually(t, "another owner's request is queued", func() bool { return h.waiting("b/r4") })
}

// lease.requestStatus reads a queued request's place, then its outcome
// from the store; another principal cannot read it.
func TestRequestStatusOnAGateway(t *testing.T) {
	st := newMemStore()
	h := newHarness(t, withStore(st))
	w := newFakeWorker("w1", h.clock)
	w.maxRun["ios"] = 1
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w1")
	holder := h.lease(agent("a"), ios("holder", ""))
	ch := h.request(agent("a"), ios("r", "k"), nil)
	eventually(t, "queued", func() bool { return h.waiting("a/r") })
	h.g.mu.Lock()
	rid := h.g.pendingBy["a/r"].rid
	h.g.mu.Unlock()
	var rec contract.LeaseRequestReceipt
	if err := h.do(context.Background(), agent("a"), contract.LeaseRequestStatus.Name, contract.LeaseRequestStatusIn{RequestID: rid}, &rec, nil); err != nil {
		t.Fatal(err)
	}
	if rec.State != contract.RequestQueued || rec.QueuePosition != 1 {
		t.Fatalf("a queued request's receipt: %+v", rec)
	}
	if err := h.do(context.Background(), agent("b"), contract.LeaseRequestStatus.Name, contract.LeaseRequestStatusIn{RequestID: rid}, &rec, nil); err == nil || err.Code != contract.CodeForbidden {
		t.Fatalf("another principal read it: %v", err)
	}
	var out contract.LeaseReleaseOut
	_ = h.do(context.Background(), agent("a"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: holder.LeaseID}, &out, nil)
	got := wait(t, ch)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if err := h.do(context.Background(), agent("a"), contract.LeaseRequestStatus.Name, contract.LeaseRequestStatusIn{RequestID: rid}, &rec, nil); err != nil {
		t.Fatal(err)
	}
	if rec.State != contract.RequestGranted || rec.LeaseID != got.lease.LeaseID || rec.Lease == nil {
		t.Fatalf("the granted request's receipt: %+v", rec)
	}
	if err := h.do(context.Background(), agent("a"), contract.LeaseRequestStatus.Name, contract.LeaseRequestStatusIn{RequestID: "greq_nope"}, &rec, nil); err == nil || err.Code != contract.CodeUnknownRequest {
		t.Fatalf("an unknown request: %v", err)
	}
}

// A keyless noWait request writes nothing; a waiting one is stored and
// forgotten once its caller has its outcome.
func TestWhatAKeylessRequestStores(t *testing.T) {
	st := newMemStore()
	h := newHarness(t, withStore(st))
	w := newFakeWorker("w1", h.clock)
	w.maxRun["ios"] = 1
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w1")
	nw := ios("n", "")
	nw.NoWait = true
	l := h.lease(agent("a"), nw)
	st.mu.Lock()
	puts := st.puts
	st.mu.Unlock()
	if puts != 0 {
		t.Fatalf("a keyless noWait grant wrote %d receipts", puts)
	}
	var out contract.LeaseReleaseOut
	_ = h.do(context.Background(), agent("a"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, &out, nil)
	h.settle("w1")
	h.lease(agent("a"), ios("q", ""))
	if rs := st.all(); len(rs) != 0 {
		t.Fatalf("receipts left after a keyless request was answered: %+v", rs)
	}
}

// A lease served to a restored request that nobody collects leaves no
// trace once it ends: the uncollected entry goes with the lease.
func TestAnUncollectedLeaseIsForgottenWhenItEnds(t *testing.T) {
	st := newMemStore()
	h := newHarness(t, withStore(st))
	w := newFakeWorker("w1", h.clock)
	w.maxRun["ios"] = 1
	w.addDevice("ios", "iPhone 16", "18.2")
	h.attach(w)
	h.settle("w1")
	holder := h.lease(agent("a"), ios("holder", ""))
	ch := h.request(agent("a"), ios("r", ""), nil)
	eventually(t, "queued", func() bool { return h.waiting("a/r") })
	h.restart(st)
	wait(t, ch)
	h.attach(w)
	h.settle("w1")
	var out contract.LeaseReleaseOut
	if err := h.do(context.Background(), agent("a"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: holder.LeaseID}, &out, nil); err != nil {
		t.Fatal(err)
	}
	var lid string
	eventually(t, "the restored request served with nobody waiting", func() bool {
		h.g.mu.Lock()
		defer h.g.mu.Unlock()
		u, ok := h.g.uncollected["a/r"]
		lid = u.lease.LeaseID
		return ok
	})
	if err := h.do(context.Background(), agent("a"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: lid}, &out, nil); err != nil {
		t.Fatal(err)
	}
	h.g.mu.Lock()
	_, still := h.g.uncollected["a/r"]
	h.g.mu.Unlock()
	if still {
		t.Fatal("the uncollected entry outlived its lease")
	}
}
