package core

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// Request is a lease request after the daemon resolved its defaults.
type Request struct {
	Spec        SpecRequest
	TTL         time.Duration // 0: default
	Timeout     time.Duration // 0: wait without a bound
	NoWait      bool
	RequesterID string
	OwnerID     string
	// IdempotencyKey makes a repeat of this request return the first one's
	// outcome (ADR 0017); empty: none.
	IdempotencyKey string
	// Downloaded reports, after spec resolution, whether the driver had to
	// install the OS runtime (nil: never); it marks the admission path.
	Downloaded func() bool

	rq *requestEntry // the stored request this admission serves
}

// Progress reports a pending request's phase.
type Progress struct {
	Phase         string // queued, evicting, provisioning, booting, granted
	RequestID     string
	QueuePosition int
	DeviceID      string
	ETA           time.Duration
}

// Grant is a granted lease with its device.
type Grant struct {
	Lease  LeaseRecord
	Device DeviceRecord
}

type result struct {
	grant Grant
	err   error
}

// waiter is one request in the FIFO queue.
type waiter struct {
	requester  string
	owner      string
	spec       Spec
	ttl        time.Duration
	enqueuedAt time.Time
	progress   func(Progress)
	done       chan result // buffered(1); written exactly once
	phase      string      // "queued" while waiting; device work phase once started
	working    bool        // device work for this waiter is in flight
	evicting   bool        // an eviction on this waiter's behalf is in flight
	abandoned  bool        // the caller went away while work was in flight
	lastPos    int
	rq         *requestEntry // its stored request (nil for none)
	out        *outcome      // the admission of rq it serves
}

// request serves one admission of a stored request (see Request in
// requests.go). It resolves the spec through the driver (outside the
// decision section: resolution may shell out or even download), then joins
// the FIFO queue and waits for a grant, a timeout, a cancel or ctx.
func (e *Engine) request(ctx context.Context, r Request, progress func(Progress)) (Grant, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = e.cfg.DefaultTTL
	}
	if ttl < 0 {
		return Grant{}, fmt.Errorf("%w: ttl must be positive", ErrBadRequest)
	}
	if ttl > e.cfg.MaxTTL {
		return Grant{}, fmt.Errorf("%w: asked for %s, at most %s", ErrTTLTooLong, ttl, e.cfg.MaxTTL)
	}
	drv, ok := e.drivers[r.Spec.Platform]
	if !ok {
		return Grant{}, NewSpecError(ErrUnsupportedPlatform, fmt.Sprintf("no driver serves platform %q", r.Spec.Platform), "platforms", e.Platforms())
	}
	if err := e.checkRequester(r.RequesterID); err != nil {
		return Grant{}, err
	}
	r.Spec.RequesterID = r.RequesterID
	spec, err := drv.ResolveSpec(ctx, r.Spec)
	if err != nil {
		return Grant{}, err
	}

	w := &waiter{requester: r.RequesterID, owner: r.OwnerID, spec: spec, ttl: ttl,
		progress: progress, done: make(chan result, 1), phase: "queued", rq: r.rq}
	var refuse error
	e.section(func() {
		if e.stopping {
			refuse = ErrStopping
			return
		}
		if e.maintenance {
			refuse = ErrMaintenance
			return
		}
		if err := e.checkRequesterLocked(r.RequesterID); err != nil {
			refuse = err
			return
		}
		w.enqueuedAt = e.now()
		e.bindLocked(w)
		e.queue = append(e.queue, w)
		e.scheduleLocked()
		if r.NoWait && !w.working && inQueue(e.queue, w) {
			e.removeLocked(w)
			refuse = ErrNoCapacity
			e.emitLocked(events.Event{Type: "request.refused", RequesterID: w.requester, Platform: spec.Platform, Reason: "no-capacity", Data: map[string]any{"ownerId": w.owner}})
			return
		}
		if inQueue(e.queue, w) && !w.working {
			e.emitLocked(events.Event{Type: "request.queued", RequesterID: w.requester, Platform: spec.Platform,
				Data: map[string]any{"model": spec.Model, "osVersion": spec.OSVersion, "ownerId": w.owner}})
		}
	})
	if refuse != nil {
		return Grant{}, refuse
	}
	e.notifyPositions()

	var timeout <-chan time.Time
	if r.Timeout > 0 {
		timeout = e.clock.After(r.Timeout)
	}
	for {
		select {
		case res := <-w.done:
			return res.grant, res.err
		case <-timeout:
			timedOut := false
			e.section(func() {
				if inQueue(e.queue, w) && !w.working {
					e.removeLocked(w)
					timedOut = true
					e.emitLocked(events.Event{Type: "request.timed-out", RequesterID: w.requester, Platform: spec.Platform, Data: map[string]any{"ownerId": w.owner}})
				}
			})
			if timedOut {
				e.notifyPositions()
				return Grant{}, fmt.Errorf("%w after %s", ErrQueueTimeout, r.Timeout)
			}
			// Device work already started for this request: it finishes
			// (or fails) on its own and we report that outcome.
			timeout = nil
		case <-ctx.Done():
			e.abandon(w)
			return Grant{}, ctx.Err()
		}
	}
}

