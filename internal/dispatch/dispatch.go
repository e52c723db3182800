// Package dispatch is the one dispatcher every frontend calls, for a worker
// daemon and a fleet gateway alike: it runs each contract operation through a
// fixed pipeline (decode strictly and validate identifiers, scope requester
// ids to the caller, check the role, run the declared
// authorization, park on readiness, call the typed handler, check the
// output). It knows nothing of devices: handlers and the error mapping are
// supplied by whoever builds it.
package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/simlock/simlock/contract"
)

// Call is one operation invocation as a frontend hands it to the dispatcher.
type Call struct {
	Session contract.Session
	// Notify sends a push tied to this request (progress, events). Nil when
	// the frontend cannot push.
	Notify func(method string, params any)

	mu    sync.Mutex
	after []func()
	log   *slog.Logger // the dispatcher's, set when the call is dispatched
}

// After registers f to run once the frontend has written the response
// (used by daemon.stop and by followed event subscriptions).
func (c *Call) After(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = append(c.after, f)
}

// RunAfter runs the registered hooks; frontends call it after responding.
func (c *Call) RunAfter() {
	c.mu.Lock()
	hooks, log := c.after, c.log
	c.after = nil
	c.mu.Unlock()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, f := range hooks {
		runHook(log, f)
	}
}

// runHook runs one after-response hook; a panic in it is a bug in that
// hook, and must not take the frontend's connection loop (and so the
// daemon) down with it.
func runHook(log *slog.Logger, f func()) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("after-response hook panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}

// Push sends a push tied to this request, if the frontend can push.
func (c *Call) Push(method string, params any) {
	if c.Notify != nil {
		c.Notify(method, params)
	}
}

type handlerFunc func(ctx context.Context, call *Call, in any) (any, error)

// Dispatcher runs every operation through one fixed pipeline: decode the
// input strictly, check the role, run the operation's authorization, park
// on startup readiness, call the handler, check the output.
type Dispatcher struct {
	handlers map[string]handlerFunc
	ops      map[string]contract.Op
	o        Options
}

// Options supply what the pipeline needs from its owner.
type Options struct {
	Log *slog.Logger
	// Ready parks a request until startup has finished (or failed).
	Ready func(ctx context.Context) error
	// ParkRefusal, when set, may answer an operation's refusal by the
	// readiness park in the operation's own terms (the session broker's
	// calls during a stop: SESSION_BROKER_STOPPING); nil keeps err.
	ParkRefusal func(method string, err *contract.Error) *contract.Error
	// LeaseOwner answers AuthOwnsLease checks.
	LeaseOwner func(ctx context.Context, leaseID string) (owner string, ok bool, err error)
	// MapError turns a handler's error into a contract error; the one place
	// a backend's internal errors become wire codes.
	MapError func(error) *contract.Error
}

// New builds an empty dispatcher; register handlers with Handle.
func New(o Options) *Dispatcher {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Ready == nil {
		o.Ready = func(context.Context) error { return nil }
	}
	if o.MapError == nil {
		o.MapError = func(err error) *contract.Error {
			if ce := contract.AsError(err); ce != nil {
				return ce
			}
			return contract.Errorf(contract.CodeInternal, "%s", err.Error())
		}
	}
	return &Dispatcher{handlers: map[string]handlerFunc{}, ops: map[string]contract.Op{}, o: o}
}

// Handle registers a typed handler for op. Registering an operation twice
// is a programming error.
func Handle[In, Out any](d *Dispatcher, op contract.Operation[In, Out], h func(ctx context.Context, call *Call, in In) (Out, error)) {
	if _, dup := d.handlers[op.Name]; dup {
		panic("daemon: duplicate handler for " + op.Name)
	}
	d.ops[op.Name] = op.Op
	d.handlers[op.Name] = func(ctx context.Context, call *Call, in any) (any, error) {
		return h(ctx, call, in.(In))
	}
}

// Dispatch runs method for call with raw params.
func (d *Dispatcher) Dispatch(ctx context.Context, call *Call, method string, params json.RawMessage) (any, *contract.Error) {
	call.mu.Lock()
	call.log = d.o.Log
	call.mu.Unlock()
	op, ok := d.ops[method]
	if !ok {
		return nil, contract.Errorf(contract.CodeUnknownOperation, "unknown operation %q", method)
	}
	if !call.Session.Compatible && method != contract.DaemonStop.Name {
		return nil, contract.Errorf(contract.CodeProtocolUnsupported, "this connection's protocol range does not overlap the daemon's")
	}
	in, err := op.DecodeInput(params)
	if err != nil {
		return nil, d.o.MapError(err)
	}
	// A non-admin caller's requester ids are confined to its own
	// namespace before any handler (worker or gateway) sees them.
	in = contract.ScopeInput(call.Session, in)
	if !call.Session.Role.Allows(op.Role) {
		return nil, contract.Errorf(contract.CodeForbidden, "%s needs the %s role; this session is %s", op.Name, op.Role, call.Session.Role)
	}
	if err := d.authorize(ctx, op, call, in); err != nil {
		return nil, err
	}
	if !op.Unparked {
		if err := d.park(ctx, method); err != nil {
			return nil, err
		}
	}
	out, herr := d.call(ctx, call, method, in)
	if herr != nil {
		ce := d.o.MapError(herr)
		if ce.Code == contract.CodeInternal {
			d.o.Log.Error("operation failed", "op", method, "err", herr)
		}
		return nil, ce
	}
	if err := op.CheckOutput(out); err != nil {
		d.o.Log.Error("output check failed", "op", method, "err", err)
		return nil, d.o.MapError(err)
	}
	return out, nil
}

// call runs the handler for method, turning a panic into an INTERNAL error:
// one bad request must never take the daemon and everyone's leases with it.
// Every frontend (socket, HTTP, uplink, and MCP through the socket) reaches
// handlers only through here.
func (d *Dispatcher) call(ctx context.Context, call *Call, method string, in any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			d.o.Log.Error("operation panicked", "op", method, "principal", call.Session.Principal,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out, err = nil, contract.Errorf(contract.CodeInternal, "%s failed unexpectedly (a daemon bug); the daemon keeps running", method)
		}
	}()
	return d.handlers[method](ctx, call, in)
}

