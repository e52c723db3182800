package sessions

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
)

// Reference, "Release reply budget": 30 s by default, and a per-call
// replyBudgetMs is clamped into [0, 30000]; an operator's budget outside
// that range falls back to the 30 s bound.
func TestConfSessionReleaseReplyBudgetIsClamped(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	cases := []struct {
		name     string
		operator int64
		call     *int64
		want     time.Duration
	}{
		{"default", 0, nil, 30 * time.Second},
		{"operator's own", 5000, nil, 5 * time.Second},
		{"operator's above the bound", 60000, nil, 30 * time.Second},
		{"per call", 30000, ms(1200), 1200 * time.Millisecond},
		{"per call zero", 30000, ms(0), 0},
		{"per call negative", 30000, ms(-5), 0},
		{"per call above the bound", 5000, ms(90000), 30 * time.Second},
	}
	for _, c := range cases {
		b := &Broker{cfg: &config.Sessions{ReleaseReplyBudgetMs: c.operator}}
		if got := b.replyBudget(c.call); got != c.want {
			t.Errorf("%s: replyBudget = %s, want %s", c.name, got, c.want)
		}
	}
}
