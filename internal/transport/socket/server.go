// Package socket serves the daemon contract over a unix socket: JSON-RPC 2.0,
// one JSON object per line. It does framing and connection lifecycle only;
// every decision belongs to the dispatcher it is given.
package socket

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/connlimit"
	"github.com/simlock/simlock/internal/transport/outbox"
)

// MaxLine bounds one request line; a longer line closes the connection.
const MaxLine = 4 << 20

// Dispatcher is what the server needs from the daemon.
type Dispatcher interface {
	// Hello negotiates the protocol and resolves the session's role. On a
	// protocol mismatch it returns the error together with a session that
	// is marked incompatible (only daemon.stop may follow).
	Hello(ctx context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error)
	// Dispatch runs one operation. after, when non-nil, runs once the
	// response has been written.
	Dispatch(ctx context.Context, sess contract.Session, method string, params json.RawMessage, notify func(method string, params any)) (result any, after func(), err *contract.Error)
}

// Request is a JSON-RPC 2.0 request or notification.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC 2.0 response.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is the JSON-RPC error object; Data carries simlock's one error
// shape, which is what clients read.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    *contract.Error `json:"data"`
}

// Notification is a server push. Params carries "requestId" when the push
// belongs to a request.
type Notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// RPCCode maps a contract error to a JSON-RPC error code.
func RPCCode(e *contract.Error) int {
	switch e.Code {
	case contract.CodeUnknownOperation:
		return -32601
	case contract.CodeBadRequest:
		return -32602
	case contract.CodeInternal:
		return -32603
	}
	return -32000
}

func rpcError(e *contract.Error) *RPCError {
	return &RPCError{Code: RPCCode(e), Message: e.Message, Data: e}
}

// Server accepts connections and serves each one.
//
// Every connection writes through its own outbox: responses, progress,
// events and lease notices are queued without blocking whoever produced
// them (an engine goroutine, the notice relay, another client's request),
// and one writer per connection gives each write a deadline. A connection
// whose queue overflows or whose write outlives WriteTimeout is closed; as
// with any close, its leases stay and its queued requests are withdrawn.
type Server struct {
	D   Dispatcher
	Log *slog.Logger
	// WriteTimeout bounds one write to a client (default
	// outbox.DefaultStall).
	WriteTimeout time.Duration
	// MaxQueue bounds the messages waiting for one client (default
	// outbox.DefaultMaxItems).
	MaxQueue int
	// MaxConns caps the connections Serve holds open at once (0: the
	// connlimit default, a share of the fd limit; negative: no cap).
	MaxConns int

	mu    sync.Mutex
	conns map[net.Conn]*conn
	wg    sync.WaitGroup
}

// Push sends a notification to every live connection whose session
// principal is principal (lease-scoped facts go to the lease's owner). It
// never blocks: a connection that cannot take it is disconnected.
func (s *Server) Push(principal, method string, params any) {
	s.mu.Lock()
	var targets []*conn
	for _, c := range s.conns {
		if c != nil && c.principal() == principal {
			targets = append(targets, c)
		}
	}
	s.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	b, err := encode(Notification{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return
	}
	for _, c := range targets {
		c.box.Send(b)
	}
}

// Serve accepts on ln until it is closed or ctx ends. A temporary accept
// failure (no file descriptors for a moment) is retried with backoff, never
// the end of the listener: a daemon that holds its home lock must keep
// answering once descriptors free up.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[net.Conn]*conn{}
	}
	s.mu.Unlock()
	n := s.MaxConns
	if n == 0 {
		n = connlimit.Default()
	}
	ln = connlimit.Listen(ln, n)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var backoff connlimit.Backoff
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if connlimit.Temporary(err) {
				if backoff.Delay() == 0 && s.Log != nil {
					s.Log.Warn("accept failed; retrying with backoff", "err", err)
				}
				if !backoff.Wait(ctx) {
					return nil
				}
				continue
			}
			return err
		}
		backoff.Reset()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

// CloseAll closes every open connection and waits for their goroutines.
func (s *Server) CloseAll() {
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// conn is one client connection: a reader loop and an outbox.
type conn struct {
	c   net.Conn
	box *outbox.Box

	pmu  sync.Mutex
	prin string // the session principal once hello succeeded
}

func (c *conn) principal() string {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.prin
}

func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// write queues v; it never blocks.
func (c *conn) write(v any) {
	if b, err := encode(v); err == nil {
		c.box.Send(b)
	}
}

// respond queues a response and waits until it is written (or the
// connection has failed): the after hooks (daemon.stop) must follow it.
func (c *conn) respond(v any) {
	b, err := encode(v)
	if err != nil {
		ce := contract.Errorf(contract.CodeInternal, "encode response: %v", err)
		b, _ = encode(Response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: rpcError(ce)})
	}
	<-c.box.SendNotify(b)
}

// ServeConn serves one already-accepted connection (also used for the
// gateway uplink, which carries the same framing).
func (s *Server) ServeConn(ctx context.Context, rw net.Conn) { s.serveConn(ctx, rw) }

