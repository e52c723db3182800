package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/fake"
	pfake "github.com/simlock/simlock/internal/ports/fake"
)

// countingDB is the daemon's database as the engine sees it (registry and
// receipts in one store, so receipts ride with the grants), counting every
// transaction that reaches the disk.
type countingDB struct {
	*DB
	mu      sync.Mutex
	commits int
	batches [][]core.Changes
}

func (c *countingDB) count(cs []core.Changes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	c.batches = append(c.batches, cs)
}

func (c *countingDB) Apply(ctx context.Context, ch core.Changes) error {
	c.count([]core.Changes{ch})
	return c.DB.Apply(ctx, ch)
}

func (c *countingDB) ApplyBatch(ctx context.Context, cs []core.Changes) error {
	c.count(cs)
	return c.DB.ApplyBatch(ctx, cs)
}

func (c *countingDB) PutRequest(ctx context.Context, r core.RequestRecord) error {
	c.count(nil)
	return c.DB.PutRequest(ctx, r)
}

func (c *countingDB) DeleteRequests(ctx context.Context, ids []string) error {
	c.count(nil)
	return c.DB.DeleteRequests(ctx, ids)
}

// since returns the commits and the change sets after the n-th commit.
func (c *countingDB) since(n int) (int, []core.Changes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []core.Changes
	for _, b := range c.batches[n:] {
		out = append(out, b...)
	}
	return c.commits - n, out
}

func (c *countingDB) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

func receiptsIn(changes []core.Changes) (puts, deletes int) {
	for _, ch := range changes {
		puts += len(ch.PutRequests)
		deletes += len(ch.DeleteRequests)
	}
	return puts, deletes
}

type commitWorld struct {
	db     *countingDB
	engine *core.Engine
	drv    *fake.Driver
}

func newCommitWorld(t *testing.T, maxReceipts int) *commitWorld {
	t.Helper()
	raw, _ := newTestDB(t)
	db := &countingDB{DB: raw}
	drv := fake.New("ios")
	ids := 0
	e := core.New(core.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, RequestMaxReceipts: maxReceipts}, core.Deps{
		DiskFree: func() (uint64, error) { return 100 << 30, nil },
		Clock:    pfake.NewClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)),
		Store:    db, Requests: db, Drivers: []core.Driver{drv},
		Strategy: core.FixedStrategy{L: core.Limits{MaxRunning: 1, MaxManaged: 1}},
		NewID:    func() string { ids++; return fmt.Sprintf("%06d", ids) },
	})
	if err := e.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return &commitWorld{db: db, engine: e, drv: drv}
}

func (w *commitWorld) lease(t *testing.T, requester, key string, noWait bool) (core.Grant, error) {
	t.Helper()
	return w.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"},
		RequesterID: requester, OwnerID: requester, IdempotencyKey: key, NoWait: noWait}, nil)
}

