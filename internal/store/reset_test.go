package store

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// A device's reuse count and a session release's intent (its policy and
// lease) survive a reload: a restart must know a device was mid-reset.
func TestDeviceReuseCountAndResetIntentRoundTrip(t *testing.T) {
	for _, dev := range []core.DeviceRecord{
		func() core.DeviceRecord {
			d := fullDevice("d1")
			d.ReuseCount = 7
			d.Intent = core.DeviceIntent{Op: core.OpKindDestroy, Since: ms(1700000007000),
				Release: core.ReleasePolicy{Mode: "keep-booted", Fallback: "snapshot", MaxUses: 3, Timeout: 90 * time.Second}, LeaseID: "lse_1"}
			return d
		}(),
		{ID: "d2", ReuseCount: 2}, // nothing else in the health column
	} {
		ctx := context.Background()
		db, _ := newTestDB(t)
		if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{dev}}); err != nil {
			t.Fatal(err)
		}
		snap, err := db.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		assertSnapshot(t, snap, []core.DeviceRecord{dev}, nil)
	}
}
