// Package uplink carries the daemon's socket protocol between a worker and
// a fleet gateway over one WebSocket that the worker dials out. Only the
// gateway listens; a worker behind NAT joins with a URL and a join token.
// Both ends see a plain net.Conn, so tests script a fleet with net.Pipe and
// the rest of the code never knows about WebSockets.
package uplink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/simlock/simlock/contract"
)

// Path is where a gateway accepts uplinks.
const Path = "/v1/uplink"

// Headers a worker presents with its join token.
const (
	HeaderWorkerID    = "X-Simlock-Worker-Id"
	HeaderWorkerLabel = "X-Simlock-Worker-Label"
)

// ValidateURL accepts only ws:// and wss:// gateway URLs: the join token
// travels in the upgrade request, and http(s) would suggest otherwise.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("gateway.url: %w", err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return fmt.Errorf("gateway.url: scheme %q is not ws or wss", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("gateway.url: no host")
	}
	return nil
}

// Endpoint derives the uplink URL from a gateway base URL.
func Endpoint(base string) string { return strings.TrimRight(base, "/") + Path }

// Acceptor is the gateway side: an http.Handler that checks the join token
// and hands each accepted uplink to Attach, which blocks for its life.
type Acceptor struct {
	// Verify resolves a bearer token to its role (agent, operator, worker).
	Verify func(ctx context.Context, bearer string) (role string, ok bool, err error)
	// Attach serves one worker connection until it ends.
	Attach func(ctx context.Context, id, label string, conn net.Conn)
	// Rejected reports a refused uplink (reason unauthenticated/forbidden/bad-request).
	Rejected func(reason, detail string)
	// Redirect, when set, may name the base URL where uplinks belong
	// instead of here (a follower names its leader); an authenticated
	// uplink is then answered 307 with that endpoint as Location. "" serves
	// it here.
	Redirect func() string
	Log      *slog.Logger
}

func (a *Acceptor) refuse(w http.ResponseWriter, status int, reason string, e *contract.Error) {
	if a.Rejected != nil {
		a.Rejected(reason, e.Message)
	}
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="simlock"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (a *Acceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The scheme is case-insensitive (RFC 9110 §11.1), as on every other
	// route of the API.
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if tok = strings.TrimSpace(tok); !strings.EqualFold(scheme, "Bearer") {
		tok = ""
	}
	if tok == "" {
		a.refuse(w, http.StatusUnauthorized, "unauthenticated", contract.Errorf(contract.CodeUnauthenticated, "an uplink needs a join token").
			WithNext("set gateway.token to a token minted on the gateway with `simlock token create --role worker`"))
		return
	}
	role, ok, err := a.Verify(r.Context(), tok)
	if err != nil || !ok {
		a.refuse(w, http.StatusUnauthorized, "unauthenticated", contract.Errorf(contract.CodeUnauthenticated, "the join token is not known to this gateway"))
		return
	}
	if role != contract.TokenRoleWorker {
		a.refuse(w, http.StatusForbidden, "forbidden", contract.Errorf(contract.CodeForbidden, "a %s token cannot open an uplink; use a worker token", role))
		return
	}
	id := r.Header.Get(HeaderWorkerID)
	if id == "" || strings.Contains(id, ".") {
		a.refuse(w, http.StatusBadRequest, "bad-request", contract.Errorf(contract.CodeBadRequest, "the uplink must name its worker id (no dots) in %s", HeaderWorkerID))
		return
	}
	if a.Redirect != nil {
		if to := a.Redirect(); to != "" {
			http.Redirect(w, r, Endpoint(to), http.StatusTemporaryRedirect)
			return
		}
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the client
	}
	c.SetReadLimit(8 << 20)
	ctx := r.Context()
	conn := websocket.NetConn(ctx, c, websocket.MessageText)
	defer conn.Close()
	a.Attach(ctx, id, r.Header.Get(HeaderWorkerLabel), conn)
}

// RejectedError is a gateway's refusal of an uplink (401, 403, 400).
type RejectedError struct {
	Status int
	Body   string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("gateway refused the uplink (HTTP %d): %s", e.Status, strings.TrimSpace(e.Body))
}

// RedirectError is a gateway's answer that the uplink belongs elsewhere: a
// follower answers 307 or 308 with its leader's address in Location.
type RedirectError struct {
	Status   int
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("gateway redirected the uplink (HTTP %d) to %q", e.Status, e.Location)
}

// noRedirects makes the upgrade request stop at a redirect: the Connector
// decides whether to follow it, because the join token travels with it.
func noRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Dial opens one uplink to the gateway at base. It never follows a
// redirect itself; it reports one as a *RedirectError.
func Dial(ctx context.Context, base, token, id, label string) (net.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set(HeaderWorkerID, id)
	if label != "" {
		h.Set(HeaderWorkerLabel, label)
	}
	c, resp, err := websocket.Dial(ctx, Endpoint(base), &websocket.DialOptions{HTTPHeader: h, HTTPClient: noRedirects()})
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect) {
			loc := resp.Header.Get("Location")
			if u, lerr := resp.Location(); lerr == nil {
				loc = u.String()
			}
			return nil, &RedirectError{Status: resp.StatusCode, Location: loc}
		}
		if resp != nil && resp.StatusCode >= 400 {
			var body [512]byte
			n := 0
			if resp.Body != nil {
				n, _ = resp.Body.Read(body[:])
			}
			return nil, &RejectedError{Status: resp.StatusCode, Body: string(body[:n])}
		}
		return nil, err
	}
	c.SetReadLimit(8 << 20)
	// The connection lives until the uplink ends, not until this dial's ctx.
	return websocket.NetConn(context.WithoutCancel(ctx), c, websocket.MessageText), nil
}

