package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
)

// fakeWorker is an in-memory worker daemon with just enough behaviour for
// the gateway: warm grants, provisioning with progress, NO_CAPACITY,
// leases with TTLs, exec with output pushes, and a followed event stream.
// Every call round-trips its input and output through JSON, like a wire.
type fakeWorker struct {
	id, label string
	clock     *fake.Clock

	mu        sync.Mutex
	proto     contract.ProtocolRange
	started   time.Time
	policy    string
	maxRun    map[string]int
	reserved  map[string]int
	devices   []*contract.Device
	leases    map[string]*contract.Lease
	catalog   []contract.PlatformCatalog
	nextDev   int
	nextLease int
	conns     []*fakeConn
	hold      chan struct{} // provisioning waits for it when set
	working   map[string]chan struct{}
	calls     []string
	execOut   []contract.ExecOutput
	execCode  int
	uploadCap int64 // device.upload refuses past this many bytes (0: no cap)
	refuse    int   // refuse the next n lease.requests with NO_CAPACITY
	goldens   *contract.Goldens
	cpu       [2]uint64 // status.get's CPU budget and use, in thousandths
	seq       uint64
	backlog   []contract.Event
	emitMu    sync.Mutex
	// keyed holds the outcome of each keyed lease.request, replayed to a
	// repeat as a worker's receipts do (ADR 0017); an interrupted one is
	// not kept, so a repeat admits it again.
	keyed map[string]keyedOutcome
}

type keyedOutcome struct {
	lease contract.Lease
	err   error
}

func newFakeWorker(id string, clock *fake.Clock) *fakeWorker {
	return &fakeWorker{id: id, label: "mac-" + id, clock: clock,
		proto:   contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		started: clock.Now(), policy: "on-request",
		maxRun: map[string]int{"ios": 2}, reserved: map[string]int{},
		leases: map[string]*contract.Lease{}, working: map[string]chan struct{}{}, keyed: map[string]keyedOutcome{},
		catalog: []contract.PlatformCatalog{{Platform: "ios",
			Models:   []contract.CatalogModel{{Name: "iPhone 16", Identifier: "com.apple.iPhone-16"}, {Name: "iPad Air", Identifier: "com.apple.iPad-Air"}},
			Runtimes: []contract.CatalogRuntime{{Name: "iOS 18.2", Version: "18.2", Identifier: "com.apple.CoreSimulator.SimRuntime.iOS-18-2", Available: true}}}},
	}
}

// addDevice puts a ready device in the worker's pool.
func (w *fakeWorker) addDevice(platform, model, os string) *contract.Device {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextDev++
	d := &contract.Device{ID: fmt.Sprintf("%s-dev%d", w.id, w.nextDev), Platform: platform, Model: model, OSVersion: os,
		Runtime: contract.DeviceRuntime{Lifecycle: contract.StateReady}, Name: model, UDID: "UDID-" + w.id, DeviceSet: "/private/set", Env: map[string]string{"X": "1"},
		CreatedAt: w.clock.Now()}
	w.devices = append(w.devices, d)
	return d
}

func (w *fakeWorker) connect() *fakeConn {
	c := &fakeConn{w: w, done: make(chan struct{}), subs: map[int]func(string, json.RawMessage){}}
	w.mu.Lock()
	w.conns = append(w.conns, c)
	w.mu.Unlock()
	return c
}

