// Package gatewaystoretest is the contract every gateway.Store keeps
// (ADR 0101), as one test suite any implementation runs on itself:
// the SQLite home store and the PostgreSQL store alike.
package gatewaystoretest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/gateway"
)

// Run runs the contract's subtests. open returns an empty store for one
// subtest; the implementation registers its own cleanup on t.
func Run(t *testing.T, open func(t *testing.T) gateway.Store) {
	for _, c := range []struct {
		name string
		test func(*testing.T, gateway.Store)
	}{
		{"PutAndRead", testPutAndRead},
		{"ReplaceByID", testReplace},
		{"DuplicateKey", testDuplicateKey},
		{"OpenReceiptsBySeq", testOpenReceipts},
		{"MaxSeq", testMaxSeq},
		{"Delete", testDelete},
		{"PruneByCutoff", testPruneByCutoff},
		{"PruneByCount", testPruneByCount},
		{"Drained", testDrained},
		{"ConcurrentPuts", testConcurrentPuts},
		{"TimesAtMillisecondsUTC", testTimes},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t)) })
	}
}

// base is a fixed instant with a sub-millisecond part, in a zone that is
// not UTC, so that a store which keeps either is caught.
var base = time.Date(2026, 12, 6, 10, 30, 0, 123_456_789, time.FixedZone("X", 3600))

func ctxFor(t *testing.T) context.Context {
	// A hang guard, not a performance bound.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// receipt builds a full receipt whose fields all differ from their zero
// values, so that a column a store forgets shows up as a difference.
func receipt(n int, state string) gateway.Receipt {
	r := gateway.Receipt{
		ID:          fmt.Sprintf("greq_%04x", n),
		Seq:         uint64(n),
		Requester:   "req-a",
		Owner:       "owner-a",
		Fingerprint: fmt.Sprintf("fp-%d", n),
		In: contract.LeaseRequestIn{
			Platform: "ios", Model: "iPhone 16", TTLMs: 60_000, TimeoutMs: 30_000,
			RequesterID: "req-a", OwnerID: "owner-a",
		},
		State:     state,
		Worker:    "w1",
		Attempt:   2,
		AttemptAt: base.Add(2 * time.Second),
		Deadline:  base.Add(time.Minute),
		CreatedAt: base,
		UpdatedAt: base.Add(time.Duration(n) * time.Second),
	}
	switch state {
	case gateway.ReceiptGranted:
		r.Lease = &contract.Lease{LeaseID: "lease_1", RequesterID: "req-a", OwnerID: "owner-a", DeviceID: "dev_1"}
	case gateway.ReceiptFailed, gateway.ReceiptCancelled, gateway.ReceiptExpired:
		r.Error = &contract.Error{Code: "NO_CAPACITY", Message: "no device", Retryable: true}
		r.Interrupted = true
	}
	return r
}

// normal is what a store gives back for r: its times cut to the
// millisecond, in UTC.
func normal(r gateway.Receipt) gateway.Receipt {
	for _, p := range []*time.Time{&r.AttemptAt, &r.Deadline, &r.CreatedAt, &r.UpdatedAt} {
		if !p.IsZero() {
			*p = p.Truncate(time.Millisecond).UTC()
		}
	}
	return r
}

func put(t *testing.T, s gateway.Store, rs ...gateway.Receipt) {
	t.Helper()
	for _, r := range rs {
		if err := s.PutReceipt(ctxFor(t), r); err != nil {
			t.Fatalf("PutReceipt(%s): %v", r.ID, err)
		}
	}
}

func mustGet(t *testing.T, s gateway.Store, id string) gateway.Receipt {
	t.Helper()
	r, ok, err := s.Receipt(ctxFor(t), id)
	if err != nil || !ok {
		t.Fatalf("Receipt(%s) = found %v, %v; want it", id, ok, err)
	}
	return r
}

func same(t *testing.T, what string, got, want gateway.Receipt) {
	t.Helper()
	if !reflect.DeepEqual(got, normal(want)) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, normal(want))
	}
}

