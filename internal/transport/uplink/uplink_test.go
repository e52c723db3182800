package uplink

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func acceptor(t *testing.T, attached chan<- net.Conn) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var rejected []string
	a := &Acceptor{
		Verify: func(_ context.Context, tok string) (string, bool, error) {
			switch tok {
			case "worker-tok":
				return "worker", true, nil
			case "agent-tok":
				return "agent", true, nil
			}
			return "", false, nil
		},
		Attach: func(ctx context.Context, id, label string, conn net.Conn) {
			attached <- conn
			<-ctx.Done()
		},
		Rejected: func(reason, _ string) { mu.Lock(); rejected = append(rejected, reason); mu.Unlock() },
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv, &rejected
}

func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") }

func TestUplinkCarriesLinesBothWays(t *testing.T) {
	attached := make(chan net.Conn, 1)
	srv, _ := acceptor(t, attached)
	conn, err := Dial(context.Background(), wsURL(srv), "worker-tok", "w1", "mac-a")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gw := <-attached
	go gw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"hello"}` + "\n"))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, `"hello"`) {
		t.Fatalf("%q %v", line, err)
	}
	go conn.Write([]byte("pong\n"))
	if line, _ := bufio.NewReader(gw).ReadString('\n'); line != "pong\n" {
		t.Fatalf("%q", line)
	}
}

func TestUplinkRefusals(t *testing.T) {
	srv, rejected := acceptor(t, make(chan net.Conn, 1))
	var rej *RejectedError
	if _, err := Dial(context.Background(), wsURL(srv), "", "w1", ""); !errors.As(err, &rej) || rej.Status != 401 {
		t.Fatalf("no token: %v", err)
	}
	if _, err := Dial(context.Background(), wsURL(srv), "nope", "w1", ""); !errors.As(err, &rej) || rej.Status != 401 {
		t.Fatalf("unknown token: %v", err)
	}
	if _, err := Dial(context.Background(), wsURL(srv), "agent-tok", "w1", ""); !errors.As(err, &rej) || rej.Status != 403 || !strings.Contains(rej.Body, "FORBIDDEN") {
		t.Fatalf("agent token: %v", err)
	}
	if len(*rejected) != 3 {
		t.Fatalf("rejections reported: %v", *rejected)
	}
}

// TestUplinkAcceptsTheBearerSchemeInAnyCase, as every other route does.
func TestUplinkAcceptsTheBearerSchemeInAnyCase(t *testing.T) {
	attached := make(chan net.Conn, 4)
	srv, _ := acceptor(t, attached)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		h := http.Header{}
		h.Set("Authorization", scheme+" worker-tok")
		h.Set(HeaderWorkerID, "w-"+scheme)
		c, _, err := websocket.Dial(context.Background(), Endpoint(wsURL(srv)), &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		c.CloseNow()
		<-attached
	}
	h := http.Header{}
	h.Set("Authorization", "Basic worker-tok")
	h.Set(HeaderWorkerID, "w")
	if _, resp, err := websocket.Dial(context.Background(), Endpoint(wsURL(srv)), &websocket.DialOptions{HTTPHeader: h}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("Basic scheme: %v", err)
	}
}

func TestConnectorRedialsAfterADisconnect(t *testing.T) {
	served := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dials := 0
	c := &Connector{URLs: []string{"ws://x"}, Min: time.Millisecond, Max: 5 * time.Millisecond,
		Dial: func(context.Context, string, string, string, string) (net.Conn, error) {
			dials++
			if dials == 2 {
				return nil, errors.New("gateway down")
			}
			a, b := net.Pipe()
			b.Close() // the gateway hangs up at once
			return a, nil
		},
		Serve: func(_ context.Context, conn net.Conn) error {
			conn.Read(make([]byte, 1))
			served <- struct{}{}
			return nil
		},
	}
	go c.Run(ctx)
	<-served
	<-served // a failed dial in between did not stop it
	cancel()
}

func TestValidateURL(t *testing.T) {
	for raw, ok := range map[string]bool{"ws://gw:7420": true, "wss://gw.example": true, "http://gw": false, "https://gw": false, "ws://": false} {
		if err := ValidateURL(raw); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// fakeGateway is an httptest gateway whose uplink endpoint can be down
// (503), redirect elsewhere (a follower), or accept (a leader).
type fakeGateway struct {
	srv      *httptest.Server
	down     atomic.Bool
	redirect atomic.Pointer[string]
	attached chan net.Conn
}

func newFakeGateway(t *testing.T) *fakeGateway {
	t.Helper()
	g := &fakeGateway{attached: make(chan net.Conn, 4)}
	a := &Acceptor{
		Verify: func(context.Context, string) (string, bool, error) { return "worker", true, nil },
		Attach: func(_ context.Context, _, _ string, conn net.Conn) {
			g.attached <- conn
			io.Copy(io.Discard, conn) // until the test or the worker hangs up
		},
		Redirect: func() string {
			if p := g.redirect.Load(); p != nil {
				return *p
			}
			return ""
		},
	}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		a.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) url() string { return wsURL(g.srv) }

// session is one uplink the worker side served, seen from the worker.
type session struct {
	gateway string
	conn    net.Conn
}

// runConnector starts a connector over urls whose Serve reports each
// session and returns serveErr's answer when the session ends.
func runConnector(t *testing.T, urls []string, serveErr func() error) (*Connector, <-chan session) {
	t.Helper()
	sessions := make(chan session, 8)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Connector{URLs: urls, Token: "worker-tok", ID: "w1", Min: time.Millisecond, Max: 5 * time.Millisecond}
	c.Serve = func(ctx context.Context, conn net.Conn) error {
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		sessions <- session{gateway: c.Connected(), conn: conn}
		io.Copy(io.Discard, conn)
		return serveErr()
	}
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c, sessions
}

func TestConnectorUsesTheNextURLWhenTheFirstIsDown(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := wsURL(down)
	down.Close() // nothing listens there any more
	up := newFakeGateway(t)
	_, sessions := runConnector(t, []string{downURL, up.url()}, func() error { return nil })
	s := <-sessions
	if s.gateway != up.url() {
		t.Fatalf("connected to %q, want the second URL %q", s.gateway, up.url())
	}
	<-up.attached
}

func TestConnectorFollowsAFollowersRedirectToItsLeader(t *testing.T) {
	leader, follower := newFakeGateway(t), newFakeGateway(t)
	// The follower names its leader by its HTTP address, as a gateway knows it.
	to := leader.srv.URL
	follower.redirect.Store(&to)
	c := &Connector{URLs: []string{follower.url(), leader.url()}, Token: "worker-tok", ID: "w1"}
	conn, used, err := c.dialOne(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if used != 1 {
		t.Fatalf("dial starting at the follower connected to URL %d, want the leader (1)", used)
	}
	<-leader.attached
	select {
	case <-follower.attached:
		t.Fatal("the follower attached an uplink it redirected")
	default:
	}
}

func TestConnectorRefusesARedirectOutsideItsGateways(t *testing.T) {
	elsewhere, follower := newFakeGateway(t), newFakeGateway(t)
	to := elsewhere.srv.URL
	follower.redirect.Store(&to)
	c := &Connector{URLs: []string{follower.url()}, Token: "worker-tok", ID: "w1"}
	if _, _, err := c.dialOne(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "not one of this worker's gateway URLs") {
		t.Fatalf("a redirect to an unconfigured host: %v", err)
	}
	select {
	case <-elsewhere.attached:
		t.Fatal("the join token was presented to a gateway the worker was not configured with")
	default:
	}
}

func TestConnectorFollowsOneRedirectPerDial(t *testing.T) {
	a, b := newFakeGateway(t), newFakeGateway(t)
	toA, toB := a.srv.URL, b.srv.URL
	a.redirect.Store(&toB)
	b.redirect.Store(&toA) // two followers naming each other
	c := &Connector{URLs: []string{a.url(), b.url()}, Token: "worker-tok", ID: "w1"}
	if _, _, err := c.dialOne(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "second redirect") {
		t.Fatalf("a redirect loop: %v", err)
	}
}

func TestFollowAcceptsOnlyConfiguredHostsAndWebSchemes(t *testing.T) {
	urls := []string{"ws://gw-a:7420", "wss://gw-b.example"}
	for loc, want := range map[string]int{
		"ws://gw-a:7420/v1/uplink":    0,
		"http://GW-A:7420/v1/uplink":  0,
		"https://gw-b.example/v1/up":  1,
		"wss://gw-b.example:443/":     1,
		"ftp://gw-a:7420/v1/uplink":   -1,
		"ws://gw-b.example/v1/uplink": -1, // port 80, not the configured 443
		"ws://evil:7420/v1/uplink":    -1,
	} {
		got, err := Follow(urls, loc)
		if want < 0 {
			if err == nil {
				t.Errorf("%s: followed to %d, want a refusal", loc, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", loc, got, err, want)
		}
	}
}

func TestConnectorRedialsFromTheURLThatLastWorked(t *testing.T) {
	a, b := newFakeGateway(t), newFakeGateway(t)
	a.down.Store(true)
	var fenced atomic.Bool
	_, sessions := runConnector(t, []string{a.url(), b.url()}, func() error {
		if fenced.Load() {
			return errors.New("fenced")
		}
		return nil
	})
	first := <-sessions
	if first.gateway != b.url() {
		t.Fatalf("first session on %q, want b", first.gateway)
	}
	// a comes back, but the session on b is lost: the redial starts at b.
	a.down.Store(false)
	(<-b.attached).Close()
	second := <-sessions
	if second.gateway != b.url() {
		t.Fatalf("after a loss the connector redialled %q, want b, which last worked", second.gateway)
	}
	// b is fenced as a deposed leader: the next round starts after it.
	fenced.Store(true)
	(<-b.attached).Close()
	third := <-sessions
	if third.gateway != a.url() {
		t.Fatalf("after a fenced session the connector redialled %q, want a", third.gateway)
	}
	<-a.attached
}
