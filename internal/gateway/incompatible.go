package gateway

import (
	"context"
	"encoding/json"

	"github.com/simlock/simlock/contract"
)

// IncompatibleConn stands for an uplink whose hello failed on the protocol
// range, so the worker can still be attached and shown as incompatible
// (with its range) instead of vanishing. hello carries what is known of the
// worker (its protocol range at least); done reports the uplink closing and
// closeFn closes it (nil when there is nothing to close). Every call on it
// answers PROTOCOL_VERSION_UNSUPPORTED; the gateway never makes one.
func IncompatibleConn(hello contract.HelloOut, done <-chan struct{}, closeFn func() error) WorkerConn {
	return &incompatibleConn{hello: hello, done: done, closeFn: closeFn}
}

// IncompatibleFromHelloError reads the worker's protocol range out of a
// failed uplink hello (PROTOCOL_VERSION_UNSUPPORTED, whose details carry
// the daemon's range) and returns a conn for Attach. ok is false for any
// other error.
func IncompatibleFromHelloError(err error, done <-chan struct{}, closeFn func() error) (WorkerConn, bool) {
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeProtocolUnsupported {
		return nil, false
	}
	var r contract.ProtocolRange
	if raw, e := json.Marshal(ce.Details["daemon"]); e == nil {
		_ = json.Unmarshal(raw, &r)
	}
	return IncompatibleConn(contract.HelloOut{Protocol: r}, done, closeFn), true
}

type incompatibleConn struct {
	hello   contract.HelloOut
	done    <-chan struct{}
	closeFn func() error
}

func (c *incompatibleConn) Hello() contract.HelloOut { return c.hello }

func (c *incompatibleConn) Call(context.Context, string, any, any, func(string, json.RawMessage)) error {
	return contract.Errorf(contract.CodeProtocolUnsupported, "the worker speaks protocol %d-%d, the gateway %d-%d",
		c.hello.Protocol.Min, c.hello.Protocol.Max, contract.ProtocolMin, contract.ProtocolMax)
}

func (c *incompatibleConn) Stream(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error {
	return c.Call(ctx, method, in, out, notify)
}

func (c *incompatibleConn) Done() <-chan struct{} { return c.done }

func (c *incompatibleConn) Close() error {
	if c.closeFn == nil {
		return nil
	}
	return c.closeFn()
}