func inQueue(q []*waiter, w *waiter) bool {
	for _, x := range q {
		if x == w {
			return true
		}
	}
	return false
}

func (e *Engine) removeLocked(w *waiter) {
	for i, x := range e.queue {
		if x == w {
			e.queue = append(e.queue[:i:i], e.queue[i+1:]...)
			return
		}
	}
}

func (e *Engine) checkRequester(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.checkRequesterLocked(id)
}

func (e *Engine) checkRequesterLocked(id string) error {
	if lid, ok := e.byRequester[id]; ok {
		return &RequesterLeasedError{LeaseID: lid}
	}
	for _, w := range e.queue {
		if w.requester == id {
			return ErrRequesterQueue
		}
	}
	return nil
}

// abandon withdraws a request whose caller went away. Work already in
// flight completes and leaves its device warm instead of leased.
func (e *Engine) abandon(w *waiter) {
	e.section(func() {
		if !inQueue(e.queue, w) {
			return
		}
		if w.working {
			w.abandoned = true
			return
		}
		e.removeLocked(w)
		e.emitLocked(events.Event{Type: "request.abandoned", RequesterID: w.requester, Platform: w.spec.Platform, Data: map[string]any{"ownerId": w.owner}})
	})
	e.notifyPositions()
}

// Cancel withdraws the pending request of requester.
func (e *Engine) Cancel(requester string) error {
	var found bool
	var w *waiter
	e.section(func() {
		for _, x := range e.queue {
			if x.requester == requester {
				w, found = x, true
				break
			}
		}
		if !found {
			return
		}
		if w.working {
			w.abandoned = true
		} else {
			e.removeLocked(w)
		}
		e.emitLocked(events.Event{Type: "request.cancelled", RequesterID: requester, Platform: w.spec.Platform, Data: map[string]any{"ownerId": w.owner}})
	})
	if !found {
		return ErrNoPending
	}
	w.deliver(result{err: ErrCancelled})
	w.awaitSettled()
	e.notifyPositions()
	return nil
}

// deliver hands the outcome to the waiting caller exactly once.
func (w *waiter) deliver(r result) {
	select {
	case w.done <- r:
	default:
	}
}

// notifyPositions pushes a queued progress to every waiting request whose
// position changed. Called outside the decision section.
func (e *Engine) notifyPositions() {
	type push struct {
		w   *waiter
		pos int
	}
	var pushes []push
	e.mu.Lock()
	pos := 0
	for _, w := range e.queue {
		if w.working {
			continue
		}
		pos++
		if w.lastPos != pos {
			w.lastPos = pos
			pushes = append(pushes, push{w, pos})
		}
	}
	e.mu.Unlock()
	for _, p := range pushes {
		p.w.progress(Progress{Phase: "queued", QueuePosition: p.pos})
	}
}

// ---- the acquisition planner ----

