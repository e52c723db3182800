package listcache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/ports/fake"
)

func newShared(t *testing.T, s *source, clock *fake.Clock) *Shared[string] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return NewShared(ctx, SharedOptions[string]{TTL: 2500 * time.Millisecond, Cap: 30 * time.Second, Clock: clock,
		Read: s.read, Keep: func(v string) bool { return v != "partial" }})
}

// within runs Within in the background and returns its outcome channel.
func within(sh *Shared[string], budget time.Duration) <-chan Outcome[string] {
	ch := make(chan Outcome[string], 1)
	go func() { ch <- sh.Within(context.Background(), budget) }()
	return ch
}

// A read slower than the budget answers pending at the deadline; the read
// goes on, and a retry after it finished is served without a new read.
func TestSharedAnswersWithinBudgetAndServesTheLateRead(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	s := &source{value: "full"}
	gate := s.block()
	sh := newShared(t, s, clock)

	ch := within(sh, 2*time.Second)
	until(t, "cap and budget timers armed", func() bool { return clock.Pending() == 2 })
	clock.Advance(2 * time.Second)
	out := <-ch
	if !out.Pending || out.Done || out.Err != nil {
		t.Fatalf("at the budget: %+v, want pending", out)
	}
	// The read outlasts the TTL; it is timed from when it finishes.
	clock.Advance(3 * time.Second)
	close(gate)
	until(t, "background read finished", func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.have
	})
	got := sh.Within(context.Background(), 2*time.Second)
	if !got.Done || !got.Cached || got.Val != "full" {
		t.Fatalf("retry: %+v, want the late read, cached", got)
	}
	if n := s.reads.Load(); n != 1 {
		t.Fatalf("reads = %d, want 1 (the retry must start none)", n)
	}
	clock.Advance(2500 * time.Millisecond)
	if got := sh.Within(context.Background(), time.Second); got.Cached {
		t.Fatalf("after the TTL: %+v, want a fresh read", got)
	}
}

// Callers arriving while a read is under way share it.
func TestSharedBurstStartsOneRead(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	s := &source{value: "full"}
	gate := s.block()
	sh := newShared(t, s, clock)
	a, b := within(sh, time.Minute), within(sh, time.Minute)
	until(t, "both callers waiting", func() bool { return clock.Pending() == 3 })
	close(gate)
	for _, ch := range []<-chan Outcome[string]{a, b} {
		if o := <-ch; !o.Done || o.Val != "full" {
			t.Fatalf("caller: %+v", o)
		}
	}
	if n := s.reads.Load(); n != 1 {
		t.Fatalf("reads = %d, want 1", n)
	}
}

// A failed or partial read answers its callers and is never kept.
func TestSharedKeepsNoFailedOrPartialRead(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	boom := errors.New("adb devices: exit 1")
	s := &source{err: boom}
	sh := newShared(t, s, clock)
	if o := sh.Within(context.Background(), time.Second); !errors.Is(o.Err, boom) || o.Done {
		t.Fatalf("failed read: %+v", o)
	}
	s.set("partial", nil)
	if o := sh.Within(context.Background(), time.Second); !o.Done || o.Cached || o.Val != "partial" {
		t.Fatalf("partial read: %+v", o)
	}
	s.set("full", nil)
	if o := sh.Within(context.Background(), time.Second); o.Cached || o.Val != "full" {
		t.Fatalf("after a partial read: %+v, want a new read", o)
	}
	if n := s.reads.Load(); n != 3 {
		t.Fatalf("reads = %d, want 3 (neither the failure nor the partial read kept)", n)
	}
}

