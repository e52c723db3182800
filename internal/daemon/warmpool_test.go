package daemon

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// The explanation names the term that set the count, and the window the
// way the docs write it.
func TestWarmTargetExplanations(t *testing.T) {
	spec := core.Spec{Platform: "ios", Model: "iPhone 16", OSVersion: "26.3"}
	ws := warmPoolOut(core.WarmPoolStatus{Demand: true, Window: time.Hour, Targets: []core.WarmTargetStatus{
		{Spec: spec, Count: 2, Reason: core.WarmReasonDemand, DemandP90: 2},
		{Spec: spec, Count: 1, Reason: core.WarmReasonDemand, DemandP90: 3, Leased: 1, Waiting: 1, Configured: 1},
		{Spec: core.Spec{Platform: "android", Model: "Pixel 8", OSVersion: "15"}, Count: 1, Reason: core.WarmReasonConfigured, Configured: 1},
		{Spec: spec, Count: 1, Reason: core.WarmReasonSpare, Leased: 1, DemandP90: 1},
	}})
	want := []string{
		"2 warm because p90 concurrency 2 over 1 h",
		"1 warm because p90 concurrency 3 over 1 h, less 1 leased and 1 waiting (configured floor 1)",
		"1 warm: configured floor 1",
		"1 warm: spare beside 1 leased (leased within 1 h; p90 concurrency 1)",
	}
	if ws.WindowMs != 3_600_000 || len(ws.Targets) != len(want) {
		t.Fatalf("warm pool %+v", ws)
	}
	for i, w := range want {
		if ws.Targets[i].Explanation != w {
			t.Errorf("target %d: %q, want %q", i, ws.Targets[i].Explanation, w)
		}
	}
	if ws.Targets[0].Spec != "iPhone 16 / iOS 26.3" || ws.Targets[2].Spec != "Pixel 8 / Android 15" {
		t.Errorf("spec names %q, %q", ws.Targets[0].Spec, ws.Targets[2].Spec)
	}
	if got := spell(10 * time.Minute); got != "10 min" {
		t.Errorf("spell 10m = %q", got)
	}
}