// scheduleLocked walks the queue oldest first and, for each request that is
// not already being served, takes the first plan that fits: a ready matching
// device; booting a shut-down matching one; provisioning a new one; evicting
// the least recently used warm device of another spec to make room. A request
// no device can serve right now is passed over, not blocked on; because each
// plan reserves what it takes before the next request is considered, a later
// request can never take a resource an earlier one could use.
func (e *Engine) scheduleLocked() {
	if e.stopping || e.maintenance {
		return
	}
	for _, w := range append([]*waiter(nil), e.queue...) {
		if w.working {
			continue
		}
		e.planLocked(w)
	}
	e.fillWarmPoolLocked()
}

func (e *Engine) planLocked(w *waiter) {
	key := w.spec.Key()
	// 1. A warm device: grant at once.
	if d := e.pickLocked(StateReady, key, false); d != nil {
		e.grantLocked(w, d.ID)
		return
	}
	// 2. A shut-down device of the same spec: boot it.
	if d := e.pickLocked(StateShutdown, key, false); d != nil && e.canStartLocked(w.spec.Platform, false) {
		e.startBootLocked(w, d.ID)
		return
	}
	// 3. A new device.
	if e.canStartLocked(w.spec.Platform, true) {
		e.startProvisionLocked(w, w.spec)
		return
	}
	if w.evicting {
		return
	}
	// 4. Make room: shut down the least recently used warm device of another
	// spec when running capacity is what blocks us, or destroy the least
	// recently used shut-down device when the managed limit is.
	if !e.canStartLocked(w.spec.Platform, false) {
		if d := e.pickLocked(StateReady, "", true); d != nil && d.Spec.Key() != key {
			e.startEvictLocked(w, d.ID, false)
		}
		return
	}
	if e.managedFullLocked(w.spec.Platform) {
		if d := e.pickLocked(StateShutdown, "", true); d != nil && d.Spec.Key() != key {
			e.startEvictLocked(w, d.ID, true)
		}
	}
}

// pickLocked selects an unclaimed device in exactly state st (never by
// excluding bad states). With key set it must match; lru picks the least
// recently used, otherwise the most recently used (warmest).
func (e *Engine) pickLocked(st DeviceState, key string, lru bool) *DeviceRecord {
	var best *DeviceRecord
	for _, d := range e.devices {
		if d.State != st || e.opLocks[d.ID] != "" {
			continue
		}
		if key != "" && d.Spec.Key() != key {
			continue
		}
		if best == nil {
			best = d
			continue
		}
		a, b := lastUse(d), lastUse(best)
		if (lru && a.Before(b)) || (!lru && a.After(b)) || (a.Equal(b) && d.ID < best.ID) {
			best = d
		}
	}
	return best
}

func lastUse(d *DeviceRecord) time.Time {
	t := d.StateSince
	if d.LastReleasedAt.After(t) {
		t = d.LastReleasedAt
	}
	return t
}

// grantLocked commits a lease on ready device id for w.
func (e *Engine) grantLocked(w *waiter, id string) {
	now := e.now()
	d := *e.devices[id]
	d.State = StateLeased
	d.StateSince = now
	d.LastLeasedAt = now
	l := LeaseRecord{
		ID: "lse_" + e.newID(), DeviceID: id, RequesterID: w.requester, OwnerID: w.owner,
		Platform: d.Platform, TTL: w.ttl, GrantedAt: now, ExpiresAt: now.Add(w.ttl), LastRenewedAt: now,
	}
	w.stampLease(&l, now)
	if err := e.commitLocked(Changes{PutDevices: []DeviceRecord{d}, PutLeases: []LeaseRecord{l}, PutRequests: e.grantedReceiptLocked(w, l)}); err != nil {
		e.log.Error("grant commit failed", "device", id, "err", err)
		e.removeLocked(w)
		w.deliver(result{err: err})
		return
	}
	e.removeLocked(w)
	e.armExpiryLocked(l)
	e.emitLocked(events.Event{Type: "lease.granted", LeaseID: l.ID, DeviceID: id, RequesterID: l.RequesterID, Platform: d.Platform,
		Data: map[string]any{"ttlMs": l.TTL.Milliseconds(), "waitedMs": now.Sub(w.enqueuedAt).Milliseconds(), "ownerId": l.OwnerID,
			"requestId": l.RequestID, "timing": l.Timing.Data()}})
	e.pushLocked(w, Progress{Phase: "granted", DeviceID: id})
	w.deliver(result{grant: Grant{Lease: l, Device: d}})
}

