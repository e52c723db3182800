package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/sessions"
)

// Session acquisition (--session-config): the MCP process is the keeper of
// one broker session. It prepares the session before answering
// initialize, publishes the flat receipt under the experimental
// capability, heartbeats while it runs and releases the session when
// stdin closes or its parent exits; cut off while the session is still
// being prepared, it abandons the request instead.

const (
	// SessionConfigEnv holds the session config when --session-config is
	// not given (the flag wins).
	SessionConfigEnv = "SIMLOCK_SESSION_CONFIG"
	// SessionOwnerTokenEnv names the owner token; without it each process
	// makes its own, so only this process can continue the session.
	SessionOwnerTokenEnv = "SIMLOCK_SESSION_OWNER_TOKEN"
	// SessionCapability is the initialize capability (under experimental)
	// that carries the preparation's receipt.
	SessionCapability = "simlock/session"
)

// SessionOptions is a session the MCP server prepares before initialize.
type SessionOptions struct {
	Config     contract.SessionConfig
	OwnerToken string // "" makes a random one for this process
}

// LoadSessionConfig reads --session-config (flag wins over the env value);
// ok is false when neither is set.
func LoadSessionConfig(flag, env string, readFile func(string) ([]byte, error)) (contract.SessionConfig, bool, error) {
	v := flag
	if v == "" {
		v = env
	}
	if v == "" {
		return contract.SessionConfig{}, false, nil
	}
	cfg, err := sessions.LoadConfig(v, readFile)
	return cfg, err == nil, err
}

const sessionInstructions = `
This server holds one simlock session prepared before initialize (see the experimental capability simlock/session: its status,
sessionId, leaseId and device). Use that lease for your work; do not lease other devices. Ending this server releases the session.`

// acquired is the session this MCP process keeps.
type acquired struct {
	mu      sync.Mutex
	receipt contract.SessionReceipt
	failure *contract.Error // why there is no ready session
	token   string
}

func (a *acquired) ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failure == nil && a.receipt.Status == contract.SessionReady
}

// flat is what the capability publishes: the receipt's own fields at the
// top, or a failure when the daemon never answered with one.
func (a *acquired) flat() map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]any{}
	b, _ := json.Marshal(a.receipt)
	_ = json.Unmarshal(b, &out)
	if a.failure != nil && a.receipt.Failure == nil {
		out["status"] = contract.SessionFailed
		out["failure"] = contract.SessionFailure{Code: a.failure.Code, Message: a.failure.Message, Retryable: a.failure.Retryable,
			RetryAfterMs: a.failure.RetryAfterMs, NextAction: a.failure.NextAction}
	}
	return out
}

// refusal is the typed error every tool call gets without a ready session.
func (a *acquired) refusal() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failure != nil {
		return a.failure
	}
	if f := a.receipt.Failure; f != nil {
		e := contract.Errorf(f.Code, "%s", f.Message)
		e.Retryable, e.RetryAfterMs = f.Retryable, f.RetryAfterMs
		if f.NextAction != "" {
			e.NextAction = f.NextAction
		}
		return e.WithDetails("requestId", a.receipt.RequestID, "retryRequires", f.RetryRequires)
	}
	return contract.Errorf(contract.CodeSessionEnded, "the session is %s", a.receipt.Status)
}

// decorate publishes the receipt in the initialize answer.
func (a *acquired) decorate(opts *mcpsdk.ServerOptions) {
	if opts.Capabilities == nil {
		opts.Capabilities = &mcpsdk.ServerCapabilities{}
	}
	if opts.Capabilities.Experimental == nil {
		opts.Capabilities.Experimental = map[string]any{}
	}
	opts.Capabilities.Experimental[SessionCapability] = a.flat()
	opts.Instructions += sessionInstructions
}

// sessionLifecycleTools lease or release devices; a session's server
// holds exactly its session's lease, which ends with the server, so they
// are neither listed nor answered.
var sessionLifecycleTools = []string{ToolLeaseSimulator, ToolReleaseSimulator}

// tools lists nothing without a ready session, and never the lifecycle
// tools.
func (a *acquired) tools(all []tool) []tool {
	if !a.ready() {
		return nil
	}
	var out []tool
	for _, t := range all {
		if !slices.Contains(sessionLifecycleTools, t.decl.Name) {
			out = append(out, t)
		}
	}
	return out
}

