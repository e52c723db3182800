package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// An actor is one concurrent client of the drill: its own goroutine, its
// own connection (an agent session under its own principal), its own
// random stream. It holds at most one lease at a time, as one agent would.
type actor struct {
	ch    *chaos
	name  string
	rng   *rand.Rand
	c     *client.Client
	lease *contract.Lease
	// letExpire: this lease was asked for with a short TTL and is left to
	// run out, so expiry is part of the mix.
	letExpire bool
	// prev is the last request outcome, for diagnosing the next one.
	prev string
	// attempts numbers this actor's lease requests, for idempotency keys.
	attempts int
}

// attempt is one logical lease request. It is the unit a durable retry
// repeats: the same input, sent again after a connection loss.
type attempt struct {
	kind   string // request, nowait, cancel, expire
	in     contract.LeaseRequestIn
	sentAt time.Time

	mu       sync.Mutex
	evicting []string // devices the daemon told us it was evicting for this request
}

func (at *attempt) progress(p contract.Progress) {
	if p.Phase == "evicting" {
		at.mu.Lock()
		at.evicting = append(at.evicting, p.DeviceID)
		at.mu.Unlock()
	}
}

func (at *attempt) evictions() []string {
	at.mu.Lock()
	defer at.mu.Unlock()
	return append([]string(nil), at.evicting...)
}

var chaosSpecs = []struct{ platform, model string }{
	{"ios", "iPhone 16"}, {"ios", "iPhone 16"}, {"ios", "iPhone 15"},
	{"android", "pixel_6"}, {"android", "pixel_6"}, {"android", "pixel_7"},
}

func (a *actor) run(ctx context.Context) {
	for ctx.Err() == nil {
		if a.c == nil && !a.connect(ctx) {
			continue
		}
		if a.lease == nil {
			a.acquire(ctx)
		} else {
			a.hold(ctx)
		}
		sleepCtx(ctx, time.Duration(a.rng.IntN(40))*time.Millisecond)
	}
}

// connect dials as an agent and picks up whatever the daemon says this
// principal holds: a grant whose answer a daemon kill swallowed shows up
// here, and a held lease missing here ended while we were away.
func (a *actor) connect(ctx context.Context) bool {
	c, err := a.ch.dial(ctx, a.name, false)
	if err != nil {
		if ctx.Err() == nil {
			a.ch.violate("%s: cannot reach the daemon for 30s: %v", a.name, err)
			sleepCtx(ctx, time.Second)
		}
		return false
	}
	a.c = c
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(45*time.Second))
	defer cancel()
	out, err := client.Do(cctx, c, contract.LeaseList, contract.LeaseListIn{})
	if err != nil {
		a.lost(err)
		return false
	}
	if len(out.Leases) > 1 {
		a.ch.violate("%s holds %d leases at once: %+v", a.name, len(out.Leases), out.Leases)
	}
	var held *contract.Lease
	if len(out.Leases) > 0 {
		held = &out.Leases[0]
	}
	switch {
	case a.lease != nil && (held == nil || held.LeaseID != a.lease.LeaseID):
		a.ch.leaseGone(a.name, a.lease.LeaseID)
		a.lease = nil
	}
	if a.lease == nil && held != nil {
		a.ch.count("adopt", "ok")
		a.ch.noteLease(a.name, *held, time.Now())
		a.lease, a.letExpire = held, false
	}
	return true
}

// lost handles a failed call: a dead connection is dropped (connect picks
// up the pieces); anything else is the caller's to judge.
func (a *actor) lost(err error) bool {
	if client.IsCode(err, contract.CodeConnectionLost) || client.IsCode(err, contract.CodeDaemonNotRunning) {
		if a.c != nil {
			a.c.Close()
		}
		a.c = nil
		return true
	}
	return false
}