// startBootLocked locks a shut-down device and reserves a running slot,
// then boots it outside the decision section, for waiter w or, with w nil,
// for the warm pool.
func (e *Engine) startBootLocked(w *waiter, id string) {
	d := *e.devices[id]
	p := d.Platform
	e.opLocks[id] = e.workLock(w, "boot")
	e.reservations[p]++
	drv := e.drivers[p]
	eta := drv.Estimate(OpBoot)
	e.goBackground(func(ctx context.Context) {
		w.push(Progress{Phase: "booting", DeviceID: id, ETA: eta})
		w.begin(PhaseBoot, e.now())
		err := drv.MakeReady(ctx, d.Ref())
		w.end(PhaseBoot, e.now())
		e.section(func() {
			e.reservations[p]--
			delete(e.opLocks, id)
			e.settleBootLocked(w, id, err, "device.booted")
		})
		e.notifyPositions()
	})
}

// startProvisionLocked records a provisioning device for spec, reserves a
// running slot, then creates and boots it outside the decision section, for
// waiter w or, with w nil, for the warm pool.
func (e *Engine) startProvisionLocked(w *waiter, spec Spec) {
	now := e.now()
	rec := DeviceRecord{ID: "dev_" + e.newID(), Platform: spec.Platform, Spec: spec,
		State: StateProvisioning, StateSince: now, CreatedAt: now}
	if err := e.commitLocked(Changes{PutDevices: []DeviceRecord{rec}}); err != nil {
		e.log.Error("record a new device", "err", err)
		if w != nil {
			e.removeLocked(w)
			w.deliver(result{err: err})
		}
		return
	}
	id, p := rec.ID, rec.Platform
	e.opLocks[id] = e.workLock(w, "provision")
	e.reservations[p]++
	drv := e.drivers[p]
	e.goBackground(func(ctx context.Context) {
		w.push(Progress{Phase: "provisioning", DeviceID: id, ETA: drv.Estimate(OpProvision) + drv.Estimate(OpBoot)})
		w.begin(PhaseProvision, e.now())
		prov, err := drv.Provision(ctx, spec)
		w.end(PhaseProvision, e.now())
		if err != nil {
			e.section(func() {
				e.reservations[p]--
				delete(e.opLocks, id)
				_ = e.commitLocked(Changes{DeleteDevices: []string{id}})
				e.log.Warn("provision failed", "device", id, "err", err)
				if w != nil {
					e.failWorkLocked(w, &DeviceFailedError{Phase: "provision", Err: err})
				} else {
					e.scheduleLocked()
				}
			})
			e.notifyPositions()
			return
		}
		var ref DeviceRef
		e.section(func() {
			d := *e.devices[id]
			d.Handle, d.Name, d.Attrs, d.Simulated, d.Data = prov.Handle, prov.Name, prov.Attrs, prov.Simulated, prov.Data
			if err := e.commitLocked(Changes{PutDevices: []DeviceRecord{d}}); err != nil {
				e.log.Error("persist provisioned device", "device", id, "err", err)
			}
			e.emitLocked(events.Event{Type: "device.provisioned", DeviceID: id, Platform: p,
				Data: map[string]any{"model": spec.Model, "osVersion": spec.OSVersion}})
			ref = d.Ref()
			if w != nil {
				w.phase = "booting"
			}
		})
		w.push(Progress{Phase: "booting", DeviceID: id, ETA: drv.Estimate(OpBoot)})
		w.begin(PhaseBoot, e.now())
		err = drv.MakeReady(ctx, ref)
		w.end(PhaseBoot, e.now())
		e.section(func() {
			e.reservations[p]--
			delete(e.opLocks, id)
			e.settleBootLocked(w, id, err, "device.ready")
		})
		e.notifyPositions()
	})
}