func (w *fakeWorker) called(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, c := range w.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (w *fakeWorker) runningLocked(platform string) int {
	n := 0
	for _, d := range w.devices {
		if d.Platform == platform && (d.Runtime.Lifecycle == contract.StateReady || d.Runtime.Lifecycle == contract.StateLeased) {
			n++
		}
	}
	return n
}

// emit publishes a worker event to every followed subscription, in order.
func (w *fakeWorker) emit(e contract.Event) {
	w.emitMu.Lock()
	defer w.emitMu.Unlock()
	w.mu.Lock()
	w.seq++
	e.Seq = w.seq
	if e.At.IsZero() {
		e.At = w.clock.Now()
	}
	w.backlog = append(w.backlog, e)
	var subs []func(string, json.RawMessage)
	for _, c := range w.conns {
		c.mu.Lock()
		for _, s := range c.subs {
			subs = append(subs, s)
		}
		c.mu.Unlock()
	}
	w.mu.Unlock()
	raw := withRequestID(e)
	for _, s := range subs {
		s(contract.NotifyEvent, raw)
	}
}

// withRequestID encodes a push the way the socket server does.
func withRequestID(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["requestId"] = "7"
	out, _ := json.Marshal(m)
	return out
}

func (w *fakeWorker) grantLocked(d *contract.Device, in contract.LeaseRequestIn) contract.Lease {
	w.nextLease++
	ttl := time.Duration(in.TTLMs) * time.Millisecond
	if ttl == 0 {
		ttl = 10 * time.Minute
	}
	now := w.clock.Now()
	owner := in.OwnerID
	if owner == "" {
		owner = "uplink"
	}
	req := in.RequesterID
	if req == "" {
		req = "uplink"
	}
	l := &contract.Lease{LeaseID: fmt.Sprintf("lse_%d", w.nextLease), RequesterID: req, OwnerID: owner,
		DeviceID: d.ID, Platform: d.Platform, GrantedAt: now, ExpiresAt: now.Add(ttl), LastRenewedAt: now, TTLMs: ttl.Milliseconds()}
	w.leases[l.LeaseID] = l
	lid := l.LeaseID
	d.Runtime.Lifecycle, d.Runtime.Lease = contract.StateLeased, &lid
	out := *l
	dev := *d
	out.Device = &dev
	return out
}

// localLease takes a device behind the gateway's back (a local agent on
// the worker machine); with quiet no event says so.
func (w *fakeWorker) localLease(requester, platform string, quiet bool) contract.Lease {
	w.mu.Lock()
	var dev *contract.Device
	for _, d := range w.devices {
		if d.Platform == platform && d.Runtime.Lifecycle == contract.StateReady && d.Runtime.Lease == nil {
			dev = d
			break
		}
	}
	if dev == nil {
		w.nextDev++
		dev = &contract.Device{ID: fmt.Sprintf("%s-dev%d", w.id, w.nextDev), Platform: platform, Model: "iPhone 16", OSVersion: "18.2", Runtime: contract.DeviceRuntime{Lifecycle: contract.StateReady}}
		w.devices = append(w.devices, dev)
	}
	l := w.grantLocked(dev, contract.LeaseRequestIn{Platform: platform, RequesterID: requester, OwnerID: requester})
	w.mu.Unlock()
	if !quiet {
		w.emit(contract.Event{Type: "lease.granted", LeaseID: l.LeaseID, RequesterID: requester, DeviceID: dev.ID, Platform: platform, Data: map[string]any{"ownerId": requester}})
	}
	return l
}

func (w *fakeWorker) release(leaseID, reason string) {
	w.mu.Lock()
	l := w.leases[leaseID]
	if l == nil {
		w.mu.Unlock()
		return
	}
	delete(w.leases, leaseID)
	for _, d := range w.devices {
		if d.ID == l.DeviceID {
			d.Runtime.Lifecycle, d.Runtime.Lease = contract.StateReady, nil
		}
	}
	w.mu.Unlock()
	w.emit(contract.Event{Type: "lease.released", LeaseID: l.LeaseID, RequesterID: l.RequesterID, DeviceID: l.DeviceID,
		Platform: l.Platform, Reason: reason, Data: map[string]any{"ownerId": l.OwnerID}})
}

func (w *fakeWorker) status() contract.StatusGetOut {
	out := contract.StatusGetOut{Daemon: contract.DaemonInfo{Version: "1.0.0", Health: "running", Mode: "worker", InstanceID: w.id, StartedAt: w.started},
		Devices: w.devicesLocked(), Leases: []contract.Lease{}, Queue: []contract.QueueEntry{},
		Capacity: contract.Capacity{Strategy: "fixed", Platforms: map[string]contract.PlatformCapacity{}, CPUBudgetMilli: w.cpu[0], CPUUsedMilli: w.cpu[1]},
		Goldens:  w.goldens}
	for _, l := range w.leases {
		out.Leases = append(out.Leases, *l)
	}
	for p, m := range w.maxRun {
		pc := contract.PlatformCapacity{MaxRunning: m, MaxManaged: 3 * m, Running: w.runningLocked(p), Managed: w.runningLocked(p), Reserved: w.reserved[p]}
		out.Capacity.Platforms[p] = pc
		out.Capacity.MaxRunning += pc.MaxRunning
		out.Capacity.MaxManaged += pc.MaxManaged
		out.Capacity.Running += pc.Running
		out.Capacity.Managed += pc.Managed
		out.Capacity.Reserved += pc.Reserved
	}
	return out
}

func (w *fakeWorker) devicesLocked() []contract.Device {
	out := []contract.Device{}
	for _, d := range w.devices {
		out = append(out, *d)
	}
	return out
}

// fakeConn is one uplink to a fakeWorker.
type fakeConn struct {
	w    *fakeWorker
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	subs map[int]func(string, json.RawMessage)
	nsub int
}

func (c *fakeConn) Hello() contract.HelloOut {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return contract.HelloOut{Protocol: c.w.proto, Selected: contract.ProtocolMax, Role: contract.RoleAdmin, Principal: "gateway",
		Version: "1.0.0", InstanceID: c.w.id, Mode: "worker"}
}

func (c *fakeConn) Done() <-chan struct{} { return c.done }

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

func lost() error {
	return contract.Errorf(contract.CodeConnectionLost, "connection to the daemon was lost")
}

func (c *fakeConn) Call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error {
	select {
	case <-c.done:
		return lost()
	default:
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	res, err := c.handle(ctx, method, raw, notify)
	if err != nil {
		return err
	}
	select {
	case <-c.done:
		return lost()
	default:
	}
	if out != nil {
		b, _ := json.Marshal(res)
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *fakeConn) Stream(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error {
	if method != contract.EventsSubscribe.Name {
		return c.Call(ctx, method, in, out, notify)
	}
	select {
	case <-c.done:
		return lost()
	default:
	}
	var sub contract.EventsSubscribeIn
	b, _ := json.Marshal(in)
	_ = json.Unmarshal(b, &sub)
	c.w.emitMu.Lock()
	defer c.w.emitMu.Unlock()
	c.w.mu.Lock()
	res := contract.EventsSubscribeOut{Events: []contract.Event{}}
	for _, e := range c.w.backlog {
		if e.Seq > sub.Since {
			res.Events = append(res.Events, e)
		}
	}
	c.w.mu.Unlock()
	c.mu.Lock()
	c.nsub++
	id := c.nsub
	c.subs[id] = notify
	c.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-c.done:
		}
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}()
	rb, _ := json.Marshal(res)
	return json.Unmarshal(rb, out)
}

func decode[T any](raw []byte) T {
	var v T
	_ = json.Unmarshal(raw, &v)
	return v
}

func (c *fakeConn) handle(ctx context.Context, method string, raw []byte, notify func(string, json.RawMessage)) (any, error) {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	switch method {
	case contract.StatusGet.Name:
		w.calls = append(w.calls, method)
		return w.status(), nil
	case contract.ListGet.Name:
		w.calls = append(w.calls, method)
		return contract.ListGetOut{Devices: w.devicesLocked()}, nil
	case contract.CatalogGet.Name:
		w.calls = append(w.calls, method)
		return contract.CatalogGetOut{Platforms: w.catalog}, nil
	case contract.ConfigGet.Name:
		w.calls = append(w.calls, method)
		cfg, _ := json.Marshal(map[string]any{"mode": "worker", "downloads": map[string]any{"policy": w.policy}, "log": map[string]any{"level": "info"}})
		return contract.ConfigGetOut{Path: "/x/config.json", Config: cfg}, nil
	case contract.LeaseList.Name:
		w.calls = append(w.calls, method)
		out := contract.LeaseListOut{Leases: []contract.Lease{}}
		for _, l := range w.leases {
			out.Leases = append(out.Leases, *l)
		}
		return out, nil
	case contract.LeaseGet.Name:
		in := decode[contract.LeaseGetIn](raw)
		w.calls = append(w.calls, method+" "+in.LeaseID)
		l := w.leases[in.LeaseID]
		if l == nil {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %s", in.LeaseID)
		}
		return *l, nil
	case contract.LeaseRenew.Name:
		in := decode[contract.LeaseRenewIn](raw)
		w.calls = append(w.calls, method+" "+in.LeaseID)
		l := w.leases[in.LeaseID]
		if l == nil {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %s", in.LeaseID)
		}
		if in.TTLMs > 0 {
			l.TTLMs = in.TTLMs
		}
		l.LastRenewedAt = w.clock.Now()
		l.ExpiresAt = l.LastRenewedAt.Add(time.Duration(l.TTLMs) * time.Millisecond)
		return *l, nil
	case contract.LeaseRelease.Name:
		in := decode[contract.LeaseReleaseIn](raw)
		w.calls = append(w.calls, method+" "+in.LeaseID)
		if w.leases[in.LeaseID] == nil {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %s", in.LeaseID)
		}
		w.mu.Unlock()
		w.release(in.LeaseID, "released")
		w.mu.Lock()
		return contract.LeaseReleaseOut{LeaseID: in.LeaseID, Released: true}, nil
	case contract.LeaseCancel.Name:
		in := decode[contract.LeaseCancelIn](raw)
		w.calls = append(w.calls, method+" "+in.RequesterID)
		ch := w.working[in.RequesterID]
		if ch == nil {
			return nil, contract.Errorf(contract.CodeNoPendingRequest, "nothing pending")
		}
		close(ch)
		delete(w.working, in.RequesterID)
		return contract.LeaseCancelOut{Cancelled: true}, nil
	case contract.LeaseRequest.Name:
		in := decode[contract.LeaseRequestIn](raw)
		w.calls = append(w.calls, fmt.Sprintf("%s %s owner=%s noWait=%v key=%s", method, in.RequesterID, in.OwnerID, in.NoWait, in.IdempotencyKey))
		return w.request(ctx, c, in, notify)
	case contract.DeviceExec.Name:
		in := decode[contract.DeviceExecIn](raw)
		w.calls = append(w.calls, method+" "+in.LeaseID+" "+in.RequesterID)
		l := w.leases[in.LeaseID]
		if l == nil {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %s", in.LeaseID)
		}
		if in.RequesterID != l.RequesterID {
			return nil, contract.Errorf(contract.CodeForbidden, "lease %s belongs to requester %q, not %q", l.LeaseID, l.RequesterID, in.RequesterID)
		}
		outs, code := w.execOut, w.execCode
		w.mu.Unlock()
		for _, o := range outs {
			notify(contract.NotifyOutput, withRequestID(o))
		}
		w.mu.Lock()
		return contract.DeviceExecOut{ExitCode: code}, nil
	case contract.DeviceUpload.Name:
		in := decode[contract.DeviceUploadIn](raw)
		w.calls = append(w.calls, fmt.Sprintf("%s %s %s off=%d len=%d final=%v", method, in.LeaseID, in.Name, in.Offset, len(in.Data), in.Final))
		if w.leases[in.LeaseID] == nil {
			return nil, contract.Errorf(contract.CodeUnknownLease, "no lease %s", in.LeaseID)
		}
		if w.uploadCap > 0 && in.Offset+int64(len(in.Data)) > w.uploadCap {
			return nil, contract.Errorf(contract.CodeUploadTooLarge, "over the cap")
		}
		return contract.DeviceUploadOut{Name: in.Name, Received: in.Offset + int64(len(in.Data)), Complete: in.Final}, nil
	}
	return nil, contract.Errorf(contract.CodeUnknownOperation, "fake worker: %s", method)
}

// request serves a forwarded lease.request (called with w.mu held).
func (w *fakeWorker) request(ctx context.Context, c *fakeConn, in contract.LeaseRequestIn, notify func(string, json.RawMessage)) (any, error) {
	if in.IdempotencyKey == "" {
		return w.serve(ctx, c, in, notify)
	}
	k := in.RequesterID + "\x00" + in.IdempotencyKey
	if o, ok := w.keyed[k]; ok {
		if o.err != nil {
			return nil, o.err
		}
		if l := w.leases[o.lease.LeaseID]; l != nil {
			out := *l
			return out, nil
		}
		return nil, contract.Errorf(contract.CodeUnknownLease, "lease %s has ended", o.lease.LeaseID)
	}
	res, err := w.serve(ctx, c, in, notify)
	if ce := contract.AsError(err); err == nil || (ce != nil && ce.Code != contract.CodeConnectionLost) {
		l, _ := res.(contract.Lease)
		w.keyed[k] = keyedOutcome{lease: l, err: err}
	}
	return res, err
}

func (w *fakeWorker) serve(ctx context.Context, c *fakeConn, in contract.LeaseRequestIn, notify func(string, json.RawMessage)) (any, error) {
	for _, l := range w.leases {
		if l.RequesterID == in.RequesterID {
			return nil, contract.Errorf(contract.CodeRequesterLeased, "this requester already holds lease %s", l.LeaseID).WithDetails("leaseId", l.LeaseID)
		}
	}
	if w.refuse > 0 {
		w.refuse--
		return nil, contract.Errorf(contract.CodeNoCapacity, "no capacity")
	}
	for _, d := range w.devices {
		if d.Platform == in.Platform && d.Runtime.Lifecycle == contract.StateReady && d.Runtime.Lease == nil &&
			(in.Model == "" || d.Model == in.Model) && (in.OSVersion == "" || strings.HasPrefix(d.OSVersion, in.OSVersion)) {
			l := w.grantLocked(d, in)
			w.mu.Unlock()
			w.emit(contract.Event{Type: "lease.granted", LeaseID: l.LeaseID, RequesterID: l.RequesterID, DeviceID: d.ID, Platform: d.Platform, Data: map[string]any{"ownerId": l.OwnerID}})
			w.mu.Lock()
			return l, nil
		}
	}
	if w.runningLocked(in.Platform)+w.reserved[in.Platform] >= w.maxRun[in.Platform] {
		return nil, contract.Errorf(contract.CodeNoCapacity, "no capacity")
	}
	w.reserved[in.Platform]++
	cancel := make(chan struct{})
	w.working[in.RequesterID] = cancel
	hold := w.hold
	w.nextDev++
	devID := fmt.Sprintf("%s-dev%d", w.id, w.nextDev)
	w.mu.Unlock()
	notify(contract.NotifyProgress, withRequestID(contract.Progress{Phase: "provisioning", DeviceID: devID, EtaMs: 2000}))
	var err error
	if hold != nil {
		select {
		case <-hold:
		case <-cancel:
			err = contract.Errorf(contract.CodeRequestCancelled, "the request was cancelled")
		case <-c.done:
			err = lost()
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	w.mu.Lock()
	w.reserved[in.Platform]--
	if w.working[in.RequesterID] == cancel {
		delete(w.working, in.RequesterID)
	}
	if err != nil {
		return nil, err
	}
	model := in.Model
	if model == "" {
		model = "iPhone 16"
	}
	d := &contract.Device{ID: devID, Platform: in.Platform, Model: model, OSVersion: "18.2", Runtime: contract.DeviceRuntime{Lifecycle: contract.StateReady}, CreatedAt: w.clock.Now()}
	w.devices = append(w.devices, d)
	l := w.grantLocked(d, in)
	w.mu.Unlock()
	notify(contract.NotifyProgress, withRequestID(contract.Progress{Phase: "granted", DeviceID: devID}))
	w.emit(contract.Event{Type: "lease.granted", LeaseID: l.LeaseID, RequesterID: l.RequesterID, DeviceID: d.ID, Platform: d.Platform, Data: map[string]any{"ownerId": l.OwnerID}})
	w.mu.Lock()
	return l, nil
}

// ---- harness ----

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	clock *fake.Clock
	file  string
	g     *Gateway
	d     *dispatch.Dispatcher
}

func newHarness(t *testing.T, mod ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, clock: fake.NewClock(t0), file: filepath.Join(t.TempDir(), "workers.json")}
	h.start(mod...)
	return h
}

// start builds a gateway (again, for restart tests) on the same clock and
// drain file.
func (h *harness) start(mod ...func(*Options)) {
	o := Options{InstanceID: "gw1", Clock: h.clock, DrainFile: h.file,
		DaemonInfo: func() contract.DaemonInfo { return contract.DaemonInfo{Version: "1.0.0", PID: 42} }}
	for _, m := range mod {
		m(&o)
	}
	g, err := New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.g = g
	h.d = dispatch.New(dispatch.Options{LeaseOwner: g.LeaseOwner, MapError: MapError})
	g.Register(h.d)
	h.t.Cleanup(g.Close)
}

func (h *harness) attach(w *fakeWorker) *fakeConn {
	h.t.Helper()
	c := w.connect()
	if err := h.g.Attach(context.Background(), w.id, w.label, c); err != nil {
		h.t.Fatalf("attach %s: %v", w.id, err)
	}
	return c
}

// settle waits until a worker's view has absorbed the refresh its attach
// (or anything since) asked for, so a test can change the worker behind
// the gateway's back deterministically.
func (h *harness) settle(id string) uint64 {
	h.t.Helper()
	var v uint64
	eventually(h.t, "the view of "+id+" settles", func() bool {
		h.g.mu.Lock()
		defer h.g.mu.Unlock()
		w := h.g.workers[id]
		if w == nil || w.link == nil || w.refreshing || len(w.link.refresh) > 0 || w.version < 2 {
			return false
		}
		v = w.version
		return true
	})
	return v
}

// waiting reports whether requester's request is in the fleet queue and
// not with any worker.
func (h *harness) waiting(requester string) bool {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	p := h.g.pendingBy[requester]
	return p != nil && p.state == stQueued
}

func agent(p string) contract.Session {
	return contract.Session{Principal: p, Role: contract.RoleAgent, Compatible: true}
}

var admin = contract.Session{Principal: "operator", Role: contract.RoleAdmin, Compatible: true}

// pushes records the pushes one call received.
type pushes struct {
	mu   sync.Mutex
	list []struct {
		method string
		params any
	}
}

func (p *pushes) add(method string, params any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, struct {
		method string
		params any
	}{method, params})
}

func (p *pushes) progress() []contract.Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []contract.Progress
	for _, x := range p.list {
		if pr, ok := x.params.(contract.Progress); ok {
			out = append(out, pr)
		}
	}
	return out
}