func (a *actor) acquire(ctx context.Context) {
	spec := chaosSpecs[a.rng.IntN(len(chaosSpecs))]
	at := &attempt{in: contract.LeaseRequestIn{Platform: spec.platform, Model: spec.model, TTLMs: 600000}}
	switch r := a.rng.IntN(100); {
	case r < 12:
		// A multi-device lease (ADR 0043): an iPhone and an emulator, all
		// or nothing, contending with the single requests for both of the
		// drill's running slots.
		at.kind = "group"
		at.in.Platform, at.in.Model = "", ""
		at.in.Devices = []contract.DeviceSpec{{Platform: "ios", Model: chaosSpecs[a.rng.IntN(3)].model},
			{Platform: "android", Model: chaosSpecs[3+a.rng.IntN(3)].model}}
		at.in.TimeoutMs = int64(1000 + a.rng.IntN(3000))
	case r < 45:
		at.kind = "request"
		at.in.TimeoutMs = int64(300 + a.rng.IntN(1700))
	case r < 70:
		at.kind = "nowait"
		at.in.NoWait = true
	case r < 90:
		at.kind = "cancel"
		at.in.TimeoutMs = 10000
	default:
		at.kind = "expire"
		at.in.TimeoutMs = 1500
		at.in.TTLMs = int64(1000 + a.rng.IntN(1500))
	}
	if at.kind == "cancel" {
		a.requestThenCancel(ctx, at)
		return
	}
	// Every other attempt is durable: a retry after a lost answer sends the
	// same input under the same key (see retry).
	a.attempts++
	at.in.IdempotencyKey = fmt.Sprintf("%s-%d", a.name, a.attempts)
	l, err := a.request(ctx, at)
	a.settle(ctx, at, l, err)
}

// retry repeats an attempt whose answer a lost connection swallowed, twice,
// with the same input and key. The daemon must answer both with the same
// lease (and device) or the same refusal: never a second device, never a
// lease the actor did not already hold, and lease.list (in connect) never
// shows two. A lease that ends between the two answers (a short TTL) is the
// one allowed difference: the second names it as UNKNOWN_LEASE.
func (a *actor) retry(ctx context.Context, at *attempt) {
	if !a.connect(ctx) {
		return
	}
	l1, err1 := a.request(ctx, at)
	if a.lost(err1) {
		return // the daemon died again; connect adopts whatever it granted
	}
	l2, err2 := a.request(ctx, at)
	if a.lost(err2) {
		return
	}
	a.ch.count(at.kind+"-retry", outcome(err1))
	switch {
	case err1 == nil && err2 == nil:
		if l1.LeaseID != l2.LeaseID || l1.Device == nil || l2.Device == nil || l1.Device.ID != l2.Device.ID {
			a.ch.violate("%s: key %s answered %s and then %s", a.name, at.in.IdempotencyKey, l1.LeaseID, l2.LeaseID)
		}
	case err1 == nil:
		if !client.IsCode(err2, contract.CodeUnknownLease) {
			a.ch.violate("%s: key %s answered lease %s and then %v", a.name, at.in.IdempotencyKey, l1.LeaseID, err2)
		}
	case err2 == nil:
		a.ch.violate("%s: key %s was refused (%v) and then granted %s", a.name, at.in.IdempotencyKey, err1, l2.LeaseID)
	case outcome(err1) != outcome(err2):
		a.ch.violate("%s: key %s was refused %s and then %s", a.name, at.in.IdempotencyKey, outcome(err1), outcome(err2))
	}
	if err1 != nil {
		return
	}
	switch {
	case a.lease == nil:
		a.ch.noteLease(a.name, l1, time.Now())
		a.lease, a.letExpire = &l1, at.kind == "expire"
	case a.lease.LeaseID != l1.LeaseID:
		a.ch.violate("%s: key %s answered %s while the actor holds %s", a.name, at.in.IdempotencyKey, l1.LeaseID, a.lease.LeaseID)
	}
}

// request sends one attempt and waits for its outcome.
func (a *actor) request(ctx context.Context, at *attempt) (contract.Lease, error) {
	rctx, cancel := context.WithTimeout(ctx, testhost.Scale(60*time.Second))
	defer cancel()
	at.sentAt = time.Now()
	l, err := a.c.LeaseRequest(rctx, at.in, at.progress)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		a.ch.violate("%s: lease.request %+v got no answer within 60s", a.name, at.in)
	}
	return l, err
}

