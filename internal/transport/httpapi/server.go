// Package httpapi serves the daemon contract over HTTP. Routes under /v1 are
// declared once in a table whose entries name contract operations; a bearer
// token on every route but GET /v1/healthz becomes the session; every call
// goes to the same dispatcher the socket uses, in-process. Like the socket
// transport it does framing only: the error table gives the status, the
// contract gives the schemas of the generated OpenAPI document.
//
// The only state it keeps is frontend state with no socket equivalent: the
// handles of lease requests answered 202 (Prefer: wait and long-poll) and the
// per-lease notices a polling client reads on renew. See docs/http-api.md.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/transport/connlimit"
)

// Backend is what the HTTP frontend needs from the daemon.
type Backend interface {
	// Authenticate resolves a bearer secret to its token role (agent,
	// operator or worker) and principal (for example "token:tok_ab12").
	// ok is false for an unknown or revoked secret; err is for failures to
	// look it up.
	Authenticate(ctx context.Context, bearer string) (role, principal string, ok bool, err error)
	// Hello negotiates the protocol range. The HTTP frontend passes no
	// credential and no principal (the bearer token decides both) and
	// ignores the returned session.
	Hello(ctx context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error)
	// Dispatch runs one operation through the daemon's one dispatcher.
	// notify may be nil; after, when non-nil, must run once the response
	// has been written.
	Dispatch(ctx context.Context, sess contract.Session, method string, params json.RawMessage, notify func(method string, params any)) (result any, after func(), err *contract.Error)
}

// Options configure a Server. Backend is required; the rest default.
type Options struct {
	Backend Backend
	Logger  *slog.Logger
	Clock   ports.Clock
	Version string
	// Uplink, when set (gateway mode), serves GET /v1/uplink. It checks
	// its own join token: a worker token opens an uplink and nothing else.
	Uplink http.Handler
	// Metrics, when set, serves GET /metrics (Prometheus text format)
	// behind a token like every route but healthz.
	Metrics http.Handler
	// MaxConns caps the connections the listener holds open at once (0:
	// the connlimit default, a share of the fd limit; negative: no cap).
	MaxConns int
}

// Limits and waits. They are constants, not configuration: they bound
// resources, and clients learn them from the responses (Preference-Applied,
// abandonAfterMs).
const (
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes = 1 << 20
	// DefaultWait is how long POST /v1/leases and GET /v1/requests/{id}
	// wait for an outcome when the client states no preference.
	DefaultWait = 20 * time.Second
	// MaxWait caps Prefer: wait and ?wait=; no HTTP request waits longer.
	MaxWait = 60 * time.Second
	// AbandonAfter cancels a pending lease request nobody has polled for
	// this long, so a vanished client never holds a queue slot.
	AbandonAfter = 2 * time.Minute
	// KeepOutcome keeps a collected outcome answerable to a retried poll.
	KeepOutcome = time.Minute
	// keepAlive spaces SSE comment lines on an idle stream.
	keepAlive = 15 * time.Second
	// writeStall bounds one write of a stream to a client that stopped
	// reading.
	writeStall = 30 * time.Second
	// authDeadline closes a connection that has not presented a valid
	// token this long after it was opened, so idle or unauthenticated
	// connections cannot hold the listener's slots (see Serve).
	authDeadline = 10 * time.Second
)

// Server is the HTTP frontend. Build it with New.
type Server struct {
	b       Backend
	log     *slog.Logger
	clock   ports.Clock
	version string
	routes  []route
	handler http.Handler
	openapi func() []byte
	metrics http.Handler

	// ctx spans the server's life: background dispatches (pending lease
	// requests, the notice follower) and every request context derive
	// from it, so Close ends them all.
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	notices  *noticeBuffer
	requests *requestTable
	console  *consoleTable

	maxConns     int
	authDeadline time.Duration
	writeStall   time.Duration
	gateway      bool
}

// New builds a server and starts following the daemon's events for lease
// notices. Call Close (or let Serve return) to stop it.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{b: o.Backend, log: o.Logger, clock: o.Clock, version: o.Version, ctx: ctx, cancel: cancel,
		notices: newNoticeBuffer(), console: newConsoleTable(), maxConns: o.MaxConns, authDeadline: authDeadline, writeStall: writeStall, gateway: o.Uplink != nil}
	s.requests = newRequestTable(s)
	s.routes = routeTable()
	s.metrics = o.Metrics
	s.handler = s.buildMux(o.Uplink)
	s.openapi = sync.OnceValue(func() []byte {
		b, _ := json.MarshalIndent(openAPIDocument(s.routes, s.version, s.gateway), "", "  ")
		return append(b, '\n')
	})
	s.wg.Add(1)
	go s.followNotices()
	return s
}

// Handler returns the root handler (for tests and for embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Close ends every stream, long-poll and pending lease request, stops the
// notice follower and waits for the server's goroutines.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.requests.closeAll()
	})
	s.wg.Wait()
}

