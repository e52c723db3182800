package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// Request asks for a lease. The request is stored first; a repeat under
// the same idempotency key replays or attaches instead (ADR 0017). The
// caller waits for the outcome, its ctx, or the request's own timeout.
// A new admission is served in a goroutine the engine owns (Stop joins
// it), which settles the receipt in the section once the lease path
// answered.
func (e *Engine) Request(ctx context.Context, r Request, progress func(Progress)) (Grant, error) {
	b := e.reqs
	fp := fingerprint(r)
	e.mu.Lock()
	rq, replay, serve, err := b.admit(e, r, fp, e.reg.leases)
	var out *outcome
	if rq != nil {
		out = rq.out
	}
	if serve {
		served, cancel := context.WithCancel(e.bg)
		rq.cancel = cancel
		r.rq = rq
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer cancel()
			g, err := e.request(served, r, rq.push)
			e.mu.Lock()
			defer e.mu.Unlock()
			b.settle(e, rq, out, g, err)
		}()
	}
	e.mu.Unlock()
	if err != nil {
		return Grant{}, err
	}
	if replay != nil {
		return replay.grant, replay.err
	}
	return b.await(ctx, rq, out, progress, e.awaitDurable, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return b.detach(rq, out)
	})
}

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
	// DeviceID, when set, is the one device that may serve the request
	// (targeted.go); Spec.Platform must be its platform.
	DeviceID string
	// Group, when set, asks for all of these devices in one lease
	// (group.go); Spec is then unused.
	Group []SpecRequest
	// Release is what the lease's release does to its devices (zero: the
	// pool's purge).
	Release ReleasePolicy
	// Slot, with DeviceID, is the managed slot key whose execution this
	// is: it may use the slot's assigned device (slotbook.go).
	Slot string
	// OwnerSystem, when set, is the owner-system mark of the devices this
	// request may use and of any device made for it (DeviceRecord.OwnerSystem).
	OwnerSystem string

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
	// Members are every device of a group lease, Device first (nil for a
	// lease of one device).
	Members []DeviceRecord
}

type result struct {
	grant Grant
	err   error
	// ticket is the grant's commit: the grant is answered only once it is
	// durable (ADR 0044).
	ticket uint64
}

// waiter is one request in the FIFO queue.
type waiter struct {
	requester  string
	owner      string
	spec       Spec
	key        string // spec.Key(), kept: the queue's readers ask it of every waiter
	ttl        time.Duration
	enqueuedAt time.Time
	progress   func(Progress)
	done       chan result      // buffered(1); written exactly once
	phase      string           // "queued" while waiting; device work phase once started
	working    bool             // device work for this waiter is in flight
	evicting   bool             // an eviction on this waiter's behalf is in flight
	abandoned  bool             // the caller went away while work was in flight
	noWait     bool             // refused rather than queued when nothing can take it now
	waitLimit  string           // the limit that bound it at its last wait decision
	posMu      sync.Mutex       // orders position pushes (pushPosition)
	posStamp   uint64           // the newest position decision pushed
	rq         *requestEntry    // its stored request (nil for none)
	device     string           // the one device that may serve it ("" any)
	slot       string           // the managed slot whose execution it is (slotbook.go)
	out        *outcome         // the admission of rq it serves
	made       string           // the device provisioned for it, if any (a failed resource step destroys it)
	tuned      *resourceOutcome // its resource step's result, once applied (resources_op.go)
	group      []Spec           // a multi-device request's members (group.go); spec is the first
	bypassed   int              // how often requests behind the group were served before it
	prep       map[string]bool  // devices whose work was started for the group, until it settles
	prepared   bool             // work was started for the group at least once
	release    ReleasePolicy    // what the lease's release does to its devices (resetbook.go)
	system     string           // the owner-system mark it is served from (DeviceRecord.OwnerSystem)
	baselined  bool             // its keep-booted baseline step ran (resetmodes.go)
}