// settle records an attempt's outcome and checks what it promises.
func (a *actor) settle(ctx context.Context, at *attempt, l contract.Lease, err error) {
	if ctx.Err() != nil {
		return
	}
	code := outcome(err)
	a.ch.count(at.kind, code)
	prev := a.prev
	a.prev = fmt.Sprintf("%s %s/%s -> %s at %s", at.kind, at.in.Platform, at.in.Model, code, time.Now().Format(time.StampMilli))
	if client.IsCode(err, contract.CodeRequesterQueued) {
		a.ch.note("%s: %s %s/%s sent at %s was refused REQUESTER_ALREADY_QUEUED; the previous request was %s",
			a.name, at.kind, at.in.Platform, at.in.Model, at.sentAt.Format(time.StampMilli), prev)
	}
	if err == nil && len(at.in.Devices) > 0 {
		if len(l.Devices) != len(at.in.Devices) || l.Devices[0].Platform != "ios" || l.Devices[1].Platform != "android" || l.Devices[0].ID != l.DeviceID {
			a.ch.violate("%s: group %+v was granted %s with devices %+v", a.name, at.in.Devices, l.LeaseID, l.Devices)
		}
	}
	switch {
	case err == nil:
		a.ch.noteLease(a.name, l, time.Now())
		a.lease, a.letExpire = &l, at.kind == "expire"
	case a.lost(err):
		if at.in.IdempotencyKey != "" {
			a.retry(ctx, at)
		}
	case client.IsCode(err, contract.CodeRequesterLeased):
		// A grant we never heard about; connect will adopt it.
		a.c.Close()
		a.c = nil
	case client.IsCode(err, contract.CodeNoCapacity):
		if ev := at.evictions(); len(ev) > 0 {
			a.ch.violate("%s: noWait request %+v was refused with NO_CAPACITY after the daemon started evicting %v for it", a.name, at.in, ev)
		}
		a.ch.noteRefusal(a.name, at)
	case client.IsCode(err, contract.CodeQueueTimeout), client.IsCode(err, contract.CodeDeviceFailed),
		client.IsCode(err, contract.CodeDaemonStopping), client.IsCode(err, contract.CodeRequestCancelled),
		client.IsCode(err, "DAEMON_RESTARTED"):
		// Legitimate under chaos; counted above.
	case client.IsCode(err, contract.CodeRequesterQueued):
		// Seen right after this requester's previous request was answered
		// REQUEST_CANCELLED while device work ran for it: the cancelled
		// waiter keeps its place until the work ends. Logged and counted
		// rather than failed: the contract does not say yet when a
		// cancelled request stops counting against its requester.
	default:
		a.ch.violate("%s: unexpected lease.request error for %+v: %v", a.name, at.in, err)
	}
}

// requestThenCancel queues a request and withdraws it with lease.cancel
// a moment later. A cancel the daemon confirmed must not end in a grant.
func (a *actor) requestThenCancel(ctx context.Context, at *attempt) {
	type res struct {
		l   contract.Lease
		err error
	}
	done := make(chan res, 1)
	c := a.c
	go func() {
		l, err := a.request(ctx, at)
		done <- res{l, err}
	}()
	sleepCtx(ctx, time.Duration(20+a.rng.IntN(500))*time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(45*time.Second))
	out, cerr := client.Do(cctx, c, contract.LeaseCancel, contract.LeaseCancelIn{})
	cancel()
	if ctx.Err() == nil {
		a.ch.count("lease.cancel", outcome(cerr))
	}
	r := <-done
	if cerr == nil && out.Cancelled && r.err == nil {
		a.ch.violate("%s: lease.cancel answered cancelled, yet the request was granted %s", a.name, r.l.LeaseID)
	}
	if cerr != nil && !client.IsCode(cerr, contract.CodeNoPendingRequest) && !client.IsCode(cerr, contract.CodeConnectionLost) &&
		!client.IsCode(cerr, contract.CodeDaemonStopping) && ctx.Err() == nil {
		a.ch.violate("%s: unexpected lease.cancel error: %v", a.name, cerr)
	}
	a.settle(ctx, at, r.l, r.err)
}

// hold works with a held lease: renew it, release it, or (for a lease
// meant to expire) wait past its deadline and see that it is gone.
func (a *actor) hold(ctx context.Context) {
	l := a.lease
	if a.letExpire {
		sleepCtx(ctx, time.Until(l.ExpiresAt)+time.Duration(300+a.rng.IntN(300))*time.Millisecond)
		a.renew(ctx, "renew-expired")
		return
	}
	switch r := a.rng.IntN(100); {
	case r < 55:
		a.renew(ctx, "lease.renew")
	case r < 90:
		a.release(ctx)
	default:
		sleepCtx(ctx, time.Duration(100+a.rng.IntN(600))*time.Millisecond)
		a.renew(ctx, "lease.renew")
	}
}

