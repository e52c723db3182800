package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
)

// The web console: static assets served at / and /console/, and the
// one-time-code exchange that signs a browser in without the credential
// ever travelling in a URL (docs/adr/0027-console-sign-in-by-one-time-code.md).
//
// The assets call the same /v1 routes as any client, with a bearer token
// kept in the tab's sessionStorage: either an API token pasted into the
// login form, or a console session token obtained by exchanging a code.

//go:embed console
var consoleAssets embed.FS

const (
	// ConsoleCodeTTL is how long a one-time code can be exchanged.
	ConsoleCodeTTL = 60 * time.Second
	// ConsoleSessionTTL bounds a console session however active it is; the
	// operator runs `simlock console` again after it.
	ConsoleSessionTTL = 12 * time.Hour
	// maxConsoleCodes and maxConsoleSessions bound the tables: minting past
	// them forgets the entry closest to expiring.
	maxConsoleCodes    = 64
	maxConsoleSessions = 256
	// consoleSessionPrefix marks a console session token, so the auth path
	// knows to look in this table rather than the token store.
	consoleSessionPrefix = "slcs_"
)

// ConsoleCode is POST /v1/console/codes's body.
type ConsoleCode struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Path is where a browser exchanges the code: the console's address
	// with the code in the fragment, which browsers never send to a server.
	Path string `json:"path"`
}

// ConsoleExchangeIn is POST /v1/console/session's body.
type ConsoleExchangeIn struct {
	Code string `json:"code"`
}

