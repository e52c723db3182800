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

// Dial opens one uplink to the gateway at base.
func Dial(ctx context.Context, base, token, id, label string) (net.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set(HeaderWorkerID, id)
	if label != "" {
		h.Set(HeaderWorkerLabel, label)
	}
	c, resp, err := websocket.Dial(ctx, Endpoint(base), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
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

// Connector is the worker side: it keeps one uplink open, redialling with
// exponential backoff after any disconnect, until ctx ends.
type Connector struct {
	URL, Token, ID, Label string
	// Serve runs the protocol over a connected uplink until it ends.
	Serve func(ctx context.Context, conn net.Conn)
	// Dial defaults to the WebSocket Dial; tests substitute net.Pipe.
	Dial func(ctx context.Context, base, token, id, label string) (net.Conn, error)
	Log  *slog.Logger
	// Min and Max bound the backoff (defaults 500ms and 30s).
	Min, Max time.Duration
}

// Run keeps the uplink up until ctx ends.
func (c *Connector) Run(ctx context.Context) {
	dial := c.Dial
	if dial == nil {
		dial = Dial
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	lo, hi := c.Min, c.Max
	if lo <= 0 {
		lo = 500 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	delay := lo
	for ctx.Err() == nil {
		conn, err := dial(ctx, c.URL, c.Token, c.ID, c.Label)
		if err == nil {
			c.Log.Info("uplink connected", "gateway", c.URL)
			start := time.Now()
			c.Serve(ctx, conn)
			conn.Close()
			c.Log.Warn("uplink disconnected", "gateway", c.URL, "after", time.Since(start).Round(time.Second))
			if time.Since(start) > hi {
				delay = lo // it was a healthy session; retry promptly
			}
		} else {
			var rej *RejectedError
			if errors.As(err, &rej) {
				c.Log.Error("gateway refused this worker's uplink", "err", err)
			} else {
				c.Log.Warn("uplink dial failed", "gateway", c.URL, "err", err)
			}
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
