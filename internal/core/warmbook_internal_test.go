package core

import (
	"testing"
	"time"
)

// Each sample period keeps its peak concurrency (a tick opens a period at
// the level of the moment, a change can only raise it), the p90 is the
// nearest-rank percentile of the peaks, idle periods pull it down one rank
// at a time, and once the window has passed the series is forgotten.
func TestDemandBookP90OverAScriptedHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	spec := Spec{Platform: "ios", ModelID: "m", OSVersion: "26.3"}
	const window = 30 * time.Minute
	var b demandBook
	step := func(at time.Duration, leased, queued int, tick bool) {
		b.observe(t0.Add(at), map[string]demandNow{spec.Key(): {spec: spec, leased: leased, queued: queued}}, window, tick)
	}
	step(0, 1, 0, false)
	step(time.Second, 2, 0, false) // period 0: peak 2
	step(time.Minute, 2, 0, true)
	step(time.Minute+time.Second, 2, 1, false) // period 1: one waits, peak 3
	step(2*time.Minute, 2, 1, true)
	step(2*time.Minute+time.Second, 1, 0, false) // period 2: opened at 3
	step(3*time.Minute, 1, 0, true)              // period 3: 1
	step(4*time.Minute, 1, 0, true)
	step(4*time.Minute+6*time.Second, 0, 0, false) // period 4: 1, the last lease ends
	s := b.series[spec.Key()]
	peaks := []int{2, 3, 3, 1, 1}
	if len(s.samples) != len(peaks) {
		t.Fatalf("samples %+v, want one per period with peaks %v", s.samples, peaks)
	}
	for i, p := range peaks {
		if s.samples[i].n != p {
			t.Fatalf("period %d peak %d, want %d (%+v)", i, s.samples[i].n, p, s.samples)
		}
	}
	if got := s.p90(); got != 3 {
		t.Fatalf("p90 %d, want 3", got)
	}
	if !s.lastHeld.Equal(t0.Add(4*time.Minute + 6*time.Second)) {
		t.Fatalf("last held %v, want the release at t0+4m6s", s.lastHeld)
	}
	idle := func(from, to int) {
		for k := from; k <= to; k++ {
			step(time.Duration(4+k)*time.Minute, 0, 0, true)
		}
	}
	// 15 idle periods: 20 peaks, the 18th ranked is 2.
	idle(1, 15)
	if got := s.p90(); got != 2 {
		t.Fatalf("after 15 idle periods p90 %d, want 2", got)
	}
	// 25: 30 peaks, the 27th ranked is 1.
	idle(16, 25)
	if got := s.p90(); got != 1 {
		t.Fatalf("after 25 idle periods p90 %d, want 1", got)
	}
	// Past the window every busy period has aged out and the series goes.
	step(35*time.Minute, 0, 0, true)
	if _, ok := b.series[spec.Key()]; ok {
		t.Fatalf("series kept after an idle window: %+v", b.series[spec.Key()].samples)
	}
	// Churn does not grow the book: a thousand changes in one period are
	// one sample.
	for i := range 1000 {
		step(40*time.Minute+time.Duration(i)*time.Millisecond, i%3, 0, false)
	}
	if n := len(b.series[spec.Key()].samples); n != 1 {
		t.Fatalf("%d samples after churn in one period, want 1", n)
	}
}