// ConsoleSession is POST /v1/console/session's answer: a bearer token for
// the console's own calls, valid until ExpiresAt or the daemon stops.
type ConsoleSession struct {
	Token     string    `json:"token"`
	Role      string    `json:"role"`
	Principal string    `json:"principal"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// consoleGrant is what a code or a session stands for: the session the
// minting credential had, and that credential, re-checked on every use so
// that revoking the token (or restarting the daemon, for the admin secret)
// ends the console session too.
type consoleGrant struct {
	sess      contract.Session
	secret    string
	adminOnly bool // secret is the daemon's admin secret, checked through hello
	expiresAt time.Time
}

// consoleTable holds the one-time codes and console sessions, keyed by the
// SHA-256 of their secret so a map lookup compares no secret bytes.
type consoleTable struct {
	mu       sync.Mutex
	codes    map[string]consoleGrant
	sessions map[string]consoleGrant
}

func newConsoleTable() *consoleTable {
	return &consoleTable{codes: map[string]consoleGrant{}, sessions: map[string]consoleGrant{}}
}

func digest(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func randomToken(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return prefix + hex.EncodeToString(b)
}

// put adds g under key, first dropping expired entries and, when the table
// is full, the entry that expires soonest.
func put(m map[string]consoleGrant, key string, g consoleGrant, now time.Time, limit int) {
	for k, v := range m {
		if !now.Before(v.expiresAt) {
			delete(m, k)
		}
	}
	for len(m) >= limit {
		first := ""
		for k, v := range m {
			if first == "" || v.expiresAt.Before(m[first].expiresAt) {
				first = k
			}
		}
		delete(m, first)
	}
	m[key] = g
}

// mint stores a new one-time code for g.
func (t *consoleTable) mint(g consoleGrant, now time.Time) (string, time.Time) {
	code := randomToken("", 16)
	g.expiresAt = now.Add(ConsoleCodeTTL)
	t.mu.Lock()
	defer t.mu.Unlock()
	put(t.codes, digest(code), g, now, maxConsoleCodes)
	return code, g.expiresAt
}

// redeem consumes code: it is removed whether or not it is still valid, so
// it can be tried once.
func (t *consoleTable) redeem(code string, now time.Time) (consoleGrant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := digest(code)
	g, ok := t.codes[k]
	delete(t.codes, k)
	if !ok || !now.Before(g.expiresAt) {
		return consoleGrant{}, false
	}
	return g, true
}

func (t *consoleTable) open(g consoleGrant, now time.Time) (string, time.Time) {
	tok := randomToken(consoleSessionPrefix, 32)
	g.expiresAt = now.Add(ConsoleSessionTTL)
	t.mu.Lock()
	defer t.mu.Unlock()
	put(t.sessions, digest(tok), g, now, maxConsoleSessions)
	return tok, g.expiresAt
}

func (t *consoleTable) session(tok string, now time.Time) (consoleGrant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := digest(tok)
	g, ok := t.sessions[k]
	if ok && !now.Before(g.expiresAt) {
		delete(t.sessions, k)
		ok = false
	}
	return g, ok
}

func (t *consoleTable) close(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, digest(tok))
}

// consoleAuthenticate resolves a console session token (ok false when the
// bearer is not one). The credential behind it is checked again, so a
// revoked token ends its console sessions at their next call.
func (s *Server) consoleAuthenticate(ctx context.Context, bearer string) (contract.Session, bool, *contract.Error) {
	if !strings.HasPrefix(bearer, consoleSessionPrefix) {
		return contract.Session{}, false, nil
	}
	g, ok := s.console.session(bearer, s.clock.Now())
	if !ok {
		return contract.Session{}, true, contract.Errorf(contract.CodeUnauthenticated, "the console session has expired or was signed out").
			WithNext("run `simlock console` again, or sign in with an API token")
	}
	if _, cerr := s.verifyCredential(ctx, g.secret, g.adminOnly); cerr != nil {
		s.console.close(bearer)
		return contract.Session{}, true, contract.Errorf(contract.CodeUnauthenticated, "the credential behind this console session is no longer valid").
			WithNext("run `simlock console` again, or sign in with an API token")
	}
	return g.sess, true, nil
}

// verifyCredential checks a credential that may mint a code: an agent or
// operator API token, or (on the daemon's machine, where `simlock console`
// reads it from the home) the daemon's admin secret. adminOnly skips the
// token store.
func (s *Server) verifyCredential(ctx context.Context, secret string, adminOnly bool) (consoleGrant, *contract.Error) {
	if !adminOnly {
		role, principal, ok, err := s.b.Authenticate(ctx, secret)
		if err != nil {
			s.log.Error("token lookup failed", "err", err)
			return consoleGrant{}, contract.Errorf(contract.CodeInternal, "the token could not be checked")
		}
		if ok {
			sess := contract.Session{Principal: principal, Compatible: true}
			switch role {
			case contract.TokenRoleOperator:
				sess.Role = contract.RoleAdmin
			case contract.TokenRoleAgent:
				sess.Role = contract.RoleAgent
			default:
				return consoleGrant{}, contract.Errorf(contract.CodeForbidden, "a %q token cannot open the console", role)
			}
			return consoleGrant{sess: sess, secret: secret}, nil
		}
	}
	// Not a stored token: the admin secret, which only hello can check.
	_, hs, herr := s.b.Hello(ctx, contract.HelloIn{Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Client: "console", Principal: "console", Credential: secret})
	if herr != nil || hs.Role != contract.RoleAdmin {
		return consoleGrant{}, contract.Errorf(contract.CodeUnauthenticated, "unknown or revoked token")
	}
	return consoleGrant{sess: contract.Session{Principal: "console", Role: contract.RoleAdmin, Compatible: true},
		secret: secret, adminOnly: true}, nil
}

// mountConsole adds the console's routes to mux: its pages (no token: they
// hold no data) and the code exchange.
func (s *Server) mountConsole(mux *http.ServeMux) {
	page := route{method: "GET", path: "/", public: true, summary: "web console"}
	mux.Handle("GET /{$}", s.wrap(page, s.serveConsoleAsset))
	mux.Handle("GET /console/{file}", s.wrap(page, s.serveConsoleAsset))
	mint := route{method: "POST", path: "/v1/console/codes", public: true}
	mux.Handle(mint.pattern(), s.wrap(mint, s.serveConsoleMint))
	exchange := route{method: "POST", path: "/v1/console/session", public: true}
	mux.Handle(exchange.pattern(), s.wrap(exchange, s.serveConsoleExchange))
	signOut := route{method: "DELETE", path: "/v1/console/session"}
	mux.Handle(signOut.pattern(), s.wrap(signOut, s.serveConsoleSignOut))
	// Browsers ask for /favicon.ico on their own, without a token: behind
	// the auth wall it answered 401 and every page load logged an error.
	icon := route{method: "GET", path: "/favicon.ico", public: true, summary: "the console's icon"}
	mux.Handle("GET /favicon.ico", s.wrap(icon, func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, "favicon.ico") }))
}

// assetTypes are the console's own content types where the system's MIME
// table may differ (.ico has two names in the wild).
var assetTypes = map[string]string{".ico": "image/x-icon", ".svg": "image/svg+xml"}

func (s *Server) serveConsoleAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "" {
		name = "index.html"
	}
	serveAsset(w, r, name)
}

// serveAsset writes the embedded console file name.
func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(consoleAssets, path.Join("console", path.Clean("/"+name)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	ct := assetTypes[path.Ext(name)]
	if ct == "" {
		ct = mime.TypeByExtension(path.Ext(name))
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	// Everything the page runs comes from here; nothing may frame it, and
	// no request it makes carries the page's address (with its fragment).
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func bearerOf(r *http.Request) string {
	scheme, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(secret)
}

// serveConsoleMint answers POST /v1/console/codes: a one-time code standing
// for the caller's credential, for `simlock console` to put in a URL.
func (s *Server) serveConsoleMint(w http.ResponseWriter, r *http.Request) {
	secret := bearerOf(r)
	if secret == "" {
		writeError(w, contract.Errorf(contract.CodeUnauthenticated, "minting a console code needs a bearer token (an API token, or the daemon's admin secret)"), nil)
		return
	}
	if strings.HasPrefix(secret, consoleSessionPrefix) {
		writeError(w, contract.Errorf(contract.CodeForbidden, "a console session cannot mint codes; use the credential it came from"), nil)
		return
	}
	g, cerr := s.verifyCredential(r.Context(), secret, false)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	authenticated(r)
	code, exp := s.console.mint(g, s.clock.Now())
	s.log.Info("console code minted", "principal", g.sess.Principal, "role", g.sess.Role, "expiresAt", exp)
	writeJSON(w, http.StatusCreated, ConsoleCode{Code: code, ExpiresAt: exp, Path: "/#code=" + code})
}

// serveConsoleExchange answers POST /v1/console/session: a valid, unused
// code becomes a console session token. The code is spent by the attempt.
func (s *Server) serveConsoleExchange(w http.ResponseWriter, r *http.Request) {
	body, cerr := readBody(w, r)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	var in ConsoleExchangeIn
	if err := contract.Decode(body, &in); err != nil {
		writeError(w, contract.AsError(err), nil)
		return
	}
	now := s.clock.Now()
	g, ok := s.console.redeem(in.Code, now)
	if !ok || in.Code == "" {
		writeError(w, contract.Errorf(contract.CodeUnauthenticated, "the console code is unknown, already used or expired").
			WithNext("run `simlock console` again for a fresh link (codes last 60 s and work once)"), nil)
		return
	}
	// The credential may have been revoked since the code was minted.
	if _, cerr := s.verifyCredential(r.Context(), g.secret, g.adminOnly); cerr != nil {
		writeError(w, contract.Errorf(contract.CodeUnauthenticated, "the credential behind this code is no longer valid"), nil)
		return
	}
	authenticated(r)
	tok, exp := s.console.open(g, now)
	s.log.Info("console session opened", "principal", g.sess.Principal, "role", g.sess.Role)
	writeJSON(w, http.StatusCreated, ConsoleSession{Token: tok, Role: string(g.sess.Role), Principal: g.sess.Principal, ExpiresAt: exp})
}

// serveConsoleSignOut ends the calling console session (DELETE
// /v1/console/session); with an API token it does nothing.
func (s *Server) serveConsoleSignOut(w http.ResponseWriter, r *http.Request) {
	tok := bearerOf(r)
	closed := strings.HasPrefix(tok, consoleSessionPrefix)
	if closed {
		s.console.close(tok)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"signedOut": closed})
}
