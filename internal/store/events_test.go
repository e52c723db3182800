package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

func journalFacts(from, n int, at time.Time) []events.Event {
	var out []events.Event
	for i := 0; i < n; i++ {
		out = append(out, events.Event{Seq: uint64(from + i), Type: "lease.granted", At: at.Add(time.Duration(i) * time.Minute),
			LeaseID: "lse_x", DeviceID: "dev_y", RequesterID: "r", Platform: "ios", Reason: "why",
			Data: map[string]any{"ttlMs": int64(60000), "timing": map[string]any{"path": "warm"}}})
	}
	return out
}

func TestEventsJournalRoundTripsAndSurvivesAReopen(t *testing.T) {
	ctx := context.Background()
	db, path := newTestDB(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := db.AppendEvents(ctx, journalFacts(1, 5, t0)); err != nil {
		t.Fatal(err)
	}
	// A retried batch (after a failed commit) must not fail on rows it
	// already wrote.
	if err := db.AppendEvents(ctx, journalFacts(4, 3, t0.Add(3*time.Minute))); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openAt(t, path)
	if last, err := db.LastSeq(ctx); err != nil || last != 6 {
		t.Fatalf("LastSeq = %d, %v; want 6", last, err)
	}
	got, err := db.EventsBetween(ctx, 2, 4)
	if err != nil || len(got) != 3 || got[0].Seq != 2 || got[2].Seq != 4 {
		t.Fatalf("EventsBetween(2,4) = %+v, %v", got, err)
	}
	e := got[0]
	if e.Type != "lease.granted" || !e.At.Equal(t0.Add(time.Minute)) || e.LeaseID != "lse_x" || e.DeviceID != "dev_y" ||
		e.RequesterID != "r" || e.Platform != "ios" || e.Reason != "why" {
		t.Errorf("event read back as %+v", e)
	}
	if n, ok := e.Data["ttlMs"].(json.Number); !ok || n.String() != "60000" {
		t.Errorf("data.ttlMs = %#v; want the exact number 60000", e.Data["ttlMs"])
	}
	if seq, ok, err := db.FirstSeqAt(ctx, t0.Add(150*time.Second)); err != nil || !ok || seq != 4 {
		t.Errorf("FirstSeqAt(10:02:30) = %d, %v, %v; want 4", seq, ok, err)
	}
	if _, ok, _ := db.FirstSeqAt(ctx, t0.Add(time.Hour)); ok {
		t.Error("FirstSeqAt after the newest fact found one")
	}
}

func TestPruneEventsBoundsByCountAndAgeButKeepsTheNewest(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := db.AppendEvents(ctx, journalFacts(1, 10, t0)); err != nil { // 10:00 .. 10:09
		t.Fatal(err)
	}
	if n, err := db.PruneEvents(ctx, 8, time.Time{}); err != nil || n != 2 {
		t.Fatalf("prune to 8 dropped %d, %v; want 2", n, err)
	}
	if n, err := db.PruneEvents(ctx, 0, t0.Add(5*time.Minute)); err != nil || n != 3 { // drops 3, 4, 5
		t.Fatalf("prune before 10:05 dropped %d, %v; want 3", n, err)
	}
	got, _ := db.EventsBetween(ctx, 0, 100)
	if len(got) != 5 || got[0].Seq != 6 {
		t.Fatalf("left %d facts from %d; want 5 from 6", len(got), got[0].Seq)
	}
	// Everything is too old, yet the newest stays: the next start
	// continues the sequence from it.
	if _, err := db.PruneEvents(ctx, 100, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if last, _ := db.LastSeq(ctx); last != 10 {
		t.Errorf("LastSeq after pruning everything old = %d; want 10", last)
	}
	if got, _ := db.EventsBetween(ctx, 0, 100); len(got) != 1 {
		t.Errorf("left %d facts; want only the newest", len(got))
	}
}

func TestAppendEventsKeepsAFactWhoseDataCannotBeEncoded(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	evs := journalFacts(1, 2, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	evs[0].Data = map[string]any{"bad": func() {}}
	if err := db.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, _ := db.EventsBetween(ctx, 1, 2)
	if len(got) != 2 || got[0].Data["unencodable"] == nil || got[1].Data["ttlMs"] == nil {
		t.Fatalf("journaled %+v", got)
	}
}