func ids(rs []gateway.Receipt) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testPutAndRead(t *testing.T, s gateway.Store) {
	ctx := ctxFor(t)
	keyed := receipt(1, gateway.ReceiptGranted)
	keyed.Key = "k1"
	keyless := receipt(2, gateway.ReceiptFailed)
	put(t, s, keyed, keyless)

	same(t, "by id", mustGet(t, s, keyed.ID), keyed)
	same(t, "keyless by id", mustGet(t, s, keyless.ID), keyless)
	got, ok, err := s.ReceiptByKey(ctx, "req-a", "k1")
	if err != nil || !ok {
		t.Fatalf("ReceiptByKey = found %v, %v", ok, err)
	}
	same(t, "by key", got, keyed)

	for _, q := range [][2]string{{"req-b", "k1"}, {"req-a", "k2"}, {"req-a", ""}} {
		if _, ok, err := s.ReceiptByKey(ctx, q[0], q[1]); err != nil || ok {
			t.Errorf("ReceiptByKey(%q, %q) = found %v, %v; want none", q[0], q[1], ok, err)
		}
	}
	if _, ok, err := s.Receipt(ctx, "greq_missing"); err != nil || ok {
		t.Errorf("Receipt(missing) = found %v, %v; want none", ok, err)
	}
}

func testReplace(t *testing.T, s gateway.Store) {
	r := receipt(1, gateway.ReceiptQueued)
	r.Key = "k1"
	r.Lease, r.Error = nil, nil
	put(t, s, r)

	r.State = gateway.ReceiptGranted
	r.Worker, r.Attempt = "w2", 3
	r.Lease = &contract.Lease{LeaseID: "lease_9", DeviceID: "dev_9"}
	r.UpdatedAt = base.Add(time.Hour)
	put(t, s, r)
	same(t, "after replace", mustGet(t, s, r.ID), r)

	// A replace may clear what an earlier write set.
	r.Lease, r.AttemptAt, r.Deadline, r.Worker = nil, time.Time{}, time.Time{}, ""
	put(t, s, r)
	same(t, "after clearing", mustGet(t, s, r.ID), r)
	got, _, err := s.ReceiptByKey(ctxFor(t), r.Requester, r.Key)
	if err != nil || got.ID != r.ID {
		t.Fatalf("ReceiptByKey after replace = %q, %v; want %s", got.ID, err, r.ID)
	}
}

func testDuplicateKey(t *testing.T, s gateway.Store) {
	first := receipt(1, gateway.ReceiptQueued)
	first.Key = "k1"
	put(t, s, first)

	dup := receipt(2, gateway.ReceiptQueued)
	dup.Key = "k1"
	err := s.PutReceipt(ctxFor(t), dup)
	if !errors.Is(err, gateway.ErrDuplicateKey) {
		t.Fatalf("a second receipt under (req-a, k1): %v; want ErrDuplicateKey", err)
	}
	if _, ok, err := s.Receipt(ctxFor(t), dup.ID); err != nil || ok {
		t.Fatalf("the refused receipt was stored (found %v, %v)", ok, err)
	}
	same(t, "the first receipt after the refusal", mustGet(t, s, first.ID), first)

	// The key is per requester, and keyless receipts never collide.
	other := receipt(3, gateway.ReceiptQueued)
	other.Key, other.Requester = "k1", "req-b"
	a, b := receipt(4, gateway.ReceiptQueued), receipt(5, gateway.ReceiptQueued)
	put(t, s, other, a, b)
}

func testOpenReceipts(t *testing.T, s gateway.Store) {
	// Put out of Seq order, with settled ones between the open ones.
	put(t, s,
		receipt(5, gateway.ReceiptDispatched),
		receipt(2, gateway.ReceiptQueued),
		receipt(3, gateway.ReceiptGranted),
		receipt(9, gateway.ReceiptQueued),
		receipt(4, gateway.ReceiptFailed),
		receipt(7, gateway.ReceiptCancelled),
		receipt(8, gateway.ReceiptExpired),
		receipt(1, gateway.ReceiptDispatched),
	)
	open, err := s.OpenReceipts(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"greq_0001", "greq_0002", "greq_0005", "greq_0009"}
	if got := ids(open); !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenReceipts = %v; want %v (open states only, by Seq)", got, want)
	}
	same(t, "an open receipt as listed", open[2], receipt(5, gateway.ReceiptDispatched))
}

