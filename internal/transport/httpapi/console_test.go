package httpapi_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

// mintCode asks for a one-time console code with credential.
func (f *fixture) mintCode(credential string) httpapi.ConsoleCode {
	f.t.Helper()
	var c httpapi.ConsoleCode
	if r := f.call("POST", "/v1/console/codes", credential, "", &c); r.StatusCode != 201 || c.Code == "" {
		f.t.Fatalf("mint: status %d, %+v", r.StatusCode, c)
	}
	if c.Path != "/#code="+c.Code {
		f.t.Fatalf("the code's path %q does not carry it in the fragment", c.Path)
	}
	return c
}

func (f *fixture) exchange(code string) (httpapi.ConsoleSession, int) {
	f.t.Helper()
	var s httpapi.ConsoleSession
	r := f.call("POST", "/v1/console/session", "", `{"code":"`+code+`"}`, &s)
	return s, r.StatusCode
}

func (f *fixture) adminSecret() string {
	f.t.Helper()
	b, err := os.ReadFile(config.PathsFor(f.st.Home).AdminToken)
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A code works exactly once, and the session it opens carries the role of
// the credential that minted it.
func TestConsoleCodeIsSingleUse(t *testing.T) {
	f := newFixture(t, 1)
	c := f.mintCode(f.operator)
	if !c.ExpiresAt.Equal(f.clk.Now().Add(httpapi.ConsoleCodeTTL)) {
		t.Fatalf("code expires at %s, want %s after now", c.ExpiresAt, httpapi.ConsoleCodeTTL)
	}
	s, status := f.exchange(c.Code)
	if status != 201 || !strings.HasPrefix(s.Token, "slcs_") || s.Role != string(contract.RoleAdmin) || s.Principal != f.principal(f.operator) {
		t.Fatalf("exchange: %d %+v", status, s)
	}
	if s.Token == f.operator || strings.Contains(s.Token, f.operator) {
		t.Fatal("the session token is the credential itself")
	}
	if _, status := f.exchange(c.Code); status != 401 {
		t.Fatalf("second exchange of the same code: %d, want 401", status)
	}
	// The session is an operator session: an admin-only route answers.
	if r := f.call("GET", "/v1/devices", s.Token, "", nil); r.StatusCode != 200 {
		t.Fatalf("admin route with the console session: %d", r.StatusCode)
	}
}

func TestConsoleCodeExpires(t *testing.T) {
	f := newFixture(t, 1)
	early := f.mintCode(f.operator)
	late := f.mintCode(f.operator)
	f.clk.Advance(httpapi.ConsoleCodeTTL - time.Second)
	if _, status := f.exchange(early.Code); status != 201 {
		t.Fatalf("a code 59 s old: %d, want 201", status)
	}
	f.clk.Advance(time.Second)
	e, _ := f.refusal("POST", "/v1/console/session", "", `{"code":"`+late.Code+`"}`)
	if e.Code != contract.CodeUnauthenticated || !strings.Contains(e.NextAction, "simlock console") {
		t.Fatalf("an expired code: %+v", e)
	}
}

// A wrong code is refused and spends no valid one; malformed input is
// BAD_REQUEST.
func TestConsoleWrongCodeIsRefused(t *testing.T) {
	f := newFixture(t, 1)
	c := f.mintCode(f.operator)
	for _, wrong := range []string{"", "nope", strings.ToUpper(c.Code), c.Code[:len(c.Code)-1]} {
		if _, status := f.exchange(wrong); status != 401 {
			t.Fatalf("code %q: %d, want 401", wrong, status)
		}
	}
	if e, _ := f.refusal("POST", "/v1/console/session", "", `{"code":"x","token":"y"}`); e.Code != contract.CodeBadRequest {
		t.Fatalf("unknown field: %s", e.Code)
	}
	if _, status := f.exchange(c.Code); status != 201 {
		t.Fatalf("the valid code after wrong tries: %d", status)
	}
	// Minting needs a credential the daemon knows.
	for _, cred := range []string{"", "not-a-token"} {
		if e, _ := f.refusal("POST", "/v1/console/codes", cred, ""); e.Code != contract.CodeUnauthenticated {
			t.Fatalf("mint with %q: %s", cred, e.Code)
		}
	}
	if e, _ := f.refusal("POST", "/v1/console/codes", f.worker, ""); e.Code != contract.CodeForbidden {
		t.Fatalf("mint with a worker token: %s", e.Code)
	}
}

// On the daemon's machine `simlock console` mints with the admin secret;
// the secret opens a code and nothing else over HTTP.
func TestConsoleAdminSecretMintsButIsNoBearer(t *testing.T) {
	f := newFixture(t, 1)
	secret := f.adminSecret()
	if r := f.call("GET", "/v1/status", secret, "", nil); r.StatusCode != 401 {
		t.Fatalf("the admin secret as a bearer: %d", r.StatusCode)
	}
	s, status := f.exchange(f.mintCode(secret).Code)
	if status != 201 || s.Role != string(contract.RoleAdmin) {
		t.Fatalf("exchange: %d %+v", status, s)
	}
	if r := f.call("GET", "/v1/devices", s.Token, "", nil); r.StatusCode != 200 {
		t.Fatalf("admin route: %d", r.StatusCode)
	}
	// A console session cannot mint further codes.
	if e, _ := f.refusal("POST", "/v1/console/codes", s.Token, ""); e.Code != contract.CodeForbidden {
		t.Fatalf("mint with a console session: %s", e.Code)
	}
}

func TestConsoleAgentCodeOpensAnAgentSession(t *testing.T) {
	f := newFixture(t, 1)
	s, status := f.exchange(f.mintCode(f.agent).Code)
	if status != 201 || s.Role != string(contract.RoleAgent) {
		t.Fatalf("exchange: %d %+v", status, s)
	}
	if e, _ := f.refusal("GET", "/v1/devices", s.Token, ""); e.Code != contract.CodeForbidden {
		t.Fatalf("admin route with an agent console session: %s", e.Code)
	}
	if r := f.call("GET", "/v1/status", s.Token, "", nil); r.StatusCode != 200 {
		t.Fatalf("status: %d", r.StatusCode)
	}
}

// A session ends with its lifetime, on sign-out, and when the token that
// minted its code is revoked.
func TestConsoleSessionEnds(t *testing.T) {
	f := newFixture(t, 1)
	var tok contract.TokenCreateOut
	f.call("POST", "/v1/tokens", f.operator, `{"role":"operator","name":"console"}`, &tok)
	revoked, _ := f.exchange(f.mintCode(tok.Token).Code)
	signedOut, _ := f.exchange(f.mintCode(f.operator).Code)
	expiring, _ := f.exchange(f.mintCode(f.operator).Code)
	for _, s := range []string{revoked.Token, signedOut.Token, expiring.Token} {
		if r := f.call("GET", "/v1/status", s, "", nil); r.StatusCode != 200 {
			t.Fatalf("fresh session: %d", r.StatusCode)
		}
	}
	f.call("DELETE", "/v1/tokens/"+tok.ID, f.operator, "", nil)
	if r := f.call("GET", "/v1/status", revoked.Token, "", nil); r.StatusCode != 401 {
		t.Fatalf("session of a revoked token: %d", r.StatusCode)
	}
	if r := f.call("DELETE", "/v1/console/session", signedOut.Token, "", nil); r.StatusCode != 200 {
		t.Fatalf("sign out: %d", r.StatusCode)
	}
	if r := f.call("GET", "/v1/status", signedOut.Token, "", nil); r.StatusCode != 401 {
		t.Fatalf("signed-out session: %d", r.StatusCode)
	}
	f.clk.Advance(httpapi.ConsoleSessionTTL)
	if r := f.call("GET", "/v1/status", expiring.Token, "", nil); r.StatusCode != 401 {
		t.Fatalf("session past its lifetime: %d", r.StatusCode)
	}
}

// The pages need no token (they hold no data), come with a policy that
// lets them load only themselves, and nothing else is served from there.
func TestConsoleAssetsAreServed(t *testing.T) {
	f := newFixture(t, 1)
	for path, ct := range map[string]string{"/": "text/html", "/console/app.js": "text/javascript", "/console/app.css": "text/css"} {
		r := f.req("GET", path, "", "")
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), ct) || len(b) == 0 {
			t.Fatalf("GET %s: %d %q", path, r.StatusCode, r.Header.Get("Content-Type"))
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
	}
	for _, path := range []string{"/console/nope.js", "/console/..%2fconsole.go", "/console/"} {
		r := f.req("GET", path, "", "")
		r.Body.Close()
		if r.StatusCode == 200 {
			t.Fatalf("GET %s: 200", path)
		}
	}
	// Other unknown routes still need a token first.
	if r := f.req("GET", "/anything", "", ""); r.StatusCode != 401 {
		t.Fatalf("GET /anything without a token: %d", r.StatusCode)
	}
}

// The icon a browser asks for by itself is served without a token, as an
// icon; the page names its SVG twin, which the asset route serves.
func TestConsoleFaviconNeedsNoToken(t *testing.T) {
	f := newFixture(t, 1)
	for path, ct := range map[string]string{"/favicon.ico": "image/x-icon", "/console/favicon.svg": "image/svg+xml"} {
		r := f.req("GET", path, "", "")
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != ct || len(b) == 0 {
			t.Fatalf("GET %s without a token: %d %q, %d bytes", path, r.StatusCode, r.Header.Get("Content-Type"), len(b))
		}
		if path == "/favicon.ico" && !strings.HasPrefix(string(b), "\x00\x00\x01\x00") {
			t.Fatalf("GET /favicon.ico is not an icon file: % x", b[:min(8, len(b))])
		}
	}
	r := f.req("GET", "/", "", "")
	page, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(page), `rel="icon" href="/console/favicon.svg"`) {
		t.Fatal("the page names no icon")
	}
}
