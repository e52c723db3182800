package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/testhost"
)

type fixture struct {
	t    *testing.T
	d    *Daemon
	home string
	drv  *fakedrv.Driver
}

func startDaemon(t *testing.T, mutate func(*config.Config)) *fixture {
	t.Helper()
	return startDaemonWith(t, mutate, nil)
}

// startDaemonWith is startDaemon with the daemon's options changed by opts
// too (a clock, say).
func startDaemonWith(t *testing.T, mutate func(*config.Config), opts func(*Options)) *fixture {
	t.Helper()
	home, err := os.MkdirTemp("", "sld-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: 1, MaxManaged: 2}
	// A roomy host: claims another home holds (planted by a test, or left
	// by an earlier test's daemon) must not bind the host limit, which
	// defaults to this daemon's own maxRunning of 1, unless a test says so.
	cfg.Capacity.Host.MaxRunning = 8
	if mutate != nil {
		mutate(&cfg)
	}
	drv := fakedrv.New("ios")
	o := Options{Home: home, Config: cfg, Version: "test", Drivers: []core.Driver{drv}}
	if opts != nil {
		opts(&o)
	}
	d, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, d: d, home: home, drv: drv}
	t.Cleanup(func() {
		d.Stop()
		os.RemoveAll(home)
	})
	return f
}

func (f *fixture) adminToken() string {
	b, err := os.ReadFile(filepath.Join(f.home, "admin.token"))
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (f *fixture) dial(principal, cred string) *client.Client {
	f.t.Helper()
	c, err := client.Dial(context.Background(), client.Options{Socket: f.d.Paths().Socket, Principal: principal, Credential: cred})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

func TestFilesAreOwnerOnly(t *testing.T) {
	f := startDaemon(t, nil)
	for _, p := range []string{"admin.token", "simlock.db", "instance.json", "simlock.sock"} {
		st, err := os.Stat(filepath.Join(f.home, p))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", p, st.Mode().Perm())
		}
	}
}

func TestTokensResolveRoles(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	adm := f.dial("op", f.adminToken())
	if adm.Hello().Role != contract.RoleAdmin {
		t.Fatal("admin secret did not grant admin")
	}
	mk := func(role string) contract.TokenCreateOut {
		out, err := client.Do(ctx, adm, contract.TokenCreate, contract.TokenCreateIn{Role: role, Name: "t-" + role})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	op, ag, wk := mk("operator"), mk("agent"), mk("worker")
	if f.dial("x", op.Token).Hello().Role != contract.RoleAdmin || f.dial("y", ag.Token).Hello().Role != contract.RoleAgent {
		t.Fatal("token roles")
	}
	if _, err := client.Dial(ctx, client.Options{Socket: f.d.Paths().Socket, Credential: wk.Token}); !client.IsCode(err, contract.CodeAdminAuthFailed) {
		t.Fatalf("a worker join token must not open a socket session: %v", err)
	}
	if _, err := client.Do(ctx, adm, contract.TokenCreate, contract.TokenCreateIn{Role: "agent", Name: "t-agent"}); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("duplicate name: %v", err)
	}
	list, _ := client.Do(ctx, adm, contract.TokenList, contract.TokenListIn{})
	if len(list.Tokens) != 3 {
		t.Fatalf("%+v", list)
	}
	raw, _ := os.ReadFile(filepath.Join(f.home, "simlock.db"))
	if strings.Contains(string(raw), op.Token) {
		t.Fatal("a token secret is stored in plain text")
	}
	if _, err := client.Do(ctx, adm, contract.TokenRevoke, contract.TokenRevokeIn{ID: op.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Dial(ctx, client.Options{Socket: f.d.Paths().Socket, Credential: op.Token}); !client.IsCode(err, contract.CodeAdminAuthFailed) {
		t.Fatalf("revoked token still works: %v", err)
	}
	if _, err := client.Do(ctx, adm, contract.TokenRevoke, contract.TokenRevokeIn{ID: "tok_nope"}); !client.IsCode(err, contract.CodeUnknownToken) {
		t.Fatalf("%v", err)
	}
}

func TestLeaseVisibilityAndOwnership(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 2} })
	ctx := context.Background()
	a, b := f.dial("alice", ""), f.dial("bob", "")
	la, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if la.Device == nil || la.OwnerID != "alice" || la.RequesterID != "alice" || !la.Device.Simulated {
		t.Fatalf("%+v", la)
	}
	lb, err := b.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "bob-job-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := client.Do(ctx, a, contract.LeaseList, contract.LeaseListIn{})
	if len(mine.Leases) != 1 || mine.Leases[0].LeaseID != la.LeaseID {
		t.Fatalf("alice sees %+v", mine.Leases)
	}
	if _, err := client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: lb.LeaseID}); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("alice released bob's lease: %v", err)
	}
	_, err = a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	var ce *contract.Error
	if ce = contract.AsError(err); ce == nil || ce.Code != contract.CodeRequesterLeased || ce.Details["leaseId"] != la.LeaseID {
		t.Fatalf("second lease for alice: %v", err)
	}
	all, err := client.Do(ctx, b, contract.LeaseReleaseAll, contract.LeaseReleaseAllIn{})
	if err != nil || len(all.Released) != 1 || all.Released[0] != lb.LeaseID {
		t.Fatalf("bob's release-all: %+v %v", all, err)
	}
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TTLMs: 48 * 3600 * 1000}, nil); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("ttl above max: %v", err)
	}
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "tvos", RequesterID: "x"}, nil); !client.IsCode(err, contract.CodeUnsupportedPlatform) {
		t.Fatalf("unknown platform: %v", err)
	}
}