func (a *actor) renew(ctx context.Context, kind string) {
	id := a.lease.LeaseID
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(45*time.Second))
	defer cancel()
	start := time.Now()
	l, err := client.Do(cctx, a.c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: id})
	if ctx.Err() != nil {
		return
	}
	a.ch.count(kind, outcome(err))
	switch {
	case err == nil:
		a.ch.fastOp(time.Since(start))
		a.ch.noteLease(a.name, l, time.Now())
		a.lease = &l
	case a.lost(err):
	case client.IsCode(err, contract.CodeUnknownLease):
		a.ch.leaseGone(a.name, id)
		a.lease = nil
	default:
		a.ch.violate("%s: renew %s: %v", a.name, id, err)
	}
}

func (a *actor) release(ctx context.Context) {
	id := a.lease.LeaseID
	a.ch.releaseAsked(id)
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(45*time.Second))
	defer cancel()
	start := time.Now()
	_, err := client.Do(cctx, a.c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: id})
	if ctx.Err() != nil {
		return
	}
	a.ch.count("lease.release", outcome(err))
	switch {
	case err == nil:
		a.ch.fastOp(time.Since(start))
		a.lease = nil
	case a.lost(err):
	case client.IsCode(err, contract.CodeUnknownLease):
		a.ch.leaseGone(a.name, id)
		a.lease = nil
	default:
		a.ch.violate("%s: release %s: %v", a.name, id, err)
	}
}

// slowReader is a foreign client that stops reading: it subscribes to
// every event (admin), asks for a short lease, piles up status.get
// answers it never reads, and stays silent for a while before it goes
// away. Nobody else may notice it.
func (ch *chaos) slowReader(ctx context.Context, n int, platform string, stall time.Duration) {
	ch.slowActive.Add(1)
	defer ch.slowActive.Add(-1)
	conn, err := net.Dial("unix", ch.sock)
	if err != nil {
		ch.count("slow-reader", "dial-failed")
		return
	}
	defer conn.Close()
	name := fmt.Sprintf("slow-%d", n)
	_ = conn.SetDeadline(time.Now().Add(testhost.Scale(10 * time.Second)))
	hello := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":%d,"max":%d},"principal":%q,"credential":%q}}`+"\n",
		contract.ProtocolMin, contract.ProtocolMax, name, ch.adminToken())
	if _, err := conn.Write([]byte(hello)); err != nil {
		ch.count("slow-reader", "write-failed")
		return
	}
	// Read the hello answer (later lines depend on the session), then never again.
	if _, err := bufio.NewReader(conn).ReadBytes('\n'); err != nil {
		ch.count("slow-reader", "hello-failed")
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(testhost.Scale(2 * time.Second)))
	lines := []string{
		`{"jsonrpc":"2.0","id":2,"method":"events.subscribe","params":{"follow":true}}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"lease.request","params":{"platform":%q,"ttlMs":%d,"timeoutMs":3000}}`, platform, 1500+n%3*500),
	}
	for i := 0; i < 300; i++ {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"status.get"}`, 10+i))
	}
	outcome := "stalled"
	for _, l := range lines {
		if _, err := conn.Write([]byte(l + "\n")); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				outcome = "stalled-write-blocked"
			} else {
				outcome = "disconnected"
			}
			break
		}
	}
	ch.count("slow-reader", outcome)
	sleepCtx(ctx, stall)
}

// dial connects as principal (admin with the daemon's secret), retrying
// for 30s while no daemon listens or a dying one resets the handshake.
func (ch *chaos) dial(ctx context.Context, principal string, admin bool) (*client.Client, error) {
	deadline := time.Now().Add(testhost.Scale(30 * time.Second))
	for {
		o := client.Options{Socket: ch.sock, Principal: principal, Name: "chaos"}
		if admin {
			o.Credential = ch.adminToken()
		}
		c, err := client.DialRetry(ctx, o, time.Until(deadline))
		retry := client.IsCode(err, contract.CodeConnectionLost) || client.IsCode(err, contract.CodeAdminAuthFailed)
		if err == nil || !retry || time.Now().After(deadline) || ctx.Err() != nil {
			return c, err
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *contract.Error
	if errors.As(err, &ce) {
		return string(ce.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "hung"
	}
	return "error"
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
