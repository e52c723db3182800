package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/testhost"
)

// release --all means the caller's requester (and the ids scoped under
// it), never everyone's; everyone takes the flag and the admin role.
func TestReleaseAllIsScopedToTheCallersRequester(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 4, MaxManaged: 4} })
	ctx := context.Background()
	alice, bob := f.dial("alice", ""), f.dial("bob", "")
	op := f.dial("op", f.adminToken())
	a1 := lease(t, alice, "")
	a2 := lease(t, alice, "job-2")
	b1 := lease(t, bob, "")
	o1 := lease(t, op, "nightly")

	if _, err := client.Do(ctx, alice, contract.LeaseReleaseAll, contract.LeaseReleaseAllIn{Everyone: true}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("an agent's --everyone: %v, want FORBIDDEN", err)
	}
	out, err := client.Do(ctx, alice, contract.LeaseReleaseAll, contract.LeaseReleaseAllIn{})
	if err != nil || !sameSet(out.Released, a1.LeaseID, a2.LeaseID) {
		t.Fatalf("alice's release-all released %v (%v), want her two leases", out.Released, err)
	}
	// The operator's plain release-all is its own requester's: nothing.
	out, err = client.Do(ctx, op, contract.LeaseReleaseAll, contract.LeaseReleaseAllIn{})
	if err != nil || len(out.Released) != 0 {
		t.Fatalf("admin release-all without everyone released %v (%v)", out.Released, err)
	}
	out, err = client.Do(ctx, op, contract.LeaseReleaseAll, contract.LeaseReleaseAllIn{RequesterID: "nightly"})
	if err != nil || !sameSet(out.Released, o1.LeaseID) {
		t.Fatalf("admin release-all of requester nightly: %v (%v)", out.Released, err)
	}
	if _, ok := f.d.Engine().Lease(b1.LeaseID); !ok {
		t.Fatal("bob's lease went in someone else's release-all")
	}
	out, err = client.Do(ctx, op, contract.LeaseReleaseAll, contract.LeaseReleaseAllIn{Everyone: true})
	if err != nil || !sameSet(out.Released, b1.LeaseID) {
		t.Fatalf("admin --everyone released %v (%v), want bob's lease", out.Released, err)
	}
}

// An agent's requester ids live under its principal: it cannot act under
// another agent's id, squat its default, or learn its lease id.
func TestRequesterIDsAreScopedToTheirPrincipal(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 4, MaxManaged: 4} })
	ctx := context.Background()
	alice, bob := f.dial("alice", ""), f.dial("bob", "")
	op := f.dial("op", f.adminToken())
	// bob tries alice's default id before she uses it.
	squat := lease(t, bob, "alice")
	if squat.RequesterID != "bob/alice" || squat.OwnerID != "bob" {
		t.Fatalf("bob's lease %+v", squat)
	}
	mine := lease(t, alice, "")
	if mine.RequesterID != "alice" {
		t.Fatalf("alice's default requester was squatted: %+v", mine)
	}
	// Probing alice's id again yields bob's own refusal, about his own lease.
	_, err := bob.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "alice"}, nil)
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeRequesterLeased || ce.Details["leaseId"] != squat.LeaseID {
		t.Fatalf("bob's second request: %v", err)
	}
	if strings.Contains(err.Error(), mine.LeaseID) {
		t.Fatalf("bob learnt alice's lease id: %v", err)
	}
	// A lease an admin placed under bob's namespace for someone else is
	// refused to bob without its id.
	other, err := op.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "bob/ci", OwnerID: "carol"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "ci"}, nil)
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeRequesterLeased {
		t.Fatalf("bob's request under a taken id: %v", err)
	}
	if _, named := ce.Details["leaseId"]; named || strings.Contains(ce.Message+ce.NextAction, other.LeaseID) {
		t.Fatalf("the refusal names carol's lease to bob: %+v", ce)
	}
	// The operator sees all three, under their scoped ids.
	if st, _ := client.Do(ctx, op, contract.StatusGet, contract.StatusGetIn{}); len(st.Leases) != 3 {
		t.Fatalf("status shows %d leases", len(st.Leases))
	}
}