func (s *Server) serveConn(ctx context.Context, rw net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer rw.Close()
	c := &conn{c: rw}
	c.box = outbox.New(outbox.SinkFunc(func(b []byte, deadline time.Time) error {
		_ = rw.SetWriteDeadline(deadline)
		_, err := rw.Write(b)
		return err
	}), outbox.Options{MaxItems: s.MaxQueue, Stall: s.WriteTimeout, OnFail: func(err error) {
		if s.Log != nil {
			s.Log.Warn("disconnecting a client that is not reading", "err", err)
		}
		rw.Close() // ends the read loop; leases are unaffected
	}})
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[net.Conn]*conn{}
	}
	s.conns[rw] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, rw)
		s.mu.Unlock()
	}()
	r := bufio.NewReaderSize(rw, 64<<10)
	var sess *contract.Session
	var inflight sync.WaitGroup
	// On the way out, cancel first so requests still in flight (a queued
	// lease.request) learn their caller is gone, then wait for them. The
	// other order would keep a departed client's request queued, to be
	// granted a lease nobody holds. Then let the writer drain what is
	// queued (each write bounded by its deadline) before the close.
	defer func() {
		cancel()
		inflight.Wait()
		c.box.Close()
		<-c.box.Done()
	}()
	for {
		line, err := readLine(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && s.Log != nil {
				s.Log.Debug("connection closed", "err", err)
			}
			if errors.Is(err, errLineTooLong) {
				c.write(Response{JSONRPC: "2.0", ID: json.RawMessage("null"),
					Error: rpcError(contract.Errorf(contract.CodeBadRequest, "request line longer than %d bytes", MaxLine))})
			}
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil || req.Method == "" {
			msg := "not a JSON-RPC request"
			if err != nil {
				msg = "malformed JSON: " + err.Error()
			}
			ce := contract.Errorf(contract.CodeBadRequest, "%s", msg)
			c.write(Response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &RPCError{Code: -32700, Message: ce.Message, Data: ce}})
			continue
		}
		if req.JSONRPC != "2.0" {
			c.respondErr(req.ID, contract.Errorf(contract.CodeBadRequest, `jsonrpc must be "2.0"`))
			continue
		}
		if req.Method == contract.Hello.Name {
			var in contract.HelloIn
			if err := contract.Decode(req.Params, &in); err != nil {
				c.respondErr(req.ID, contract.AsError(err))
				continue
			}
			out, ns, herr := s.D.Hello(ctx, in)
			if ns.Role != "" {
				sess = &ns
				c.pmu.Lock()
				c.prin = ns.Principal
				c.pmu.Unlock()
			}
			if herr != nil {
				c.respondErr(req.ID, herr)
				continue
			}
			c.write(Response{JSONRPC: "2.0", ID: req.ID, Result: out})
			continue
		}
		if sess == nil {
			c.respondErr(req.ID, contract.Errorf(contract.CodeHelloRequired, "send hello before %s", req.Method))
			continue
		}
		// Each request runs on its own goroutine: lease.request may wait
		// in the queue for a long time while renews flow on the same
		// connection.
		inflight.Add(1)
		go func(req Request, sess contract.Session) {
			defer inflight.Done()
			// notify runs on engine goroutines (progress before driver
			// work) and on event followers: it only queues. Progress is
			// coalesced per request, since only the newest one matters.
			notify := func(method string, params any) {
				b, err := encode(Notification{JSONRPC: "2.0", Method: method, Params: withRequestID(req.ID, params)})
				if err != nil {
					return
				}
				switch method {
				case contract.NotifyProgress:
					c.box.SendLatest("progress:"+string(req.ID), b)
				case contract.NotifyOutput:
					// The caller's own command output: paced by its reader,
					// so a slow one slows only its own command.
					c.box.SendPaced(ctx, b)
				default:
					c.box.Send(b)
				}
			}
			res, after, derr := s.D.Dispatch(ctx, sess, req.Method, req.Params, notify)
			if len(req.ID) == 0 || string(req.ID) == "null" {
				// A notification from the client: no response.
			} else if derr != nil {
				c.respond(errResponse(req.ID, derr))
			} else {
				c.respond(Response{JSONRPC: "2.0", ID: req.ID, Result: res})
			}
			if after != nil {
				after()
			}
		}(req, *sess)
	}
}

// respondErr queues an error response without waiting for it.
func (c *conn) respondErr(id json.RawMessage, e *contract.Error) { c.write(errResponse(id, e)) }

func errResponse(id json.RawMessage, e *contract.Error) Response {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return Response{JSONRPC: "2.0", ID: id, Error: rpcError(e)}
}

// withRequestID merges "requestId" into a push's params object.
func withRequestID(id json.RawMessage, params any) any {
	b, err := json.Marshal(params)
	if err != nil || len(b) == 0 || b[0] != '{' {
		return map[string]any{"requestId": id, "value": params}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return params
	}
	m["requestId"] = id
	return m
}

var errLineTooLong = errors.New("line too long")

func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		buf = append(buf, chunk...)
		if len(buf) > MaxLine {
			return nil, errLineTooLong
		}
		if !isPrefix {
			return buf, nil
		}
	}
}
