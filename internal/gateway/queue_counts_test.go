package gateway

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports/fake"
)

// The fleet queue's waiting counts, kept as requests come and go, agree
// with a walk of the queue after any mix of arrivals (waiting and noWait),
// departures and repeated departures; and a page read from them numbers
// and orders its entries as a full walk would, stopping at its limit.
func TestFleetQueueCountsMatchAWalk(t *testing.T) {
	g := &Gateway{clock: fake.NewClock(time.Unix(1_800_000_000, 0))}
	rng := rand.New(rand.NewPCG(1, 2))
	var live []*pending
	platforms := []string{"ios", "android"}
	for step := range 4000 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			g.dequeueLocked(live[i])
			if rng.IntN(4) == 0 {
				g.dequeueLocked(live[i]) // a second finish must not count twice
			}
			live = append(live[:i], live[i+1:]...)
		} else {
			p := &pending{id: uint64(step), noWait: rng.IntN(5) == 0,
				in: contract.LeaseRequestIn{Platform: platforms[rng.IntN(2)]}, requester: "r"}
			g.enqueueLocked(p, 0)
			live = append(live, p)
		}
		if step%97 != 0 {
			continue
		}
		want := map[string]int{}
		all := g.queue.Positions(waits)
		for _, qp := range all {
			want[qp.Entry.in.Platform]++
		}
		page := g.queuePageLocked(0, 7)
		if page.Depth != len(all) || len(page.byPlatform) != len(want) {
			t.Fatalf("step %d: depth %d by %v, a walk finds %d by %v", step, page.Depth, page.byPlatform, len(all), want)
		}
		for k, n := range want {
			if page.byPlatform[k] != n {
				t.Fatalf("step %d: %s counted %d, a walk finds %d", step, k, page.byPlatform[k], n)
			}
		}
		if n := min(7, len(all)); len(page.Entries) != n {
			t.Fatalf("step %d: page of %d, want %d", step, len(page.Entries), n)
		}
		for i, e := range page.Entries {
			if e.Position != all[i].Pos || page.last == nil {
				t.Fatalf("step %d: entry %d at position %d, a walk says %d", step, i, e.Position, all[i].Pos)
			}
		}
		if (len(all) > 7) != (page.NextCursor != "") {
			t.Fatalf("step %d: %d waiting, next cursor %q", step, len(all), page.NextCursor)
		}
		if page.NextCursor != "" {
			cursor, err := contract.ParseQueueCursor(page.NextCursor)
			if err != nil {
				t.Fatal(err)
			}
			next := g.queuePageLocked(cursor, 7)
			if len(next.Entries) == 0 || next.Entries[0].Position != all[7].Pos {
				t.Fatalf("step %d: the second page starts at %+v, want position %d", step, next.Entries, all[7].Pos)
			}
		}
	}
}