// Connector is the worker side: it keeps one uplink open to one of the
// fleet's gateways, redialling with exponential backoff after any
// disconnect, until ctx ends.
//
// URLs are tried in turn, starting from the one that last carried a
// session. A gateway that answers with a redirect (a follower naming its
// leader) is followed once per dial, and only to a gateway this worker was
// configured with: the join token goes wherever the upgrade goes, so a
// redirect may choose among the configured gateways but never add one
// (ADR 0103).
type Connector struct {
	URLs             []string
	Token, ID, Label string
	// Serve runs the protocol over a connected uplink until it ends. A
	// non-nil error says this gateway should not be the next one dialled
	// (the worker fenced it as a deposed leader); the connector then
	// starts its next round at the URL after it.
	Serve func(ctx context.Context, conn net.Conn) error
	// Dial defaults to the WebSocket Dial; tests substitute net.Pipe.
	Dial func(ctx context.Context, base, token, id, label string) (net.Conn, error)
	Log  *slog.Logger
	// Min and Max bound the backoff (defaults 500ms and 30s).
	Min, Max time.Duration
	// DialTimeout bounds one upgrade (default 10s), so a gateway that
	// accepts TCP and never answers does not hold the worker from the
	// next URL.
	DialTimeout time.Duration

	connected atomic.Pointer[string]
}

// Connected is the base URL of the gateway the uplink is up to now, or ""
// while it is down.
func (c *Connector) Connected() string {
	if p := c.connected.Load(); p != nil {
		return *p
	}
	return ""
}

// Run keeps the uplink up until ctx ends.
func (c *Connector) Run(ctx context.Context) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if len(c.URLs) == 0 {
		c.Log.Error("uplink has no gateway URL to dial")
		return
	}
	lo, hi := c.Min, c.Max
	if lo <= 0 {
		lo = 500 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	delay := lo
	next := 0 // the URL that last carried a session, or the one after a fenced one
	for ctx.Err() == nil {
		for i := range len(c.URLs) {
			at := (next + i) % len(c.URLs)
			conn, used, err := c.dialOne(ctx, at)
			if err != nil {
				var rej *RejectedError
				if errors.As(err, &rej) {
					c.Log.Error("gateway refused this worker's uplink", "gateway", c.URLs[at], "err", err)
				} else {
					c.Log.Warn("uplink dial failed", "gateway", c.URLs[at], "err", err)
				}
				continue
			}
			gw := c.URLs[used]
			c.connected.Store(&gw)
			c.Log.Info("uplink connected", "gateway", gw)
			start := time.Now()
			serr := c.Serve(ctx, conn)
			conn.Close()
			c.connected.Store(nil)
			c.Log.Warn("uplink disconnected", "gateway", gw, "after", time.Since(start).Round(time.Second), "err", serr)
			if time.Since(start) > hi {
				delay = lo // it was a healthy session; retry promptly
			}
			next = used
			if serr != nil {
				next = (used + 1) % len(c.URLs)
			}
			break
		}
		// Full jitter keeps a fleet from reconnecting in lockstep.
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		delay = min(delay*2, hi)
	}
}

// dialOne dials URLs[at], following at most one redirect to another of
// the configured URLs; it returns the index of the URL it connected to.
func (c *Connector) dialOne(ctx context.Context, at int) (net.Conn, int, error) {
	dial := c.Dial
	if dial == nil {
		dial = Dial
	}
	timeout := c.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	once := func(i int) (net.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return dial(dctx, c.URLs[i], c.Token, c.ID, c.Label)
	}
	conn, err := once(at)
	var red *RedirectError
	if !errors.As(err, &red) {
		return conn, at, err
	}
	to, err := Follow(c.URLs, red.Location)
	if err != nil {
		return nil, at, fmt.Errorf("not following the redirect: %w", err)
	}
	if c.Log != nil {
		c.Log.Info("uplink redirected", "from", c.URLs[at], "to", c.URLs[to])
	}
	conn, err = once(to)
	if errors.As(err, &red) {
		return nil, to, fmt.Errorf("a second redirect in one dial (to %q): %w", red.Location, err)
	}
	return conn, to, err
}

// Follow picks the configured gateway a redirect's Location points at: the
// one with the same host and port. The Location may be ws, wss, http or
// https (a follower may name its leader by its HTTP address); any other
// scheme, or a host that is not configured, is refused.
func Follow(urls []string, location string) (int, error) {
	u, err := url.Parse(location)
	if err != nil {
		return 0, fmt.Errorf("location %q: %w", location, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if !validScheme(scheme) {
		return 0, fmt.Errorf("location %q: scheme %q is not ws, wss, http or https", location, u.Scheme)
	}
	want := hostPort(scheme, u)
	for i, raw := range urls {
		cu, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if hostPort(strings.ToLower(cu.Scheme), cu) == want {
			return i, nil
		}
	}
	return 0, fmt.Errorf("location %q: host %s is not one of this worker's gateway URLs", location, want)
}

func validScheme(s string) bool { return s == "ws" || s == "wss" || s == "http" || s == "https" }

// hostPort names a URL's host with its port made explicit, so ws://gw and
// http://gw:80 name the same gateway.
func hostPort(scheme string, u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if scheme == "wss" || scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
