package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/testhost"
)

// socketClient dials st's socket as principal.
func socketClient(t *testing.T, st *daemontest.Stack, principal string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), client.Options{Socket: client.SocketPath(st.Home), Principal: principal, Name: "hold-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The client lays the socket out where the daemon listens.
func TestSocketPathIsTheDaemons(t *testing.T) {
	if got, want := client.SocketPath("/h"), config.PathsFor("/h").Socket; got != want {
		t.Fatalf("client.SocketPath = %s, the daemon listens on %s", got, want)
	}
}

// FromEnv reaches the daemon in SIMLOCK_HOME as SIMLOCK_PRINCIPAL, and
// with SIMLOCK_URL set it goes over HTTP with SIMLOCK_TOKEN instead.
func TestFromEnvPicksSocketOrHTTP(t *testing.T) {
	f := serveHTTP(t, 1)
	t.Setenv(client.EnvURL, "")
	t.Setenv(client.EnvToken, "")
	t.Setenv(client.EnvHome, f.st.Home)
	t.Setenv(client.EnvPrincipal, "ci-runner-7")
	c, err := client.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if h := c.Hello(); h.Principal != "ci-runner-7" || h.Role != contract.RoleAgent {
		t.Fatalf("socket hello %+v", h)
	}

	t.Setenv(client.EnvURL, f.ts.URL)
	t.Setenv(client.EnvToken, f.agent1)
	t.Setenv(client.EnvHome, "/nonexistent")
	h, err := client.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := h.Hello().Principal; got != f.principal1 {
		t.Fatalf("over HTTP the principal is %s, want the token's %s", got, f.principal1)
	}

	t.Setenv(client.EnvURL, "")
	t.Setenv(client.EnvHome, t.TempDir())
	if _, err := client.FromEnv(context.Background()); !client.IsCode(err, contract.CodeDaemonNotRunning) {
		t.Fatalf("a home with no daemon: %v, want DAEMON_NOT_RUNNING", err)
	}
}

func TestHoldRenewsAndReportsALostLease(t *testing.T) {
	st := daemontest.Start(t, daemontest.Options{})
	c := socketClient(t, st, "holder")
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", TTLMs: 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	renews := make(chan contract.Event, 16)
	go c.Events(t.Context(), contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) {
		if e.Type == "lease.renewed" {
			renews <- e
		}
	})
	h := c.Hold(context.Background(), l)
	// Renewed at TTL/3 = 100ms of real time: two renews well within 2s.
	for i := range 2 {
		select {
		case <-renews:
		case <-time.After(testhost.Scale(2 * time.Second)):
			t.Fatalf("renew %d not seen within 2s", i+1)
		}
	}
	// Someone else ends the lease: the holder hears of it.
	st.Admin(contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, nil)
	select {
	case <-h.Lost():
	case <-time.After(testhost.Scale(2 * time.Second)):
		t.Fatal("the holder did not report the released lease as lost")
	}
	if err := h.Err(); !client.IsCode(err, contract.CodeUnknownLease) && !client.IsCode(err, contract.CodeLeaseEnded) {
		t.Fatalf("lost with %v, want UNKNOWN_LEASE or LEASE_ENDED", err)
	}
	<-h.Done()
	if err := h.Release(context.Background()); err != nil {
		t.Fatalf("releasing an already ended lease: %v", err)
	}
}

// Ending the context stops the renewing but leaves the lease in place;
// Release then still releases it.
func TestHoldStopsWithItsContext(t *testing.T) {
	st := daemontest.Start(t, daemontest.Options{})
	c := socketClient(t, st, "holder")
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := c.Hold(ctx, l)
	cancel()
	select {
	case <-h.Done():
	case <-time.After(testhost.Scale(2 * time.Second)):
		t.Fatal("the holder did not stop with its context")
	}
	if !errors.Is(h.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", h.Err())
	}
	select {
	case <-h.Lost():
		t.Fatal("a stopped holder reported its lease lost")
	default:
	}
	if _, err := client.Do(context.Background(), c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatalf("the lease ended with the holder's context: %v", err)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Do(context.Background(), c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID}); !client.IsCode(err, contract.CodeUnknownLease) {
		t.Fatalf("after Release: %v, want UNKNOWN_LEASE", err)
	}
}

// A lease that expires on the daemon (its clock moved past the TTL before
// any renew) is pushed to its owner as lease-lost: the holder reports it
// as LEASE_ENDED at once, and the program's own notice receiver still
// hears it too.
func TestHoldHearsALeaseLostPush(t *testing.T) {
	st := daemontest.Start(t, daemontest.Options{})
	c := socketClient(t, st, "holder")
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", TTLMs: 60_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := make(chan contract.LeaseNotice, 4)
	c.OnNotice(func(n contract.LeaseNotice) { own <- n })
	h := c.Hold(context.Background(), l) // first renew in 20s: none during the test
	st.Clock.Advance(61 * time.Second)
	select {
	case <-h.Lost():
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("the holder did not report the expired lease")
	}
	if !client.IsCode(h.Err(), contract.CodeLeaseEnded) {
		t.Fatalf("lost with %v, want LEASE_ENDED from the push", h.Err())
	}
	select {
	case n := <-own:
		if n.Type != contract.NotifyLeaseLost || n.LeaseID != l.LeaseID {
			t.Fatalf("the program's receiver got %+v", n)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("the holder took the notice from the program's own receiver")
	}
}

// A connection that fails (the HTTP server drops every request for a
// while, as a restarting daemon would) is replaced: the holder redials the
// same URL and keeps renewing once it answers again.
func TestHoldRedialsAfterALostConnection(t *testing.T) {
	f := serveHTTP(t, 1)
	var down atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		f.srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c, err := client.DialHTTP(context.Background(), ts.URL, f.agent1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", TTLMs: 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Hold(context.Background(), l)
	down.Store(true)
	spin(t, func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	})
	time.Sleep(300 * time.Millisecond) // a few failed redials
	down.Store(false)
	spin(t, func() bool { return h.Reconnects() > 0 })
	before := h.Reconnects()
	time.Sleep(400 * time.Millisecond) // renews on the new connection, no more redials
	select {
	case <-h.Lost():
		t.Fatalf("lost the lease: %v", h.Err())
	default:
	}
	if h.Reconnects() != before {
		t.Fatalf("redialled %d more times over a working connection", h.Reconnects()-before)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	var st contract.StatusGetOut
	f.st.Admin(contract.StatusGet.Name, contract.StatusGetIn{}, &st)
	if len(st.Leases) != 0 {
		t.Fatalf("after Release the daemon holds %d leases", len(st.Leases))
	}
}
