package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
)

// HTTPOption adjusts DialHTTP.
type HTTPOption func(*httpConfig)

type httpConfig struct {
	name string
	rt   http.RoundTripper
}

// WithClientName names the calling program in hello and the User-Agent.
func WithClientName(name string) HTTPOption { return func(c *httpConfig) { c.name = name } }

// WithRoundTripper replaces the HTTP transport (tests, proxies, TLS
// settings). The default is a clone of http.DefaultTransport.
func WithRoundTripper(rt http.RoundTripper) HTTPOption { return func(c *httpConfig) { c.rt = rt } }

// ordinaryCallTimeout bounds an ordinary call end to end. Such a call
// answers in milliseconds; the bound is for a daemon or proxy that accepted
// the connection and then never answers, which a context.Background() caller
// would otherwise wait on forever. Calls that may legitimately wait (a
// lease request in the queue, a followed event stream, command output)
// carry no such bound: their context governs them.
const ordinaryCallTimeout = 30 * time.Second

// waitingOps may outlast ordinaryCallTimeout even without a push callback:
// they queue, run commands or act on every device.
var waitingOps = map[string]bool{
	contract.LeaseRequest.Name:    true,
	contract.EventsSubscribe.Name: true,
	contract.DeviceExec.Name:      true,
	contract.DoctorRun.Name:       true,
	contract.CleanupRun.Name:      true,
	contract.NukeRun.Name:         true,
	// A resource call runs native commands within its own timeoutMs
	// (five minutes by default).
	contract.ResourcesGet.Name:       true,
	contract.ResourcesSet.Name:       true,
	contract.ResourcesReconcile.Name: true,
	// These wait for a device to be made, booted or torn down: a session
	// prepared without waitMs answers once its device is ready, a slot
	// once it is reconciled, a scope reset within waitMs (up to 60 s), a
	// clean stop and a device release once the teardown is done.
	contract.SessionPrepare.Name: true,
	contract.SessionRelease.Name: true,
	contract.SlotAcquire.Name:    true,
	contract.SlotResetScope.Name: true,
	contract.DaemonStop.Name:     true,
	contract.DeviceRelease.Name:  true,
}

// DialHTTP connects to a daemon or gateway's HTTP API at baseURL (for
// example http://127.0.0.1:7420) with a bearer token, and performs hello:
// the token decides the role and principal, which Hello() reports. Every
// typed call then works as over the socket. A daemon that cannot be reached
// is DAEMON_NOT_RUNNING.
//
// HTTP has no connection to lose, so the client keeps the socket client's
// promise differently: the first transport failure (refused, reset, timed
// out, a stream cut short) marks the client lost — Done closes, the
// OnConnectionLost hooks run, and every later call fails with
// CONNECTION_LOST. It never retries or redials on its own.
func DialHTTP(ctx context.Context, baseURL, token string, opts ...HTTPOption) (*Client, error) {
	cfg := httpConfig{name: "simlock-go-client"}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, contract.Errorf(contract.CodeBadRequest, "%q is not an http:// or https:// URL", baseURL)
	}
	if token == "" {
		return nil, contract.Errorf(contract.CodeUnauthenticated, "the HTTP API needs a token")
	}
	t := newHTTPTransport(u.String(), token, cfg)
	c := &Client{t: t}
	err = c.handshake(ctx, DefaultHandshakeTimeout, contract.HelloIn{
		Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Client:   cfg.name,
	}, u.Redacted())
	if err != nil {
		t.close()
		if IsCode(err, contract.CodeConnectionLost) {
			return nil, contract.Errorf(contract.CodeDaemonNotRunning, "no simlock daemon answers at %s: %s", u.Redacted(), contract.AsError(err).Message).
				WithDetails("url", u.Redacted())
		}
		return nil, err
	}
	c.redial = func(ctx context.Context) (*Client, error) { return DialHTTP(ctx, baseURL, token, opts...) }
	return c, nil
}

// httpTransport carries each call as POST /v1/ops/{name}.
type httpTransport struct {
	base, token, ua string
	ordinary        *http.Client // bounded by ordinaryCallTimeout
	waiting         *http.Client // bounded by the caller's context only

	// root is cancelled once the client is lost or closed, ending every
	// call and stream in flight.
	root   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	err     error
	doneCh  chan struct{}
	lostFns []func(error)
}

