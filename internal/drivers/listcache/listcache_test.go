package listcache

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/ports/fake"
)

// source is a scripted listing: each read returns the current value (or
// err), optionally blocking until released.
type source struct {
	mu    sync.Mutex
	value string
	err   error
	gate  chan struct{} // when set, reads wait for it to close
	reads atomic.Int32
}

func (s *source) read(ctx context.Context) (string, error) {
	s.reads.Add(1)
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.err
}

func (s *source) set(v string, err error) {
	s.mu.Lock()
	s.value, s.err = v, err
	s.mu.Unlock()
}

func (s *source) block() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
	return s.gate
}

func newCache(s *source, clock *fake.Clock) *Cache[string] {
	return New(Options[string]{TTL: time.Minute, Clock: clock, Read: s.read, Keep: func(v string) bool { return v != "partial" }})
}

// until spins (no sleeping) until cond holds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 10_000_000 {
			t.Fatalf("never: %s", what)
		}
		runtime.Gosched()
	}
}

func (c *Cache[T]) parked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

func get(t *testing.T, c *Cache[string]) (string, bool) {
	t.Helper()
	v, cached, err := c.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v, cached
}

func TestServesWithinTheBoundAndReReadsAfterIt(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := &source{value: "a"}
	c := newCache(s, clock)
	if v, cached := get(t, c); v != "a" || cached {
		t.Fatalf("first get %q cached=%v", v, cached)
	}
	s.set("b", nil)
	clock.Advance(59 * time.Second)
	if v, cached := get(t, c); v != "a" || !cached || s.reads.Load() != 1 {
		t.Fatalf("within the bound: %q cached=%v after %d reads", v, cached, s.reads.Load())
	}
	clock.Advance(time.Second)
	if v, cached := get(t, c); v != "b" || cached || s.reads.Load() != 2 {
		t.Fatalf("at the bound: %q cached=%v after %d reads", v, cached, s.reads.Load())
	}
}

func TestNeverKeepsAFailedOrPartialRead(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := &source{err: errors.New("simctl: CoreSimulator is not running")}
	c := newCache(s, clock)
	if _, _, err := c.Get(context.Background()); err == nil {
		t.Fatal("a failed read succeeded")
	}
	s.set("partial", nil)
	if v, cached := get(t, c); v != "partial" || cached {
		t.Fatalf("a partial read is still the answer of its own call: %q cached=%v", v, cached)
	}
	s.set("full", nil)
	if v, cached := get(t, c); v != "full" || cached || s.reads.Load() != 3 {
		t.Fatalf("after failed and partial reads: %q cached=%v after %d reads", v, cached, s.reads.Load())
	}
	if v, cached := get(t, c); v != "full" || !cached || s.reads.Load() != 3 {
		t.Fatalf("a full read is kept: %q cached=%v after %d reads", v, cached, s.reads.Load())
	}
}

func TestABurstSharesOneRead(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := &source{value: "a"}
	gate := s.block()
	c := newCache(s, clock)
	const n = 20
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := c.Get(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	until(t, "the burst waits on one read", func() bool { return c.parked() == n-1 })
	close(gate)
	wg.Wait()
	if r := s.reads.Load(); r != 1 {
		t.Fatalf("a burst of %d started %d reads", n, r)
	}
	for i, v := range got {
		if v != "a" {
			t.Fatalf("caller %d got %q", i, v)
		}
	}
}

// A miss asks for a read newer than the moment it started: a read already
// under way may predate the change the caller is looking for.
func TestFetchNeverUsesAReadThatStartedBeforeItsTicket(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := &source{value: "old"}
	gate := s.block()
	c := newCache(s, clock)
	first := make(chan string, 1)
	go func() { v, _, _ := c.Get(context.Background()); first <- v }()
	until(t, "the first read starts", func() bool { return s.reads.Load() == 1 })

	ticket := c.Now()
	s.mu.Lock()
	s.value, s.gate = "new", nil
	s.mu.Unlock()
	second := make(chan string, 1)
	go func() {
		v, err := c.Fetch(context.Background(), ticket)
		if err != nil {
			t.Error(err)
		}
		second <- v
	}()
	until(t, "the fetch waits for the older read", func() bool { return c.parked() == 1 })
	close(gate)
	if v := <-second; v != "new" || s.reads.Load() != 2 {
		t.Fatalf("fetch after the ticket got %q after %d reads", v, s.reads.Load())
	}
	if v := <-first; v != "new" && v != "old" {
		t.Fatalf("first get %q", v)
	}
	if v, cached := get(t, c); v != "new" || !cached {
		t.Fatalf("the newer read is the one kept: %q cached=%v", v, cached)
	}
}

func TestInvalidateDropsTheValueAndTheReadInFlight(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := &source{value: "before install"}
	c := newCache(s, clock)
	get(t, c)
	c.Invalidate()
	s.set("after install", nil)
	if v, cached := get(t, c); v != "after install" || cached || s.reads.Load() != 2 {
		t.Fatalf("after invalidation: %q cached=%v after %d reads", v, cached, s.reads.Load())
	}

	// A read that started before an invalidation is answered to its caller
	// but not kept.
	s.set("stale", nil)
	gate := s.block()
	c.Invalidate()
	done := make(chan string, 1)
	go func() { v, _ := c.Fetch(context.Background(), c.Now()); done <- v }()
	until(t, "a read is in flight", func() bool { return s.reads.Load() == 3 })
	c.Invalidate()
	close(gate)
	if v := <-done; v != "stale" {
		t.Fatalf("in-flight read returned %q", v)
	}
	s.set("fresh", nil)
	s.mu.Lock()
	s.gate = nil
	s.mu.Unlock()
	if v, cached := get(t, c); v != "fresh" || cached {
		t.Fatalf("a read from before the invalidation was kept: %q cached=%v", v, cached)
	}
}

func TestACallerThatGivesUpDoesNotFailTheOthers(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := &source{value: "a"}
	gate := s.block()
	c := newCache(s, clock)
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() { _, _, err := c.Get(ctx); leader <- err }()
	until(t, "the leader reads", func() bool { return s.reads.Load() == 1 })
	follower := make(chan string, 1)
	go func() {
		v, _, err := c.Get(context.Background())
		if err != nil {
			t.Error(err)
		}
		follower <- v
	}()
	until(t, "the follower waits", func() bool { return c.parked() == 1 })
	s.mu.Lock()
	s.gate = nil
	s.mu.Unlock()
	cancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v", err)
	}
	close(gate)
	if v := <-follower; v != "a" || s.reads.Load() != 2 {
		t.Fatalf("follower got %q after %d reads", v, s.reads.Load())
	}
}