// install refuses every tool call with the typed failure when there is no
// ready session (an unlisted tool included), and a lifecycle tool always.
func (a *acquired) install(srv *mcpsdk.Server) {
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			if !a.ready() {
				return errorResult(a.refusal()), nil
			}
			if call, ok := req.(*mcpsdk.CallToolRequest); ok && call.Params != nil && slices.Contains(sessionLifecycleTools, call.Params.Name) {
				return errorResult(contract.Errorf(contract.CodeForbidden, "this MCP server keeps session %s and leases nothing else", a.sessionID()).
					WithDetails("tool", call.Params.Name).WithNext("use the session's lease; ending this server releases it")), nil
			}
			return next(ctx, method, req)
		}
	})
}

func (a *acquired) sessionID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.receipt.SessionID
}

// ownLease is the lease a device or resource tool acts on: the session's,
// and no other, even one the daemon would let this principal drive.
func (a *acquired) ownLease(id string) (string, error) {
	a.mu.Lock()
	own := a.receipt.LeaseID
	a.mu.Unlock()
	if own == "" {
		return "", a.refusal()
	}
	if id != "" && id != own {
		return "", contract.Errorf(contract.CodeForbidden, "lease %s is not this session's; the tools act only on lease %s", id, own).
			WithDetails("leaseId", id).WithNext("omit leaseId, or pass the session's leaseId from the initialize capability")
	}
	return own, nil
}

// aheadReader reads stdin ahead of the server, so its end is seen while
// the preparation still runs (and cancels it).
type aheadReader struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte
	err  error
	eof  chan struct{}
}

func newAheadReader(r io.Reader) *aheadReader {
	a := &aheadReader{eof: make(chan struct{})}
	a.cond = sync.NewCond(&a.mu)
	go func() {
		b := make([]byte, 32<<10)
		for {
			n, err := r.Read(b)
			a.mu.Lock()
			a.buf = append(a.buf, b[:n]...)
			if err != nil {
				a.err = err
			}
			a.cond.Broadcast()
			a.mu.Unlock()
			if err != nil {
				close(a.eof)
				return
			}
		}
	}()
	return a
}

func (a *aheadReader) Read(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.buf) == 0 && a.err == nil {
		a.cond.Wait()
	}
	if len(a.buf) > 0 {
		n := copy(p, a.buf)
		a.buf = a.buf[n:]
		return n, nil
	}
	return 0, a.err
}

func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "mcp_" + hex.EncodeToString(b[:])
}

// runSessionAcquire serves MCP as the keeper of one session.
func runSessionAcquire(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) error {
	life, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSession(o, life)
	a := &acquired{token: o.Session.OwnerToken}
	if a.token == "" {
		a.token = randomToken()
	}
	s.acquired = a
	in := newAheadReader(stdin)

	ownerExited := false
	var ownerMu sync.Mutex
	parentGone := o.ParentWatch.Watch(life)
	prep, stopPrep := context.WithCancel(life)
	go func() {
		select {
		case <-parentGone:
			o.Logger.Info("parent process exited; ending the MCP session")
			ownerMu.Lock()
			ownerExited = true
			ownerMu.Unlock()
			cancel()
		case <-in.eof:
			stopPrep() // an EOF during the preparation cancels it; the server still answers what it read
		case <-life.Done():
		}
	}()

	a.prepare(prep, s, o)
	cancelled := prep.Err() != nil
	stopPrep()
	if cancelled && a.interrupted() {
		// EOF, a signal or the owner's exit cut the preparation short: the
		// daemon would go on and hand a device to nobody, so the keeper
		// abandons the request, which cancels the preparation there.
		a.abandon(s, o)
	}
	hbDone := make(chan struct{})
	if a.ready() {
		go a.heartbeat(life, s, o, hbDone)
	} else {
		close(hbDone)
	}

	err := s.server().Run(life, &lineTransport{r: in, w: stdout, log: o.Logger})
	cancel()
	<-hbDone
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		o.Logger.Error("MCP transport failed", "err", err)
	}
	ownerMu.Lock()
	exited := ownerExited
	ownerMu.Unlock()
	return errors.Join(err, a.release(s, exited), s.close())
}