// warm makes one ready device and leaves it idle.
func (w *commitWorld) warm(t *testing.T) {
	t.Helper()
	g, err := w.lease(t, "warmup", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	w.engine.WaitIdle()
}

func storedReceipts(t *testing.T, db *DB) int {
	t.Helper()
	recs, err := db.LoadRequests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// A warm grant pays one durable commit: the lease and the device's state
// together, with the receipt in that same commit when the request has an
// idempotency key, and no receipt at all when it has none.
func TestAWarmGrantPaysOneCommit(t *testing.T) {
	w := newCommitWorld(t, 0)
	w.warm(t)
	before := storedReceipts(t, w.db.DB)

	n := w.db.mark()
	g, err := w.lease(t, "agent", "", false)
	if err != nil {
		t.Fatal(err)
	}
	commits, changes := w.db.since(n)
	if puts, _ := receiptsIn(changes); commits != 1 || puts != 0 {
		t.Fatalf("a keyless warm grant made %d commits with %d receipts, want 1 commit and none: %+v", commits, puts, changes)
	}
	if got := storedReceipts(t, w.db.DB); got != before {
		t.Fatalf("a keyless grant stored a receipt: %d rows, was %d", got, before)
	}
	// Its receipt is still readable while the lease lasts.
	st, err := w.engine.Requests().RequestStatus(g.Lease.RequestID)
	if err != nil || st.Record.State != core.RequestGranted || st.Record.LeaseID != g.Lease.ID {
		t.Fatalf("status of a keyless grant: %+v %v", st, err)
	}
	if err := w.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	w.engine.WaitIdle()

	n = w.db.mark()
	if _, err := w.lease(t, "agent", "k1", false); err != nil {
		t.Fatal(err)
	}
	commits, changes = w.db.since(n)
	if puts, _ := receiptsIn(changes); commits != 1 || puts != 2 {
		// The admission's queued receipt and the granted one, both in the
		// grant's transaction.
		t.Fatalf("a keyed warm grant made %d commits with %d receipt writes, want 1 commit carrying the receipt", commits, puts)
	}
	if got := storedReceipts(t, w.db.DB); got != before+1 {
		t.Fatalf("a keyed grant left %d stored receipts, want %d", got, before+1)
	}
}

// A noWait request refused for want of room, without a key, writes
// nothing: polling with --no-wait must not fill the database.
func TestAKeylessRefusalStoresNothing(t *testing.T) {
	w := newCommitWorld(t, 0)
	holder, err := w.lease(t, "holder", "", false)
	if err != nil {
		t.Fatal(err)
	}
	w.engine.WaitIdle()
	rows := storedReceipts(t, w.db.DB)
	n := w.db.mark()
	for i := range 50 {
		_, err := w.lease(t, fmt.Sprintf("poller-%d", i), "", true)
		if !errors.Is(err, core.ErrNoCapacity) {
			t.Fatalf("poll %d: %v, want NO_CAPACITY", i, err)
		}
	}
	if commits, changes := w.db.since(n); commits != 0 {
		t.Fatalf("50 keyless refusals made %d commits: %+v", commits, changes)
	}
	if got := storedReceipts(t, w.db.DB); got != rows {
		t.Fatalf("keyless refusals stored receipts: %d rows, was %d", got, rows)
	}
	_ = holder
}

// Receipts are bounded by count as well as by age: the oldest settled ones
// go first, the stored ones in the commit that admits the next, and a
// keyed grant whose lease lasts is kept whatever the bound.
func TestReceiptsAreBoundedByCount(t *testing.T) {
	const bound = 5
	w := newCommitWorld(t, bound)
	var first core.Grant
	for i := range 40 {
		g, err := w.lease(t, "ci", fmt.Sprintf("k%d", i), false)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i == 0 {
			first = g
		}
		if err := w.engine.Release(g.Lease.ID); err != nil {
			t.Fatalf("cycle %d release: %v", i, err)
		}
		w.engine.WaitIdle()
		if got := storedReceipts(t, w.db.DB); got > bound {
			t.Fatalf("cycle %d: %d stored receipts, bound %d", i, got, bound)
		}
	}
	// The oldest went; the newest still answers a repeat.
	if _, err := w.engine.Requests().RequestStatus(first.Lease.RequestID); !errors.Is(err, core.ErrUnknownRequest) {
		t.Fatalf("the oldest receipt outlived the bound: %v", err)
	}
	if _, err := w.lease(t, "ci", "k39", false); !errors.Is(err, core.ErrUnknownLease) {
		t.Fatalf("repeat of the newest settled request: %v, want its ended grant", err)
	}
}

// A keyed grant whose lease still lasts keeps its receipt past the bound:
// it is the lease's answer to a repeat.
func TestALiveKeyedGrantOutlivesTheCountBound(t *testing.T) {
	const bound = 3
	w := newCommitWorld(t, bound)
	held, err := w.lease(t, "holder", "keep", false)
	if err != nil {
		t.Fatal(err)
	}
	w.engine.WaitIdle()
	for i := range 10 {
		if _, err := w.lease(t, fmt.Sprintf("poller-%d", i), fmt.Sprintf("p%d", i), true); !errors.Is(err, core.ErrNoCapacity) {
			t.Fatalf("poll %d: %v", i, err)
		}
		w.engine.WaitIdle()
	}
	g, err := w.lease(t, "holder", "keep", false)
	if err != nil || g.Lease.ID != held.Lease.ID {
		t.Fatalf("repeat of the live grant: %+v %v, want lease %s", g.Lease, err, held.Lease.ID)
	}
	if got := storedReceipts(t, w.db.DB); got > bound+1 {
		t.Fatalf("%d stored receipts, want at most the bound %d and the live grant's", got, bound)
	}
}
