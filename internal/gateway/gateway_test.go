package gateway

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/testhost"
)

func code(t *testing.T, err *contract.Error, want contract.Code) {
	t.Helper()
	if err == nil || err.Code != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestRegisterCoversEveryOperationButTheDaemonsOwn(t *testing.T) {
	h := newHarness(t)
	got := map[string]bool{}
	for _, op := range h.d.Ops() {
		got[op.Name] = true
	}
	owned := map[string]bool{contract.Hello.Name: true, contract.TokenCreate.Name: true, contract.TokenList.Name: true,
		contract.TokenRevoke.Name: true, contract.ConfigGet.Name: true, contract.DaemonStop.Name: true}
	for _, op := range contract.Registry() {
		if got[op.Name] == owned[op.Name] {
			t.Errorf("%s: registered=%v, but the daemon owns it=%v", op.Name, got[op.Name], owned[op.Name])
		}
	}
}

func TestWorkerOnlyOperationsAreUnsupported(t *testing.T) {
	h := newHarness(t)
	for _, name := range contract.WorkerOnly() {
		err := h.do(context.Background(), admin, name, struct{}{}, nil, nil)
		code(t, err, contract.CodeUnsupportedInGateway)
	}
}

func TestWarmHitPreferredThenFreeCapacity(t *testing.T) {
	h := newHarness(t)
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	a.maxRun["ios"] = 2
	a.addDevice("ios", "iPhone 16", "18.2")
	b.maxRun["ios"] = 4
	h.attach(a)
	h.attach(b)

	l1 := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16"})
	if l1.Worker == nil || l1.Worker.ID != "wa" || !strings.HasPrefix(l1.LeaseID, "wa.lse_") {
		t.Fatalf("warm hit should land on wa: %+v", l1)
	}
	if l1.Device == nil || l1.Device.WorkerID != "wa" || l1.Device.DeviceSet != "" || l1.Device.Env != nil {
		t.Fatalf("device must carry its worker and no worker-local addresses: %+v", l1.Device)
	}
	// No warm device left: most free running capacity (wb: 4 free vs wa: 1).
	l2 := h.lease(agent("bob"), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16"})
	if l2.Worker.ID != "wb" {
		t.Fatalf("free capacity should pick wb: %+v", l2.Worker)
	}
	if got := a.called("lease.request"); len(got) != 1 || !strings.Contains(got[0], "gw:gw1:alice owner=gw:gw1:alice noWait=true") {
		t.Fatalf("forwarded request on wa: %v", got)
	}
	if !h.hasEvent("request.dispatched", func(e contract.Event) bool { return e.WorkerID == "wb" && e.RequesterID == "bob" }) {
		t.Fatal("no request.dispatched for bob on wb")
	}
}

func TestDrainedAndIncompatibleWorkersAreSkipped(t *testing.T) {
	h := newHarness(t)
	a, old, c := newFakeWorker("wa", h.clock), newFakeWorker("wold", h.clock), newFakeWorker("wc", h.clock)
	a.maxRun["ios"] = 9
	a.addDevice("ios", "iPhone 16", "18.2")
	old.maxRun["ios"] = 9
	old.proto = contract.ProtocolRange{Min: 3, Max: 4}
	c.maxRun["ios"] = 1
	h.attach(a)
	h.attach(old)
	h.attach(c)
	var out contract.WorkerOut
	if err := h.do(context.Background(), admin, contract.WorkerDrain.Name, contract.WorkerIn{ID: "wa"}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if !out.Worker.Drained {
		t.Fatalf("drain answer %+v", out.Worker)
	}
	v, ok := h.view("wold")
	if !ok || v.State != contract.WorkerIncompatible || v.Protocol.Max != 4 {
		t.Fatalf("the incompatible worker must stay visible: %+v", v)
	}
	if len(old.called("status.get")) != 0 {
		t.Fatal("the gateway spoke the contract to an incompatible worker")
	}
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16"})
	if l.Worker.ID != "wc" {
		t.Fatalf("granted on %s, want wc", l.Worker.ID)
	}
	// wc is now full; nothing else may take the next one.
	r := wait(t, h.request(agent("bob"), contract.LeaseRequestIn{Platform: "ios", NoWait: true}, nil))
	code(t, r.err, contract.CodeNoCapacity)
	if len(a.called("lease.request"))+len(old.called("lease.request")) != 0 {
		t.Fatal("a drained or incompatible worker was dispatched to")
	}
	// The drained worker keeps its leases: renew through the gateway works.
	local := a.localLease("gw:gw1:carol", "ios", false)
	var rl contract.Lease
	if err := h.do(context.Background(), admin, contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: "wa." + local.LeaseID}, &rl, nil); err != nil {
		t.Fatal(err)
	}
	if !h.hasEvent("worker.drain-started", func(e contract.Event) bool { return e.WorkerID == "wa" }) {
		t.Fatal("no worker.drain-started")
	}
}

func TestProgressDispatchesAndRelays(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.hold = make(chan struct{})
	h.attach(a)
	ps := &pushes{}
	res := h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, ps)
	eventually(t, "the provisioning push is relayed", func() bool {
		for _, p := range ps.progress() {
			if p.Phase == "provisioning" {
				return true
			}
		}
		return false
	})
	if !h.hasEvent("request.dispatched", func(e contract.Event) bool { return e.RequesterID == "alice" && e.WorkerID == "wa" }) {
		t.Fatal("the first progress push did not dispatch the request")
	}
	if d := h.queueDepth(); d != 0 {
		t.Fatalf("a dispatched request is still in the fleet queue (%d)", d)
	}
	// A second request for the same requester is refused while the first
	// is in the worker's hands.
	r2 := wait(t, h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, nil))
	code(t, r2.err, contract.CodeRequesterQueued)
	close(a.hold)
	r := wait(t, res)
	if r.err != nil || r.lease.Worker.ID != "wa" {
		t.Fatalf("%+v %v", r.lease, r.err)
	}
}

