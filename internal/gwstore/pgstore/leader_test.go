package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/pgtest"
)

// A short lease keeps failovers quick; the margin is wide so that a loaded
// machine's scheduling delays stay far inside it.
const (
	testTTL    = 2 * time.Second
	testMargin = 900 * time.Millisecond
	testPoll   = 100 * time.Millisecond
)

type campaigner struct {
	name  string
	store *Store
	l     *Leader
}

func newCampaigner(t *testing.T, srv *pgtest.Server, dsn, name string) *campaigner {
	t.Helper()
	s := openStore(t, srv.NewUser(t, dsn, name))
	l, err := s.NewLeader(LeaderConfig{Holder: name, TTL: testTTL, Margin: testMargin, Poll: testPoll})
	if err != nil {
		t.Fatal(err)
	}
	return &campaigner{name: name, store: s, l: l}
}

// acquireAsync runs Acquire in the background and reports its epoch.
func (c *campaigner) acquireAsync(ctx context.Context, t *testing.T) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		e, err := c.l.Acquire(ctx)
		if err != nil {
			t.Errorf("%s Acquire: %v", c.name, err)
			close(out)
			return
		}
		out <- e
	}()
	return out
}

func TestLeaderFailovers(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	ctx := testCtx(t)
	a := newCampaigner(t, srv, dsn, "gw_a")
	b := newCampaigner(t, srv, dsn, "gw_b")

	if _, _, _, err := a.l.Current(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.l.Lost():
	default:
		t.Fatal("Lost is open before any Acquire; a campaigner that never led must read as not leading")
	}
	e1, err := a.l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// b waits while a renews: a second and a half TTLs pass without b leading.
	bCtx, bCancel := context.WithTimeout(ctx, testTTL*3/2)
	if _, err := b.l.Acquire(bCtx); err == nil {
		t.Fatal("b acquired while a held and renewed the lease")
	}
	bCancel()
	select {
	case <-a.l.Lost():
		t.Fatal("a lost a lease it was renewing")
	default:
	}
	if h, e, exp, err := b.l.Current(ctx); err != nil || h != "gw_a" || e != e1 || exp.IsZero() {
		t.Fatalf("Current = %s %d %v, %v; want gw_a %d", h, e, exp, err, e1)
	}
	epochs := []uint64{e1}

	// Failover 1: a's connections are cut (terminated, logins refused).
	// a must step down before b can lead.
	e2 := cutAndTakeOver(ctx, t, srv, a, b)
	epochs = append(epochs, e2)

	// Failover 2: a comes back and waits; b is cut.
	if err := srv.RestoreUser(ctx, a.name); err != nil {
		t.Fatal(err)
	}
	e3 := cutAndTakeOver(ctx, t, srv, b, a)
	epochs = append(epochs, e3)

	// Failover 3: b comes back and waits; a resigns.
	if err := srv.RestoreUser(ctx, b.name); err != nil {
		t.Fatal(err)
	}
	bGot := b.acquireAsync(ctx, t)
	if err := a.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.l.Lost():
	default:
		t.Fatal("Resign returned with Lost still open")
	}
	e4, ok := <-bGot
	if !ok {
		t.FailNow()
	}
	epochs = append(epochs, e4)

	for i := 1; i < len(epochs); i++ {
		if epochs[i] != epochs[i-1]+1 {
			t.Fatalf("epochs %v; want each failover one above the last", epochs)
		}
	}
	if h, e, _, err := a.l.Current(ctx); err != nil || h != "gw_b" || e != e4 {
		t.Fatalf("Current = %s %d, %v; want gw_b %d", h, e, err, e4)
	}
}

// cutAndTakeOver cuts the leader off the database while the follower
// campaigns, and checks the order of events: the leader's Lost closes
// before the follower's Acquire returns. It returns the new epoch.
func cutAndTakeOver(ctx context.Context, t *testing.T, srv *pgtest.Server, leader, follower *campaigner) uint64 {
	t.Helper()
	lost := leader.l.Lost()
	got := follower.acquireAsync(ctx, t)
	if err := srv.CutUser(ctx, leader.name); err != nil {
		t.Fatal(err)
	}
	var epoch uint64
	select {
	case <-lost:
	case e, ok := <-got:
		if ok {
			t.Fatalf("%s acquired epoch %d before %s stepped down", follower.name, e, leader.name)
		}
		t.FailNow()
	case <-ctx.Done():
		t.Fatalf("%s never stepped down", leader.name)
	}
	epoch, ok := <-got
	if !ok {
		t.FailNow()
	}
	return epoch
}

// TestTerminatedConnectionKeepsTheLease: a leader whose connections are
// only terminated (it may reconnect) keeps its term and epoch.
func TestTerminatedConnectionKeepsTheLease(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	ctx := testCtx(t)
	a := newCampaigner(t, srv, dsn, "gw_a")
	e, err := a.l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.TerminateUser(ctx, a.name); err != nil {
		t.Fatal(err)
	}
	// Watch from another role's store: a's own pool may hand out a
	// terminated connection once. The expiry must move on past the TTL.
	watch := openStore(t, dsn)
	_, _, exp0, err := watch.CurrentLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, e2, exp, err := watch.CurrentLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e2 != e {
			t.Fatalf("epoch moved from %d to %d", e, e2)
		}
		if exp.After(exp0.Add(testTTL)) {
			break
		}
		select {
		case <-a.l.Lost():
			t.Fatal("a stepped down after a reconnectable termination")
		case <-ctx.Done():
			t.Fatal("the lease was never renewed after the termination")
		case <-time.After(testPoll):
		}
	}
}
