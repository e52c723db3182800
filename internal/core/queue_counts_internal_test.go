package core

import (
	"math/rand/v2"
	"testing"
	"time"
)

// walkedDemand is the queued part of countDemand as it was computed before
// the queue kept counts: a walk over every waiter.
func walkedDemand(q *queue) map[string]int {
	out := map[string]int{}
	for _, w := range q.Entries() {
		if len(w.group) == 0 {
			out[w.key]++
			continue
		}
		for _, sp := range w.group {
			out[sp.Key()]++
		}
	}
	return out
}

// The queue's per-spec counts are the walk's, after any mix of pushes and
// removals of single and multi-device requests, and nothing is left once
// the queue is empty.
func TestQueueSpecCountsMatchAWalk(t *testing.T) {
	specs := []Spec{
		{Platform: "ios", ModelID: "a", OSVersion: "26.3"},
		{Platform: "ios", ModelID: "b", OSVersion: "26.3"},
		{Platform: "android", ModelID: "p", OSVersion: "15"},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	q := &queue{left: func() {}}
	var in []*waiter
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for step := range 2000 {
		if len(in) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(in))
			q.remove(in[i])
			q.remove(in[i]) // a second removal changes nothing
			in = append(in[:i], in[i+1:]...)
		} else {
			w := &waiter{spec: specs[rng.IntN(len(specs))]}
			if rng.IntN(4) == 0 {
				w.group = []Spec{specs[rng.IntN(len(specs))], specs[rng.IntN(len(specs))]}
				w.spec = w.group[0]
			}
			w.key = w.spec.Key()
			if !q.Push(w, at, time.Minute) {
				t.Fatalf("step %d: push refused", step)
			}
			in = append(in, w)
		}
		want := walkedDemand(q)
		if len(want) != len(q.bySpec) {
			t.Fatalf("step %d: %d specs counted, the walk finds %d", step, len(q.bySpec), len(want))
		}
		for k, n := range want {
			if c := q.bySpec[k]; c == nil || c.n != n || c.spec.Key() != k {
				t.Fatalf("step %d: spec %s counted %+v, the walk finds %d", step, k, c, n)
			}
		}
	}
	for _, w := range in {
		q.remove(w)
	}
	if len(q.bySpec) != 0 || len(q.byPlatform) != 0 {
		t.Fatalf("an empty queue still counts %v and %v", q.bySpec, q.byPlatform)
	}
}
