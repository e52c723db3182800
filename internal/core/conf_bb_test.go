package core_test

import (
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// simlock-architecture, Warm pool and quarantine: "device.purge-failed still
// fires as it always did; device.quarantined ... are the follow-up facts".
// The purge failure is published before the quarantine it caused.
func TestPurgeFailedIsPublishedBeforeTheQuarantineItCauses(t *testing.T) {
	h := withPolicies(t, one(1), func(c *core.Config) {
		c.Quarantine = core.QuarantinePolicy{Retries: 3, Backoff: 10 * time.Second, Multiplier: 2, Cap: time.Minute}
	})
	g, _ := h.lease("a", "")
	h.drv.SetFail("reclaim", 1)
	h.engine.Release(g.Lease.ID)
	h.engine.WaitIdle()
	evs := eventTypes(h, g.Device.ID)
	failed, quarantined := slices.Index(evs, "device.purge-failed"), slices.Index(evs, "device.quarantined")
	if failed < 0 || quarantined < 0 || failed > quarantined {
		t.Fatalf("facts %v: device.purge-failed must come before device.quarantined", evs)
	}
}