func TestStaleNoCapacityStaysQueuedUntilTheViewRefreshes(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.maxRun["ios"] = 1
	h.attach(a)
	h.settle("wa")
	// A local agent on the worker takes the only slot, and the gateway's
	// view does not hear about it: it is stale.
	local := a.localLease("local-agent", "ios", true)
	ps := &pushes{}
	res := h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, ps)
	eventually(t, "the worker refuses the stale dispatch", func() bool { return len(a.called("lease.request")) == 1 })
	eventually(t, "the request waits in the fleet queue", func() bool { return h.waiting("alice") && h.queueDepth() == 1 })
	select {
	case r := <-res:
		t.Fatalf("a stale NO_CAPACITY ended the request: %v", r.err)
	case <-time.After(30 * time.Millisecond):
	}
	eventually(t, "the refusal refreshed the view", func() bool {
		v, _ := h.view("wa")
		return v.Leases == 1
	})
	if h.hasEvent("request.refused", nil) {
		t.Fatal("the worker's refusal of a forwarded request leaked onto the gateway's bus")
	}
	eventually(t, "alice hears her queue position", func() bool { return len(ps.progress()) > 0 })
	// The local lease ends; the worker's event refreshes the view, and the
	// queued request is granted.
	a.release(local.LeaseID, "released")
	r := wait(t, res)
	if r.err != nil || r.lease.Worker.ID != "wa" {
		t.Fatalf("%+v %v", r.lease, r.err)
	}
	if p := ps.progress(); len(p) == 0 || p[0].Phase != "queued" || p[0].QueuePosition != 1 {
		t.Fatalf("progress %+v", p)
	}
}

func TestRefusalWaitsForANewerViewThenTheBackstopTickRetries(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RefreshInterval = 30 * time.Second })
	a := newFakeWorker("wa", h.clock)
	a.refuse = 1 // the worker refuses once though its view says free
	h.attach(a)
	v := h.settle("wa")
	res := h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, nil)
	eventually(t, "the first dispatch is refused", func() bool { return len(a.called("lease.request")) == 1 })
	eventually(t, "the request is back in the queue", func() bool { return h.waiting("alice") })
	if got := h.settle("wa"); got != v+1 {
		t.Fatalf("the refusal refreshed the view %d times", got-v)
	}
	time.Sleep(20 * time.Millisecond)
	if n := len(a.called("lease.request")); n != 1 {
		t.Fatalf("re-dispatched %d times on an unchanged view", n)
	}
	h.clock.Advance(30 * time.Second) // the backstop tick
	r := wait(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
}

func TestNoWaitAndQueueTimeout(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.maxRun["ios"] = 1
	h.attach(a)
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})

	r := wait(t, h.request(agent("bob"), contract.LeaseRequestIn{Platform: "ios", NoWait: true}, nil))
	code(t, r.err, contract.CodeNoCapacity)
	if r.err.RetryAfterMs == nil {
		t.Fatal("NO_CAPACITY without a retry hint")
	}

	ps := &pushes{}
	res := h.request(agent("carol"), contract.LeaseRequestIn{Platform: "ios", TimeoutMs: 5000}, ps)
	eventually(t, "carol queues", func() bool { return h.queueDepth() == 1 })
	h.clock.Advance(4 * time.Second)
	select {
	case r := <-res:
		t.Fatalf("timed out early: %v", r.err)
	case <-time.After(20 * time.Millisecond):
	}
	h.clock.Advance(time.Second)
	r = wait(t, res)
	code(t, r.err, contract.CodeQueueTimeout)
	if h.queueDepth() != 0 {
		t.Fatal("a timed-out request is still queued")
	}
	h.awaitEvent("request.timed-out", func(e contract.Event) bool { return e.RequesterID == "carol" })
}

