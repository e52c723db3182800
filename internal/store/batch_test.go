package store

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// ApplyBatch applies its change sets in order, each with Apply's rules, in
// one transaction: a later set may release what an earlier one granted, and
// one failing set leaves none of them on disk.
func TestApplyBatchIsOrderedAndAtomic(t *testing.T) {
	ctx := context.Background()
	db, _ := newTestDB(t)
	grant := core.Changes{PutDevices: []core.DeviceRecord{fullDevice("d0")}, PutLeases: []core.LeaseRecord{fullLease("l0", "d0", "r0")}}
	release := core.Changes{DeleteLeases: []string{"l0"}}
	regrant := core.Changes{PutLeases: []core.LeaseRecord{fullLease("l1", "d0", "r0")}}
	// Merged into one Apply, the delete would run before the puts and l0
	// would survive; applied in order it does not, and r0's new lease does
	// not collide with it.
	if err := db.ApplyBatch(ctx, []core.Changes{grant, release, regrant}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 1 || snap.Leases[0].ID != "l1" {
		t.Fatalf("leases after grant, release, grant: %+v", snap.Leases)
	}

	bad := core.Changes{PutLeases: []core.LeaseRecord{fullLease("l9", "missing", "r9")}}
	ok := core.Changes{PutDevices: []core.DeviceRecord{fullDevice("d5")}}
	if err := db.ApplyBatch(ctx, []core.Changes{ok, bad}); err == nil {
		t.Fatal("a batch with a failing change set committed")
	}
	snap, err = db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range snap.Devices {
		if d.ID == "d5" {
			t.Fatal("the failing batch left its first change set on disk")
		}
	}
}