// An invalidation while a read is under way aborts it; its waiters are
// told superseded, and the next call reads afresh.
func TestSharedInvalidateSupersedesTheReadInFlight(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	s := &source{value: "old"}
	s.block() // never released: only the cancellation ends the read
	sh := newShared(t, s, clock)
	ch := within(sh, time.Minute)
	until(t, "caller waiting", func() bool { return clock.Pending() == 2 })
	sh.Invalidate()
	o := <-ch
	if !o.Superseded || !errors.Is(o.Err, ErrSuperseded) {
		t.Fatalf("after Invalidate: %+v, want superseded", o)
	}
	s.mu.Lock()
	s.gate, s.value = nil, "new"
	s.mu.Unlock()
	if o := sh.Within(context.Background(), time.Second); o.Val != "new" || o.Cached {
		t.Fatalf("next call: %+v, want a fresh read", o)
	}
}

// The background read is bounded by Cap even when nobody waits for it,
// and a read cut off by the cap is not kept.
func TestSharedCapsTheBackgroundRead(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	s := &source{value: "full"}
	s.block()
	sh := newShared(t, s, clock)
	ch := within(sh, time.Second)
	until(t, "timers armed", func() bool { return clock.Pending() == 2 })
	clock.Advance(time.Second)
	if o := <-ch; !o.Pending {
		t.Fatalf("at the budget: %+v", o)
	}
	clock.Advance(29 * time.Second)
	until(t, "capped read ended", func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.flight == nil
	})
	sh.mu.Lock()
	have := sh.have
	sh.mu.Unlock()
	if have {
		t.Fatal("a read cut off by the cap was kept")
	}
}

// Device resources reference, inventory invalidation: obsolete reads report
// superseded "rather than a timeout". A caller told pending comes back
// after an invalidation aborted that read: while the replacing read runs
// past its budget it is told pending and superseded; once a read finishes,
// callers get it, and a later slow read times out plainly again.
func TestSharedRetryAfterAnOvertakenReadIsSuperseded(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	s := &source{value: "new"}
	gate := s.block()
	sh := newShared(t, s, clock)
	ch := within(sh, time.Second)
	until(t, "timers armed", func() bool { return clock.Pending() == 2 })
	clock.Advance(time.Second)
	if o := <-ch; !o.Pending || o.Superseded {
		t.Fatalf("first caller: %+v, want a plain pending", o)
	}
	sh.Invalidate()
	until(t, "the aborted read ended", func() bool { return clock.Pending() == 0 })

	ch = within(sh, time.Second)
	until(t, "replacement timers armed", func() bool { return clock.Pending() == 2 })
	clock.Advance(time.Second)
	if o := <-ch; !o.Pending || !o.Superseded || o.Err != nil {
		t.Fatalf("retry: %+v, want pending and superseded", o)
	}
	close(gate)
	until(t, "replacement finished", func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.have
	})
	if o := sh.Within(context.Background(), time.Second); !o.Done || o.Val != "new" || o.Superseded {
		t.Fatalf("after the replacement: %+v, want its value", o)
	}
	// A later slow read, with no invalidation behind it, is a timeout.
	clock.Advance(3 * time.Second)
	s.block()
	ch = within(sh, time.Second)
	until(t, "timers armed again", func() bool { return clock.Pending() == 2 })
	clock.Advance(time.Second)
	if o := <-ch; !o.Pending || o.Superseded {
		t.Fatalf("unrelated slow read: %+v, want a plain pending", o)
	}
}

// Device resources reference: daemon shutdown is a full invalidation too.
// A caller waiting when the Shared's lifetime ends is told superseded, not
// handed the read's cancellation as a failure.
func TestSharedLifetimeEndSupersedesTheReadInFlight(t *testing.T) {
	clock := fake.NewClock(time.Unix(0, 0))
	s := &source{value: "old"}
	s.block()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sh := NewShared(ctx, SharedOptions[string]{TTL: time.Second, Cap: 30 * time.Second, Clock: clock, Read: s.read})
	ch := within(sh, time.Minute)
	until(t, "caller waiting", func() bool { return clock.Pending() == 2 })
	cancel()
	if o := <-ch; !o.Superseded || !errors.Is(o.Err, ErrSuperseded) {
		t.Fatalf("after the lifetime ended: %+v, want superseded", o)
	}
}