func testMaxSeq(t *testing.T, s gateway.Store) {
	ctx := ctxFor(t)
	if n, err := s.MaxSeq(ctx); err != nil || n != 0 {
		t.Fatalf("MaxSeq of an empty store = %d, %v; want 0", n, err)
	}
	// The caller numbers receipts, in any order of writes.
	put(t, s, receipt(40, gateway.ReceiptQueued), receipt(7, gateway.ReceiptQueued), receipt(41, gateway.ReceiptGranted))
	if n, err := s.MaxSeq(ctx); err != nil || n != 41 {
		t.Fatalf("MaxSeq = %d, %v; want 41", n, err)
	}
	// "Ever stored": deleting the highest does not let numbers be reused.
	if err := s.DeleteReceipt(ctx, receipt(41, "").ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.MaxSeq(ctx); err != nil || n != 41 {
		t.Fatalf("MaxSeq after deleting seq 41 = %d, %v; want 41 (highest ever stored)", n, err)
	}
}

func testDelete(t *testing.T, s gateway.Store) {
	ctx := ctxFor(t)
	r := receipt(1, gateway.ReceiptGranted)
	r.Key = "k1"
	put(t, s, r, receipt(2, gateway.ReceiptQueued))
	if err := s.DeleteReceipt(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Receipt(ctx, r.ID); err != nil || ok {
		t.Fatalf("Receipt after delete = found %v, %v", ok, err)
	}
	if _, ok, err := s.ReceiptByKey(ctx, r.Requester, r.Key); err != nil || ok {
		t.Fatalf("ReceiptByKey after delete = found %v, %v", ok, err)
	}
	mustGet(t, s, receipt(2, "").ID)
	if err := s.DeleteReceipt(ctx, "greq_missing"); err != nil {
		t.Fatalf("deleting an absent receipt: %v; want no error", err)
	}
	// The key is free again.
	again := receipt(3, gateway.ReceiptQueued)
	again.Key = "k1"
	put(t, s, again)
}

func testPruneByCutoff(t *testing.T, s gateway.Store) {
	ctx := ctxFor(t)
	// receipt(n) was updated at base + n s.
	put(t, s,
		receipt(1, gateway.ReceiptGranted),
		receipt(2, gateway.ReceiptQueued), // open: never pruned, however old
		receipt(3, gateway.ReceiptFailed),
		receipt(4, gateway.ReceiptDispatched),
		receipt(5, gateway.ReceiptExpired),
		receipt(6, gateway.ReceiptCancelled),
	)
	n, err := s.PruneReceipts(ctx, base.Add(5*time.Second), 100)
	if err != nil || n != 2 {
		t.Fatalf("PruneReceipts(cutoff base+5s) = %d, %v; want 2 (seq 1 and 3)", n, err)
	}
	left := present(t, s, 6)
	if want := []int{2, 4, 5, 6}; !reflect.DeepEqual(left, want) {
		t.Fatalf("after prune by cutoff: %v left; want %v", left, want)
	}
}

func testPruneByCount(t *testing.T, s gateway.Store) {
	ctx := ctxFor(t)
	put(t, s,
		receipt(1, gateway.ReceiptGranted),
		receipt(2, gateway.ReceiptQueued),
		receipt(3, gateway.ReceiptFailed),
		receipt(4, gateway.ReceiptGranted),
		receipt(5, gateway.ReceiptDispatched),
		receipt(6, gateway.ReceiptCancelled),
	)
	// No receipt is older than the cutoff; keep the 2 newest settled.
	n, err := s.PruneReceipts(ctx, base.Add(-time.Hour), 2)
	if err != nil || n != 2 {
		t.Fatalf("PruneReceipts(keep 2) = %d, %v; want 2 (seq 1 and 3)", n, err)
	}
	if left, want := present(t, s, 6), []int{2, 4, 5, 6}; !reflect.DeepEqual(left, want) {
		t.Fatalf("after prune by count: %v left; want %v", left, want)
	}
	// keep 0 takes every settled receipt and still no open one.
	if n, err := s.PruneReceipts(ctx, base.Add(-time.Hour), 0); err != nil || n != 2 {
		t.Fatalf("PruneReceipts(keep 0) = %d, %v; want 2", n, err)
	}
	if left, want := present(t, s, 6), []int{2, 5}; !reflect.DeepEqual(left, want) {
		t.Fatalf("after prune keep 0: %v left; want %v", left, want)
	}
}

// present lists which of receipts 1..n are still stored.
func present(t *testing.T, s gateway.Store, n int) []int {
	t.Helper()
	var out []int
	for i := 1; i <= n; i++ {
		_, ok, err := s.Receipt(ctxFor(t), receipt(i, "").ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, i)
		}
	}
	return out
}

func testDrained(t *testing.T, s gateway.Store) {
	ctx := ctxFor(t)
	if d, err := s.Drained(ctx); err != nil || len(d) != 0 {
		t.Fatalf("Drained of an empty store = %v, %v", d, err)
	}
	for _, w := range [][2]string{{"w1", "mac-1"}, {"w2", ""}, {"w1", "mac-1 again"}} {
		if err := s.SetDrained(ctx, w[0], w[1], true); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.Drained(ctx)
	if want := map[string]string{"w1": "mac-1 again", "w2": ""}; err != nil || !reflect.DeepEqual(d, want) {
		t.Fatalf("Drained = %v, %v; want %v", d, err, want)
	}
	if err := s.SetDrained(ctx, "w1", "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDrained(ctx, "w-never", "", false); err != nil {
		t.Fatalf("undraining an absent worker: %v; want no error", err)
	}
	d, err = s.Drained(ctx)
	if want := map[string]string{"w2": ""}; err != nil || !reflect.DeepEqual(d, want) {
		t.Fatalf("Drained after undrain = %v, %v; want %v", d, err, want)
	}
}

func testConcurrentPuts(t *testing.T, s gateway.Store) {
	const writers, each = 8, 25
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 1 + w*each + i
				r := receipt(n, gateway.ReceiptQueued)
				r.Key = fmt.Sprintf("k%d", n)
				if err := s.PutReceipt(ctx, r); err != nil {
					errs <- err
					continue
				}
				// Every writer also updates its receipt, as a gateway does.
				r.State = gateway.ReceiptDispatched
				if err := s.PutReceipt(ctx, r); err != nil {
					errs <- err
				}
			}
		}()
	}
	// All writers race for one key: exactly one wins.
	won := make(chan bool, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := receipt(10_000+w, gateway.ReceiptQueued)
			r.Key = "contested"
			err := s.PutReceipt(ctx, r)
			switch {
			case err == nil:
				won <- true
			case errors.Is(err, gateway.ErrDuplicateKey):
				won <- false
			default:
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(won)
	for err := range errs {
		t.Errorf("concurrent PutReceipt: %v", err)
	}
	winners := 0
	for w := range won {
		if w {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d writers got the contested key; want exactly 1", winners)
	}
	open, err := s.OpenReceipts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != writers*each+1 {
		t.Fatalf("%d open receipts; want %d", len(open), writers*each+1)
	}
	for i, r := range open[:writers*each] {
		if r.Seq != uint64(i+1) || r.State != gateway.ReceiptDispatched {
			t.Fatalf("open[%d] = seq %d %s; want seq %d dispatched", i, r.Seq, r.State, i+1)
		}
	}
}

func testTimes(t *testing.T, s gateway.Store) {
	r := receipt(1, gateway.ReceiptQueued)
	r.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	r.UpdatedAt = base // sub-millisecond part and a non-UTC zone
	r.Deadline = time.Time{}
	r.AttemptAt = time.Time{}
	put(t, s, r)
	got := mustGet(t, s, r.ID)
	if !got.CreatedAt.Equal(r.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v; want %v in UTC", got.CreatedAt, r.CreatedAt)
	}
	want := base.Truncate(time.Millisecond)
	if !got.UpdatedAt.Equal(want) || got.UpdatedAt.Location() != time.UTC {
		t.Errorf("UpdatedAt = %v; want %v in UTC (milliseconds kept)", got.UpdatedAt, want.UTC())
	}
	if !got.Deadline.IsZero() || !got.AttemptAt.IsZero() {
		t.Errorf("zero Deadline/AttemptAt came back as %v / %v; want zero", got.Deadline, got.AttemptAt)
	}
}