func TestCancelAndQueuePositions(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.maxRun["ios"] = 1
	h.attach(a)
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	bobP, carolP := &pushes{}, &pushes{}
	bob := h.request(agent("bob"), contract.LeaseRequestIn{Platform: "ios"}, bobP)
	eventually(t, "bob queues", func() bool { return h.queueDepth() == 1 })
	carol := h.request(agent("carol"), contract.LeaseRequestIn{Platform: "ios"}, carolP)
	eventually(t, "carol is second", func() bool {
		p := carolP.progress()
		return len(p) > 0 && p[len(p)-1].QueuePosition == 2
	})
	// mallory's "bob" is her own scoped requester "mallory/bob": she
	// cannot reach bob's request (his own cancel below still finds it).
	code(t, h.do(context.Background(), agent("mallory"), contract.LeaseCancel.Name, contract.LeaseCancelIn{RequesterID: "bob"}, nil, nil), contract.CodeNoPendingRequest)
	var out contract.LeaseCancelOut
	if err := h.do(context.Background(), agent("bob"), contract.LeaseCancel.Name, contract.LeaseCancelIn{}, &out, nil); err != nil || !out.Cancelled {
		t.Fatalf("%+v %v", out, err)
	}
	code(t, wait(t, bob).err, contract.CodeRequestCancelled)
	eventually(t, "carol moves up", func() bool {
		p := carolP.progress()
		return p[len(p)-1].QueuePosition == 1
	})
	code(t, h.do(context.Background(), agent("bob"), contract.LeaseCancel.Name, contract.LeaseCancelIn{}, nil, nil), contract.CodeNoPendingRequest)
	// A caller that goes away withdraws its queued request.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan *contract.Error, 1)
	go func() {
		gone <- h.do(ctx, agent("dave"), contract.LeaseRequest.Name, contract.LeaseRequestIn{Platform: "ios"}, nil, nil)
	}()
	eventually(t, "dave queues", func() bool { return h.queueDepth() == 2 })
	cancel()
	<-gone
	eventually(t, "dave is withdrawn", func() bool { return h.queueDepth() == 1 })
	h.awaitEvent("request.abandoned", func(e contract.Event) bool { return e.RequesterID == "dave" })
	if err := h.do(context.Background(), admin, contract.LeaseCancel.Name, contract.LeaseCancelIn{RequesterID: "carol"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	code(t, wait(t, carol).err, contract.CodeRequestCancelled)
}

func TestCancelReachesTheWorkerOnceDispatched(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.hold = make(chan struct{})
	h.attach(a)
	res := h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, nil)
	eventually(t, "dispatched", func() bool { return h.hasEvent("request.dispatched", nil) })
	if err := h.do(context.Background(), agent("alice"), contract.LeaseCancel.Name, contract.LeaseCancelIn{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	code(t, wait(t, res).err, contract.CodeRequestCancelled)
	if got := a.called("lease.cancel"); len(got) != 1 || got[0] != "lease.cancel gw:gw1:alice" {
		t.Fatalf("worker cancels %v", got)
	}
}

func TestLeaseIDsSplitAndForward(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("3f81a2c4", h.clock)
	h.attach(a)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", RequesterID: "job-7", TTLMs: 60000})
	if l.LeaseID != "3f81a2c4.lse_1" || l.RequesterID != "alice/job-7" || l.OwnerID != "alice" || l.Worker == nil || l.Worker.Label != "mac-3f81a2c4" {
		t.Fatalf("lease %+v", l)
	}
	h.clock.Advance(10 * time.Second)
	var rl contract.Lease
	if err := h.do(context.Background(), agent("alice"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID}, &rl, nil); err != nil {
		t.Fatal(err)
	}
	if !rl.ExpiresAt.Equal(t0.Add(70*time.Second)) || rl.LeaseID != l.LeaseID {
		t.Fatalf("renewed %+v", rl)
	}
	var gl contract.Lease
	if err := h.do(context.Background(), agent("alice"), contract.LeaseGet.Name, contract.LeaseGetIn{LeaseID: l.LeaseID}, &gl, nil); err != nil || gl.OwnerID != "alice" {
		t.Fatalf("%+v %v", gl, err)
	}
	// Another agent may not touch it; an admin may.
	code(t, h.do(context.Background(), agent("bob"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID}, nil, nil), contract.CodeForbidden)
	var list contract.LeaseListOut
	_ = h.do(context.Background(), agent("bob"), contract.LeaseList.Name, struct{}{}, &list, nil)
	if len(list.Leases) != 0 {
		t.Fatalf("bob sees %+v", list.Leases)
	}
	_ = h.do(context.Background(), agent("alice"), contract.LeaseList.Name, struct{}{}, &list, nil)
	if len(list.Leases) != 1 || list.Leases[0].LeaseID != l.LeaseID {
		t.Fatalf("alice sees %+v", list.Leases)
	}
	var rel contract.LeaseReleaseOut
	if err := h.do(context.Background(), agent("alice"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, &rel, nil); err != nil || !rel.Released || rel.LeaseID != l.LeaseID {
		t.Fatalf("%+v %v", rel, err)
	}
	want := []string{"lease.renew lse_1", "lease.get lse_1", "lease.release lse_1"}
	var got []string
	for _, c := range a.called("lease.") {
		if strings.HasSuffix(c, " lse_1") {
			got = append(got, c)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("forwarded %v, want %v", got, want)
	}
	// Gone on the worker is gone.
	code(t, h.do(context.Background(), admin, contract.LeaseGet.Name, contract.LeaseGetIn{LeaseID: l.LeaseID}, nil, nil), contract.CodeUnknownLease)
	code(t, h.do(context.Background(), admin, contract.LeaseGet.Name, contract.LeaseGetIn{LeaseID: "no-dot"}, nil, nil), contract.CodeUnknownLease)
	// The requester may lease again.
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", RequesterID: "job-7"})
}

func TestRenewOnADisconnectedWorkerIsUnreachable(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	conn := h.attach(a)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	_ = conn.Close()
	eventually(t, "the view turns disconnected", func() bool {
		v, _ := h.view("wa")
		return v.State == contract.WorkerDisconnected
	})
	err := h.do(context.Background(), agent("alice"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID}, nil, nil)
	code(t, err, contract.CodeWorkerUnreachable)
	if err.Info().Kind != contract.KindTransport || !err.Retryable {
		t.Fatalf("%+v", err)
	}
	code(t, h.do(context.Background(), agent("alice"), contract.LeaseRelease.Name, contract.LeaseReleaseIn{LeaseID: l.LeaseID}, nil, nil), contract.CodeWorkerUnreachable)
	// Another agent is still refused by ownership, from the index.
	code(t, h.do(context.Background(), agent("bob"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID}, nil, nil), contract.CodeForbidden)
	// A worker the gateway does not know yet is unreachable, not "unknown".
	code(t, h.do(context.Background(), admin, contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: "wz.lse_1"}, nil, nil), contract.CodeWorkerUnreachable)
	st := h.status(admin)
	if len(st.Leases) != 1 || st.Leases[0].LeaseID != l.LeaseID || len(st.Workers) != 1 || st.Workers[0].State != contract.WorkerDisconnected {
		t.Fatalf("the disconnected view must keep its last state: %+v", st)
	}
	if st.Capacity.MaxRunning != 0 {
		t.Fatalf("a disconnected worker's capacity was counted: %+v", st.Capacity)
	}
	// The worker comes back within the TTL: the lease renews again.
	h.attach(a)
	if err := h.do(context.Background(), agent("alice"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID}, nil, nil); err != nil {
		t.Fatal(err)
	}
	h.awaitEvent("worker.disconnected", nil)
}

func TestOneLeasePerRequesterAcrossTheFleet(t *testing.T) {
	h := newHarness(t)
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	a.maxRun["ios"], b.maxRun["ios"] = 1, 5
	h.attach(a)
	h.attach(b)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	r := wait(t, h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, nil))
	code(t, r.err, contract.CodeRequesterLeased)
	if r.err.Details["leaseId"] != l.LeaseID {
		t.Fatalf("the refusal must name the gateway lease: %+v", r.err)
	}
	// Another requester on the same connection is fine.
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", RequesterID: "alice/2"})
}

func TestIndexRebuiltOnReconnectAndRestart(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.maxRun["ios"] = 5
	h.attach(a)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	// Leases this gateway did not issue: a local agent's, another gateway's.
	a.localLease("local-bob", "ios", false)
	a.localLease("gw:gw2:carol", "ios", false)

	h.g.Close()
	h.start() // same instance id, same drain file: a gateway restart
	h.attach(a)
	r := wait(t, h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, nil))
	code(t, r.err, contract.CodeRequesterLeased)
	if r.err.Details["leaseId"] != l.LeaseID {
		t.Fatalf("%+v", r.err)
	}
	// Foreign leases are not this gateway's: their requesters may lease.
	h.lease(agent("local-bob"), contract.LeaseRequestIn{Platform: "ios"})
	h.lease(agent("carol"), contract.LeaseRequestIn{Platform: "ios"})
	var list contract.LeaseListOut
	if err := h.do(context.Background(), admin, contract.LeaseList.Name, struct{}{}, &list, nil); err != nil {
		t.Fatal(err)
	}
	if len(list.Leases) != 3 {
		t.Fatalf("the gateway lists only its own leases: %+v", list.Leases)
	}
	// An agent named like a worker-local principal does not own its lease.
	st := h.status(agent("local-bob"))
	for _, sl := range st.Leases {
		if strings.HasPrefix(sl.OwnerID, "worker:") {
			t.Fatalf("a worker-local lease is visible to a gateway agent: %+v", sl)
		}
	}
	if err := h.do(context.Background(), agent("alice"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID}, nil, nil); err != nil {
		t.Fatalf("the lease must stay renewable after a restart: %v", err)
	}
	// release --all is the caller's requester's: the admin's own, none.
	var ra contract.LeaseReleaseAllOut
	if err := h.do(context.Background(), admin, contract.LeaseReleaseAll.Name, struct{}{}, &ra, nil); err != nil || len(ra.Released) != 0 {
		t.Fatalf("admin release-all without everyone: %+v %v", ra, err)
	}
	code(t, h.do(context.Background(), agent("alice"), contract.LeaseReleaseAll.Name, contract.LeaseReleaseAllIn{Everyone: true}, nil, nil), contract.CodeForbidden)
	// --everyone touches only this gateway's leases.
	if err := h.do(context.Background(), admin, contract.LeaseReleaseAll.Name, contract.LeaseReleaseAllIn{Everyone: true}, &ra, nil); err != nil || len(ra.Released) != 3 {
		t.Fatalf("%+v %v", ra, err)
	}
	a.mu.Lock()
	left := len(a.leases)
	a.mu.Unlock()
	if left != 2 {
		t.Fatalf("release --all left %d leases on the worker, want the 2 foreign ones", left)
	}
}

func TestExecOwnershipOnBothHops(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.execOut = []contract.ExecOutput{{Stream: "stdout", Chunk: "booted\n"}, {Stream: "stderr", Chunk: "warn\n"}}
	a.execCode = 3
	h.attach(a)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	exec := func(s contract.Session, in contract.DeviceExecIn, ps *pushes) (contract.DeviceExecOut, *contract.Error) {
		var out contract.DeviceExecOut
		err := h.do(context.Background(), s, contract.DeviceExec.Name, in, &out, ps)
		return out, err
	}
	ps := &pushes{}
	out, err := exec(agent("alice"), contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "simctl", Args: []string{"io", "booted"}}, ps)
	if err != nil || out.ExitCode != 3 {
		t.Fatalf("%+v %v", out, err)
	}
	if o := ps.outputs(); len(o) != 2 || o[0] != a.execOut[0] || o[1] != a.execOut[1] {
		t.Fatalf("output relayed as %+v", o)
	}
	if got := a.called("device.exec"); len(got) != 1 || got[0] != "device.exec lse_1 gw:gw1:alice" {
		t.Fatalf("forwarded %v", got)
	}
	// First hop: another agent fails the ownership check; an admin does not
	// bypass the requester check.
	_, err = exec(agent("bob"), contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "simctl"}, nil)
	code(t, err, contract.CodeForbidden)
	_, err = exec(admin, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "simctl"}, nil)
	code(t, err, contract.CodeForbidden)
	if _, err = exec(admin, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "simctl", RequesterID: "alice"}, nil); err != nil {
		t.Fatalf("admin with the lease's requester: %v", err)
	}
	// Second hop: the worker checks the forwarded requester against its own
	// record, whatever the gateway's index says.
	a.mu.Lock()
	a.leases["lse_1"].RequesterID = "gw:gw1:someone-else"
	a.mu.Unlock()
	_, err = exec(agent("alice"), contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "simctl"}, nil)
	code(t, err, contract.CodeForbidden)
	if n := len(a.called("device.exec")); n != 3 {
		t.Fatalf("worker saw %d exec calls, want 3", n)
	}
	// A worker-local lease is never exec'd through the gateway.
	loc := a.localLease("local", "ios", false)
	_, err = exec(admin, contract.DeviceExecIn{LeaseID: "wa." + loc.LeaseID, Tool: "simctl", RequesterID: "local"}, nil)
	code(t, err, contract.CodeForbidden)
}

func TestExecBackstopTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ExecTimeout = time.Minute })
	a := newFakeWorker("wa", h.clock)
	// A worker that never answers exec.
	stuck := make(chan struct{})
	defer close(stuck)
	if err := h.g.Attach(context.Background(), a.id, a.label, hangingExec{WorkerConn: a.connect(), stuck: stuck}); err != nil {
		t.Fatal(err)
	}
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	done := make(chan *contract.Error, 1)
	go func() {
		done <- h.do(context.Background(), agent("alice"), contract.DeviceExec.Name, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "simctl"}, nil, nil)
	}()
	eventually(t, "the backstop is armed", func() bool { return h.clock.Pending() >= 2 })
	h.clock.Advance(time.Minute)
	code(t, wait(t, done), contract.CodeExecTimeout)
}

type hangingExec struct {
	WorkerConn
	stuck chan struct{}
}

func (c hangingExec) Call(ctx context.Context, method string, in, out any, notify func(string, json.RawMessage)) error {
	if method != contract.DeviceExec.Name {
		return c.WorkerConn.Call(ctx, method, in, out, notify)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stuck:
		return nil
	}
}

func TestDrainPersistsAcrossRestarts(t *testing.T) {
	h := newHarness(t)
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	h.attach(a)
	h.attach(b)
	code(t, h.do(context.Background(), admin, contract.WorkerDrain.Name, contract.WorkerIn{ID: "nope"}, nil, nil), contract.CodeUnknownDevice)
	if err := h.do(context.Background(), admin, contract.WorkerDrain.Name, contract.WorkerIn{ID: "wa"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(h.file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("workers.json: %v %v", fi, err)
	}
	h.g.Close()
	h.start()
	h.attach(a)
	h.attach(b)
	v, _ := h.view("wa")
	if !v.Drained {
		t.Fatal("the drain did not survive a gateway restart")
	}
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	if l.Worker.ID != "wb" {
		t.Fatalf("granted on drained %s", l.Worker.ID)
	}
	// A reconnect keeps it drained too.
	h.attach(a)
	if v, _ := h.view("wa"); !v.Drained || v.State != contract.WorkerConnected {
		t.Fatalf("%+v", v)
	}
	var out contract.WorkerOut
	if err := h.do(context.Background(), admin, contract.WorkerUndrain.Name, contract.WorkerIn{ID: "wa"}, &out, nil); err != nil || out.Worker.Drained {
		t.Fatalf("%+v %v", out, err)
	}
	h.g.Close()
	h.start()
	h.attach(a)
	if v, _ := h.view("wa"); v.Drained {
		t.Fatal("undrain did not persist")
	}
	code(t, h.do(context.Background(), agent("x"), contract.WorkerList.Name, struct{}{}, nil, nil), contract.CodeForbidden)
}

func TestRetentionAndRemove(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DisconnectedRetention = 24 * time.Hour })
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	ca := h.attach(a)
	cb := h.attach(b)
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", TTLMs: (30 * time.Hour).Milliseconds()})
	code(t, h.do(context.Background(), admin, contract.WorkerRemove.Name, contract.WorkerIn{ID: "wa"}, nil, nil), contract.CodeDeviceInUse)
	_ = ca.Close()
	_ = cb.Close()
	eventually(t, "both disconnect", func() bool {
		va, _ := h.view("wa")
		vb, _ := h.view("wb")
		return va.State == contract.WorkerDisconnected && vb.State == contract.WorkerDisconnected
	})
	h.clock.Advance(24*time.Hour - time.Second)
	if _, ok := h.view("wb"); !ok {
		t.Fatal("forgotten before the retention elapsed")
	}
	h.clock.Advance(time.Second)
	if _, ok := h.view("wb"); ok {
		t.Fatal("wb (no leases) outlived its retention")
	}
	if _, ok := h.view("wa"); !ok {
		t.Fatal("wa was forgotten while a gateway-issued lease on it was still within its TTL")
	}
	h.clock.Advance(6 * time.Hour)
	if _, ok := h.view("wa"); ok {
		t.Fatal("wa outlived its last lease and the retention")
	}
	if !h.hasEvent("worker.removed", func(e contract.Event) bool { return e.WorkerID == "wa" }) {
		t.Fatal("no worker.removed")
	}
	// worker.remove on a disconnected worker.
	c := newFakeWorker("wc", h.clock)
	cc := h.attach(c)
	_ = cc.Close()
	eventually(t, "wc disconnects", func() bool { v, _ := h.view("wc"); return v.State == contract.WorkerDisconnected })
	if err := h.do(context.Background(), admin, contract.WorkerRemove.Name, contract.WorkerIn{ID: "wc"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.view("wc"); ok {
		t.Fatal("worker.remove left the view")
	}
	code(t, h.do(context.Background(), admin, contract.WorkerRemove.Name, contract.WorkerIn{ID: "wc"}, nil, nil), contract.CodeUnknownDevice)
}

func TestStatusCatalogAndListAggregate(t *testing.T) {
	h := newHarness(t)
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	a.maxRun["ios"] = 2
	a.addDevice("ios", "iPhone 16", "18.2")
	b.maxRun = map[string]int{"ios": 3, "android": 1}
	b.catalog = append(b.catalog, androidCatalog()...)
	b.catalog[0].Runtimes = append(b.catalog[0].Runtimes, contract.CatalogRuntime{Name: "iOS 17.5", Version: "17.5", Identifier: "rt-17-5", Available: true})
	h.attach(a)
	h.attach(b)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16"})
	eventually(t, "the grant reaches the view", func() bool { return len(h.status(admin).Leases) == 1 })
	st := h.status(admin)
	if st.Daemon.Mode != "gateway" || st.Daemon.InstanceID != "gw1" || st.Daemon.PID != 42 {
		t.Fatalf("daemon %+v", st.Daemon)
	}
	if st.Capacity.MaxRunning != 6 || st.Capacity.Platforms["ios"].MaxRunning != 5 || st.Capacity.Platforms["android"].MaxRunning != 1 {
		t.Fatalf("capacity %+v", st.Capacity)
	}
	if len(st.Workers) != 2 || len(st.Devices) != 1 || st.Devices[0].WorkerID != "wa" || st.Devices[0].Runtime.LeaseID() != l.LeaseID {
		t.Fatalf("%+v", st)
	}
	if st.Leases[0].Worker == nil || st.Leases[0].Worker.ID != "wa" || st.Leases[0].OwnerID != "alice" {
		t.Fatalf("lease %+v", st.Leases[0])
	}
	if len(h.status(agent("bob")).Leases) != 0 {
		t.Fatal("an agent sees another's lease")
	}
	var cat contract.CatalogGetOut
	if err := h.do(context.Background(), agent("x"), contract.CatalogGet.Name, contract.CatalogGetIn{}, &cat, nil); err != nil {
		t.Fatal(err)
	}
	if len(cat.Platforms) != 2 || cat.Platforms[1].Platform != "ios" || len(cat.Platforms[1].Models) != 2 || len(cat.Platforms[1].Runtimes) != 2 {
		t.Fatalf("catalog %+v", cat)
	}
	code(t, h.do(context.Background(), agent("x"), contract.CatalogGet.Name, contract.CatalogGetIn{Platform: "tvos"}, nil, nil), contract.CodeUnsupportedPlatform)
	var list contract.ListGetOut
	if err := h.do(context.Background(), admin, contract.ListGet.Name, struct{}{}, &list, nil); err != nil || len(list.Devices) != 1 || list.Devices[0].WorkerID != "wa" {
		t.Fatalf("%+v %v", list, err)
	}
	var wl contract.WorkerListOut
	if err := h.do(context.Background(), admin, contract.WorkerList.Name, struct{}{}, &wl, nil); err != nil || len(wl.Workers) != 2 {
		t.Fatalf("%+v %v", wl, err)
	}
	if w := wl.Workers[1]; w.ID != "wb" || w.DownloadPolicy != "on-request" || w.Capacity["android"].MaxRunning != 1 || w.State != contract.WorkerConnected {
		t.Fatalf("view %+v", w)
	}
}

// The fleet's status carries every connected worker's goldens, each named
// by its worker, and sums the CPU budgets as it sums the RAM ones: the
// managed counts it sums include goldens, so a reader of the fleet's
// status (the console, the device gauges) must see them as well.
func TestStatusCarriesTheWorkersGoldensAndCPUBudgets(t *testing.T) {
	h := newHarness(t)
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	a.goldens = &contract.Goldens{Devices: []contract.GoldenDevice{{Platform: "ios", ModelID: "m", RuntimeID: "r", Handle: "G-A", State: "ready"}}}
	b.goldens = &contract.Goldens{NotBuilt: []contract.GoldenNotBuilt{{Platform: "ios", ModelID: "m", RuntimeID: "r", Reason: "a request is waiting for capacity"}}}
	a.cpu, b.cpu = [2]uint64{8000, 2000}, [2]uint64{4000, 1000}
	h.attach(a)
	h.attach(b)
	var st contract.StatusGetOut
	eventually(t, "both workers in the view", func() bool {
		st = h.status(admin)
		return len(st.Workers) == 2 && st.Goldens != nil && len(st.Goldens.NotBuilt) == 1
	})
	if g := st.Goldens; len(g.Devices) != 1 || g.Devices[0].Handle != "G-A" || g.Devices[0].Worker != "wa" || g.NotBuilt[0].Worker != "wb" {
		t.Fatalf("fleet goldens %+v", g)
	}
	if st.Capacity.CPUBudgetMilli != 12000 || st.Capacity.CPUUsedMilli != 3000 {
		t.Fatalf("fleet CPU budget %d used %d, want 12000 and 3000", st.Capacity.CPUBudgetMilli, st.Capacity.CPUUsedMilli)
	}
}

func TestWorkerEventsAreRepublished(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.emit(contract.Event{Type: "device.ready", DeviceID: "old"}) // before the gateway: not replayed
	conn := h.attach(a)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})

	var followed pushes
	var sub contract.EventsSubscribeOut
	if err := h.do(context.Background(), agent("alice"), contract.EventsSubscribe.Name, contract.EventsSubscribeIn{Follow: true}, &sub, &followed); err != nil {
		t.Fatal(err)
	}
	var granted *contract.Event
	for i, e := range sub.Events {
		if e.DeviceID == "old" {
			t.Fatal("a worker's backlog from before the gateway was republished")
		}
		if e.Type == "lease.granted" {
			granted = &sub.Events[i]
		}
		if e.Type == "worker.connected" {
			t.Fatal("an agent sees worker facts")
		}
	}
	if granted == nil || granted.WorkerID != "wa" || granted.LeaseID != l.LeaseID || granted.RequesterID != "alice" || granted.Data["ownerId"] != "alice" {
		t.Fatalf("granted %+v in %+v", granted, sub.Events)
	}
	a.emit(contract.Event{Type: "device.crash-detected", LeaseID: "lse_1", RequesterID: "gw:gw1:alice", Data: map[string]any{"ownerId": "gw:gw1:alice"}})
	eventually(t, "the live event reaches alice", func() bool {
		followed.mu.Lock()
		defer followed.mu.Unlock()
		for _, p := range followed.list {
			if e, ok := p.params.(contract.Event); ok && e.Type == "device.crash-detected" && e.LeaseID == l.LeaseID {
				return true
			}
		}
		return false
	})
	// Missed while disconnected: replayed once the same worker run is back.
	_ = conn.Close()
	eventually(t, "disconnected", func() bool { v, _ := h.view("wa"); return v.State == contract.WorkerDisconnected })
	a.mu.Lock()
	a.leases["lse_1"].ExpiresAt = h.clock.Now()
	a.mu.Unlock()
	a.release("lse_1", "expired")
	h.attach(a)
	if !h.hasEvent("lease.released", func(e contract.Event) bool { return e.Reason == "expired" && e.LeaseID == l.LeaseID }) {
		t.Fatal("the expiry that happened during the outage was not replayed")
	}
	// The index heard it: alice may lease again.
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	var all contract.EventsSubscribeOut
	_ = h.do(context.Background(), admin, contract.EventsSubscribe.Name, contract.EventsSubscribeIn{}, &all, nil)
	types := map[string]bool{}
	for _, e := range all.Events {
		types[e.Type] = true
	}
	for _, want := range []string{"worker.connected", "worker.disconnected", "request.queued", "request.dispatched", "lease.granted"} {
		if !types[want] {
			t.Errorf("no %s on the gateway bus", want)
		}
	}
}

