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

	"github.com/simlock/simlock/internal/contract"
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
type Server struct {
	D   Dispatcher
	Log *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]*conn
	wg    sync.WaitGroup
}

// Push sends a notification to every live connection whose session
// principal is principal (lease-scoped facts go to the lease's owner).
func (s *Server) Push(principal, method string, params any) {
	s.mu.Lock()
	var targets []*conn
	for _, c := range s.conns {
		if c != nil && c.principal() == principal {
			targets = append(targets, c)
		}
	}
	s.mu.Unlock()
	for _, c := range targets {
		c.write(Notification{JSONRPC: "2.0", Method: method, Params: params})
	}
}

// Serve accepts on ln until it is closed or ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[net.Conn]*conn{}
	}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
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

// conn is one client connection: a reader loop and a serialized writer.
type conn struct {
	c   net.Conn
	wmu sync.Mutex
	enc *json.Encoder

	pmu  sync.Mutex
	prin string // the session principal once hello succeeded
}

func (c *conn) principal() string {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.prin
}

func (c *conn) write(v any) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.enc.Encode(v) // a failed write surfaces as a read error in the loop
}

// ServeConn serves one already-accepted connection (also used for the
// gateway uplink, which carries the same framing).
func (s *Server) ServeConn(ctx context.Context, rw net.Conn) { s.serveConn(ctx, rw) }

func (s *Server) serveConn(ctx context.Context, rw net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer rw.Close()
	c := &conn{c: rw, enc: json.NewEncoder(rw)}
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
	// granted a lease nobody holds.
	defer func() {
		cancel()
		inflight.Wait()
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
			notify := func(method string, params any) {
				c.write(Notification{JSONRPC: "2.0", Method: method, Params: withRequestID(req.ID, params)})
			}
			res, after, derr := s.D.Dispatch(ctx, sess, req.Method, req.Params, notify)
			if len(req.ID) == 0 || string(req.ID) == "null" {
				// A notification from the client: no response.
			} else if derr != nil {
				c.respondErr(req.ID, derr)
			} else {
				c.write(Response{JSONRPC: "2.0", ID: req.ID, Result: res})
			}
			if after != nil {
				after()
			}
		}(req, *sess)
	}
}

func (c *conn) respondErr(id json.RawMessage, e *contract.Error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	c.write(Response{JSONRPC: "2.0", ID: id, Error: rpcError(e)})
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
