package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/simlock/simlock/contract"
)

// socketTransport speaks JSON-RPC lines over the unix socket.
type socketTransport struct {
	conn net.Conn

	wmu sync.Mutex
	enc *json.Encoder

	mu      sync.Mutex
	nextID  int64
	pending map[string]*pending
	streams map[string]func(string, json.RawMessage) // pushes that outlive their response (followed events)
	notices []func(string, json.RawMessage)          // receivers of lease-scoped pushes, tied to no request
	err     error                                    // set once the connection is lost
	doneCh  chan struct{}
	lostFns []func(error)
}

type pending struct {
	resp   chan rpcResponse
	notify func(method string, params json.RawMessage)
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    *contract.Error `json:"data"`
	} `json:"error"`
}

type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	rpcResponse
}

func dialSocket(ctx context.Context, path string, timeout time.Duration) (*socketTransport, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		// A full backlog or a connect that times out means a process is
		// listening but not accepting: not a reason to launch another.
		var ne net.Error
		if ctx.Err() == nil && (errors.Is(err, syscall.EAGAIN) || errors.As(err, &ne) && ne.Timeout()) {
			return nil, contract.Errorf(contract.CodeConnectionLost, "the daemon socket %s is not accepting connections: %v", path, err).
				WithDetails("socket", path).
				WithNext("the daemon may be wedged or out of file descriptors; `simlock daemon stop` escalates to a signal")
		}
		return nil, contract.Errorf(contract.CodeDaemonNotRunning, "no simlock daemon is listening on %s", path).
			WithDetails("socket", path)
	}
	return newSocketTransport(conn), nil
}

// newSocketTransport speaks the line protocol over any connected stream.
func newSocketTransport(conn net.Conn) *socketTransport {
	c := &socketTransport{conn: conn, enc: json.NewEncoder(conn), pending: map[string]*pending{},
		streams: map[string]func(string, json.RawMessage){}, doneCh: make(chan struct{})}
	go c.readLoop()
	return c
}

func (c *socketTransport) close() error { return c.conn.Close() }

func (c *socketTransport) onNotice(f func(string, json.RawMessage)) {
	c.mu.Lock()
	c.notices = append(c.notices, f)
	c.mu.Unlock()
}

func (c *socketTransport) done() <-chan struct{} { return c.doneCh }

func (c *socketTransport) onLost(f func(error)) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		f(err)
		return
	}
	c.lostFns = append(c.lostFns, f)
	c.mu.Unlock()
}

func (c *socketTransport) readLoop() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	dec := json.NewDecoder(r)
	var lostErr error
	for {
		var m rpcMessage
		if err := dec.Decode(&m); err != nil {
			lostErr = err
			break
		}
		if m.Method != "" {
			// A push: route by the requestId it carries.
			var head struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &head)
			c.mu.Lock()
			var notify func(string, json.RawMessage)
			switch {
			case len(head.RequestID) == 0:
				// Not tied to a request: a lease-scoped notice, for every
				// receiver (a program's own and each Holder's).
				fns := c.notices
				notify = func(method string, params json.RawMessage) {
					for _, f := range fns {
						f(method, params)
					}
				}
			case c.pending[string(head.RequestID)] != nil:
				notify = c.pending[string(head.RequestID)].notify
			default:
				notify = c.streams[string(head.RequestID)]
			}
			c.mu.Unlock()
			if notify != nil {
				notify(m.Method, m.Params)
			}
			continue
		}
		c.mu.Lock()
		p := c.pending[string(m.ID)]
		delete(c.pending, string(m.ID))
		c.mu.Unlock()
		if p != nil {
			p.resp <- m.rpcResponse
		}
	}
	ce := contract.Errorf(contract.CodeConnectionLost, "connection to the daemon was lost: %v", lostErr)
	c.mu.Lock()
	c.err = ce
	for id, p := range c.pending {
		close(p.resp)
		delete(c.pending, id)
	}
	hooks := c.lostFns
	c.lostFns = nil
	c.mu.Unlock()
	close(c.doneCh)
	for _, f := range hooks {
		f(ce)
	}
}

// call sends one request and waits for its response. notify receives the
// pushes tied to this request; with stream, they keep flowing after the
// response until ctx ends or the connection dies.
func (c *socketTransport) call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage), stream bool) error {
	id, err := c.send(ctx, method, in, out, notify, stream)
	if err != nil || !stream {
		return err
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-c.doneCh:
		}
		c.forget(id)
	}()
	return nil
}

func (c *socketTransport) send(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage), keep bool) (string, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return "", err
	}
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	p := &pending{resp: make(chan rpcResponse, 1), notify: notify}
	c.pending[id] = p
	c.mu.Unlock()

	params, err := json.Marshal(in)
	if err != nil {
		c.forget(id)
		return "", contract.Errorf(contract.CodeBadRequest, "encode %s input: %v", method, err)
	}
	if keep {
		c.mu.Lock()
		c.streams[id] = notify
		c.mu.Unlock()
	}
	c.wmu.Lock()
	// The deadline is I/O plumbing: a daemon that stops reading fails the
	// write instead of blocking this call forever.
	_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	err = c.enc.Encode(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": json.RawMessage(params)})
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return "", contract.Errorf(contract.CodeConnectionLost, "send %s: %v", method, err)
	}
	select {
	case r, ok := <-p.resp:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return "", err
		}
		if r.Error != nil {
			c.forget(id)
			if r.Error.Data != nil {
				return "", contract.Normalize(r.Error.Data)
			}
			return "", contract.Errorf(contract.CodeUnknownDaemonError, "%s", r.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				c.forget(id)
				return "", contract.Errorf(contract.CodeInternal, "decode %s result: %v", method, err)
			}
		}
		return id, nil
	case <-ctx.Done():
		c.forget(id)
		return "", ctx.Err()
	}
}

func (c *socketTransport) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	delete(c.streams, id)
	c.mu.Unlock()
}
