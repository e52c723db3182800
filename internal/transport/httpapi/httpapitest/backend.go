// Package httpapitest provides an in-memory httpapi.Backend that behaves like
// a small daemon: it runs the dispatcher's pipeline in miniature (strict
// input decoding, role check, lease ownership) over a fixed pool of devices
// with a FIFO queue, progress pushes, lease events and tokens. Tests of the
// HTTP frontend and of clients that speak to it use it instead of a daemon.
//
// It is a test double, not a second implementation: its decisions are simple
// on purpose and nothing outside tests may depend on it.
package httpapitest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Backend is the fake. Build it with New.
type Backend struct {
	mu        sync.Mutex
	version   string
	now       func() time.Time
	tokens    map[string]token // secret -> token
	devices   []string
	holder    map[string]string // device -> lease id
	leases    map[string]*contract.Lease
	queue     []*waiter
	events    []contract.Event
	subs      map[int]chan contract.Event
	nextSub   int
	seq       uint64
	nextLease int
	nextToken int
	stops     int
	calls     map[string]int
}

type token struct {
	id, role, name string
}

type waiter struct {
	requester, owner string
	platform         string
	ttl              time.Duration
	progress         func(contract.Progress)
	// result receives the grant or the refusal exactly once.
	result chan grantResult
}

type grantResult struct {
	lease contract.Lease
	err   *contract.Error
}

// New returns a backend with devices ready iOS devices named dev-1..dev-N.
func New(devices int) *Backend {
	b := &Backend{version: "test", now: func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		tokens: map[string]token{}, holder: map[string]string{}, leases: map[string]*contract.Lease{},
		subs: map[int]chan contract.Event{}, calls: map[string]int{}}
	for i := 1; i <= devices; i++ {
		b.devices = append(b.devices, fmt.Sprintf("dev-%d", i))
	}
	return b
}

// AddToken registers secret as a token of role (agent, operator, worker);
// its principal is "token:<id>".
func (b *Backend) AddToken(secret, role, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens[secret] = token{id: id, role: role, name: id}
}

// Stops reports how many times daemon.stop's after hook has run.
func (b *Backend) Stops() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stops
}

// Calls reports how many times method reached Dispatch.
func (b *Backend) Calls(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[method]
}

// Queued reports how many lease requests wait in the queue.
func (b *Backend) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Subscribers reports how many followed event subscriptions are live.
func (b *Backend) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Emit publishes a business event (tests inject device.crash-detected and
// the like); Seq and At are filled in.
func (b *Backend) Emit(e contract.Event) contract.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.emitLocked(e)
}

func (b *Backend) emitLocked(e contract.Event) contract.Event {
	b.seq++
	e.Seq = b.seq
	e.At = b.now()
	b.events = append(b.events, e)
	for _, ch := range b.subs {
		select {
		case ch <- e:
		default: // a subscriber that cannot keep up misses events, like the daemon's bus
		}
	}
	return e
}

// Expire ends a lease as if its TTL had run out.
func (b *Backend) Expire(leaseID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.leases[leaseID]; ok {
		b.emitLocked(contract.Event{Type: "lease.expired", LeaseID: l.LeaseID, DeviceID: l.DeviceID, RequesterID: l.RequesterID,
			Data: map[string]any{"ownerId": l.OwnerID}})
		b.endLocked(l, "expired")
	}
}

// Crash reports the leased device crashed (device.crash-detected), and
// Recover that it came back (device.recovered), as the health monitor does.
func (b *Backend) Crash(leaseID string)   { b.healthEvent(leaseID, "device.crash-detected") }
func (b *Backend) Recover(leaseID string) { b.healthEvent(leaseID, "device.recovered") }

func (b *Backend) healthEvent(leaseID, typ string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.leases[leaseID]; ok {
		b.emitLocked(contract.Event{Type: typ, LeaseID: l.LeaseID, DeviceID: l.DeviceID, RequesterID: l.RequesterID,
			Platform: l.Platform, Data: map[string]any{"ownerId": l.OwnerID}})
	}
}

// LoseDevice ends a lease because its device is gone.
func (b *Backend) LoseDevice(leaseID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.leases[leaseID]; ok {
		b.endLocked(l, "device-lost")
	}
}

// Authenticate resolves a bearer secret.
func (b *Backend) Authenticate(_ context.Context, bearer string) (string, string, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tokens[bearer]
	if !ok {
		return "", "", false, nil
	}
	return t.role, "token:" + t.id, true, nil
}