func TestRejectedAndSupersededUplinks(t *testing.T) {
	h := newHarness(t)
	h.g.Rejected("unknown-token", "401 from 10.0.0.7")
	if !h.hasEvent("worker.rejected", func(e contract.Event) bool { return e.Reason == "unknown-token" }) {
		t.Fatal("no worker.rejected")
	}
	a := newFakeWorker("wa", h.clock)
	first := h.attach(a)
	second := h.attach(a)
	select {
	case <-first.Done():
	case <-time.After(testhost.Scale(time.Second)):
		t.Fatal("a superseded uplink was left open")
	}
	time.Sleep(10 * time.Millisecond)
	if v, _ := h.view("wa"); v.State != contract.WorkerConnected {
		t.Fatalf("the old uplink's close disconnected the new one: %+v", v)
	}
	_ = second.Close()
	eventually(t, "disconnected", func() bool { v, _ := h.view("wa"); return v.State == contract.WorkerDisconnected })
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("no instance id accepted")
	}
	if _, err := New(Options{InstanceID: "x", Routing: "round-robin"}); err == nil || !strings.Contains(err.Error(), "warm-then-free") {
		t.Fatalf("unknown routing: %v", err)
	}
	dir := t.TempDir() + "/workers.json"
	_ = os.WriteFile(dir, []byte("{nope"), 0o600)
	if _, err := New(Options{InstanceID: "x", DrainFile: dir}); err == nil {
		t.Fatal("a corrupt workers.json was accepted")
	}
}

