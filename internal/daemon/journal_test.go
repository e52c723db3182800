package daemon_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/store"
)

// A clean stop journals every event published before it, even those whose
// batch had not come due (the fake clock never moves here), so the next
// start continues numbering after the last one and reuses none.
func TestACleanStopJournalsEveryEventPublished(t *testing.T) {
	s := daemontest.Start(t, daemontest.Options{})
	var l contract.Lease
	s.Admin(contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios"}, &l)
	s.Admin(contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, nil)
	s.Daemon.Engine().WaitIdle()
	var out contract.EventsSubscribeOut
	s.Admin(contract.EventsSubscribe.Name, contract.EventsSubscribeIn{}, &out)
	if len(out.Events) == 0 {
		t.Fatal("no events")
	}
	last := out.Events[len(out.Events)-1].Seq
	if err := s.Daemon.Stop(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), filepath.Join(s.Home, "simlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := db.EventsBetween(context.Background(), 1, last)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(evs)) != last {
		t.Fatalf("the journal holds %d of the %d events published", len(evs), last)
	}
	granted := false
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.Type != out.Events[i].Type {
			t.Fatalf("journal row %d is seq %d %s; the bus had %d %s", i, e.Seq, e.Type, out.Events[i].Seq, out.Events[i].Type)
		}
		granted = granted || e.Type == "lease.granted" && e.LeaseID == l.LeaseID
	}
	if !granted {
		t.Error("the grant is not in the journal")
	}
}