// request serves one admission of a stored request (see Request in
// durablereq.go). It resolves the spec through the driver (outside the
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
	if len(r.Group) > 0 {
		if err := e.groups.check(r.Group); err != nil {
			return Grant{}, err
		}
		r.Spec = r.Group[0]
	}
	for _, sr := range append([]SpecRequest{r.Spec}, r.Group...) {
		if err := r.Release.Validate(sr.Platform, capabilitiesOf(e.drivers)); err != nil {
			return Grant{}, err // release_policy.go: a policy the device cannot run
		}
	}
	if r.Release.Mode == contract.ResetNone && r.Slot == "" {
		// Keeping a device as its holder left it is safe only where the
		// next holder is the same slot.
		return Grant{}, fmt.Errorf("%w: release policy none is for a managed slot's execution only", ErrBadRequest)
	}
	drv, ok := e.drivers[r.Spec.Platform]
	if !ok {
		return Grant{}, NewSpecError(ErrUnsupportedPlatform, fmt.Sprintf("no driver serves platform %q", r.Spec.Platform), "platforms", e.Platforms())
	}
	e.mu.Lock()
	err := e.queue.admits(&e.reg, r.RequesterID)
	e.mu.Unlock()
	if err != nil {
		return Grant{}, err
	}
	r.Spec.RequesterID = r.RequesterID
	var spec Spec
	if r.DeviceID != "" {
		e.mu.Lock()
		spec, err = e.targets.specLocked(r.DeviceID, r.Spec.Platform)
		e.mu.Unlock()
		if err == nil {
			err = checkAssigned(r.DeviceID, r.Slot, e.Slots().AssignedSlot)
		}
		if err == nil && len(r.Spec.Resources) > 0 {
			// The one device is named, so no profile key selects it; the
			// profile is still applied before the grant.
			spec.Resources = maps.Clone(r.Spec.Resources)
		}
	} else {
		spec, err = drv.ResolveSpec(ctx, r.Spec)
		spec = withProfile(spec, r.Spec)
	}
	if err != nil {
		return Grant{}, err
	}
	group, err := resolveGroup(ctx, e.drivers, r)
	if err != nil {
		return Grant{}, err
	}

	w := &waiter{requester: r.RequesterID, owner: r.OwnerID, spec: spec, ttl: ttl, noWait: r.NoWait,
		progress: progress, done: make(chan result, 1), phase: "queued", rq: r.rq, device: r.DeviceID, slot: r.Slot, group: group,
		release: r.Release, system: r.OwnerSystem}
	if len(group) > 0 {
		spec = group[0]
		w.spec = spec
	}
	w.key = spec.Key()
	// The wait's clock starts before the request is queued: once anyone
	// can see it queued (request.queued), its deadline already exists, so
	// time passing after that moment always counts (a fake clock advanced
	// by a test that saw the event could otherwise outrun the timer).
	var timeout <-chan time.Time
	if r.Timeout > 0 {
		timeout = e.clock.After(r.Timeout)
	}
	var refuse error
	e.section(func() {
		if e.halt.stopping {
			refuse = ErrStopping
			return
		}
		if e.halt.maintenance {
			refuse = ErrMaintenance
			return
		}
		if e.broken != nil {
			refuse = e.broken
			return
		}
		if e.slots.unknown {
			refuse = ErrAssignedUnknown
			return
		}
		if err := e.queue.admits(&e.reg, r.RequesterID); err != nil {
			refuse = err
			return
		}
		w.enqueuedAt = e.now()
		e.reqs.bind(e, w)
		e.queue.Push(w, w.enqueuedAt, 0)
		if !e.grantWarmLocked(w) {
			e.scheduleLocked()
		}
		// A noWait request either took capacity just now (a grant, device
		// work, or an eviction it is committed to, ADR 0010) or is refused;
		// the planner changed nothing for a request it could not serve.
		if r.NoWait && !w.working && !w.evicting && len(w.prep) == 0 && e.queue.Contains(w) {
			refuse = e.host.refusal(w, e.planInputLocked)
			e.queue.remove(w)
			e.emitLocked(refusedEvent(w, refuse, e.reqs.refusalData(w.owner, refuse)))
			return
		}
		if e.queue.Contains(w) && !w.working {
			e.emitLocked(events.Event{Type: "request.queued", RequesterID: w.requester, Platform: spec.Platform,
				Data: map[string]any{"model": spec.Model, "osVersion": spec.OSVersion, "ownerId": w.owner}})
		}
	})
	if refuse != nil {
		return Grant{}, refuse
	}
	e.notifyPositions()

	for {
		select {
		case res := <-w.done:
			if err := e.awaitDurable(res.ticket); err != nil {
				return Grant{}, err
			}
			return res.grant, res.err
		case <-timeout:
			timedOut := false
			e.section(func() {
				if e.queue.Contains(w) && !w.working {
					timedOut = true
					e.queue.withdraw(w, events.Event{Type: "request.timed-out", RequesterID: w.requester, Platform: spec.Platform, Data: e.reqs.refusalData(w.owner, ErrQueueTimeout)})
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
			// The caller went away: the request is withdrawn. Work already
			// in flight completes and leaves its device warm instead of
			// leased.
			e.section(func() {
				switch {
				case !e.queue.Contains(w):
				case w.working:
					w.abandoned = true
				default:
					e.queue.withdraw(w, events.Event{Type: "request.abandoned", RequesterID: w.requester, Platform: w.spec.Platform, Data: map[string]any{"ownerId": w.owner}})
				}
			})
			e.notifyPositions()
			return Grant{}, ctx.Err()
		}
	}
}

// Cancel withdraws the pending request of requester.
func (e *Engine) Cancel(requester string) error {
	var found bool
	var w *waiter
	e.section(func() {
		w = e.queue.pendingOf(requester)
		if found = w != nil; !found {
			return
		}
		ev := events.Event{Type: "request.cancelled", RequesterID: requester, Platform: w.spec.Platform, Data: e.reqs.refusalData(w.owner, ErrCancelled)}
		if w.working {
			// Its work in flight completes and leaves the device warm.
			w.abandoned = true
			e.emitLocked(ev)
		} else {
			e.queue.withdraw(w, ev)
		}
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
	e.mu.Lock()
	pushes := e.queue.Renumber(func(w *waiter) bool { return !w.working }, nil)
	e.mu.Unlock()
	for _, p := range pushes {
		p.Entry.pushPosition(p.Pos, p.Stamp)
	}
}

// pushPosition tells the caller its queue position unless a newer decision
// was already pushed: notifyPositions runs outside the decision section, so
// two of them may race, and an older position must never land last.
func (w *waiter) pushPosition(pos int, stamp uint64) {
	w.posMu.Lock()
	defer w.posMu.Unlock()
	if stamp <= w.posStamp {
		return
	}
	w.posStamp = stamp
	w.progress(Progress{Phase: "queued", QueuePosition: pos})
}

// ---- the acquisition planner ----

// grantWarmLocked is the warm grant's short way, for w just queued: when
// nothing ahead of it in the queue could want the device, the one ready
// device the planner would grant it (registry.warmest, the pool's own
// rule for what is idle) is granted at once, without building the whole
// plan input. It reports whether it granted (or started the grant's
// resource step); otherwise the planner decides as always.
//
// Nothing ahead could want the device when no other queued request has
// w's spec (unless its own device work is running, which the planner
// leaves alone, or it names another device), none is a group (a group may hold capacity back), none
// is evicting (its victims may include the device) and none targets the
// device. Every change of state plans the queue again, so a request
// still queued there was already planned against this very device.
func (e *Engine) grantWarmLocked(w *waiter) bool {
	if len(w.group) > 0 || w.device != "" || w.slot != "" {
		return false
	}
	key := w.key
	d, ok := e.reg.warmest(key, func(d *DeviceRecord) bool { return e.pool.of(d, w.system) })
	if !ok {
		return false
	}
	others := false
	for x := range e.queue.All() {
		if x == w {
			continue
		}
		// A request that names another device wants that one only: like a
		// request of another spec, it was planned against d already.
		if len(x.group) > 0 || x.evicting || x.device == d.ID || (!x.working && x.key == key && x.device == "") {
			return false
		}
		others = others || !x.working
	}
	e.grantLocked(w, d.ID)
	if !others {
		// The grant changed nothing a queued request could use, but with
		// nothing left waiting the planner may now refill the warm pool.
		e.scheduleLocked()
	}
	return true
}

// scheduleLocked takes one snapshot of the registry, the limits and the
// queue, asks the pure planner (Plan) for a decision per waiter and applies
// them in queue order. Plan has already charged each decision against the
// ones before it, so applying them one after another never over-commits.
func (e *Engine) scheduleLocked() {
	if e.halt.halted() || e.broken != nil {
		return
	}
	e.targets.serveLocked(e.queue.Entries())
	e.warm.refresh(e.viewLocked())
	queue := e.queue.Entries()
	ds := Plan(e.planInputLocked(queue, true))
	e.groups.countBypass(ds, queue)
	for _, d := range ds {
		e.planLocked(d, queue)
	}
	e.goldens.retryLocked()
}

// planLocked applies one decision. Waiting is the absence of an action:
// a request nothing can serve now changes nothing.
func (e *Engine) planLocked(d Decision, queue []*waiter) {
	var w *waiter
	spec := Spec{}
	if d.Waiter >= 0 {
		w = queue[d.Waiter]
		spec = w.spec
	} else {
		spec = e.warm.specs[d.Warm].spec
	}
	switch d.Kind {
	case DecideGrant:
		e.grantLocked(w, d.DeviceID)
	case DecideBoot:
		e.startBootLocked(w, d.DeviceID)
	case DecideProvision:
		e.startProvisionLocked(w, spec)
	case DecideWait:
		if w != nil {
			w.waitLimit = d.Limit
			if noWaitStranded(w, &e.queue) {
				e.dropWaiterLocked(w, e.host.refusal(w, e.planInputLocked))
			}
		}
	case DecideGrantGroup:
		e.grantGroupLocked(w, d.Members)
	case DecidePrepareGroup:
		e.groups.prepare(w, d.Members)
	case DecideEvict:
		e.log.Debug("evicting to unblock a limit", "device", d.DeviceID, "limit", d.Limit, "destroy", d.Destroy, "then", string(d.Then), "requester", w.requester)
		e.startEvictLocked(w, d.DeviceID, d.Destroy)
	}
}

// planInputLocked is the planner's snapshot: every device with its state,
// footprint and whether the general pool may use it; the limits; and, when
// given, the queue and the warm-pool shortfall.
func (e *Engine) planInputLocked(queue []*waiter, warm bool) PlanInput {
	in := PlanInput{Limits: e.strategy.Limits()}
	in.Host = e.host.resolved(in.Limits)
	for _, d := range e.reg.devices {
		in.Devices = append(in.Devices, PlanDevice{ID: d.ID, Platform: d.Platform, SpecKey: d.Spec.Key(), State: d.State,
			Usable: e.pool.idle(d), System: d.OwnerSystem, Yields: e.pool.slotYields(d), Reserved: e.reg.holdsReservation(d),
			Leaving: e.reg.opLocks[d.ID] == "converge", RAM: e.footprintLocked(d.Spec), LastUse: lastUse(d)})
	}
	sort.Slice(in.Devices, func(i, j int) bool { return in.Devices[i].ID < in.Devices[j].ID })
	in.Devices = append(in.Devices, e.goldens.planDevicesLocked()...)
	for _, w := range queue {
		if len(w.group) > 0 {
			in.Queue = append(in.Queue, e.groups.plan(w))
			continue
		}
		in.Queue = append(in.Queue, PlanWaiter{Platform: w.spec.Platform, SpecKey: w.key, RAM: e.footprintLocked(w.spec),
			// A targeted waiter is served by the targeted book alone (targetBook.serveLocked): to
			// the planner it is always in flight, so no other device is
			// granted, booted or made for it.
			NoWait: w.noWait, Working: w.working || w.device != "", Evicting: w.evicting, System: w.system})
	}
	// No warm device is made while the slots' devices are unknown: every
	// device then reads as unusable, so the shortfall would be the whole
	// target, made beside slot devices that may be idle and matching.
	if warm && !e.slots.unknown {
		v := e.viewLocked()
		for _, ws := range e.warm.specs {
			in.Warm = append(in.Warm, PlanWarm{Platform: ws.spec.Platform, SpecKey: ws.spec.Key(), RAM: e.footprintLocked(ws.spec),
				Want: ws.count - e.warm.have(v, ws.spec.Key())})
		}
	}
	return in
}

// keepRunningAfterPurgeLocked answers, between a purge's erase and its boot,
// whether the device should come back running: not when running capacity is
// over, and not when the planner, seeing it ready, would evict it at once
// for a waiter it cannot serve. Booting it then would only cost a boot and
// a shutdown nobody uses.
func (e *Engine) keepRunningAfterPurgeLocked(id string) bool {
	d, ok := e.reg.devices[id]
	if !ok {
		return false
	}
	if e.capacity.runningOverLocked(d.Platform) {
		return false
	}
	in := e.planInputLocked(e.queue.Entries(), false)
	for i := range in.Devices {
		if in.Devices[i].ID == id {
			in.Devices[i].State, in.Devices[i].Usable = StateReady, true
		}
	}
	for _, dec := range Plan(in) {
		if dec.Kind == DecideEvict && dec.DeviceID == id {
			return false
		}
	}
	return true
}

// lastUse is when a caller last had the device: its last release, or for
// a device never leased, when it entered its state. A purge or a warm boot
// after the release is the pool's work, not a use: counting it let two
// devices released in one order swap places in the LRU order whenever the
// first one's purge happened to finish last.
func lastUse(d *DeviceRecord) time.Time {
	if !d.LastReleasedAt.IsZero() {
		return d.LastReleasedAt
	}
	return d.StateSince
}

// grantLocked commits a lease on ready device id for w.
func (e *Engine) grantLocked(w *waiter, id string) {
	if len(w.spec.Resources) > 0 && w.tuned == nil {
		// The resource profile is applied (again, on a reused device) and
		// verified before the grant; the step's settlement grants.
		e.tune.startLocked(w, id)
		return
	}
	if e.rs.baselineBeforeGrantLocked(w, id) {
		return // the keep-booted baseline's settlement grants (resetmodes.go)
	}
	now := e.now()
	d := *e.reg.devices[id]
	d.State = StateLeased
	d.StateSince = now
	d.LastLeasedAt = now
	l := LeaseRecord{
		ID: "lse_" + e.newID(), DeviceID: id, RequesterID: w.requester, OwnerID: w.owner,
		Platform: d.Platform, TTL: w.ttl, GrantedAt: now, ExpiresAt: now.Add(w.ttl), LastRenewedAt: now,
	}
	w.stampLease(&l, now)
	if w.tuned != nil {
		l.Resources = w.tuned.result
	}
	ticket, err := e.commitAsyncLocked(Changes{PutDevices: []DeviceRecord{d}, PutLeases: []LeaseRecord{l}, PutRequests: e.reqs.grantedReceipt(e.store, w, l)})
	if err != nil {
		e.log.Error("grant commit failed", "device", id, "err", err)
		e.queue.remove(w)
		w.deliver(result{err: err})
		return
	}
	e.queue.remove(w)
	e.armExpiryLocked(l)
	e.emitLocked(events.Event{Type: "lease.granted", LeaseID: l.ID, DeviceID: id, RequesterID: l.RequesterID, Platform: d.Platform,
		Data: map[string]any{"ttlMs": l.TTL.Milliseconds(), "waitedMs": now.Sub(w.enqueuedAt).Milliseconds(), "ownerId": l.OwnerID,
			"requestId": l.RequestID, "timing": l.Timing.Data()}})
	e.pushLocked(w, Progress{Phase: "granted", DeviceID: id})
	w.deliver(result{grant: Grant{Lease: l, Device: d}, ticket: ticket})
}

// startBootLocked boots a shut-down device through the op executor,
// holding a running reservation (its op lock: registry.holdsReservation),
// for waiter w or, with w nil, for the warm pool.
func (e *Engine) startBootLocked(w *waiter, id string) {
	lock := e.workLock(w, "boot")
	o := &deviceOp{kind: OpKindBoot, lock: lock, id: id,
		run: func(ctx context.Context, o *deviceOp) error {
			w.push(Progress{Phase: "booting", DeviceID: id, ETA: e.est.of(o.drv, OpBoot)})
			w.begin(PhaseBoot, e.now())
			defer func() { w.end(PhaseBoot, e.now()) }()
			return e.est.measure(e.now, o.drv, OpBoot, func() error { return o.drv.MakeReady(ctx, o.rec.Ref()) })
		},
		settle: func(o *deviceOp, err error) error { return e.settleBootLocked(w, id, err, "device.booted") },
	}
	if err := e.startOpLocked(o); err != nil {
		e.log.Error("start a boot", "device", id, "err", err)
		if w != nil {
			e.dropWaiterLocked(w, err)
		}
	}
}

// provisionError marks a failure before the new device could boot: the
// device is gone (or never was), so its record is dropped.
type provisionError struct{ err error }

func (e *provisionError) Error() string { return e.err.Error() }
func (e *provisionError) Unwrap() error { return e.err }

// startProvisionLocked records a provisioning device for spec, with its
// intent, before the driver is asked for anything; then it creates and
// boots it through the op executor, holding a running reservation (its op lock), for
// waiter w or, with w nil, for the warm pool.
func (e *Engine) startProvisionLocked(w *waiter, spec Spec) string {
	now := e.now()
	rec := DeviceRecord{ID: "dev_" + e.newID(), Platform: spec.Platform, Spec: spec,
		State: StateProvisioning, StateSince: now, CreatedAt: now,
		Intent: DeviceIntent{Op: OpKindProvision, Since: now}}
	if w != nil {
		// Marked in the record that creates it: the device is its
		// system's before anything exists to be served.
		rec.OwnerSystem = w.system
	}
	if err := e.commitLocked(Changes{PutDevices: []DeviceRecord{rec}}); err != nil {
		e.log.Error("record a new device", "err", err)
		if w != nil {
			e.queue.remove(w)
			w.deliver(result{err: err})
		}
		return ""
	}
	id := rec.ID
	if w != nil {
		w.made = id
	}
	lock := e.workLock(w, "provision")
	o := &deviceOp{kind: OpKindProvision, lock: lock, id: id,
		run: func(ctx context.Context, o *deviceOp) error { return e.provisionAndBoot(ctx, o, w, spec) },
		settle: func(o *deviceOp, err error) error {
			var pe *provisionError
			if errors.As(err, &pe) {
				e.log.Warn("provision failed", "device", id, "err", pe.err)
				e.dropLocked(id)
				if w != nil {
					e.failWorkLocked(w, &DeviceFailedError{Phase: "provision", Err: pe.err})
				} else {
					e.scheduleLocked()
				}
				return nil
			}
			if err != nil && e.host.refused(err) {
				// Refused before the driver created anything: forget the
				// record, and the waiter waits for room.
				e.dropLocked(id)
				if w == nil {
					e.scheduleLocked()
				} else {
					w.made = ""
					e.replanLocked(w)
				}
				return nil
			}
			return e.settleBootLocked(w, id, err, "device.ready")
		},
	}
	if err := e.startOpLocked(o); err != nil {
		e.log.Error("start a provision", "device", id, "err", err)
		e.dropLocked(id)
		if w != nil {
			e.dropWaiterLocked(w, err)
		}
		return ""
	}
	return id
}

// provisionAndBoot is a provision's driver work: create, record the handle,
// boot. If the handle cannot be recorded the device is destroyed again at
// once: a device the registry cannot name would be an orphan.
func (e *Engine) provisionAndBoot(ctx context.Context, o *deviceOp, w *waiter, spec Spec) error {
	id, drv := o.id, o.drv
	w.push(Progress{Phase: "provisioning", DeviceID: id, ETA: e.est.of(drv, OpProvision) + e.est.of(drv, OpBoot)})
	w.begin(PhaseProvision, e.now())
	var prov Provisioned
	err := e.est.measure(e.now, drv, OpProvision, func() (err error) { prov, err = drv.Provision(ctx, spec); return err })
	w.end(PhaseProvision, e.now())
	if err != nil {
		return &provisionError{err}
	}
	var ref DeviceRef
	var cerr error
	e.section(func() {
		d := *e.reg.devices[id]
		d.Handle, d.Name, d.Attrs, d.Simulated, d.Data = prov.Handle, prov.Name, prov.Attrs, prov.Simulated, prov.Data
		if prov.RAMBytes > 0 {
			d.Spec.RAMBytes = prov.RAMBytes // charged from now on, by capacity and status
		}
		if cerr = e.commitLocked(Changes{PutDevices: []DeviceRecord{d}}); cerr != nil {
			return
		}
		e.emitLocked(events.Event{Type: "device.provisioned", DeviceID: id, Platform: d.Platform,
			Data: map[string]any{"model": spec.Model, "osVersion": spec.OSVersion}})
		ref = d.Ref()
		o.rec.Handle = d.Handle
		if w != nil {
			w.phase = "booting"
		}
	})
	if cerr != nil {
		e.log.Error("persist provisioned device; destroying it again", "device", id, "handle", prov.Handle, "err", cerr)
		orphan := DeviceRef{ID: id, Handle: prov.Handle, Name: prov.Name, Spec: spec, Attrs: prov.Attrs, Data: prov.Data}
		if derr := drv.Destroy(ctx, orphan); derr != nil {
			e.log.Error("destroying an unrecorded device failed; doctor --purge-orphans finds it", "handle", prov.Handle, "err", derr)
		}
		return &provisionError{fmt.Errorf("record the new device: %w", cerr)}
	}
	// The device exists and has a name now: claim it before the first
	// mutation that is not its creation. Refused, it is destroyed again,
	// and the provision fails as if it never happened.
	info := o.info()
	info.Attrs = ref.Attrs
	if herr := e.hooks.Created(ctx, info); herr != nil {
		if derr := drv.Destroy(ctx, ref); derr != nil {
			e.log.Error("destroying a device its claim refused failed", "device", id, "handle", ref.Handle, "err", derr)
		}
		return &provisionError{fmt.Errorf("claim the new device: %w", herr)}
	}
	w.push(Progress{Phase: "booting", DeviceID: id, ETA: e.est.of(drv, OpBoot)})
	w.begin(PhaseBoot, e.now())
	defer func() { w.end(PhaseBoot, e.now()) }()
	return e.est.measure(e.now, drv, OpBoot, func() error { return drv.MakeReady(ctx, ref) })
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
// quarantined for a boot retry, so it is not picked again at once. If it was
// an existing shut-down device, its waiter goes back to the planner, which
// tries the next option (another device, or a new one); a freshly
// provisioned device that fails fails its waiter. A ready device goes to its
// waiter, or into the warm pool. An error means the store refused the first
// commit and nothing changed.
func (e *Engine) settleBootLocked(w *waiter, id string, err error, fact string) error {
	if err != nil && e.host.refused(err) {
		// Refused before any platform command: the device is as it was, and
		// its waiter waits for room like any other.
		if w == nil {
			e.scheduleLocked()
		} else {
			e.replanLocked(w)
		}
		return nil
	}
	if err != nil {
		fresh := false
		if d, ok := e.reg.devices[id]; ok {
			fresh = d.State == StateProvisioning
		}
		if qerr := e.quarantine.enterLocked(id, "boot-failed", OpKindBoot); qerr != nil {
			return qerr
		}
		e.log.Warn("boot failed", "device", id, "err", err)
		switch {
		case w == nil:
			e.scheduleLocked()
		case fresh, w.device != "":
			e.failWorkLocked(w, &DeviceFailedError{Phase: "boot", Err: err})
		case errors.Is(err, ErrHeldElsewhere):
			// Another owner on the host has the device: say so now, rather
			// than trying the next device, which the same owner may hold.
			e.failWorkLocked(w, err)
		default:
			e.replanLocked(w)
		}
		return nil
	}
	d, serr := e.reg.setState(id, StateReady)
	if serr != nil {
		return serr
	}
	if w == nil {
		e.emitLocked(events.Event{Type: "device.warmed", DeviceID: id, Platform: d.Platform,
			Data: map[string]any{"model": d.Spec.Model, "osVersion": d.Spec.OSVersion}})
		e.scheduleLocked()
		return nil
	}
	e.emitLocked(events.Event{Type: fact, DeviceID: id, Platform: d.Platform})
	e.finishWorkLocked(w, id)
	return nil
}

// replanLocked puts a waiter whose device work failed back in line, in its
// original place, and runs the planner again.
func (e *Engine) replanLocked(w *waiter) {
	w.working = false
	w.phase = "queued"
	if w.abandoned || !e.queue.Contains(w) {
		e.queue.remove(w)
	}
	e.scheduleLocked()
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
	if w.abandoned || !e.queue.Contains(w) {
		e.queue.remove(w)
		e.owners.retireUnwantedLocked(id)
		e.scheduleLocked()
		return
	}
	e.grantLocked(w, id)
	e.scheduleLocked()
}

func (e *Engine) failWorkLocked(w *waiter, err error) {
	e.dropWaiterLocked(w, err)
	e.scheduleLocked()
}

// dropWaiterLocked fails w without re-running the planner (which may be on
// the stack already).
func (e *Engine) dropWaiterLocked(w *waiter, err error) {
	w.working = false
	e.queue.remove(w)
	e.emitLocked(events.Event{Type: "request.failed", RequesterID: w.requester, Platform: w.spec.Platform, Reason: err.Error(), Data: e.reqs.refusalData(w.owner, err)})
	w.deliver(result{err: err})
}

// startEvictLocked shuts down (or, with destroy, deletes) another spec's
// idle device so that w can be served next. The intent is on disk before
// the driver acts, so a crash in between is finished by the next start.
func (e *Engine) startEvictLocked(w *waiter, id string, destroy bool) {
	if isGoldenPlanID(id) {
		e.goldens.reclaimForLocked(w, id)
		return
	}
	d := *e.reg.devices[id]
	drv := e.drivers[d.Platform]
	var o *deviceOp
	if destroy {
		o = e.destroyOp(id, "evict", "eviction-failed", func(DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: d.Platform, Reason: "evicted"})
		})
	} else {
		o = e.shutdownOp(id, "evict", "eviction-failed", func(DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.evicted", DeviceID: id, Platform: d.Platform})
		})
	}
	run, settle := o.run, o.settle
	o.run = func(ctx context.Context, o *deviceOp) error {
		w.begin(PhaseEvict, e.now())
		defer func() { w.end(PhaseEvict, e.now()) }()
		return run(ctx, o)
	}
	o.settle = func(o *deviceOp, err error) error {
		w.evicting = false
		if serr := settle(o, err); serr != nil {
			w.evicting = true
			return serr
		}
		if err != nil {
			e.scheduleLocked()
		}
		return nil
	}
	w.evicting = true
	if err := e.startOpLocked(o); err != nil {
		w.evicting = false
		e.log.Error("start an eviction", "device", id, "err", err)
		return
	}
	e.pushLocked(w, Progress{Phase: "evicting", DeviceID: id, ETA: drv.Estimate(OpShutdown)})
}

// goBackground runs f in a goroutine the engine waits for on Stop. Called
// in the decision section, so it can never add to the wait group after Stop
// has begun waiting (beginOpLocked refuses once stopping).
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
