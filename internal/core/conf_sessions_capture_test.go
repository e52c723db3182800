package core_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Reference, "Reuse and reset boundary": a baseline capture that fails
// does not fail the acquisition, and that device's release then destroys
// it (no fallback configured).
func TestConfSessionFailedBaselineCaptureStillGrantsAndTheReleaseDestroys(t *testing.T) {
	h, _, _ := newResetHarness(t, one(2))
	h.droid.SetFail("capture", 1)
	g := h.sessionLease("a", "android", core.ReleasePolicy{Mode: contract.ResetKeepBooted})
	if g.Lease.ID == "" || g.Device.ID == "" {
		t.Fatalf("a failed capture failed the grant: %+v", g)
	}
	if !slices.ContainsFunc(h.droid.Calls(), func(c string) bool { return strings.HasPrefix(c, "capture ") }) {
		t.Fatalf("no capture was tried: %v", h.droid.Calls())
	}
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if rec := h.settled(g.Lease.ID); rec.Outcome != contract.ResetOutcomeDestroyed {
		t.Fatalf("the release of a device whose capture failed: %+v, want destroyed", rec)
	}
}