// park waits for startup readiness; a refusal is the operation's own when
// ParkRefusal has one.
func (d *Dispatcher) park(ctx context.Context, method string) *contract.Error {
	err := d.o.Ready(ctx)
	if err == nil {
		return nil
	}
	ce := d.o.MapError(err)
	if d.o.ParkRefusal != nil {
		if own := d.o.ParkRefusal(method, ce); own != nil {
			ce = own
		}
	}
	return ce
}

// authorize implements the contract's declared extra checks.
func (d *Dispatcher) authorize(ctx context.Context, op contract.Op, call *Call, in any) *contract.Error {
	switch op.Auth {
	case "":
		return nil
	case contract.AuthOwnsLease:
		// Ownership is a fact about the restored registry: until startup
		// convergence has loaded it, every lease would look unknown.
		if err := d.park(ctx, op.Name); err != nil {
			return err
		}
		id := leaseIDOf(in)
		owner, ok, err := d.o.LeaseOwner(ctx, id)
		if err != nil {
			return d.o.MapError(err)
		}
		if !ok {
			return contract.Errorf(contract.CodeUnknownLease, "no lease %q", id)
		}
		if call.Session.Role == contract.RoleAdmin || owner == call.Session.Principal {
			return nil
		}
		return contract.Errorf(contract.CodeForbidden, "lease %s belongs to another principal", id)
	case contract.AuthAdminToChange:
		if in, ok := in.(contract.DoctorRunIn); ok && (in.Fix || in.PurgeOrphans) && call.Session.Role != contract.RoleAdmin {
			return contract.Errorf(contract.CodeForbidden, "%s with fix or purgeOrphans needs the admin role", op.Name)
		}
		return nil
	}
	return contract.Errorf(contract.CodeInternal, "unknown authorization %q", op.Auth)
}

// leaseIDOf extracts the leaseId field every ownsLease input carries.
func leaseIDOf(in any) string {
	switch v := in.(type) {
	case contract.LeaseRenewIn:
		return v.LeaseID
	case contract.LeaseReleaseIn:
		return v.LeaseID
	case contract.LeaseGetIn:
		return v.LeaseID
	case contract.DeviceExecIn:
		return v.LeaseID
	case contract.DeviceUploadIn:
		return v.LeaseID
	case contract.ResourcesGetIn:
		return v.LeaseID
	case contract.ResourcesSetIn:
		return v.LeaseID
	case contract.ResourcesReconcileIn:
		return v.LeaseID
	}
	panic(fmt.Sprintf("dispatch: %T declares ownsLease but has no leaseId", in))
}

// Ops lists the operations with a handler.
func (d *Dispatcher) Ops() []contract.Op {
	var out []contract.Op
	for _, op := range contract.Registry() {
		if _, ok := d.ops[op.Name]; ok {
			out = append(out, op)
		}
	}
	return out
}
