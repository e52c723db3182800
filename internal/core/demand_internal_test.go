package core

import (
	"testing"
	"time"
)

// The p90 is the nearest-rank percentile of the samples in the window, a
// sample is taken on every change (or tick), and samples age out of the
// window until the series is forgotten.
func TestDemandBookP90OverAScriptedHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	spec := Spec{Platform: "ios", ModelID: "m", OSVersion: "26.3"}
	at := func(leased, queued int) map[string]demandNow {
		return map[string]demandNow{spec.Key(): {spec: spec, leased: leased, queued: queued}}
	}
	var b demandBook
	window := 10 * time.Minute
	// 1, 2, 3 concurrent (one of them waiting), then back down to 0.
	script := []struct{ leased, queued int }{{1, 0}, {2, 0}, {2, 1}, {2, 1}, {2, 0}, {1, 0}, {0, 0}}
	for i, s := range script {
		b.observe(t0.Add(time.Duration(i)*time.Second), at(s.leased, s.queued), window, false)
	}
	s := b.series[spec.Key()]
	// The repeated {2,1} is no change and adds no sample: 1,2,3,2,1,0.
	if len(s.samples) != 6 {
		t.Fatalf("%d samples, want 6 (one per change)", len(s.samples))
	}
	if got := s.p90(); got != 3 {
		t.Fatalf("p90 %d, want 3", got)
	}
	// Idle ticks weigh in: with four zero ticks ten samples remain and the
	// 9th ranked one is 2.
	for k := 1; k <= 4; k++ {
		b.observe(t0.Add(time.Duration(k)*time.Minute), at(0, 0), window, true)
	}
	if got := s.p90(); got != 2 {
		t.Fatalf("after idle ticks p90 %d, want 2", got)
	}
	if !s.lastHeld.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("last held %v, want the release at t0+6s", s.lastHeld)
	}
	// Past the window every busy sample has aged out and the series goes.
	b.observe(t0.Add(window+time.Minute), at(0, 0), window, true)
	if _, ok := b.series[spec.Key()]; ok {
		t.Fatalf("series kept after an idle window: %+v", b.series[spec.Key()].samples)
	}
}