// One owner cannot fill the queue: past queue.maxPerPrincipal its next
// request is a retryable QUEUE_LIMIT_REACHED, and others still queue.
func TestQueuedRequestsAreCappedPerPrincipal(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) {
		c.Capacity.Fixed = config.Fixed{MaxRunning: 1, MaxManaged: 1}
		c.Queue.MaxPerPrincipal = 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder, bob, carol := f.dial("holder", ""), f.dial("bob", ""), f.dial("carol", "")
	lease(t, holder, "")
	queued := make(chan contract.Progress, 16)
	for _, r := range []string{"r1", "r2"} {
		go func() {
			_, _ = bob.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: r}, func(p contract.Progress) { queued <- p })
		}()
	}
	waitQueue(t, f, 2)
	c3, cancel3 := context.WithTimeout(ctx, testhost.Scale(5*time.Second)) // a missing cap would queue it
	defer cancel3()
	_, err := bob.LeaseRequest(c3, contract.LeaseRequestIn{Platform: "ios", RequesterID: "r3"}, nil)
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeQueueLimit || !ce.Retryable || ce.NextAction == "" || ce.RetryAfterMs == nil {
		t.Fatalf("bob's third request: %+v", ce)
	}
	go func() { _, _ = carol.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil) }()
	waitQueue(t, f, 3)
	// Cancelling one of bob's frees a place for him again.
	if _, err := client.Do(ctx, bob, contract.LeaseCancel, contract.LeaseCancelIn{RequesterID: "r1"}); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, f, 2)
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for {
		c, cancelOne := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := bob.LeaseRequest(c, contract.LeaseRequestIn{Platform: "ios", RequesterID: "r4"}, nil)
		cancelOne()
		if !client.IsCode(err, contract.CodeQueueLimit) {
			break // it queued (and timed out client-side), so the place was freed
		}
		if time.Now().After(deadline) {
			t.Fatal("a cancelled request still counts against the cap")
		}
	}
}

// Identifiers are checked for every entry point the same way: on the
// socket (hello and operations) and over HTTP.
func TestIdentifiersAreValidatedOnSocketAndHTTP(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) {
		c.HTTP.Enabled = true
		c.HTTP.Listen = "127.0.0.1:0"
	})
	ctx := context.Background()
	if _, err := client.Dial(ctx, client.Options{Socket: f.d.Paths().Socket, Principal: "ops\n[fake] row"}); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("hello with a newline in the principal: %v", err)
	}
	a := f.dial("alice", "")
	for _, req := range []string{"job\x1b[2J", strings.Repeat("r", 3<<20), "a\u202eb"} {
		if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: req}, nil); !client.IsCode(err, contract.CodeBadRequest) {
			t.Fatalf("socket lease.request with requester of %d bytes: %v", len(req), err)
		}
	}
	op := f.dial("op", f.adminToken())
	tok, err := client.Do(ctx, op, contract.TokenCreate, contract.TokenCreateIn{Role: "agent", Name: "http-agent"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.DialHTTP(ctx, "http://"+f.d.HTTPAddr(), tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "x\ny"}, nil); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("HTTP lease.request with a newline: %v", err)
	}
	if st, err := client.Do(ctx, op, contract.StatusGet, contract.StatusGetIn{}); err != nil || len(st.Queue)+len(st.Leases) != 0 {
		t.Fatalf("a refused request left state behind: %+v %v", st, err)
	}
}

// A start that fails on a taken HTTP port leaves no admin secret, pid or
// socket behind and releases the home, so the next start succeeds.
func TestFailedStartOnATakenPortCleansUp(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	home := t.TempDir()
	cfg := config.Default()
	cfg.HTTP.Enabled = true
	cfg.HTTP.Listen = taken.Addr().String()
	o := Options{Home: home, Config: cfg, Version: "test", Drivers: []core.Driver{fakedrv.New("ios")}}
	if _, err := Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("start on a taken port: %v", err)
	}
	for _, name := range []string{"admin.token", "daemon.pid", "simlock.sock"} {
		if _, err := os.Stat(filepath.Join(home, name)); !os.IsNotExist(err) {
			t.Errorf("%s left behind after a failed start (%v)", name, err)
		}
	}
	o.Config.HTTP.Listen = "127.0.0.1:0"
	d, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("the home stayed claimed after a failed start: %v", err)
	}
	d.Stop()
}

func lease(t *testing.T, c *client.Client, requester string) contract.Lease {
	t.Helper()
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", RequesterID: requester}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func waitQueue(t *testing.T, f *fixture, n int) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for len(f.d.Engine().Queue()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %d, want %d", len(f.d.Engine().Queue()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sameSet(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	m := map[string]bool{}
	for _, g := range got {
		m[g] = true
	}
	for _, w := range want {
		if !m[w] {
			return false
		}
	}
	return true
}
