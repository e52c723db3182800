package daemon_test

import (
	"fmt"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// queueUp starts a daemon whose one running slot is leased and queues n
// lease requests behind it from n principals, every third one for
// Android, returning once all n stand in the queue.
func queueUp(t testing.TB, n int) *daemontest.Stack {
	t.Helper()
	s := daemontest.Start(t, daemontest.Options{Extra: []core.Driver{fakedrv.New("android")}})
	s.Admin(contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios"}, nil)
	for i := range n {
		platform := "ios"
		if i%3 == 2 {
			platform = "android"
		}
		sess := contract.Session{Principal: fmt.Sprintf("p%04d", i), Role: contract.RoleAgent, Compatible: true}
		// Each call waits in the queue until the daemon stops at cleanup.
		go s.Dispatch(sess, contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: platform}, nil)
		// One at a time, so the FIFO order is p0000, p0001, ...
		for s.Queued() != i+1 {
			s.Daemon.Engine().WaitIdle()
		}
	}
	return s
}

func TestStatusGetDoesNotListPastNQueuedRequests(t *testing.T) {
	const n = contract.StatusQueueEntries*2 + 7
	s := queueUp(t, n)
	var st contract.StatusGetOut
	s.Admin(contract.StatusGet.Name, contract.StatusGetIn{}, &st)
	wantAndroid := n / 3
	if st.QueueDepth != n || len(st.Queue) != contract.StatusQueueEntries {
		t.Fatalf("status.get: queueDepth %d with %d entries, want %d with %d", st.QueueDepth, len(st.Queue), n, contract.StatusQueueEntries)
	}
	if st.QueueByPlatform["ios"] != n-wantAndroid || st.QueueByPlatform["android"] != wantAndroid || len(st.QueueByPlatform) != 2 {
		t.Fatalf("queueByPlatform %v, want ios %d, android %d", st.QueueByPlatform, n-wantAndroid, wantAndroid)
	}
	if st.QueueNextCursor == "" {
		t.Fatal("status.get truncated the queue without a queueNextCursor")
	}
	for i, q := range st.Queue {
		if q.Position != i+1 || q.RequesterID != fmt.Sprintf("p%04d", i) {
			t.Fatalf("status.get queue[%d] = %s at %d, want p%04d at %d", i, q.RequesterID, q.Position, i, i+1)
		}
	}
	// queue.list walks the whole queue in order, without duplicates, from
	// status.get's cursor on as from the head.
	walk := func(cursor string, limit, depth int) []contract.QueueEntry {
		var all []contract.QueueEntry
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("queue.list never reached the tail")
			}
			var page contract.QueueListOut
			s.Admin(contract.QueueList.Name, contract.QueueListIn{Cursor: cursor, Limit: limit}, &page)
			if page.Depth != depth || len(page.Entries) > limit {
				t.Fatalf("queue.list page: depth %d with %d entries, want depth %d and at most %d", page.Depth, len(page.Entries), depth, limit)
			}
			all = append(all, page.Entries...)
			if cursor = page.NextCursor; cursor == "" {
				return all
			}
		}
	}
	all := walk("", 16, n)
	if len(all) != n {
		t.Fatalf("queue.list walked %d entries, want %d", len(all), n)
	}
	for i, q := range all {
		if q.Position != i+1 || q.RequesterID != fmt.Sprintf("p%04d", i) {
			t.Fatalf("queue.list entry %d = %s at %d, want p%04d at %d", i, q.RequesterID, q.Position, i, i+1)
		}
	}
	if rest := walk(st.QueueNextCursor, 1000, n); len(rest) != n-contract.StatusQueueEntries || rest[0].Position != contract.StatusQueueEntries+1 {
		t.Fatalf("queue.list from status.get's cursor read %d entries, want the %d after queue[]", len(rest), n-contract.StatusQueueEntries)
	}
	// A request leaving before the cursor shifts positions, not the walk.
	if err := s.Dispatch(contract.Session{Principal: "p0000", Role: contract.RoleAgent, Compatible: true}, contract.LeaseCancel.Name, contract.LeaseCancelIn{}, nil); err != nil {
		t.Fatal(err)
	}
	if rest := walk(st.QueueNextCursor, 1000, n-1); len(rest) != n-contract.StatusQueueEntries || rest[0].Position != contract.StatusQueueEntries ||
		rest[0].RequesterID != fmt.Sprintf("p%04d", contract.StatusQueueEntries) {
		t.Fatalf("after a cancel ahead of the cursor, queue.list read %d entries from %v, want %d from p%04d at %d",
			len(rest), rest[0], n-contract.StatusQueueEntries, contract.StatusQueueEntries, contract.StatusQueueEntries)
	}
	if err := s.Dispatch(daemontest.AdminSession(), contract.QueueList.Name, contract.QueueListIn{Cursor: "x"}, nil); err == nil || err.Code != contract.CodeBadRequest {
		t.Fatalf("a malformed cursor: %v, want BAD_REQUEST", err)
	}
}

// BenchmarkStatusGet is status.get through the daemon's dispatcher, wire
// encoding included, with 0 and with 1,000 requests queued.
func BenchmarkStatusGet(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			s := queueUp(b, n)
			for b.Loop() {
				var st contract.StatusGetOut
				s.Admin(contract.StatusGet.Name, contract.StatusGetIn{}, &st)
			}
		})
	}
}

// BenchmarkWarmGrantBesideAQueue is a warm grant and its release through
// the daemon's dispatcher with 0 and with 1,000 requests queued from
// 1,000 principals, each asking for one device by name that another lease
// holds: they stand in the queue but cannot want the ready device, so the
// grant's cost beside them is what the queue's length adds to the
// decision (issue 25's "costs flat in the queue").
func BenchmarkWarmGrantBesideAQueue(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			s := daemontest.Start(b, daemontest.Options{Devices: 2})
			var held, warm contract.Lease
			holder := contract.Session{Principal: "holder", Role: contract.RoleAgent, Compatible: true}
			agent := contract.Session{Principal: "bench", Role: contract.RoleAgent, Compatible: true}
			for _, x := range []struct {
				sess contract.Session
				l    *contract.Lease
			}{{holder, &held}, {agent, &warm}} {
				if err := s.Dispatch(x.sess, contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios"}, x.l); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Dispatch(agent, contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: warm.LeaseID}, nil); err != nil {
				b.Fatal(err)
			}
			s.Daemon.Engine().WaitIdle()
			for i := range n {
				sess := contract.Session{Principal: fmt.Sprintf("p%04d", i), Role: contract.RoleAgent, Compatible: true}
				go s.Dispatch(sess, contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios", Device: held.Device.ID}, nil)
				for s.Queued() != i+1 {
					s.Daemon.Engine().WaitIdle()
				}
			}
			for b.Loop() {
				var l contract.Lease
				if err := s.Dispatch(agent, contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios", NoWait: true}, &l); err != nil {
					b.Fatalf("warm grant beside %d queued: %v", n, err)
				}
				if l.Device.ID != warm.Device.ID {
					b.Fatalf("granted %s, want the ready %s", l.Device.ID, warm.Device.ID)
				}
				b.StopTimer()
				if err := s.Dispatch(agent, contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, nil); err != nil {
					b.Fatal(err)
				}
				s.Daemon.Engine().WaitIdle()
				b.StartTimer()
			}
		})
	}
}