// Hello negotiates the protocol range the way the daemon does.
func (b *Backend) Hello(_ context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	out := contract.HelloOut{Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		Role: contract.RoleAgent, Principal: "anonymous", Version: b.version, InstanceID: "test-instance", Mode: "worker"}
	sess := contract.Session{Principal: "anonymous", Role: contract.RoleAgent, Compatible: true}
	lo, hi := max(in.Protocol.Min, contract.ProtocolMin), min(in.Protocol.Max, contract.ProtocolMax)
	if lo > hi {
		sess.Compatible = false
		return out, sess, contract.Errorf(contract.CodeProtocolUnsupported, "client speaks protocol %d-%d, daemon speaks %d-%d",
			in.Protocol.Min, in.Protocol.Max, contract.ProtocolMin, contract.ProtocolMax)
	}
	out.Selected = hi
	return out, sess, nil
}

// Dispatch runs one operation: decode strictly, check the role and lease
// ownership, then the handler.
func (b *Backend) Dispatch(ctx context.Context, sess contract.Session, method string, params json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	b.mu.Lock()
	b.calls[method]++
	b.mu.Unlock()
	op, ok := contract.Lookup(method)
	if !ok || method == contract.Hello.Name {
		return nil, nil, contract.Errorf(contract.CodeUnknownOperation, "unknown operation %q", method)
	}
	in, err := op.DecodeInput(params)
	if err != nil {
		return nil, nil, contract.AsError(err)
	}
	if !sess.Role.Allows(op.Role) {
		return nil, nil, contract.Errorf(contract.CodeForbidden, "%s needs the %s role; this session is %s", op.Name, op.Role, sess.Role)
	}
	if op.Auth == contract.AuthOwnsLease {
		if cerr := b.checkOwner(sess, leaseIDOf(in)); cerr != nil {
			return nil, nil, cerr
		}
	}
	if notify == nil {
		notify = func(string, any) {}
	}
	var after func()
	out, cerr := b.run(ctx, sess, in, notify, func(f func()) { after = f })
	return out, after, cerr
}

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
	}
	return ""
}

func (b *Backend) checkOwner(sess contract.Session, id string) *contract.Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.leases[id]
	if !ok {
		return contract.Errorf(contract.CodeUnknownLease, "no lease %q", id)
	}
	if sess.Role != contract.RoleAdmin && l.OwnerID != sess.Principal {
		return contract.Errorf(contract.CodeForbidden, "lease %s belongs to another principal", id)
	}
	return nil
}

