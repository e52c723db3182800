package core

import (
	"testing"

	"github.com/simlock/simlock/contract"
)

// A group lease's reset reads as its worst member whatever order the
// members settle in, and a member retired for its uses marks the record.
func TestResetFoldKeepsTheWorstOutcome(t *testing.T) {
	clean := resetResult{outcome: contract.ResetOutcomeClean, reuse: 2}
	fallback := resetResult{outcome: contract.ResetOutcomeFallbackPrefix + contract.ResetSnapshot, reuse: 1}
	destroyed := resetResult{outcome: contract.ResetOutcomeDestroyed, retired: true}
	// The expected outcome is written out, not derived from the ranking
	// under test, so a wrong ranking fails here.
	for _, c := range []struct {
		order   []resetResult
		want    string
		retired bool
	}{
		{[]resetResult{fallback, clean}, fallback.outcome, false},
		{[]resetResult{clean, fallback}, fallback.outcome, false},
		{[]resetResult{destroyed, clean, fallback}, contract.ResetOutcomeDestroyed, true},
		{[]resetResult{clean, fallback, destroyed}, contract.ResetOutcomeDestroyed, true},
	} {
		order, want, retired := c.order, c.want, c.retired
		tr := &resetTrack{rec: contract.SessionReset{Outcome: contract.ResetOutcomePending}}
		for _, r := range order {
			tr.fold(r)
			tr.merge(r)
		}
		if tr.rec.Outcome != want || tr.retired != retired || tr.rec.ReuseCount != 2 {
			t.Errorf("order %v: outcome %q retired %v reuse %d, want %q %v 2", order, tr.rec.Outcome, tr.retired, tr.rec.ReuseCount, want, retired)
		}
	}
}
