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
	for _, order := range [][]resetResult{
		{fallback, clean},
		{clean, fallback},
		{destroyed, clean, fallback},
		{clean, fallback, destroyed},
	} {
		tr := &resetTrack{rec: contract.SessionReset{Outcome: contract.ResetOutcomePending}}
		want, retired := contract.ResetOutcomeClean, false
		for _, r := range order {
			tr.fold(r)
			tr.merge(r)
			if outcomeRank(r.outcome) > outcomeRank(want) {
				want = r.outcome
			}
			retired = retired || r.retired
		}
		if tr.rec.Outcome != want || tr.retired != retired || tr.rec.ReuseCount != 2 {
			t.Errorf("order %v: outcome %q retired %v reuse %d, want %q %v 2", order, tr.rec.Outcome, tr.retired, tr.rec.ReuseCount, want, retired)
		}
	}
}
