package events

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

func epoch() time.Time { return time.Unix(0, 0) }

func TestRingKeepsNewestAndNamesTheGap(t *testing.T) {
	b := New(3, epoch)
	for i := 0; i < 5; i++ {
		b.Publish(Event{Type: "x"})
	}
	evs, gap := b.Since(0)
	if len(evs) != 3 || evs[0].Seq != 3 || evs[2].Seq != 5 {
		t.Fatalf("got %+v", evs)
	}
	if gap == nil || *gap != (Gap{FromSeq: 1, ToSeq: 2}) {
		t.Fatalf("events 1-2 left the ring; Since(0) gap = %+v", gap)
	}
	evs, gap = b.Since(3)
	if len(evs) != 2 || gap != nil {
		t.Fatalf("Since(3) = %d events, gap=%+v", len(evs), gap)
	}
	// A since from an earlier run (above the newest seq) reads the ring.
	if evs, _ := b.Since(99); len(evs) != 3 {
		t.Fatalf("Since(99) = %d events, want the whole ring", len(evs))
	}
}

func TestPublishBatchNumbersConsecutively(t *testing.T) {
	b := New(100, epoch)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				out := b.PublishBatch([]Event{{Type: "a"}, {Type: "b"}, {Type: "c"}})
				if out[1].Seq != out[0].Seq+1 || out[2].Seq != out[1].Seq+1 {
					t.Errorf("batch numbered %d %d %d", out[0].Seq, out[1].Seq, out[2].Seq)
				}
			}
		}()
	}
	wg.Wait()
	if b.LastSeq() != 240 {
		t.Fatalf("LastSeq = %d", b.LastSeq())
	}
}

func next(t *testing.T, f *Follower) Item {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(10*time.Second))
	defer cancel()
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return it
}

func TestSlowFollowerGetsTheExactGapAndResumes(t *testing.T) {
	b := New(8, epoch)
	b.Publish(Event{Type: "before"})
	backlog, gap, f := b.Follow(0)
	defer f.Close()
	if len(backlog) != 1 || gap != nil {
		t.Fatalf("backlog %+v gap %+v", backlog, gap)
	}
	for i := 0; i < 20; i++ { // seqs 2..21; the ring keeps 14..21
		b.Publish(Event{Type: "x"})
	}
	it := next(t, f)
	if it.Gap == nil || *it.Gap != (Gap{FromSeq: 2, ToSeq: 13}) {
		t.Fatalf("first item %+v, want gap 2..13", it)
	}
	for want := uint64(14); want <= 21; want++ {
		if it := next(t, f); it.Gap != nil || it.Event.Seq != want {
			t.Fatalf("item %+v, want seq %d", it, want)
		}
	}
	// Caught up: it follows live publishing without another gap.
	b.Publish(Event{Type: "live"})
	if it := next(t, f); it.Gap != nil || it.Event.Seq != 22 || it.Event.Type != "live" {
		t.Fatalf("live item %+v", it)
	}
}

func TestFollowerBlocksUntilPublishAndEndsOnClose(t *testing.T) {
	b := New(8, epoch)
	_, _, f := b.Follow(0)
	got := make(chan Item, 1)
	go func() {
		it, _ := f.Next(context.Background())
		got <- it
	}()
	b.Publish(Event{Type: "x"})
	if it := <-got; it.Event.Seq != 1 {
		t.Fatalf("got %+v", it)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := f.Next(context.Background())
		errc <- err
	}()
	f.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestFollowReadsBacklogAndLiveWithoutOverlap(t *testing.T) {
	b := New(100, epoch)
	for i := 0; i < 5; i++ {
		b.Publish(Event{Type: "old"})
	}
	backlog, gap, f := b.Follow(2)
	defer f.Close()
	if gap != nil || len(backlog) != 3 || backlog[0].Seq != 3 {
		t.Fatalf("backlog %+v gap %+v", backlog, gap)
	}
	b.Publish(Event{Type: "new"})
	if it := next(t, f); it.Event.Seq != 6 {
		t.Fatalf("follower started at %+v, want seq 6", it)
	}
}

// An observer loses nothing however far it falls behind: here it reads
// nothing at all until a flood of 100k facts from 8 publishers has
// finished, against a ring of 16.
func TestObserverUnderAFloodMissesNone(t *testing.T) {
	const total = 100_000
	b := New(16, epoch)
	ch, cancel := b.Subscribe(0)
	defer cancel()
	gap, obs := b.Observe(0)
	defer obs.Close()
	if gap != nil {
		t.Fatalf("empty bus, gap %+v", gap)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < total/8; i++ {
				b.Publish(Event{Type: "flood"})
			}
		}()
	}
	wg.Wait()
	for _, c := range []<-chan Event{ch, obs.C()} {
		for want := uint64(1); want <= total; want++ {
			if e := <-c; e.Seq != want {
				t.Fatalf("observer got seq %d, want %d", e.Seq, want)
			}
		}
	}
}