// workLock names the operation lock device work holds: the warm pool's own work is
// marked "warm" so the pool counts it as already on its way.
func (e *Engine) workLock(w *waiter, op string) string {
	if w == nil {
		return "warm"
	}
	w.working = true
	w.phase = map[string]string{"boot": "booting", "provision": "provisioning"}[op]
	return op
}

// settleBootLocked records how a boot ended. A device that fails to boot is
// quarantined, so it is retried on a backoff (and destroyed if it never
// boots) instead of being picked again at once. A ready device goes to its
// waiter, or into the warm pool.
func (e *Engine) settleBootLocked(w *waiter, id string, err error, fact string) {
	if err != nil {
		e.log.Warn("boot failed", "device", id, "err", err)
		e.quarantineLocked(id, "boot-failed")
		if w != nil {
			e.failWorkLocked(w, &DeviceFailedError{Phase: "boot", Err: err})
		} else {
			e.scheduleLocked()
		}
		return
	}
	d, serr := e.setStateLocked(id, StateReady)
	if serr != nil {
		if w != nil {
			e.failWorkLocked(w, serr)
		}
		return
	}
	if w == nil {
		e.emitLocked(events.Event{Type: "device.warmed", DeviceID: id, Platform: d.Platform,
			Data: map[string]any{"model": d.Spec.Model, "osVersion": d.Spec.OSVersion}})
		e.scheduleLocked()
		return
	}
	e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: d.Platform})
	e.finishWorkLocked(w, id)
}

// push sends progress to the waiter; the warm pool (nil) has nobody to tell.
func (w *waiter) push(p Progress) {
	if w != nil {
		w.progress(p)
	}
}

// finishWorkLocked hands a freshly readied device to the request it was
// prepared for, or leaves it warm if that caller went away.
func (e *Engine) finishWorkLocked(w *waiter, id string) {
	w.working = false
	if w.abandoned || !inQueue(e.queue, w) {
		e.removeLocked(w)
		e.scheduleLocked()
		return
	}
	e.grantLocked(w, id)
	e.scheduleLocked()
}

func (e *Engine) failWorkLocked(w *waiter, err error) {
	w.working = false
	e.removeLocked(w)
	e.emitLocked(events.Event{Type: "request.failed", RequesterID: w.requester, Platform: w.spec.Platform, Reason: err.Error(), Data: map[string]any{"ownerId": w.owner}})
	w.deliver(result{err: err})
	e.scheduleLocked()
}

// startEvictLocked shuts down (or, with destroy, deletes) another spec's
// idle device so that w can be served next.
func (e *Engine) startEvictLocked(w *waiter, id string, destroy bool) {
	w.evicting = true
	e.opLocks[id] = "evict"
	d := *e.devices[id]
	drv := e.drivers[d.Platform]
	e.pushLocked(w, Progress{Phase: "evicting", DeviceID: id, ETA: drv.Estimate(OpShutdown)})
	e.goBackground(func(ctx context.Context) {
		var err error
		w.begin(PhaseEvict, e.now())
		if destroy {
			err = drv.Destroy(ctx, d.Ref())
		} else {
			err = drv.Shutdown(ctx, d.Ref())
		}
		w.end(PhaseEvict, e.now())
		e.section(func() {
			delete(e.opLocks, id)
			w.evicting = false
			switch {
			case err != nil:
				e.log.Warn("eviction failed", "device", id, "err", err)
				e.quarantineLocked(id, "eviction-failed")
			case destroy:
				_ = e.commitLocked(Changes{DeleteDevices: []string{id}})
				e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: d.Platform, Reason: "evicted"})
			default:
				_, _ = e.setStateLocked(id, StateShutdown)
				e.emitLocked(events.Event{Type: "device.evicted", DeviceID: id, Platform: d.Platform})
			}
			e.scheduleLocked()
		})
		e.notifyPositions()
	})
}

// goBackground runs f in a goroutine the engine waits for on Stop.
func (e *Engine) goBackground(f func(ctx context.Context)) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f(e.bg)
	}()
}

// WaitIdle blocks until no background driver work is in flight.
func (e *Engine) WaitIdle() { e.wg.Wait() }

// sortedLeaseIDs is a helper for deterministic iteration.
func sortedLeaseIDs(m map[string]*LeaseRecord) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
