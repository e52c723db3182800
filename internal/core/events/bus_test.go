package events

import (
	"testing"
	"time"
)

func TestRingKeepsNewestAndReportsDrops(t *testing.T) {
	b := New(3, func() time.Time { return time.Unix(0, 0) })
	for i := 0; i < 5; i++ {
		b.Publish(Event{Type: "x"})
	}
	evs, dropped := b.Since(0)
	if len(evs) != 3 || evs[0].Seq != 3 || evs[2].Seq != 5 {
		t.Fatalf("got %+v", evs)
	}
	if !dropped {
		t.Fatal("events 1-2 left the ring; Since(0) must say so")
	}
	evs, dropped = b.Since(3)
	if len(evs) != 2 || dropped {
		t.Fatalf("Since(3) = %d events, dropped=%v", len(evs), dropped)
	}
}

func TestSubscriberSeesLaterEventsOnly(t *testing.T) {
	b := New(10, time.Now)
	b.Publish(Event{Type: "before"})
	ch, cancel := b.Subscribe(4)
	defer cancel()
	b.Publish(Event{Type: "after"})
	if e := <-ch; e.Type != "after" || e.Seq != 2 {
		t.Fatalf("got %+v", e)
	}
}

func TestSlowSubscriberNeverBlocksPublisher(t *testing.T) {
	b := New(10, time.Now)
	_, cancel := b.Subscribe(1)
	defer cancel()
	for i := 0; i < 100; i++ {
		b.Publish(Event{Type: "x"}) // would deadlock if Publish blocked
	}
	if b.LastSeq() != 100 {
		t.Fatal("lost sequence numbers")
	}
}
