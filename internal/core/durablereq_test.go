package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/testhost"
)

// classify stands in for the daemon's error mapping.
func classify(err error) core.RequestError {
	code := "OTHER"
	for sentinel, c := range map[error]string{core.ErrNoCapacity: "NO_CAPACITY", core.ErrDaemonRestarted: "DAEMON_RESTARTED",
		core.ErrQueueTimeout: "QUEUE_TIMEOUT", core.ErrCancelled: "REQUEST_CANCELLED"} {
		if errors.Is(err, sentinel) {
			code = c
		}
	}
	return core.RequestError{Code: code, Message: err.Error(), Retryable: code != "OTHER"}
}

type durable struct {
	*harness
	reqs *core.MemoryRequests
	ids  atomic.Int64 // shared by an engine and its restarted successor
}

func newDurable(t *testing.T, limits core.Limits) *durable {
	t.Helper()
	h := newHarness(t, limits)
	d := &durable{harness: h, reqs: core.NewMemoryRequests()}
	d.restart()
	return d
}

// restart builds a new engine on the same registry and receipts without
// stopping the old one, as after a kill -9.
func (d *durable) restart() {
	h := d.harness
	h.bus = events.New(100, h.clock.Now)
	h.engine = core.New(h.cfg, core.Deps{
		DiskFree: func() (uint64, error) { return h.disk, nil },
		Clock:    h.clock, Store: h.store, Drivers: []core.Driver{h.drv, h.droid},
		Strategy: core.FixedStrategy{L: h.limits}, Bus: h.bus,
		NewID:    func() string { return fmt.Sprintf("%04d", d.ids.Add(1)) },
		Requests: d.reqs, Classify: classify,
	})
	if err := h.engine.Converge(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.engine.WaitIdle()
}

func keyed(requester, key, model string) core.Request {
	return core.Request{Spec: core.SpecRequest{Platform: "ios", Model: model}, RequesterID: requester, OwnerID: requester, IdempotencyKey: key}
}

func (d *durable) do(r core.Request) (core.Grant, error) {
	return d.engine.Request(context.Background(), r, nil)
}

func (d *durable) provisions() int {
	n := 0
	for _, c := range d.drv.Calls() {
		if len(c) > 9 && c[:9] == "provision" {
			n++
		}
	}
	return n
}

func TestSameKeyTwiceYieldsOneLeaseAndOneDevice(t *testing.T) {
	d := newDurable(t, one(2))
	g1, err := d.do(keyed("ci", "k1", ""))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := d.do(keyed("ci", "k1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if g1.Lease.ID != g2.Lease.ID || g1.Device.ID != g2.Device.ID || g1.Lease.RequestID == "" || g1.Lease.RequestID != g2.Lease.RequestID {
		t.Fatalf("repeat: %+v vs %+v", g1.Lease, g2.Lease)
	}
	if n := d.provisions(); n != 1 || len(d.engine.Leases()) != 1 {
		t.Fatalf("%d provisions, %d leases", n, len(d.engine.Leases()))
	}
	st, err := d.engine.Requests().RequestStatus(g1.Lease.RequestID)
	if err != nil || st.Record.State != core.RequestGranted || st.Lease == nil || st.Lease.ID != g1.Lease.ID {
		t.Fatalf("status %+v %v", st, err)
	}
	// Once the lease has ended, the repeat does not get a new one.
	if err := d.engine.Release(g1.Lease.ID); err != nil {
		t.Fatal(err)
	}
	d.engine.WaitIdle()
	if _, err := d.do(keyed("ci", "k1", "")); !errors.Is(err, core.ErrUnknownLease) {
		t.Fatalf("repeat after release: %v", err)
	}
	if len(d.engine.Leases()) != 0 {
		t.Fatal("a repeat after release granted a lease")
	}
}

func TestRepeatWhilePendingAttachesToTheSameRequest(t *testing.T) {
	d := newDurable(t, one(1))
	gate := make(chan struct{})
	d.drv.Gate = gate
	outs := make(chan result, 2)
	seen := make(chan core.Progress, 16)
	go func() {
		g, err := d.engine.Request(context.Background(), keyed("ci", "k", ""), func(p core.Progress) { seen <- p })
		outs <- result{g, err}
	}()
	first := <-seen // the request is stored and being served
	if first.RequestID == "" {
		t.Fatalf("progress without a request id: %+v", first)
	}
	attached := make(chan core.Progress, 16)
	go func() {
		g, err := d.engine.Request(context.Background(), keyed("ci", "k", ""), func(p core.Progress) { attached <- p })
		outs <- result{g, err}
	}()
	if p := <-attached; p.RequestID != first.RequestID { // an attaching caller is told where the request stands
		t.Fatalf("attached to %+v", p)
	}
	if st, _ := d.engine.Requests().RequestStatus(first.RequestID); st.Callers != 2 || (st.Record.State != core.RequestBooting && st.Record.State != core.RequestProvisioning) {
		t.Fatalf("status while attached: %+v", st)
	}
	close(gate)
	a, b := <-outs, <-outs
	if a.err != nil || b.err != nil || a.g.Lease.ID != b.g.Lease.ID {
		t.Fatalf("attached callers: %+v / %+v", a, b)
	}
	if n := d.provisions(); n != 1 {
		t.Fatalf("%d provisions", n)
	}
}

func TestSameKeyDifferentBodyIsAMismatch(t *testing.T) {
	d := newDurable(t, one(2))
	g, err := d.do(keyed("ci", "k", "Phone"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.do(keyed("ci", "k", "Tablet"))
	var mm *core.IdempotencyMismatchError
	if !errors.As(err, &mm) || mm.RequestID != g.Lease.RequestID {
		t.Fatalf("different body: %v", err)
	}
	// The same key under another requester is another request.
	if _, err := d.do(keyed("ci-2", "k", "Tablet")); err != nil {
		t.Fatal(err)
	}
}

func TestRepeatAfterRefusalIsTheSameRefusal(t *testing.T) {
	d := newDurable(t, one(1))
	held, err := d.do(keyed("a", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	r := keyed("b", "kb", "")
	r.NoWait = true
	if _, err := d.do(r); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("noWait at capacity: %v", err)
	}
	if err := d.engine.Release(held.Lease.ID); err != nil {
		t.Fatal(err)
	}
	d.engine.WaitIdle()
	if _, err := d.do(r); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("repeat of a refusal with capacity free: %v", err)
	}
	if len(d.engine.Leases()) != 0 {
		t.Fatal("the repeat was served")
	}
	d.restart()
	_, err = d.do(r)
	var re *core.RequestError
	if !errors.As(err, &re) || re.Code != "NO_CAPACITY" {
		t.Fatalf("repeat after restart: %v", err)
	}
}

func TestRestartFailsAQueuedRequestAndTheSameKeyQueuesItAgain(t *testing.T) {
	d := newDurable(t, one(1))
	held, err := d.do(keyed("a", "ka", ""))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan core.Progress, 4)
	go d.engine.Request(context.Background(), keyed("b", "kb", ""), func(p core.Progress) { seen <- p })
	queued := <-seen
	if queued.Phase != "queued" {
		t.Fatalf("progress %+v", queued)
	}
	d.restart() // the old engine and its caller are gone, as after kill -9

	st, err := d.engine.Requests().RequestStatus(queued.RequestID)
	if err != nil || st.Record.State != core.RequestFailed || st.Record.Error == nil ||
		st.Record.Error.Code != "DAEMON_RESTARTED" || !st.Record.Interrupted {
		t.Fatalf("queued request after restart: %+v %v", st.Record, err)
	}
	granted, err := d.engine.Requests().RequestStatus(held.Lease.RequestID)
	if err != nil || granted.Record.State != core.RequestGranted || granted.Lease == nil {
		t.Fatalf("granted request after restart: %+v %v", granted, err)
	}
	if g, err := d.do(keyed("a", "ka", "")); err != nil || g.Lease.ID != held.Lease.ID {
		t.Fatalf("repeat of a granted request after restart: %+v %v", g.Lease, err)
	}
	// The interrupted request is admitted again under the same id.
	out := make(chan result, 1)
	again := make(chan core.Progress, 4)
	go func() {
		g, err := d.engine.Request(context.Background(), keyed("b", "kb", ""), func(p core.Progress) { again <- p })
		out <- result{g, err}
	}()
	if p := <-again; p.Phase != "queued" || p.RequestID != queued.RequestID {
		t.Fatalf("re-admitted: %+v", p)
	}
	if err := d.engine.Release(held.Lease.ID); err != nil {
		t.Fatal(err)
	}
	res := <-out
	if res.err != nil || res.g.Lease.RequestID != queued.RequestID {
		t.Fatalf("re-admitted: %+v %v", res.g.Lease, res.err)
	}
	if n := d.provisions(); n != 1 {
		t.Fatalf("%d provisions for two requesters on one device", n)
	}
}

func TestReceiptsArePrunedAfterTheRetention(t *testing.T) {
	d := newDurable(t, one(1))
	d.cfg.RequestRetention = time.Hour
	d.cfg.MaxTTL = 3 * time.Hour
	d.restart()
	hr := keyed("a", "ka", "")
	hr.TTL = 2 * time.Hour
	held, err := d.do(hr)
	if err != nil {
		t.Fatal(err)
	}
	r := keyed("b", "kb", "")
	r.NoWait = true
	_, err = d.do(r)
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatal(err)
	}
	refused := d.receiptOf("b")
	d.clock.Advance(59 * time.Minute)
	if _, err := d.engine.Requests().RequestStatus(refused); err != nil {
		t.Fatalf("pruned before the retention: %v", err)
	}
	d.clock.Advance(10 * time.Minute) // past the hour, and a prune tick (every 6 min) later
	if _, err := d.engine.Requests().RequestStatus(refused); !errors.Is(err, core.ErrUnknownRequest) {
		t.Fatalf("not pruned: %v", err)
	}
	if d.stored(refused) {
		t.Fatal("pruned in memory only")
	}
	// A granted receipt lives as long as its lease.
	if _, err := d.engine.Requests().RequestStatus(held.Lease.RequestID); err != nil {
		t.Fatalf("granted receipt pruned while its lease lasts: %v", err)
	}
	// The key is free again: a new request, with a new id.
	if _, err := d.do(r); !errors.Is(err, core.ErrNoCapacity) {
		t.Fatal(err)
	}
	if again := d.receiptOf("b"); again == refused {
		t.Fatal("the pruned receipt answered")
	}
}

// stored reports whether the store (not just the engine) still has id.
func (d *durable) stored(id string) bool {
	recs, _ := d.reqs.LoadRequests(context.Background())
	for _, r := range recs {
		if r.ID == id {
			return true
		}
	}
	return false
}

func (d *durable) receiptOf(requester string) string {
	recs, _ := d.reqs.LoadRequests(context.Background())
	var best core.RequestRecord
	for _, r := range recs {
		if r.RequesterID == requester && r.Seq > best.Seq {
			best = r
		}
	}
	return best.ID
}

func TestTimingRecordsHowEachLeaseWasServed(t *testing.T) {
	d := newDurable(t, core.Limits{MaxRunning: 1, MaxManaged: 4})
	ch, cancel := d.bus.Subscribe(256)
	defer cancel()
	serve := func(model string, downloaded bool) *core.Timing {
		t.Helper()
		r := keyed("ci", "", model)
		if downloaded {
			r.Downloaded = func() bool { return true }
		}
		g, err := d.do(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		d.engine.WaitIdle()
		return g.Lease.Timing
	}
	cases := []struct {
		model      string
		downloaded bool
		path       string
		phases     []string
	}{
		{"A", false, core.PathProvision, []string{core.PhaseProvision, core.PhaseBoot}},
		{"B", false, core.PathEvictThenProvision, []string{core.PhaseEvict, core.PhaseProvision, core.PhaseBoot}},
		{"A", false, core.PathBoot, []string{core.PhaseEvict, core.PhaseBoot}},
		{"A", false, core.PathWarm, nil},
		{"C", true, core.PathDownload, []string{core.PhaseDownload, core.PhaseEvict, core.PhaseProvision, core.PhaseBoot}},
	}
	for i, c := range cases {
		tm := serve(c.model, c.downloaded)
		if tm == nil || tm.Path != c.path || len(tm.Phases) != len(c.phases) {
			t.Fatalf("case %d (%s): timing %+v, want path %s phases %v", i, c.model, tm, c.path, c.phases)
		}
		for _, p := range c.phases {
			if _, ok := tm.Phases[p]; !ok {
				t.Fatalf("case %d: phase %s missing from %+v", i, p, tm)
			}
		}
	}
	// The grant's event carries the record.
	// Observers are fed by their own goroutine, so the facts may still be
	// on their way: wait for every grant (bounded), not for what is there.
	var grants int
	timeout := time.After(testhost.Scale(5 * time.Second))
	for grants < len(cases) {
		select {
		case ev := <-ch:
			if ev.Type != "lease.granted" {
				continue
			}
			grants++
			if tm, ok := ev.Data["timing"].(map[string]any); !ok || tm["path"] == nil || ev.Data["requestId"] == "" {
				t.Fatalf("lease.granted data %+v", ev.Data)
			}
		case <-timeout:
			t.Fatalf("%d grants seen, want %d", grants, len(cases))
		}
	}
}

func TestQueueWaitIsMeasuredOnTheEngineClock(t *testing.T) {
	d := newDurable(t, one(1))
	held, err := d.do(keyed("a", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan core.Progress, 4)
	out := make(chan result, 1)
	go func() {
		g, err := d.engine.Request(context.Background(), keyed("b", "", ""), func(p core.Progress) { seen <- p })
		out <- result{g, err}
	}()
	<-seen
	d.clock.Advance(10 * time.Second)
	if err := d.engine.Release(held.Lease.ID); err != nil {
		t.Fatal(err)
	}
	res := <-out
	tm := res.g.Lease.Timing
	if res.err != nil || tm == nil || tm.Path != core.PathWarm || tm.QueueWait != 10*time.Second || tm.Total != 10*time.Second || len(tm.Phases) != 0 {
		t.Fatalf("timing %+v %v", tm, res.err)
	}
}

// Many lease+release cycles keep memory flat: a settled receipt holds only
// the receipt (not its admission's context, subscribers, timing clock or
// grant), the retention window bounds how many stay, and the slim receipts
// still answer a repeat and request.status.
func TestManyCyclesKeepReceiptMemoryBounded(t *testing.T) {
	d := newDurable(t, one(1))
	d.cfg.RequestRetention = time.Hour
	d.restart()
	const cycles = 300
	var last core.Grant
	for i := range cycles {
		g, err := d.do(keyed("ci", fmt.Sprintf("k%d", i), ""))
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := d.engine.Release(g.Lease.ID); err != nil {
			t.Fatalf("cycle %d release: %v", i, err)
		}
		d.engine.WaitIdle()
		last = g
		d.clock.Advance(time.Minute)
		if _, live := d.engine.ReceiptMemory(); live != 0 {
			t.Fatalf("cycle %d: %d settled receipts still hold their admission's live state", i, live)
		}
	}
	// One receipt a minute for an hour, plus at most one prune period
	// (every 6 minutes) not yet pruned.
	if n, _ := d.engine.ReceiptMemory(); n > 60+6+1 {
		t.Fatalf("%d receipts in memory after %d cycles, want at most the retention window's 67", n, cycles)
	}
	st, err := d.engine.Requests().RequestStatus(last.Lease.RequestID)
	if err != nil || st.Record.State != core.RequestGranted || st.Record.LeaseID != last.Lease.ID {
		t.Fatalf("status of the last slim receipt: %+v %v", st, err)
	}
	if _, err := d.do(keyed("ci", fmt.Sprintf("k%d", cycles-1), "")); !errors.Is(err, core.ErrUnknownLease) {
		t.Fatalf("repeat of a settled, released request: %v", err)
	}
}

// The count bound holds in memory too: a client polling with noWait, with
// or without a key, leaves at most the bound's receipts behind.
func TestReceiptsInMemoryAreBoundedByCount(t *testing.T) {
	d := newDurable(t, one(1))
	d.cfg.RequestMaxReceipts = 20
	d.restart()
	g, err := d.do(keyed("holder", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		r := keyed(fmt.Sprintf("poller-%d", i), "", "")
		if i%2 == 0 {
			r.IdempotencyKey = fmt.Sprintf("k%d", i)
		}
		r.NoWait = true
		if _, err := d.do(r); !errors.Is(err, core.ErrNoCapacity) {
			t.Fatalf("poll %d: %v", i, err)
		}
		if n, _ := d.engine.ReceiptMemory(); n > 20 {
			t.Fatalf("poll %d: %d receipts in memory, bound 20", i, n)
		}
	}
	if got, _ := d.reqs.LoadRequests(context.Background()); len(got) > 20 {
		t.Fatalf("%d stored receipts, bound 20", len(got))
	}
	// The holder's keyless grant is still read back from its lease.
	st, err := d.engine.Requests().RequestStatus(g.Lease.RequestID)
	if err != nil || st.Record.LeaseID != g.Lease.ID {
		t.Fatalf("status of the live keyless grant: %+v %v", st, err)
	}
}
