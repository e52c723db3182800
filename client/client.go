package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/simlock/simlock/contract"
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
	// ConnectTimeout bounds reaching the socket (default
	// DefaultConnectTimeout) and HandshakeTimeout the hello that follows
	// (default DefaultHandshakeTimeout), whatever ctx allows: a daemon
	// that accepts and never answers fails the dial instead of hanging it.
	ConnectTimeout   time.Duration
	HandshakeTimeout time.Duration
	// Epoch is sent in hello: a gateway that leads a fleet presents its
	// leader epoch when it opens a session on a worker's uplink, so the
	// worker can refuse a deposed leader. Zero means no epoch.
	Epoch uint64
}

// Connect and handshake bounds. A live local daemon answers hello in
// milliseconds; the bounds are for one that is wedged or out of file
// descriptors, so the CLI reports it instead of waiting forever.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	// writeTimeout bounds one request write: a daemon that stops reading
	// fails the call with CONNECTION_LOST.
	writeTimeout = 10 * time.Second
)

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// handshake runs hello within timeout; running out of it is CONNECTION_LOST
// (something accepted the connection but does not answer).
func (c *Client) handshake(ctx context.Context, timeout time.Duration, in contract.HelloIn, where string) error {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := c.call(hctx, contract.Hello.Name, in, &c.hello, nil)
	if err != nil && ctx.Err() == nil && hctx.Err() != nil {
		return contract.Errorf(contract.CodeConnectionLost, "%s accepted the connection but did not answer hello within %s", where, timeout).
			WithDetails("timeoutMs", timeout.Milliseconds()).
			WithNext("the daemon may be wedged or out of file descriptors; `simlock daemon stop` escalates to a signal")
	}
	return err
}

// transport carries contract calls to a daemon: the unix socket, or HTTP.
type transport interface {
	call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage), stream bool) error
	close() error
	done() <-chan struct{}
	onLost(func(error))
	onNotice(func(string, json.RawMessage))
}

// Client is one connection to a daemon.
type Client struct {
	t     transport
	hello contract.HelloOut
	// redial opens a new connection the way this one was opened; nil for
	// NewConn, whose stream the caller supplied.
	redial func(context.Context) (*Client, error)
	// opts are the socket options Dial was given (nil otherwise).
	opts *Options
}

// Dial connects to the daemon socket and performs hello. A socket nobody
// listens on is DAEMON_NOT_RUNNING.
func Dial(ctx context.Context, o Options) (*Client, error) {
	t, err := dialSocket(ctx, o.Socket, orDefault(o.ConnectTimeout, DefaultConnectTimeout))
	if err != nil {
		return nil, err
	}
	c := &Client{t: t}
	err = c.handshake(ctx, orDefault(o.HandshakeTimeout, DefaultHandshakeTimeout), contract.HelloIn{
		Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Client:   o.Name, Principal: o.Principal, Credential: o.Credential, Epoch: o.Epoch,
	}, fmt.Sprintf("the daemon socket %s", o.Socket))
	if err != nil {
		t.close()
		return nil, err
	}
	c.redial = func(ctx context.Context) (*Client, error) { return Dial(ctx, o) }
	c.opts = &o
	return c, nil
}

// Redial opens a new connection to the same daemon the way c was opened
// (same socket or URL, principal and credential), for a caller whose
// connection was lost, for instance because the daemon restarted. It never
// starts a daemon. A client made by NewConn cannot redial.
func (c *Client) Redial(ctx context.Context) (*Client, error) {
	if c.redial == nil {
		return nil, contract.Errorf(contract.CodeConnectionLost, "this client was made over a caller's stream and cannot redial")
	}
	return c.redial(ctx)
}

// Hello is what the daemon answered at connect: role, principal, version.
func (c *Client) Hello() contract.HelloOut { return c.hello }

// Close ends the connection. Leases are not affected: connection close
// means nothing to a lease.
func (c *Client) Close() error { return c.t.close() }

// Done is closed when the connection is lost or closed.
func (c *Client) Done() <-chan struct{} { return c.t.done() }

// OnConnectionLost registers f to run once when the connection dies.
func (c *Client) OnConnectionLost(f func(error)) { c.t.onLost(f) }