func (p *pushes) outputs() []contract.ExecOutput {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []contract.ExecOutput
	for _, x := range p.list {
		if o, ok := x.params.(contract.ExecOutput); ok {
			out = append(out, o)
		}
	}
	return out
}

// do runs one operation through the dispatcher, decoding the result into
// out (when non-nil).
func (h *harness) do(ctx context.Context, s contract.Session, method string, in, out any, ps *pushes) *contract.Error {
	h.t.Helper()
	params, _ := json.Marshal(in)
	call := &dispatch.Call{Session: s}
	if ps != nil {
		call.Notify = ps.add
	}
	res, err := h.d.Dispatch(ctx, call, method, params)
	call.RunAfter()
	if err != nil {
		return err
	}
	if out != nil {
		b, _ := json.Marshal(res)
		if e := json.Unmarshal(b, out); e != nil {
			h.t.Fatalf("decode %s: %v", method, e)
		}
	}
	return nil
}

type leaseResult struct {
	lease contract.Lease
	err   *contract.Error
}

// request starts a lease.request in the background.
func (h *harness) request(s contract.Session, in contract.LeaseRequestIn, ps *pushes) <-chan leaseResult {
	ch := make(chan leaseResult, 1)
	go func() {
		var l contract.Lease
		err := h.do(context.Background(), s, contract.LeaseRequest.Name, in, &l, ps)
		ch <- leaseResult{l, err}
	}()
	return ch
}