// Serve answers HTTP on ln until ctx ends, then shuts down gracefully.
//
// The server timeouts bound what the frontend controls: reading headers
// and bodies, idle keep-alive connections, and the write of anything that
// does not reach the dispatcher. A request that does reach it runs for as
// long as its context lives (client gone, or Close) within its route's own
// cap (MaxWait for long-polls): handlers lift the deadlines through
// http.ResponseController, because an expiring read deadline would cancel
// the request context and a write deadline would cut a parked call.
//
// The listener is capped (connlimit) and every connection must present a
// valid bearer token within authDeadline of opening, or be closed: a flood
// of idle connections holds slots for seconds, not for the idle timeout.
// A moment without file descriptors does not stop the listener: net/http
// retries a temporary accept error (EMFILE, ENFILE) with backoff.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	n := s.maxConns
	if n == 0 {
		n = connlimit.Default()
	}
	ln = typedListener{connlimit.Listen(ln, n)}
	var pending sync.Map // net.Conn -> *connAuth, until authenticated, hijacked or closed
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ca := &connAuth{}
			ca.timer = time.AfterFunc(s.authDeadline, func() {
				if !ca.authed.Load() {
					c.Close()
				}
			})
			pending.Store(c, ca)
			return context.WithValue(ctx, connAuthKey{}, ca)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateHijacked || st == http.StateClosed {
				if ca, ok := pending.LoadAndDelete(c); ok {
					ca.(*connAuth).timer.Stop()
				}
			}
		},
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		s.Close() // ends streams and long-polls so Shutdown need not wait for them
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
	}()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	} else {
		s.Close()
	}
	<-stopped
	return err
}

type sessionKey struct{}

type connAuthKey struct{}

// connAuth is one connection's auth deadline: its timer closes the
// connection unless a request on it authenticates first.
type connAuth struct {
	authed atomic.Bool
	timer  *time.Timer
}

// authenticated lifts the auth deadline of the request's connection.
func authenticated(r *http.Request) {
	if ca, ok := r.Context().Value(connAuthKey{}).(*connAuth); ok && !ca.authed.Swap(true) {
		ca.timer.Stop()
	}
}

// sessionOf returns the session the auth middleware resolved.
func sessionOf(r *http.Request) contract.Session {
	sess, _ := r.Context().Value(sessionKey{}).(contract.Session)
	return sess
}

// authenticate turns the bearer token into a session: operator tokens are
// admin, agent tokens agent; worker tokens open only a gateway uplink.
func (s *Server) authenticate(r *http.Request) (contract.Session, *contract.Error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return contract.Session{}, contract.Errorf(contract.CodeUnauthenticated, "this route needs a bearer token (Authorization: Bearer <token>)")
	}
	scheme, secret, _ := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return contract.Session{}, contract.Errorf(contract.CodeUnauthenticated, "the Authorization header must be \"Bearer <token>\"")
	}
	if sess, ok, cerr := s.consoleAuthenticate(r.Context(), secret); ok {
		return sess, cerr
	}
	role, principal, ok, err := s.b.Authenticate(r.Context(), secret)
	if err != nil {
		s.log.Error("token lookup failed", "err", err)
		return contract.Session{}, contract.Errorf(contract.CodeInternal, "the token could not be checked")
	}
	if !ok {
		return contract.Session{}, contract.Errorf(contract.CodeUnauthenticated, "unknown or revoked token")
	}
	sess := contract.Session{Principal: principal, Compatible: true}
	switch role {
	case contract.TokenRoleOperator:
		sess.Role = contract.RoleAdmin
	case contract.TokenRoleAgent:
		sess.Role = contract.RoleAgent
	case contract.TokenRoleWorker:
		return contract.Session{}, contract.Errorf(contract.CodeForbidden, "a worker token only opens a gateway uplink").
			WithNext("use an agent or operator token (`simlock token create --role agent`)")
	default:
		return contract.Session{}, contract.Errorf(contract.CodeForbidden, "a %q token grants no HTTP access", role)
	}
	return sess, nil
}

// statusWriter remembers the status for the access log; Unwrap keeps
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrap adds authentication (unless public) and the access log.
func (s *Server) wrap(rt route, h func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clock.Now()
		sw := &statusWriter{ResponseWriter: w}
		principal := ""
		defer func() {
			s.log.Debug("http", "method", r.Method, "route", rt.pattern(), "status", sw.status,
				"principal", principal, "ms", s.clock.Now().Sub(start).Milliseconds())
		}()
		// Close ends every request, however the handler is served.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.ctx, cancel)()
		if !rt.public {
			sess, err := s.authenticate(r)
			if err != nil {
				writeError(sw, err, nil)
				return
			}
			principal = sess.Principal
			authenticated(r)
			ctx = context.WithValue(ctx, sessionKey{}, sess)
		}
		h(sw, r.WithContext(ctx))
	})
}