func (c *Client) call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error {
	return c.t.call(ctx, method, in, out, notify, false)
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

// LeaseRequest asks for a lease (lease.request); progress (may be nil)
// receives queue and preparation pushes while it waits. TTL(d) and
// QueueTimeout(d) set the lease's width and the queue wait.
func (c *Client) LeaseRequest(ctx context.Context, in contract.LeaseRequestIn, progress func(contract.Progress), opts ...CallOption) (contract.Lease, error) {
	var out contract.Lease
	if err := apply(contract.LeaseRequest.Name, &in, opts); err != nil {
		return out, err
	}
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
// each later event until ctx ends or the connection is lost. Gaps are not
// reported; use EventStream to hear about them. onEvent runs on the
// connection's reader: a callback that blocks stalls every call on the
// connection, so hand events to a buffered channel or another goroutine.
func (c *Client) Events(ctx context.Context, in contract.EventsSubscribeIn, onEvent func(contract.Event)) (contract.EventsSubscribeOut, error) {
	return c.EventStream(ctx, in, onEvent, nil)
}

// EventStream is Events that also reports, through onGap, the events a
// follower will never receive because it read too slowly for the daemon's
// ring; onEvent and onGap are called in sequence order. A gap before the
// backlog is in the result's Gap.
func (c *Client) EventStream(ctx context.Context, in contract.EventsSubscribeIn, onEvent func(contract.Event), onGap func(contract.EventsGap)) (contract.EventsSubscribeOut, error) {
	var out contract.EventsSubscribeOut
	err := c.t.call(ctx, contract.EventsSubscribe.Name, in, &out, func(method string, params json.RawMessage) {
		switch {
		case method == contract.NotifyEvent && onEvent != nil:
			var e contract.Event
			if json.Unmarshal(params, &e) == nil {
				onEvent(e)
			}
		case method == contract.NotifyGap && onGap != nil:
			var g contract.EventsGap
			if json.Unmarshal(params, &g) == nil && g.FromSeq > 0 && g.ToSeq >= g.FromSeq {
				onGap(g)
			}
		}
	}, in.Follow)
	return out, err
}

// IsCode reports whether err is a contract error with code.
func IsCode(err error, code contract.Code) bool {
	var ce *contract.Error
	return errors.As(err, &ce) && ce.Code == code
}

// Exec runs a tool against a leased device on the daemon's machine;
// onOutput receives stdout/stderr chunks as they arrive.
func (c *Client) Exec(ctx context.Context, in contract.DeviceExecIn, onOutput func(contract.ExecOutput)) (contract.DeviceExecOut, error) {
	var out contract.DeviceExecOut
	err := c.call(ctx, contract.DeviceExec.Name, in, &out, func(method string, params json.RawMessage) {
		if method != contract.NotifyOutput || onOutput == nil {
			return
		}
		var o contract.ExecOutput
		if json.Unmarshal(params, &o) == nil {
			onOutput(o)
		}
	})
	return out, err
}

// NewConn runs the protocol over an already-connected stream (a gateway's
// uplink to a worker carries the socket framing over a WebSocket) and
// performs hello.
func NewConn(ctx context.Context, conn net.Conn, o Options) (*Client, error) {
	c := &Client{t: newSocketTransport(conn)}
	err := c.handshake(ctx, orDefault(o.HandshakeTimeout, DefaultHandshakeTimeout), contract.HelloIn{
		Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Client:   o.Name, Principal: o.Principal, Credential: o.Credential, Epoch: o.Epoch,
	}, "the peer")
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Call runs any operation by name with untyped input and output; notify
// receives the pushes tied to the request.
func (c *Client) Call(ctx context.Context, method string, in, out any, notify func(method string, params json.RawMessage)) error {
	return c.t.call(ctx, method, in, out, notify, false)
}

// Stream is Call whose pushes keep arriving after the response, until ctx
// ends or the connection does (a followed event subscription).
func (c *Client) Stream(ctx context.Context, method string, in, out any, notify func(method string, params json.RawMessage)) error {
	return c.t.call(ctx, method, in, out, notify, true)
}

// OnNotice adds f to the receivers of lease-scoped facts the daemon pushes to the
// lease's owner: device-unhealthy, device-recovered and lease-lost. Over
// HTTP nothing is pushed; the same facts come back from LeaseRenew callers
// reading the renew route's notices.
func (c *Client) OnNotice(f func(contract.LeaseNotice)) {
	c.t.onNotice(func(method string, params json.RawMessage) {
		var n contract.LeaseNotice
		if json.Unmarshal(params, &n) == nil {
			f(n)
		}
	})
}