func TestMapError(t *testing.T) {
	if MapError(context.Canceled).Code != contract.CodeConnectionLost {
		t.Fatal("cancelled")
	}
	if MapError(os.ErrClosed).Code != contract.CodeInternal {
		t.Fatal("internal")
	}
	ce := contract.Errorf(contract.CodeNoCapacity, "x")
	if MapError(ce) != ce {
		t.Fatal("contract errors pass through")
	}
	var _ = dispatch.Options{MapError: MapError}
}

func TestTerminalFailuresAfterDispatch(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.maxRun["ios"] = 5
	h.attach(a)
	h.settle("wa")
	// A lease the index has not heard of yet: the worker's own refusal
	// names it, as a gateway lease id.
	hidden := a.localLease("gw:gw1:alice", "ios", true)
	r := wait(t, h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios"}, nil))
	code(t, r.err, contract.CodeRequesterLeased)
	if r.err.Details["leaseId"] != "wa."+hidden.LeaseID || !strings.Contains(r.err.NextAction, "wa."+hidden.LeaseID) {
		t.Fatalf("%+v", r.err)
	}
	eventually(t, "an immediate refusal is recorded as request.failed", func() bool {
		return h.hasEvent("request.failed", func(e contract.Event) bool { return e.RequesterID == "alice" })
	})
	// Dispatched, then the uplink drops: WORKER_UNREACHABLE, not a requeue.
	a.hold = make(chan struct{})
	conn := a.conns[len(a.conns)-1]
	res := h.request(agent("bob"), contract.LeaseRequestIn{Platform: "ios"}, nil)
	eventually(t, "bob is dispatched", func() bool {
		return h.hasEvent("request.dispatched", func(e contract.Event) bool { return e.RequesterID == "bob" })
	})
	_ = conn.Close()
	code(t, wait(t, res).err, contract.CodeWorkerUnreachable)
	if h.queueDepth() != 0 {
		t.Fatal("a request that failed after dispatch went back to the queue")
	}
}

func TestTTLBounds(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DefaultTTL, o.MaxTTL = 15*time.Minute, time.Hour })
	a := newFakeWorker("wa", h.clock)
	h.attach(a)
	r := wait(t, h.request(agent("alice"), contract.LeaseRequestIn{Platform: "ios", TTLMs: (2 * time.Hour).Milliseconds()}, nil))
	code(t, r.err, contract.CodeBadRequest)
	code(t, wait(t, h.request(agent("alice"), contract.LeaseRequestIn{}, nil)).err, contract.CodeBadRequest)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	if l.TTLMs != (15 * time.Minute).Milliseconds() {
		t.Fatalf("the gateway's default TTL was not forwarded: %d", l.TTLMs)
	}
	code(t, h.do(context.Background(), agent("alice"), contract.LeaseRenew.Name, contract.LeaseRenewIn{LeaseID: l.LeaseID, TTLMs: (3 * time.Hour).Milliseconds()}, nil, nil), contract.CodeBadRequest)
}

