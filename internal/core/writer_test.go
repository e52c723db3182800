package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// newWriterHarness is newHarness over a store that can park commits and,
// with batchable, commit several change sets in one transaction.
func newWriterHarness(t *testing.T, limits core.Limits, batchable bool) *harness {
	t.Helper()
	st := newMemStore()
	st.batchable = batchable
	h := &harness{t: t, clock: fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), store: st,
		drv: fakedrv.New("ios"), droid: fakedrv.New("android"), limits: limits,
		cfg: core.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour}, disk: 100 << 30}
	h.start()
	return h
}

func grants(c core.Changes) bool { return len(c.PutLeases) > 0 }

// holdGrants parks every commit carrying a lease until the returned func
// is called.
func (h *harness) holdGrants() (held <-chan struct{}, release func()) {
	hc, rc := make(chan struct{}, 8), make(chan struct{})
	h.store.with(func(m *memStore) { m.hold, m.held, m.release = grants, hc, rc })
	var once sync.Once
	release = func() { once.Do(func() { close(rc) }) }
	h.t.Cleanup(release) // a failed assertion must not leave commits parked
	return hc, release
}

func granted(evs []events.Event, requester string) bool {
	for _, ev := range evs {
		if ev.Type == "lease.granted" && ev.RequesterID == requester {
			return true
		}
	}
	return false
}

// A grant is decided in memory, but neither its caller nor any subscriber
// hears of it until its commit is durable; meanwhile the decision mutex is
// free (the fsync is not held inside it).
func TestGrantIsAnsweredOnlyOnceItsCommitIsDurable(t *testing.T) {
	h := newWriterHarness(t, one(1), false)
	held, release := h.holdGrants()
	out := make(chan result, 1)
	go func() {
		g, err := h.lease("a", "")
		out <- result{g, err}
	}()
	<-held // the grant's commit is in the store, not yet durable
	// The decision mutex is free while the commit is parked: reads
	// answer, and another request is decided at once.
	leases := h.engine.Leases()
	if len(leases) != 1 {
		t.Fatalf("the decided grant is not in memory: %v", leases)
	}
	refused := make(chan error, 1)
	go func() {
		_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", NoWait: true}, nil)
		refused <- err
	}()
	waitFor(t, func() bool {
		return h.engine.Writer().CommitPending() >= 2 // b's receipt queued behind a's grant
	})
	select {
	case r := <-out:
		t.Fatalf("grant answered before its commit was durable: %+v", r)
	case err := <-refused:
		// b's refusal rests on a's grant: it must not be answered before
		// that grant is durable either.
		t.Fatalf("refusal answered before the grant it rests on was durable: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if evs, _ := h.bus.Since(0); granted(evs, "a") {
		t.Fatal("lease.granted published before its commit was durable")
	}
	release()
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	var onDisk bool
	h.store.with(func(m *memStore) { _, onDisk = m.leases[r.g.Lease.ID] })
	if !onDisk {
		t.Fatal("answered a grant the store does not hold")
	}
	if evs, _ := h.bus.Since(0); !granted(evs, "a") {
		t.Fatal("lease.granted never published")
	}
	if err := <-refused; !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("b: %v", err)
	}
	h.engine.WaitIdle()
}

