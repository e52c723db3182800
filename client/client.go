// Package client is simlock's public typed Go client. It speaks the daemon
// contract over the unix socket (JSON-RPC 2.0, one object per line). It
// never reconnects on its own: a dead connection fails every pending and
// later call with CONNECTION_LOST, and the caller decides what to do.
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/simlock/simlock/internal/contract"
)

// Options configure a connection.
type Options struct {
	// Socket is the daemon's unix socket path.
	Socket string
	// Principal is this connection's identity for lease ownership.
	Principal string
	// Credential (an operator token or the admin secret) makes the
	// session admin.
	Credential string
	// Name identifies the client program in the daemon's logs.
	Name string
}

// Client is one connection to a daemon.
type Client struct {
	conn  net.Conn
	hello contract.HelloOut

	wmu sync.Mutex
	enc *json.Encoder

	mu      sync.Mutex
	nextID  int64
	pending map[string]*pending
	streams map[string]func(string, json.RawMessage) // pushes that outlive their response (followed events)
	err     error                                    // set once the connection is lost
	done    chan struct{}
	onLost  []func(error)
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

// Dial connects to the daemon socket and performs hello. A socket nobody
// listens on is DAEMON_NOT_RUNNING.
func Dial(ctx context.Context, o Options) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", o.Socket)
	if err != nil {
		return nil, contract.Errorf(contract.CodeDaemonNotRunning, "no simlock daemon is listening on %s", o.Socket).
			WithDetails("socket", o.Socket)
	}
	c := &Client{conn: conn, enc: json.NewEncoder(conn), pending: map[string]*pending{}, streams: map[string]func(string, json.RawMessage){}, done: make(chan struct{})}
	go c.readLoop()
	var out contract.HelloOut
	err = c.call(ctx, contract.Hello.Name, contract.HelloIn{
		Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Client:   o.Name, Principal: o.Principal, Credential: o.Credential,
	}, &out, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.hello = out
	return c, nil
}

// Hello is what the daemon answered at connect: role, principal, version.
func (c *Client) Hello() contract.HelloOut { return c.hello }

// Close ends the connection. Leases are not affected: connection close
// means nothing to a lease.
func (c *Client) Close() error { return c.conn.Close() }

// Done is closed when the connection is lost or closed.
func (c *Client) Done() <-chan struct{} { return c.done }

// OnConnectionLost registers f to run once when the connection dies.
func (c *Client) OnConnectionLost(f func(error)) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		f(err)
		return
	}
	c.onLost = append(c.onLost, f)
	c.mu.Unlock()
}

func (c *Client) readLoop() {
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
			if p := c.pending[string(head.RequestID)]; p != nil {
				notify = p.notify
			} else {
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
	hooks := c.onLost
	c.onLost = nil
	c.mu.Unlock()
	close(c.done)
	for _, f := range hooks {
		f(ce)
	}
}

// call sends one request and waits for its response. notify receives the
// pushes tied to this request.
func (c *Client) call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error {
	_, err := c.callKeep(ctx, method, in, out, notify, false)
	return err
}

// callKeep is call; with keep, pushes for the request keep flowing to
// notify after the response, and the returned id names the stream.
func (c *Client) callKeep(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage), keep bool) (string, error) {
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

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	delete(c.streams, id)
	c.mu.Unlock()
}

// Do runs any contract operation with typed input and output.
func Do[In, Out any](ctx context.Context, c *Client, op contract.Operation[In, Out], in In) (Out, error) {
	var out Out
	err := c.call(ctx, op.Name, in, &out, nil)
	return out, err
}

// Raw sends method with raw params and returns the raw result (for tools
// that relay arbitrary operations).
func (c *Client) Raw(ctx context.Context, method string, params json.RawMessage, notify func(string, json.RawMessage)) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.call(ctx, method, params, &out, notify)
	return out, err
}

// LeaseRequest asks for a lease; progress (may be nil) receives queue and
// preparation pushes while it waits.
func (c *Client) LeaseRequest(ctx context.Context, in contract.LeaseRequestIn, progress func(contract.Progress)) (contract.Lease, error) {
	var out contract.Lease
	err := c.call(ctx, contract.LeaseRequest.Name, in, &out, func(method string, params json.RawMessage) {
		if method != contract.NotifyProgress || progress == nil {
			return
		}
		var p contract.Progress
		if json.Unmarshal(params, &p) == nil {
			progress(p)
		}
	})
	return out, err
}

// Events reads buffered events after since; with follow, onEvent receives
// each later event until ctx ends or the connection is lost.
func (c *Client) Events(ctx context.Context, in contract.EventsSubscribeIn, onEvent func(contract.Event)) (contract.EventsSubscribeOut, error) {
	var out contract.EventsSubscribeOut
	id, err := c.callKeep(ctx, contract.EventsSubscribe.Name, in, &out, func(method string, params json.RawMessage) {
		if method != contract.NotifyEvent || onEvent == nil {
			return
		}
		var e contract.Event
		if json.Unmarshal(params, &e) == nil {
			onEvent(e)
		}
	}, in.Follow)
	if err != nil || !in.Follow {
		if id != "" {
			c.forget(id)
		}
		return out, err
	}
	// The daemon pushes later events under the same request id until the
	// connection closes; stop routing them once ctx ends.
	go func() {
		select {
		case <-ctx.Done():
		case <-c.done:
		}
		c.forget(id)
	}()
	return out, nil
}

// IsCode reports whether err is a contract error with code.
func IsCode(err error, code contract.Code) bool {
	var ce *contract.Error
	return errors.As(err, &ce) && ce.Code == code
}