func TestQueueProgressAndCancel(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	a, b := f.dial("alice", ""), f.dial("bob", "")
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil); err != nil {
		t.Fatal(err)
	}
	queued := make(chan contract.Progress, 4)
	done := make(chan error, 1)
	go func() {
		_, err := b.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, func(p contract.Progress) { queued <- p })
		done <- err
	}()
	if p := <-queued; p.Phase != "queued" || p.QueuePosition != 1 {
		t.Fatalf("progress %+v", p)
	}
	st, _ := client.Do(ctx, a, contract.StatusGet, contract.StatusGetIn{})
	if st.QueueDepth != 1 || st.Queue[0].RequesterID != "bob" || st.Daemon.Health != "running" {
		t.Fatalf("status %+v", st)
	}
	// Alice's "bob" is her own requester "alice/bob": nothing of hers is
	// queued, and bob's request stays (his own cancel below succeeds).
	if _, err := client.Do(ctx, a, contract.LeaseCancel, contract.LeaseCancelIn{RequesterID: "bob"}); !client.IsCode(err, contract.CodeNoPendingRequest) {
		t.Fatalf("alice cancelled bob's request: %v", err)
	}
	if _, err := client.Do(ctx, b, contract.LeaseCancel, contract.LeaseCancelIn{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !client.IsCode(err, contract.CodeRequestCancelled) {
		t.Fatalf("cancelled request: %v", err)
	}
}

func TestEventsFollowSeesLeaseFacts(t *testing.T) {
	f := startDaemon(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	adm := f.dial("op", f.adminToken())
	got := make(chan contract.Event, 64)
	if _, err := adm.Events(ctx, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) { got <- e }); err != nil {
		t.Fatal(err)
	}
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(testhost.Scale(5 * time.Second))
	for {
		select {
		case e := <-got:
			if e.Type == "lease.granted" && e.LeaseID == l.LeaseID && e.RequesterID == "alice" {
				return
			}
		case <-timeout:
			t.Fatal("no lease.granted event")
		}
	}
}

func TestGracefulStopRemovesTheAdminSecretAndSocket(t *testing.T) {
	f := startDaemon(t, nil)
	adm := f.dial("op", f.adminToken())
	if _, err := client.Do(context.Background(), adm, contract.DaemonStop, contract.DaemonStopIn{}); err != nil {
		t.Fatal(err)
	}
	<-f.d.Done()
	for _, p := range []string{"admin.token", "simlock.sock"} {
		if _, err := os.Stat(filepath.Join(f.home, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived a graceful stop", p)
		}
	}
	// A new daemon can claim the home at once.
	d2, err := Start(context.Background(), Options{Home: f.home, Config: f.d.cfg, Drivers: []core.Driver{fakedrv.New("ios")}})
	if err != nil {
		t.Fatal(err)
	}
	d2.Stop()
}

func TestSecondDaemonOnSameHomeIsRefused(t *testing.T) {
	f := startDaemon(t, nil)
	_, err := Start(context.Background(), Options{Home: f.home, Config: f.d.cfg, Drivers: []core.Driver{fakedrv.New("ios")}})
	if !client.IsCode(err, contract.CodeDaemonAlreadyRunning) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.home, "admin.token")); err != nil {
		t.Fatal("the losing daemon disturbed the winner's admin token")
	}
}

func TestDownloadPolicyNeverOverridesTheRequest(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.Downloads.Policy = "never" })
	f.drv.Models = []string{"Phone"}
	a := f.dial("alice", "")
	_, err := a.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", Model: "Nope", AllowDownload: true}, nil)
	if !client.IsCode(err, contract.CodeUnknownModel) {
		t.Fatalf("%v", err)
	}
}

func TestQueuedRequestOfADepartedClientIsWithdrawn(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	if _, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil); err != nil {
		t.Fatal(err)
	}
	b, err := client.Dial(ctx, client.Options{Socket: f.d.Paths().Socket, Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan struct{}, 1)
	go b.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, func(contract.Progress) { queued <- struct{}{} })
	<-queued
	b.Close() // bob goes away while queued
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for {
		st, _ := client.Do(ctx, a, contract.StatusGet, contract.StatusGetIn{})
		if st.QueueDepth == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a departed client's request stayed queued and would be granted a lease nobody holds")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The lease-lost relay is a lossless observer: under a flood of facts
// thousands of times the ring's size, the owner is still told that its
// lease was lost.
func TestLeaseLostReachesTheOwnerAfterAFlood(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.EventBuffer.Size = 16 })
	a := f.dial("alice", "")
	lost := make(chan contract.LeaseNotice, 1)
	a.OnNotice(func(n contract.LeaseNotice) {
		if n.Type == contract.NotifyLeaseLost {
			lost <- n
		}
	})
	// The connection is known as alice's once hello ran; a call makes sure.
	var st contract.StatusGetOut
	if err := a.Call(context.Background(), contract.StatusGet.Name, contract.StatusGetIn{}, &st, nil); err != nil {
		t.Fatal(err)
	}
	// The fact sits in the middle of the flood, where a reader that
	// fell a ring behind would have skipped it.
	for i := 0; i < 50_000; i++ {
		if i == 100 {
			f.d.bus.Publish(events.Event{Type: "lease.released", LeaseID: "lse_gone", Reason: "expired",
				Data: map[string]any{"ownerId": "alice"}})
		}
		f.d.bus.Publish(events.Event{Type: "device.state-changed", DeviceID: "flood"})
	}
	select {
	case n := <-lost:
		if n.LeaseID != "lse_gone" || n.Reason != "expired" {
			t.Fatalf("notice %+v", n)
		}
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the owner was never told its lease was lost")
	}
}