// A renew is committed like a grant: while its commit is parked the
// decision mutex is free (reads answer, another request is decided), the
// new deadline is already the one memory times against, and the renew is
// answered only once that deadline is durable. A renew whose commit fails
// is refused and fences the engine.
func TestRenewIsAnsweredOnlyOnceItsDeadlineIsDurable(t *testing.T) {
	h := newWriterHarness(t, one(2), false)
	g, err := h.lease("a", "")
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Second)
	held, release := h.holdGrants() // every commit carrying a lease: renews too
	out := make(chan error, 1)
	go func() {
		_, err := h.engine.Renew(g.Lease.ID, 0)
		out <- err
	}()
	<-held
	want := g.Lease.ExpiresAt.Add(10 * time.Second)
	if l, ok := h.engine.Lease(g.Lease.ID); !ok || !l.ExpiresAt.Equal(want) {
		t.Fatalf("memory's deadline while the renew's commit is parked: %+v, want %s", l, want)
	}
	refused := make(chan error, 1)
	go func() {
		_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "android"}, RequesterID: "b", NoWait: true}, nil)
		refused <- err
	}()
	waitFor(t, func() bool { return h.engine.Writer().CommitPending() >= 2 }) // b decided behind the renew
	select {
	case err := <-out:
		t.Fatalf("renew answered before its commit was durable: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	var onDisk time.Time
	h.store.with(func(m *memStore) { onDisk = m.leases[g.Lease.ID].ExpiresAt })
	if onDisk.Equal(want) {
		t.Fatal("the parked renew is on disk already")
	}
	release()
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	h.store.with(func(m *memStore) { onDisk = m.leases[g.Lease.ID].ExpiresAt })
	if !onDisk.Equal(want) {
		t.Fatalf("answered a renew the store does not hold: disk %s, want %s", onDisk, want)
	}
	<-refused
	h.engine.WaitIdle()

	h.store.with(func(m *memStore) { m.hold, m.failIf = nil, grants })
	if _, err := h.engine.Renew(g.Lease.ID, 0); !errors.Is(err, core.ErrStoreFailed) {
		t.Fatalf("a renew whose commit failed: %v, want ErrStoreFailed", err)
	}
	select {
	case <-h.engine.Writer().Failed():
	default:
		t.Fatal("engine not fenced after a renew's commit failed")
	}
	h.engine.WaitIdle()
}

// A grant whose commit fails answers no one with a lease: the caller gets
// the failure, no subscriber sees lease.granted, memory is reloaded from the
// disk (no lease), and the engine is fenced until a restart.
func TestFailedGrantCommitAnswersNoOneAndFencesTheEngine(t *testing.T) {
	h := newWriterHarness(t, one(1), false)
	h.store.with(func(m *memStore) { m.failIf = grants })
	if _, err := h.lease("a", ""); !errors.Is(err, core.ErrStoreFailed) {
		t.Fatalf("got %v", err)
	}
	if ls := h.engine.Leases(); len(ls) != 0 {
		t.Fatalf("memory holds a lease the disk does not: %v", ls)
	}
	for _, d := range h.engine.Devices() {
		if d.State == core.StateLeased {
			t.Fatalf("device %s leased in memory only", d.ID)
		}
	}
	if evs, _ := h.bus.Since(0); granted(evs, "a") {
		t.Fatal("lease.granted published for a commit that failed")
	}
	select {
	case <-h.engine.Writer().Failed():
	default:
		t.Fatal("engine not fenced after a failed commit")
	}
	h.store.with(func(m *memStore) { m.failIf = nil })
	if _, err := h.lease("b", ""); !errors.Is(err, core.ErrStoreFailed) {
		t.Fatalf("a fenced engine granted: %v", err)
	}
	h.engine.WaitIdle()
}

// Grants decided while an earlier commit is in flight queue behind it and
// go to the store together, in one transaction; their facts reach
// subscribers in decision order, each after the facts committed before it.
func TestGrantsQueuedBehindACommitShareOneTransactionInOrder(t *testing.T) {
	h := newWriterHarness(t, core.Limits{MaxRunning: 3, MaxManaged: 3}, true)
	// Three ready devices, warmed by leasing and releasing them.
	var ids []string
	for _, r := range []string{"w1", "w2", "w3"} {
		g, err := h.lease(r, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.Lease.ID)
	}
	for _, id := range ids {
		if err := h.engine.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	h.engine.WaitIdle()
	since := h.bus.LastSeq()
	g0, _ := h.engine.Writer().CommitStats()
	held, release := h.holdGrants()

	outs := map[string]chan result{}
	start := func(req string) {
		ch := make(chan result, 1)
		outs[req] = ch
		go func() {
			g, err := h.lease(req, "")
			ch <- result{g, err}
		}()
	}
	start("a")
	<-held // a's grant is committing
	// b and c are decided while a's commit is parked: their change sets
	// queue behind it.
	start("b")
	waitFor(t, func() bool { return len(h.engine.Leases()) == 2 })
	start("c")
	waitFor(t, func() bool { return len(h.engine.Leases()) == 3 })
	release()
	for _, r := range []string{"a", "b", "c"} {
		if res := <-outs[r]; res.err != nil {
			t.Fatalf("%s: %v", r, res.err)
		}
	}
	g1, _ := h.engine.Writer().CommitStats()
	// a's transaction, then one transaction for b and c (receipts and
	// grants): group commit.
	if got := g1 - g0; got != 2 {
		t.Fatalf("%d transactions for three queued grants, want 2 (a, then b+c together)", got)
	}
	evs, _ := h.bus.Since(since)
	var order []string
	last := uint64(0)
	for _, ev := range evs {
		if ev.Seq <= last {
			t.Fatalf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		if ev.Type == "lease.granted" {
			order = append(order, ev.RequesterID)
		}
	}
	if len(order) != 3 || order[0] != "a" || order[1] != "b" || order[2] != "c" {
		t.Fatalf("grants published in order %v, want [a b c]", order)
	}
	h.engine.WaitIdle()
}