func newHTTPTransport(base, token string, cfg httpConfig) *httpTransport {
	rt := cfg.rt
	if rt == nil {
		ht := http.DefaultTransport.(*http.Transport).Clone()
		ht.DialContext = (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		ht.TLSHandshakeTimeout = DefaultHandshakeTimeout
		rt = ht
	}
	root, cancel := context.WithCancel(context.Background())
	return &httpTransport{base: base, token: token, ua: cfg.name,
		ordinary: &http.Client{Transport: rt, Timeout: ordinaryCallTimeout},
		waiting:  &http.Client{Transport: rt},
		root:     root, cancel: cancel, doneCh: make(chan struct{})}
}

func (t *httpTransport) close() error {
	t.lose(contract.Errorf(contract.CodeConnectionLost, "the client was closed"))
	return nil
}

func (t *httpTransport) done() <-chan struct{} { return t.doneCh }

// onNotice: HTTP has no connection to push on; polling clients read the
// same facts from the notices array of a renew.
func (t *httpTransport) onNotice(func(string, json.RawMessage)) {}

func (t *httpTransport) onLost(f func(error)) {
	t.mu.Lock()
	if t.err != nil {
		err := t.err
		t.mu.Unlock()
		f(err)
		return
	}
	t.lostFns = append(t.lostFns, f)
	t.mu.Unlock()
}

// lose marks the client lost once and runs the hooks.
func (t *httpTransport) lose(err error) {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.err = err
	hooks := t.lostFns
	t.lostFns = nil
	t.mu.Unlock()
	t.cancel()
	close(t.doneCh)
	for _, f := range hooks {
		f(err)
	}
}

func (t *httpTransport) lostErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// failed turns a transport-level error into the call's error: the caller's
// own cancellation stays itself; anything else loses the client.
func (t *httpTransport) failed(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if lost := t.lostErr(); lost != nil {
		return lost
	}
	ce := contract.Errorf(contract.CodeConnectionLost, "%s over HTTP: %v", method, err)
	t.lose(ce)
	return ce
}

// call sends one operation. With a push callback, a waiting operation or
// stream, it asks for NDJSON (pushes as lines, then the result) and no
// timeout applies; with stream, pushes keep flowing after the result until
// ctx ends.
func (t *httpTransport) call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage), stream bool) error {
	if err := t.lostErr(); err != nil {
		return err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return contract.Errorf(contract.CodeBadRequest, "encode %s input: %v", method, err)
	}
	long := notify != nil || stream || waitingOps[method]
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.root, cancel)
	release := func() { stop(); cancel() }
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, t.base+"/v1/ops/"+url.PathEscape(method), bytes.NewReader(body))
	if err != nil {
		release()
		return contract.Errorf(contract.CodeBadRequest, "build %s request: %v", method, err)
	}
	req.Header.Set("Authorization", "Bearer "+t.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", t.ua)
	hc := t.ordinary
	if long {
		hc = t.waiting
		req.Header.Set("Accept", "application/x-ndjson")
		if stream {
			req.Header.Set("Prefer", "keep-open")
		}
	} else {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		release()
		return t.failed(ctx, method, err)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/x-ndjson" {
		defer release()
		defer resp.Body.Close()
		return t.readJSON(ctx, method, resp, out)
	}
	return t.readLines(ctx, method, resp, out, notify, stream, release)
}

// readJSON reads a plain answer: the output, or {"error": ...}.
func (t *httpTransport) readJSON(ctx context.Context, method string, resp *http.Response, out any) error {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return t.failed(ctx, method, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return contract.Errorf(contract.CodeInternal, "decode %s result: %v", method, err)
			}
		}
		return nil
	}
	return errorFromBody(resp.StatusCode, b)
}

// errorFromBody reads the contract error of a refusal; anything else (a
// proxy's error page) is UNKNOWN_DAEMON_ERROR naming the status.
func errorFromBody(status int, b []byte) error {
	var env struct {
		Error *contract.Error `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Code != "" {
		return contract.Normalize(env.Error)
	}
	snippet := strings.TrimSpace(string(b))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	return contract.Errorf(contract.CodeUnknownDaemonError, "HTTP %d without a simlock error: %s", status, snippet).
		WithDetails("httpStatus", status)
}

// line is one NDJSON message: a push, the result, or the error.
type line struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *contract.Error `json:"error"`
}

func (t *httpTransport) readLines(ctx context.Context, method string, resp *http.Response, out any, notify func(string, json.RawMessage), stream bool, release func()) error {
	dec := json.NewDecoder(resp.Body)
	finish := func() { resp.Body.Close(); release() }
	for {
		var m line
		if err := dec.Decode(&m); err != nil {
			finish()
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("the answer ended without a result (HTTP %d)", resp.StatusCode)
			}
			return t.failed(ctx, method, err)
		}
		switch {
		case m.Error != nil:
			finish()
			return contract.Normalize(m.Error)
		case m.Method != "":
			if notify != nil {
				notify(m.Method, m.Params)
			}
			continue
		case m.Result == nil:
			finish()
			return contract.Errorf(contract.CodeUnknownDaemonError, "%s: an answer line without result, error or method", method)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				finish()
				return contract.Errorf(contract.CodeInternal, "decode %s result: %v", method, err)
			}
		}
		if !stream {
			finish()
			return nil
		}
		go t.follow(ctx, method, dec, notify, finish)
		return nil
	}
}

// follow delivers the pushes that outlive a result until ctx ends. The
// server keeps such a stream open for as long as it runs, so its end while
// the caller still listens means the daemon went away.
func (t *httpTransport) follow(ctx context.Context, method string, dec *json.Decoder, notify func(string, json.RawMessage), finish func()) {
	defer finish()
	for {
		var m line
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended")
			}
			_ = t.failed(ctx, method, err)
			return
		}
		if m.Method != "" && notify != nil {
			notify(m.Method, m.Params)
		}
	}
}
