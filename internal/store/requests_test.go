package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
)

func TestRequestRoundTripAndReopen(t *testing.T) {
	db, path := newTestDB(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	granted := core.RequestRecord{ID: "req_1", RequesterID: "ci-1", OwnerID: "alice", IdempotencyKey: "k1",
		Fingerprint: "fp", Platform: "ios", State: core.RequestGranted, LeaseID: "lse_1",
		CreatedAt: at, UpdatedAt: at.Add(time.Second), Seq: 1,
		Timing: &core.Timing{Path: core.PathProvision, QueueWait: 3 * time.Millisecond, Total: 40 * time.Second,
			Phases: map[string]time.Duration{core.PhaseProvision: 9 * time.Second, core.PhaseBoot: 30 * time.Second}}}
	failed := core.RequestRecord{ID: "req_2", RequesterID: "ci-2", OwnerID: "bob", Fingerprint: "fp2", Platform: "android",
		State: core.RequestFailed, Error: &core.RequestError{Code: "DAEMON_RESTARTED", Message: "restarted", Retryable: true},
		Interrupted: true, CreatedAt: at, UpdatedAt: at, Seq: 2}
	for _, r := range []core.RequestRecord{failed, granted} {
		if err := db.PutRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	db = openAt(t, path)
	got, err := db.LoadRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.RequestRecord{granted, failed} // admission order
	want[1].Timing = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if err := db.DeleteRequests(ctx, []string{"req_1", "req_absent"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LoadRequests(ctx); len(got) != 1 || got[0].ID != "req_2" {
		t.Fatalf("after delete: %+v", got)
	}
}

func TestSecondRequestUnderTheSameKeyIsRefused(t *testing.T) {
	db, _ := newTestDB(t)
	ctx := context.Background()
	at := time.Now().UTC()
	r := core.RequestRecord{ID: "req_a", RequesterID: "ci", OwnerID: "o", IdempotencyKey: "k", Fingerprint: "f",
		Platform: "ios", State: core.RequestQueued, CreatedAt: at, UpdatedAt: at, Seq: 1}
	if err := db.PutRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.ID = "req_b"
	if err := db.PutRequest(ctx, r); err == nil {
		t.Fatal("two requests stored under one (requester, key)")
	}
	r.IdempotencyKey = "" // without a key nothing is matched
	if err := db.PutRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.ID = "req_c"
	if err := db.PutRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseKeepsItsRequestAndTiming(t *testing.T) {
	db, _ := newTestDB(t)
	ctx := context.Background()
	l := fullLease("lse_t", "dev_t", "req-t")
	l.RequestID = "req_x"
	l.Timing = &core.Timing{Path: core.PathWarm, Phases: map[string]time.Duration{}}
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{fullDevice("dev_t")}, PutLeases: []core.LeaseRecord{l}}); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 1 || !reflect.DeepEqual(snap.Leases[0], l) {
		t.Fatalf("lease round trip: %+v, want %+v", snap.Leases, l)
	}
}

func TestGrantAndItsReceiptCommitTogether(t *testing.T) {
	db, _ := newTestDB(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	r := core.RequestRecord{ID: "req_g", RequesterID: "req-g", OwnerID: "o", Fingerprint: "f", Platform: "ios",
		State: core.RequestGranted, LeaseID: "lse_g", CreatedAt: at, UpdatedAt: at, Seq: 1}
	l := fullLease("lse_g", "dev_g", "req-g")
	// A lease on a device that does not exist fails the commit: the receipt
	// must not land without it.
	if err := db.Apply(ctx, core.Changes{PutLeases: []core.LeaseRecord{l}, PutRequests: []core.RequestRecord{r}}); err == nil {
		t.Fatal("a lease without its device committed")
	}
	if got, _ := db.LoadRequests(ctx); len(got) != 0 {
		t.Fatalf("receipt landed without its grant: %+v", got)
	}
	if err := db.Apply(ctx, core.Changes{PutDevices: []core.DeviceRecord{fullDevice("dev_g")}, PutLeases: []core.LeaseRecord{l},
		PutRequests: []core.RequestRecord{r}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LoadRequests(ctx); len(got) != 1 || got[0].State != core.RequestGranted {
		t.Fatalf("receipt %+v", got)
	}
}
