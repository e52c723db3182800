package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/hostreg"
)

// Reference, "Close/release": mark releasing, tear down, clear the claim
// last. device.release marks the claim releasing before the lease's
// reclaim runs, so a reclaim held in flight reads releasing (not claimed);
// a caller that stops waiting does not stop the teardown, which shuts the
// device down and clears the claim once the reclaim ends.
func TestConfDeviceReleaseMarksReleasingFirstAndFinishesWithoutItsCaller(t *testing.T) {
	ctx := context.Background()
	f, admin := startAndroid(t)
	if _, err := admin.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android"}, nil); err != nil {
		t.Fatal(err)
	}
	_, key := f.onlyDevice()
	gate := make(chan struct{})
	f.drv.Gate = gate // the reclaim waits here

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := client.Do(cctx, admin, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: string(key)})
	cancel()
	if err == nil {
		t.Fatal("device.release answered while its reclaim was held")
	}
	st, held := claimOf(t, f.d, key)
	if !held || st.Class != hostreg.ClassReleasing {
		t.Fatalf("the claim while the release's reclaim is held: %+v (held %v)", st, held)
	}
	close(gate)
	eventually(t, "the teardown to clear the claim without its caller", func() bool {
		_, held := claimOf(t, f.d, key)
		return !held
	})
	if n := shutdowns(f.drv.Calls()); n != 1 {
		t.Fatalf("%d shutdowns, want 1: %v", n, f.drv.Calls())
	}
}