func (b *Backend) run(ctx context.Context, sess contract.Session, in any, notify func(string, any), setAfter func(func())) (any, *contract.Error) {
	switch v := in.(type) {
	case contract.StatusGetIn:
		return b.status(sess), nil
	case contract.ListGetIn:
		return contract.ListGetOut{Devices: b.deviceList()}, nil
	case contract.CatalogGetIn:
		if v.Platform != "" && v.Platform != "ios" {
			return nil, contract.Errorf(contract.CodeUnsupportedPlatform, "no driver serves platform %s", v.Platform)
		}
		return contract.CatalogGetOut{Platforms: []contract.PlatformCatalog{{Platform: "ios",
			Models:   []contract.CatalogModel{{Name: "iPhone 16", Identifier: "com.apple.CoreSimulator.SimDeviceType.iPhone-16"}},
			Runtimes: []contract.CatalogRuntime{{Name: "iOS 18.2", Version: "18.2", Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-18-2", Available: true}}}}}, nil
	case contract.ConfigGetIn:
		return contract.ConfigGetOut{Path: "/tmp/config.json", Config: json.RawMessage(`{"mode":"worker"}`)}, nil
	case contract.LeaseRequestIn:
		return b.leaseRequest(ctx, sess, v, notify)
	case contract.LeaseRenewIn:
		return b.renew(v)
	case contract.LeaseReleaseIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		l, ok := b.leases[v.LeaseID]
		if !ok {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %q", v.LeaseID)
		}
		b.endLocked(l, "released")
		return contract.LeaseReleaseOut{LeaseID: v.LeaseID, Released: true}, nil
	case contract.LeaseReleaseAllIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		out := contract.LeaseReleaseAllOut{Released: []string{}}
		for _, l := range b.sortedLeasesLocked() {
			if sess.Role == contract.RoleAdmin || l.OwnerID == sess.Principal {
				out.Released = append(out.Released, l.LeaseID)
				b.endLocked(l, "released")
			}
		}
		return out, nil
	case contract.LeaseCancelIn:
		req := v.RequesterID
		if req == "" {
			req = sess.Principal
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, w := range b.queue {
			if w.requester == req {
				if sess.Role != contract.RoleAdmin && w.owner != sess.Principal {
					return nil, contract.Errorf(contract.CodeForbidden, "the pending request of %s belongs to another principal", req)
				}
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				w.result <- grantResult{err: contract.Errorf(contract.CodeRequestCancelled, "the request was cancelled")}
				return contract.LeaseCancelOut{Cancelled: true}, nil
			}
		}
		return nil, contract.Errorf(contract.CodeNoPendingRequest, "no pending request for %s", req)
	case contract.LeaseGetIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		l, ok := b.leases[v.LeaseID]
		if !ok {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %q", v.LeaseID)
		}
		return *l, nil
	case contract.LeaseListIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		out := contract.LeaseListOut{Leases: []contract.Lease{}}
		for _, l := range b.sortedLeasesLocked() {
			if sess.Role == contract.RoleAdmin || l.OwnerID == sess.Principal {
				out.Leases = append(out.Leases, *l)
			}
		}
		return out, nil
	case contract.EventsSubscribeIn:
		return b.subscribe(ctx, v, notify, setAfter), nil
	case contract.TokenCreateIn:
		switch v.Role {
		case contract.TokenRoleAgent, contract.TokenRoleOperator, contract.TokenRoleWorker:
		default:
			return nil, contract.Errorf(contract.CodeBadRequest, "role must be agent, operator or worker, not %q", v.Role)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.nextToken++
		id := fmt.Sprintf("tok_%04d", b.nextToken)
		secret := "slk_secret_" + id
		name := v.Name
		if name == "" {
			name = id
		}
		b.tokens[secret] = token{id: id, role: v.Role, name: name}
		return contract.TokenCreateOut{ID: id, Role: v.Role, Name: name, Token: secret, CreatedAt: b.now()}, nil
	case contract.TokenListIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		out := contract.TokenListOut{Tokens: []contract.TokenInfo{}}
		for _, t := range b.tokens {
			out.Tokens = append(out.Tokens, contract.TokenInfo{ID: t.id, Role: t.role, Name: t.name, CreatedAt: b.now()})
		}
		return out, nil
	case contract.TokenRevokeIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		for s, t := range b.tokens {
			if t.id == v.ID {
				delete(b.tokens, s)
				return contract.TokenRevokeOut{Revoked: true}, nil
			}
		}
		return nil, contract.Errorf(contract.CodeUnknownToken, "no token %q", v.ID)
	case contract.DaemonStopIn:
		setAfter(func() {
			b.mu.Lock()
			b.stops++
			b.mu.Unlock()
		})
		return contract.DaemonStopOut{Stopping: true}, nil
	case contract.DeviceExecIn:
		return b.exec(sess, v, notify)
	case contract.DoctorRunIn:
		if (v.Fix || v.PurgeOrphans) && sess.Role != contract.RoleAdmin {
			return nil, contract.Errorf(contract.CodeForbidden, "fix and purgeOrphans need the admin role")
		}
		return contract.DoctorRunOut{Findings: []contract.DoctorFinding{}, Healthy: true}, nil
	case contract.CleanupRunIn:
		return contract.CleanupRunOut{DryRun: v.DryRun, Actions: []contract.CleanupAction{}}, nil
	case contract.NukeRunIn:
		b.mu.Lock()
		defer b.mu.Unlock()
		out := contract.NukeRunOut{ReleasedLeases: []string{}, CancelledRequests: []string{}, DestroyedDevices: []string{}}
		for _, w := range b.queue {
			out.CancelledRequests = append(out.CancelledRequests, w.requester)
			w.result <- grantResult{err: contract.Errorf(contract.CodeRequestCancelled, "the daemon was reset")}
		}
		b.queue = nil
		for _, l := range b.sortedLeasesLocked() {
			out.ReleasedLeases = append(out.ReleasedLeases, l.LeaseID)
			b.endLocked(l, "reset")
		}
		return out, nil
	case contract.PassthroughIn:
		return contract.PassthroughOut{Platform: "ios", Command: "xcrun", Args: append([]string{"simctl", "--set", "/tmp/devices"}, v.Args...)}, nil
	}
	return nil, contract.Errorf(contract.CodeUnknownOperation, "the fake backend does not serve %T", in)
}

func (b *Backend) status(sess contract.Session) contract.StatusGetOut {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := contract.StatusGetOut{Daemon: contract.DaemonInfo{Version: b.version, PID: 1, Health: "running", Mode: "worker",
		InstanceID: "test-instance", StartedAt: b.now()}, Devices: b.deviceListLocked(), Leases: []contract.Lease{}, Queue: []contract.QueueEntry{}}
	for _, l := range b.sortedLeasesLocked() {
		out.Leases = append(out.Leases, *l)
	}
	for i, w := range b.queue {
		out.Queue = append(out.Queue, contract.QueueEntry{Position: i + 1, RequesterID: w.requester, Platform: w.platform, Phase: "queued"})
	}
	out.QueueDepth = len(out.Queue)
	return out
}

func (b *Backend) deviceList() []contract.Device {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deviceListLocked()
}

func (b *Backend) deviceListLocked() []contract.Device {
	out := []contract.Device{}
	for _, id := range b.devices {
		d := contract.Device{ID: id, Platform: "ios", Model: "iPhone 16", OSVersion: "18.2", State: contract.StateReady, Name: "simlock-" + id, Simulated: true}
		if lid := b.holder[id]; lid != "" {
			d.State, d.LeaseID = contract.StateLeased, lid
		}
		out = append(out, d)
	}
	return out
}

func (b *Backend) sortedLeasesLocked() []*contract.Lease {
	var out []*contract.Lease
	for _, id := range b.devices {
		if lid := b.holder[id]; lid != "" {
			out = append(out, b.leases[lid])
		}
	}
	return out
}

func (b *Backend) leaseRequest(ctx context.Context, sess contract.Session, in contract.LeaseRequestIn, notify func(string, any)) (any, *contract.Error) {
	if in.Platform == "" {
		return nil, contract.Errorf(contract.CodeBadRequest, "platform is required")
	}
	if in.Platform != "ios" {
		return nil, contract.Errorf(contract.CodeUnsupportedPlatform, "no driver serves platform %s", in.Platform)
	}
	req := in.RequesterID
	if req == "" {
		req = sess.Principal
	}
	ttl := time.Duration(in.TTLMs) * time.Millisecond
	if ttl == 0 {
		ttl = 30 * time.Minute
	}
	b.mu.Lock()
	for _, l := range b.leases {
		if l.RequesterID == req {
			b.mu.Unlock()
			return nil, contract.Errorf(contract.CodeRequesterLeased, "this requester already holds lease %s", l.LeaseID).WithDetails("leaseId", l.LeaseID)
		}
	}
	for _, w := range b.queue {
		if w.requester == req {
			b.mu.Unlock()
			return nil, contract.Errorf(contract.CodeRequesterQueued, "this requester already waits in the queue")
		}
	}
	progress := func(p contract.Progress) { notify(contract.NotifyProgress, p) }
	if dev := b.freeDeviceLocked(); dev != "" {
		l := b.grantLocked(dev, req, sess.Principal, ttl)
		b.mu.Unlock()
		progress(contract.Progress{Phase: "granted", DeviceID: dev})
		return l, nil
	}
	if in.NoWait {
		b.mu.Unlock()
		return nil, contract.Errorf(contract.CodeNoCapacity, "no device is free").WithRetryAfter(5000)
	}
	w := &waiter{requester: req, owner: sess.Principal, platform: in.Platform, ttl: ttl, progress: progress, result: make(chan grantResult, 1)}
	b.queue = append(b.queue, w)
	pos := len(b.queue)
	b.emitLocked(contract.Event{Type: "request.queued", RequesterID: req, Platform: in.Platform})
	b.mu.Unlock()
	progress(contract.Progress{Phase: "queued", QueuePosition: pos})

	var timeout <-chan time.Time
	if in.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(in.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case r := <-w.result:
		if r.err != nil {
			return nil, r.err
		}
		return r.lease, nil
	case <-timeout:
		if b.dequeue(w) {
			return nil, contract.Errorf(contract.CodeQueueTimeout, "no device within %dms", in.TimeoutMs)
		}
	case <-ctx.Done():
		if b.dequeue(w) {
			return nil, contract.Errorf(contract.CodeConnectionLost, "the caller went away")
		}
	}
	// Granted or cancelled while we were giving up: honour what happened.
	r := <-w.result
	if r.err != nil {
		return nil, r.err
	}
	return r.lease, nil
}

func (b *Backend) dequeue(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.queue {
		if x == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.emitLocked(contract.Event{Type: "request.abandoned", RequesterID: w.requester})
			return true
		}
	}
	return false
}

func (b *Backend) freeDeviceLocked() string {
	for _, id := range b.devices {
		if b.holder[id] == "" {
			return id
		}
	}
	return ""
}

func (b *Backend) grantLocked(dev, requester, owner string, ttl time.Duration) contract.Lease {
	b.nextLease++
	now := b.now()
	l := &contract.Lease{LeaseID: fmt.Sprintf("lse_%04d", b.nextLease), RequesterID: requester, OwnerID: owner, DeviceID: dev,
		Platform: "ios", GrantedAt: now, ExpiresAt: now.Add(ttl), LastRenewedAt: now, TTLMs: ttl.Milliseconds()}
	b.leases[l.LeaseID] = l
	b.holder[dev] = l.LeaseID
	b.emitLocked(contract.Event{Type: "lease.granted", LeaseID: l.LeaseID, DeviceID: dev, RequesterID: requester, Platform: "ios",
		Data: map[string]any{"ownerId": owner}})
	return *l
}

// endLocked ends l and hands its device to the head of the queue.
func (b *Backend) endLocked(l *contract.Lease, reason string) {
	delete(b.leases, l.LeaseID)
	delete(b.holder, l.DeviceID)
	b.emitLocked(contract.Event{Type: "lease.released", LeaseID: l.LeaseID, DeviceID: l.DeviceID, RequesterID: l.RequesterID,
		Platform: l.Platform, Reason: reason, Data: map[string]any{"ownerId": l.OwnerID}})
	if len(b.queue) == 0 {
		return
	}
	w := b.queue[0]
	b.queue = b.queue[1:]
	g := b.grantLocked(l.DeviceID, w.requester, w.owner, w.ttl)
	w.progress(contract.Progress{Phase: "granted", DeviceID: l.DeviceID})
	w.result <- grantResult{lease: g}
}

// exec "runs" a command on a leased device: it echoes its arguments on
// stdout and stdin on stderr, and exits 0 (or 3 when the first argument is
// "fail"). Only the lease's requester may run it, admin included.
func (b *Backend) exec(sess contract.Session, in contract.DeviceExecIn, notify func(string, any)) (any, *contract.Error) {
	b.mu.Lock()
	l, ok := b.leases[in.LeaseID]
	b.mu.Unlock()
	if !ok {
		return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %q", in.LeaseID)
	}
	req := in.RequesterID
	if req == "" {
		req = sess.Principal
	}
	if req != l.RequesterID {
		return nil, contract.Errorf(contract.CodeForbidden, "lease %s belongs to requester %s", l.LeaseID, l.RequesterID)
	}
	if in.Tool != "simctl" {
		return nil, contract.Errorf(contract.CodeUnknownPassthroughTool, "no driver wraps %q", in.Tool)
	}
	notify(contract.NotifyOutput, contract.ExecOutput{Stream: "stdout", Chunk: strings.Join(in.Args, " ") + "\n"})
	if in.Stdin != "" {
		notify(contract.NotifyOutput, contract.ExecOutput{Stream: "stderr", Chunk: in.Stdin})
	}
	code := 0
	if len(in.Args) > 0 && in.Args[0] == "fail" {
		code = 3
	}
	return contract.DeviceExecOut{ExitCode: code}, nil
}

func (b *Backend) renew(in contract.LeaseRenewIn) (any, *contract.Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.leases[in.LeaseID]
	if !ok {
		return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %q", in.LeaseID)
	}
	if in.TTLMs > 0 {
		l.TTLMs = in.TTLMs
	}
	now := b.now()
	l.LastRenewedAt = now
	l.ExpiresAt = now.Add(time.Duration(l.TTLMs) * time.Millisecond)
	b.emitLocked(contract.Event{Type: "lease.renewed", LeaseID: l.LeaseID, DeviceID: l.DeviceID, RequesterID: l.RequesterID})
	return *l, nil
}

// subscribe mirrors the daemon: subscribe before reading the backlog, and
// start pushing only once the response has been written.
func (b *Backend) subscribe(ctx context.Context, in contract.EventsSubscribeIn, notify func(string, any), setAfter func(func())) contract.EventsSubscribeOut {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := contract.EventsSubscribeOut{Events: []contract.Event{}}
	last := in.Since
	for _, e := range b.events {
		if e.Seq > in.Since {
			out.Events = append(out.Events, e)
			last = e.Seq
		}
	}
	if !in.Follow {
		return out
	}
	ch := make(chan contract.Event, 1024)
	b.nextSub++
	id := b.nextSub
	b.subs[id] = ch
	setAfter(func() {
		go func() {
			defer func() {
				b.mu.Lock()
				delete(b.subs, id)
				b.mu.Unlock()
			}()
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-ch:
					if e.Seq > last {
						notify(contract.NotifyEvent, e)
					}
				}
			}
		}()
	})
	return out
}