func TestAWorkerWhoseHelloFailedShowsAsIncompatible(t *testing.T) {
	h := newHarness(t)
	helloErr := contract.Errorf(contract.CodeProtocolUnsupported, "client speaks protocol 5-5, daemon speaks 3-4").
		WithDetails("client", contract.ProtocolRange{Min: 5, Max: 5}, "daemon", contract.ProtocolRange{Min: 3, Max: 4})
	// As it arrives over the wire: details decoded as plain JSON.
	var wire contract.Error
	b, _ := json.Marshal(helloErr)
	_ = json.Unmarshal(b, &wire)
	done := make(chan struct{})
	conn, ok := IncompatibleFromHelloError(&wire, done, func() error { return nil })
	if !ok {
		t.Fatal("not recognised")
	}
	if _, ok := IncompatibleFromHelloError(contract.Errorf(contract.CodeForbidden, "x"), done, nil); ok {
		t.Fatal("another error taken for a protocol mismatch")
	}
	if err := h.g.Attach(context.Background(), "wold", "old-mac", conn); err != nil {
		t.Fatal(err)
	}
	v, _ := h.view("wold")
	if v.State != contract.WorkerIncompatible || v.Protocol != (contract.ProtocolRange{Min: 3, Max: 4}) {
		t.Fatalf("%+v", v)
	}
	close(done)
	h.awaitEvent("worker.disconnected", func(e contract.Event) bool { return e.WorkerID == "wold" })
	if v, _ := h.view("wold"); v.State != contract.WorkerIncompatible {
		t.Fatalf("an incompatible worker that left must stay marked incompatible: %+v", v)
	}
	if err := h.do(context.Background(), admin, contract.WorkerRemove.Name, contract.WorkerIn{ID: "wold"}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// status numbers the fleet queue as the pushes do (oldest first, from 1)
// and reports when each request joined it, on the gateway's clock; a
// request that leaves renumbers the rest.
func TestStatusNumbersTheFleetQueue(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.maxRun["ios"] = 1
	h.attach(a)
	h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	bobAt := h.clock.Now()
	bob := h.request(agent("bob"), contract.LeaseRequestIn{Platform: "ios"}, nil)
	eventually(t, "bob queues", func() bool { return h.queueDepth() == 1 })
	h.clock.Advance(time.Second)
	carolAt := h.clock.Now()
	h.request(agent("carol"), contract.LeaseRequestIn{Platform: "ios", TimeoutMs: 60000}, nil)
	eventually(t, "carol queues", func() bool { return h.queueDepth() == 2 })
	q := h.status(admin).Queue
	if len(q) != 2 || q[0].Position != 1 || q[0].RequesterID != "bob" || !q[0].EnqueuedAt.Equal(bobAt) ||
		q[1].Position != 2 || q[1].RequesterID != "carol" || !q[1].EnqueuedAt.Equal(carolAt) {
		t.Fatalf("queue %+v", q)
	}
	if err := h.do(context.Background(), agent("bob"), contract.LeaseCancel.Name, contract.LeaseCancelIn{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	code(t, wait(t, bob).err, contract.CodeRequestCancelled)
	q = h.status(admin).Queue
	if len(q) != 1 || q[0].Position != 1 || q[0].RequesterID != "carol" || !q[0].EnqueuedAt.Equal(carolAt) {
		t.Fatalf("after bob left: %+v", q)
	}
}

// A gateway keeps no request receipts, so it refuses an idempotency key
// rather than silently dropping it (a retry could land on another worker
// and get a second device), and nothing reaches a worker.
func TestIdempotencyKeyIsRefusedNotDropped(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.addDevice("ios", "iPhone 16", "18.2")
	h.attach(a)
	err := h.do(context.Background(), agent("alice"), contract.LeaseRequest.Name,
		contract.LeaseRequestIn{Platform: "ios", IdempotencyKey: "k1"}, nil, nil)
	code(t, err, contract.CodeUnsupportedInGateway)
	if got := a.called("lease.request"); len(got) != 0 {
		t.Fatalf("the worker was asked anyway: %v", got)
	}
}

// list.get {booted} through a gateway keeps the devices its workers run
// (ready or leased) and drops the shut-down ones, as a worker's own does.
func TestListBootedKeepsOnlyRunningDevices(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.addDevice("ios", "iPhone 16", "18.2")
	off := a.addDevice("ios", "iPhone 16", "18.2")
	off.Runtime.Lifecycle = contract.StateShutdown
	h.attach(a)
	eventually(t, "wa's two devices in the view", func() bool { v, _ := h.view("wa"); return v.Devices == 2 })
	var all, booted contract.ListGetOut
	if err := h.do(context.Background(), admin, contract.ListGet.Name, contract.ListGetIn{}, &all, nil); err != nil || len(all.Devices) != 2 {
		t.Fatalf("list: %+v %v", all, err)
	}
	if err := h.do(context.Background(), admin, contract.ListGet.Name, contract.ListGetIn{Booted: true}, &booted, nil); err != nil {
		t.Fatal(err)
	}
	if len(booted.Devices) != 1 || booted.Devices[0].Runtime.Lifecycle != contract.StateReady {
		t.Fatalf("booted view %+v", booted.Devices)
	}
}