// prepare asks the daemon for the session; the daemon is never started for
// it, since a keeper that launched its own daemon would hold nothing the
// caller can find again.
func (a *acquired) prepare(ctx context.Context, s *session, o Options) {
	c, err := s.conn(ctx, false)
	if err == nil {
		var r contract.SessionReceipt
		r, err = client.Do(ctx, c, contract.SessionPrepare, contract.SessionPrepareIn{Config: o.Session.Config, OwnerToken: a.token})
		if err == nil {
			a.mu.Lock()
			a.receipt = r
			a.mu.Unlock()
			o.Logger.Info("session prepared", "requestId", r.RequestID, "status", r.Status, "session", r.SessionID)
			return
		}
	}
	ce := asContractError(err)
	a.mu.Lock()
	a.receipt = contract.SessionReceipt{ContractVersion: 1, RequestID: o.Session.Config.RequestID, Status: contract.SessionFailed}
	a.failure = ce
	a.mu.Unlock()
	o.Logger.Warn("session preparation failed", "requestId", o.Session.Config.RequestID, "code", ce.Code, "err", ce.Message)
}

// interrupted reports whether the preparation ended without the
// daemon's answer (the call was cut short), as opposed to a receipt.
func (a *acquired) interrupted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failure != nil
}

// abandon cancels the keeper's request on the daemon (session.abandon):
// a preparation still running there is cancelled and its device torn
// down, and the request ends SESSION_ABANDONED. It never starts a daemon.
func (a *acquired) abandon(s *session, o Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := o.Session.Config.RequestID
	c, err := s.conn(ctx, false)
	if err == nil {
		var r contract.SessionReceipt
		r, err = client.Do(ctx, c, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: req, OwnerToken: a.token})
		if err == nil {
			a.mu.Lock()
			a.receipt, a.failure = r, nil
			a.mu.Unlock()
			o.Logger.Info("the preparation was interrupted; abandoned its request", "requestId", req, "status", r.Status,
				"cleanupPending", r.CleanupPending)
			return
		}
	}
	o.Logger.Warn("could not abandon the interrupted preparation; the daemon ends it when no keeper heartbeats", "requestId", req, "err", err)
}

// heartbeat keeps the session (client.KeepSession) until ctx ends, over
// the session's client, which reconnects to a daemon that listens and
// never starts one. A session that ended under the keeper records why, so
// every later tool call is refused with it.
func (a *acquired) heartbeat(ctx context.Context, s *session, o Options, done chan struct{}) {
	defer close(done)
	sid := a.receipt.SessionID
	err := client.KeepSession(ctx, client.KeepSessionOptions{SessionID: sid, OwnerToken: a.token, Clock: o.Clock,
		// The first heartbeat goes at once: the ready answer carries no
		// deadline, and the broker's heartbeat clock started when the
		// session went live, before that answer travelled here. A fixed
		// delay overran a short TTL on a loaded machine; the first answer
		// gives the real deadline and paces the rest.
		Conn: func(ctx context.Context) (*client.Client, error) { return s.conn(ctx, false) },
		OnRetry: func(_ context.Context, err error) {
			o.Logger.Warn("session heartbeat failed; trying again", "session", sid, "err", err)
		}})
	if ce := contract.AsError(err); ce != nil {
		o.Logger.Warn("the session ended under its keeper", "session", sid, "code", ce.Code)
		a.mu.Lock()
		a.failure = ce
		a.mu.Unlock()
	}
}

// release gives the session back on the way out: a plain release after
// stdin's end or a signal, session_owner_exited when the parent died.
func (a *acquired) release(s *session, ownerExited bool) error {
	if !a.ready() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.conn(ctx, false)
	if err != nil {
		return err
	}
	in := contract.SessionReleaseIn{SessionID: a.receipt.SessionID, OwnerToken: a.token}
	if ownerExited {
		in.Reason = "session_owner_exited"
	}
	budget := int64(5000) // the release is durable once answered; cleanup may go on
	in.ReplyBudgetMs = &budget
	out, err := client.Do(ctx, c, contract.SessionRelease, in)
	if err != nil {
		return err
	}
	s.log.Info("session released", "session", in.SessionID, "outcome", out.Outcome)
	return nil
}