func TestObserveStartsWithTheBacklog(t *testing.T) {
	b := New(4, epoch)
	for i := 0; i < 6; i++ {
		b.Publish(Event{Type: "x"})
	}
	gap, obs := b.Observe(0)
	defer obs.Close()
	if gap == nil || *gap != (Gap{FromSeq: 1, ToSeq: 2}) {
		t.Fatalf("gap %+v", gap)
	}
	b.Publish(Event{Type: "y"})
	for want := uint64(3); want <= 7; want++ {
		if e := <-obs.C(); e.Seq != want {
			t.Fatalf("got %d, want %d", e.Seq, want)
		}
	}
}

func TestObserverCloseEndsItsChannel(t *testing.T) {
	b := New(4, epoch)
	ch, cancel := b.Subscribe(0)
	b.Publish(Event{Type: "unread"})
	cancel()
	cancel() // idempotent
	for range ch {
	}
	b.Publish(Event{Type: "after"}) // no observer left to queue for
	b.mu.Lock()
	n := len(b.observers)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d observers still registered", n)
	}
}

func TestSlowSubscriberNeverBlocksPublisher(t *testing.T) {
	b := New(10, time.Now)
	_, cancel := b.Subscribe(1)
	defer cancel()
	_, _, f := b.Follow(0)
	defer f.Close()
	for i := 0; i < 100; i++ {
		b.Publish(Event{Type: "x"}) // would deadlock if Publish blocked
	}
	if b.LastSeq() != 100 {
		t.Fatal("lost sequence numbers")
	}
}

// BenchmarkPublish measures one Publish with idle followers and observers
// attached (the cost the engine pays under its lock).
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{0, 100} {
		b.Run(strconv.Itoa(n)+"followers", func(b *testing.B) {
			bus := New(1000, epoch)
			for i := 0; i < n; i++ {
				_, _, f := bus.Follow(0)
				defer f.Close()
			}
			b.ReportAllocs()
			for b.Loop() {
				bus.Publish(Event{Type: "x"})
			}
		})
	}
	b.Run("1observer", func(b *testing.B) {
		bus := New(1000, epoch)
		ch, cancel := bus.Subscribe(1024)
		defer cancel()
		go func() {
			for range ch {
			}
		}()
		for b.Loop() {
			bus.Publish(Event{Type: "x"})
		}
	})
}

// A bus that continues from a journal numbers after it; the earlier run's
// facts were never in its ring, so reading from before them is a gap down
// to them, while reading from Base is this run's facts and no gap.
func TestContinueFromNumbersAfterTheJournal(t *testing.T) {
	b := New(3, func() time.Time { return time.Unix(0, 0) })
	b.ContinueFrom(41)
	if b.Base() != 41 || b.LastSeq() != 41 {
		t.Fatalf("base %d last %d", b.Base(), b.LastSeq())
	}
	if e := b.Publish(Event{Type: "x"}); e.Seq != 42 {
		t.Fatalf("first fact got seq %d; want 42", e.Seq)
	}
	b.ContinueFrom(7) // too late: facts were published
	if e := b.Publish(Event{Type: "y"}); e.Seq != 43 || b.Base() != 41 {
		t.Fatalf("after a late ContinueFrom: seq %d base %d", e.Seq, b.Base())
	}
	if evs, gap := b.Since(41); gap != nil || len(evs) != 2 {
		t.Fatalf("Since(Base) = %v, %v", evs, gap)
	}
	if _, gap := b.Since(30); gap == nil || *gap != (Gap{FromSeq: 31, ToSeq: 41}) {
		t.Fatalf("Since(30) gap %+v; want 31..41", gap)
	}
	// A since from the future (another run) reads this run's facts.
	if evs, gap := b.Since(1000); gap != nil || len(evs) != 2 {
		t.Fatalf("Since(1000) = %v, %v", evs, gap)
	}
	for i := 0; i < 5; i++ {
		b.Publish(Event{Type: "z"}) // 44..48; the ring keeps 46..48
	}
	if _, gap := b.Since(41); gap == nil || *gap != (Gap{FromSeq: 42, ToSeq: 45}) {
		t.Fatalf("overflow gap %+v; want 42..45", gap)
	}
}
