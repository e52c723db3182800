package hostreg

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Two homes asking for the host's last room within one watcher poll: the
// registry admits the first and refuses the second, whatever either home's
// view of the other said. The start in flight counts before its device has
// a claim, the claim counts once written, and a dead owner's start counts
// for nothing.
func TestAdmitGivesTheHostsLastRoomOnce(t *testing.T) {
	ctx := context.Background()
	p := liveAB()
	db := openTest(t, t.TempDir(), p)
	at := time.UnixMilli(1_700_000_000_000).UTC()
	if err := db.Claim(ctx, leaseClaim(mustKey(t, udid1), ownerB, "lse_b")); err != nil {
		t.Fatal(err)
	}
	ask := func(o Owner, dev string) error {
		return db.Admit(ctx, Admission{Owner: o, DeviceID: dev, Platform: "ios", At: at, MaxRunning: 3})
	}
	// B runs one; A starts one (2 of 3).
	if err := ask(ownerA, "dev_a1"); err != nil {
		t.Fatalf("first start: %v", err)
	}
	// B's start takes the last room.
	if err := ask(ownerB, "dev_b2"); err != nil {
		t.Fatalf("second start: %v", err)
	}
	// A asks again within the same poll: refused, with the registry's count of B.
	err := ask(ownerA, "dev_a2")
	var hf *HostFullError
	if !errors.As(err, &hf) || hf.Limit != "host" || hf.Max != 3 || hf.Counted != 3 || hf.Others["ios"] != 2 {
		t.Fatalf("third start: %v (%+v)", err, hf)
	}
	// A start asking again for its own device is not counted twice.
	if err := ask(ownerA, "dev_a1"); err != nil {
		t.Fatalf("the same start again: %v", err)
	}
	// A's first start ends (its boot failed): the room is free again.
	if err := db.EndStart(ctx, ownerA, "dev_a1"); err != nil {
		t.Fatal(err)
	}
	if err := ask(ownerA, "dev_a2"); err != nil {
		t.Fatalf("after a start ended: %v", err)
	}
	// B dies: its start no longer counts (its claim still does: its device
	// may still run).
	delete(p.procs, 200)
	if err := ask(ownerA, "dev_a3"); err != nil {
		t.Fatalf("after B's death: %v", err)
	}
	// External devices and a platform's own limit count too: B's claim and
	// A's two starts, and one device outside simlock, fill an ios limit of 4.
	err = db.Admit(ctx, Admission{Owner: ownerA, DeviceID: "dev_a4", Platform: "ios", At: at, Platforms: map[string]int{"ios": 4}, External: map[string]int{"ios": 1}})
	if !errors.As(err, &hf) || hf.Limit != "ios" || hf.Counted != 4 {
		t.Fatalf("platform limit with an external device: %v (%+v)", err, hf)
	}
	if err := db.Admit(ctx, Admission{Owner: ownerA, DeviceID: "dev_a4", Platform: "android", At: at, Platforms: map[string]int{"ios": 5}}); err != nil {
		t.Fatalf("another platform: %v", err)
	}
}