func (h *harness) lease(s contract.Session, in contract.LeaseRequestIn) contract.Lease {
	h.t.Helper()
	r := wait(h.t, h.request(s, in, nil))
	if r.err != nil {
		h.t.Fatalf("lease.request %+v: %v", in, r.err)
	}
	return r.lease
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("timed out waiting")
	}
	var zero T
	return zero
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) status(s contract.Session) contract.StatusGetOut {
	h.t.Helper()
	var st contract.StatusGetOut
	if err := h.do(context.Background(), s, contract.StatusGet.Name, struct{}{}, &st, nil); err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) view(id string) (contract.WorkerView, bool) {
	for _, v := range h.g.Views() {
		if v.ID == id {
			return v, true
		}
	}
	return contract.WorkerView{}, false
}

func (h *harness) queueDepth() int { return h.status(admin).QueueDepth }

// awaitEvent waits for a fact published after the outcome it goes with
// (facts are published once the gateway's lock is released).
func (h *harness) awaitEvent(typ string, match func(contract.Event) bool) {
	h.t.Helper()
	eventually(h.t, "a "+typ+" fact", func() bool { return h.hasEvent(typ, match) })
}

func (h *harness) hasEvent(typ string, match func(contract.Event) bool) bool {
	evs, _ := h.g.bus.Since(0)
	for _, e := range evs {
		if e.Type == typ && (match == nil || match(dispatch.EventOut(e))) {
			return true
		}
	}
	return false
}
