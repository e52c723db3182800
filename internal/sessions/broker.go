package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
)

// The session broker (session-broker/v1, ADR 0045 and 0047): a session is
// an ordinary core lease whose request carries an identity derived from
// the owner token and the whole configuration; the broker keeps a durable
// receipt beside it (store migration 8).

// Broker timing that is not operator configuration.
const (
	// StoppingRetryMs paces a retry after a stopping refusal, the
	// broker's and the daemon's alike.
	StoppingRetryMs = 5000
	// capRetryMs paces a retry after a cap refusal: the broker's
	// recovery interval, as for the other configured-but-unavailable
	// refusals.
	capRetryMs       = 5000
	evictionRetryMs  = 1000
	maxReplyBudgetMs = 30000
	// handoffGrace is how long a handed-off session outlives the stop
	// without a heartbeat, so its keeper can find the next daemon.
	handoffGrace = 30 * time.Second
	// MetaHandoff marks a graceful stop: its value is the instance id of
	// the daemon that handed its sessions off.
	MetaHandoff = "sessions.handoff"
	// OwnerExited is the release reason a keeper sends for a dead owner.
	OwnerExited     = "session_owner_exited"
	retryNewRequest = RetryNewRequest
)

// Broker serves the session operations of one worker daemon.
type Broker struct {
	cfg      *config.Sessions // nil: sessions are not configured
	st       Store
	meta     Meta
	engine   Engine
	watch    LeaseWatch
	resets   Resets // nil: no reset record, no release with another policy
	retirer  Retirer
	bus      Bus
	host     Host
	clock    ports.Clock
	log      *slog.Logger
	instance string
	mapErr   func(error) *contract.Error

	ctx    context.Context // preparations and cleanups run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// admitMu makes admission (count, decide, commit the pending receipt)
	// one step, so two prepares cannot both take the last slot.
	admitMu sync.Mutex

	mu       sync.Mutex
	stopping bool
	inflight map[string]*preparation // identity → the preparation running it
	live     map[string]*liveSession // session id → admitted and not settled
	releases map[string]*tracked     // session id → its release in progress
}

// preparation is one prepare running; duplicates wait on done.
type preparation struct {
	done    chan struct{}
	rec     Record
	err     error
	cancel  context.CancelFunc
	abandon bool // set by session.abandon: the failure is SESSION_ABANDONED
}

// liveSession is what the broker keeps in memory about an admitted session.
type liveSession struct {
	identity  string
	leaseID   string
	deviceID  string
	idle      time.Duration
	lastTouch time.Time
	timer     interface{ Stop() bool }
	// lastBeat is the keeper's last heartbeat (or a handoff's grace end);
	// beat fires when the heartbeat TTL passes after it.
	lastBeat time.Time
	beat     interface{ Stop() bool }
	// cleanup is true once the session ended but its device's teardown
	// is not confirmed: it still counts against totalDeviceCap.
	cleanup bool
	// reuse is set while the session's reset keeps the device for the
	// next session: it counts against idlePoolCap until it settles.
	reuse bool
	// owner is what principalOf answered when the session became live;
	// only principalOf reads it.
	owner string
	// ownerDigest is the receipt's owner digest: a heartbeat is checked
	// against it here, without reading the receipt.
	ownerDigest string
}

// tracked is one release: every release call of the session joins it.
type tracked struct {
	done chan struct{}
}

// NewBroker builds the broker from its dependencies; it starts nothing
// until Recover.
func NewBroker(c Config) *Broker {
	ctx, cancel := context.WithCancel(context.Background())
	return &Broker{cfg: c.Sessions, st: c.Store, meta: c.Meta, engine: c.Engine, watch: c.Watch, resets: c.Resets, retirer: c.Retirer, bus: c.Bus, host: c.Host,
		clock: c.Clock, log: c.Log, instance: c.Instance, mapErr: c.MapError, ctx: ctx, cancel: cancel,
		inflight: map[string]*preparation{}, live: map[string]*liveSession{}, releases: map[string]*tracked{}}
}

// Configured reports whether this daemon's config has a sessions section.
func (b *Broker) Configured() bool { return b != nil && b.cfg != nil }

func (b *Broker) configured() error {
	if b.cfg == nil {
		return contract.Errorf(contract.CodeSessionsNotConfigured, "this daemon's config has no sessions section")
	}
	return nil
}

// StoppingErr is the broker's refusal once a stop has begun:
// SESSION_BROKER_STOPPING, nothing stored, retry the same request after
// retryAfterMs.
func StoppingErr() error {
	return contract.Errorf(contract.CodeSessionBrokerStopping, "the daemon is stopping; retry the same request against the next one").WithRetryAfter(StoppingRetryMs)
}

func (b *Broker) isStopping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stoppingLocked()
}

// stoppingLocked reports whether new prepares and abandons are refused:
// from the moment the daemon's stop begins, before the broker's own stop
// runs (it waits for convergence), so a prepare arriving in between is
// not admitted only to be interrupted.
func (b *Broker) stoppingLocked() bool {
	return b.stopping || b.host.StopBegun()
}

func msDur(ms int64, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}

func (b *Broker) heartbeatTTL() time.Duration { return msDur(b.cfg.HeartbeatTTLMs, 10*time.Second) }

// leaseTTL is the width of a session's lease: longer than the heartbeat
// TTL, so the broker's own lapse check ends the session first and as a
// destroy; the lease's expiry is only the backstop.
func (b *Broker) leaseTTL() time.Duration { return b.heartbeatTTL() * 3 / 2 }

// releasePolicy is the platform's reset from the sessions config (one
// mapping, releasePolicyFor).
func (b *Broker) releasePolicy(platform string) core.ReleasePolicy {
	return releasePolicyFor(platform, b.cfg)
}

func (b *Broker) now() time.Time { return b.clock.Now() }

func failure(code contract.Code, msg string, retryRequires string) contract.SessionFailure {
	ce := contract.Errorf(code, "%s", msg)
	return contract.SessionFailure{Code: code, Message: msg, Retryable: ce.Retryable, RetryAfterMs: ce.RetryAfterMs,
		RetryRequires: retryRequires, NextAction: ce.NextAction}
}

func (b *Broker) failureOf(err error) contract.SessionFailure {
	ce := b.mapErr(err)
	return contract.SessionFailure{Code: ce.Code, Message: ce.Message, Retryable: ce.Retryable, RetryAfterMs: ce.RetryAfterMs,
		RetryRequires: retryNewRequest, NextAction: ce.NextAction}
}

// destroyGaveUp reports whether an ended session's device could not be
// destroyed even after the quarantine's retries: the teardown is not a
// pending one that a retry after a second would outwait, so a prepare
// that needs its capacity fails for good (SESSION_PREPARATION_FAILED).
func (b *Broker) destroyGaveUp() bool {
	b.mu.Lock()
	var ids []string
	for _, s := range b.live {
		if s.cleanup && s.deviceID != "" {
			ids = append(ids, s.deviceID)
		}
	}
	b.mu.Unlock()
	for _, id := range ids {
		if b.engine.DestroyExhausted(id) {
			return true
		}
	}
	return false
}

func checkOwnerToken(t string) error {
	if t == "" || len(t) > 256 {
		return contract.Errorf(contract.CodeSessionConfigInvalid, "ownerToken must be 1 to 256 characters")
	}
	return nil
}

// ---- prepare ----

func (b *Broker) Prepare(ctx context.Context, call *dispatch.Call, in contract.SessionPrepareIn) (contract.SessionReceipt, error) {
	if err := b.configured(); err != nil {
		return contract.SessionReceipt{}, err
	}
	if b.isStopping() {
		return contract.SessionReceipt{}, StoppingErr()
	}
	if err := CheckConfig(in.Config); err != nil {
		return contract.SessionReceipt{}, err
	}
	if err := checkOwnerToken(in.OwnerToken); err != nil {
		return contract.SessionReceipt{}, err
	}
	var exp *Export
	if e := in.Export; e != nil {
		if len(e.PrepareID) < 1 || len(e.PrepareID) > 256 || len(e.RequestDigest) < 1 || len(e.RequestDigest) > 256 {
			return contract.SessionReceipt{}, contract.Errorf(contract.CodeSessionConfigInvalid, "export.prepareId and export.requestDigest must be 1 to 256 characters")
		}
		exp = &Export{PrepareID: e.PrepareID, RequestDigest: e.RequestDigest, CreatedAt: b.now()}
	}
	od := ownerKey(call, in.OwnerToken)
	id, err := Identity(od, in.Config)
	if err != nil {
		return contract.SessionReceipt{}, err
	}
	p, err := b.join(id, func(p *preparation, pctx context.Context) (Record, error) {
		return b.run(pctx, call, od, id, in.Config, exp)
	})
	if err != nil {
		return contract.SessionReceipt{}, err
	}
	var wait <-chan time.Time
	if in.WaitMs > 0 {
		wait = b.clock.After(time.Duration(in.WaitMs) * time.Millisecond)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return contract.SessionReceipt{}, p.err
		}
		return p.rec.Receipt, nil
	case <-wait:
	case <-ctx.Done():
		return contract.SessionReceipt{}, ctx.Err()
	}
	// Still running: answer with the stored receipt, pending. A
	// preparation stores its first receipt only once admitted, so until
	// then the call waits on (for that receipt or the end), rather than
	// answering with nothing a later session.status could find.
	for {
		rec, ok, err := b.st.SessionReceipt(ctx, id)
		if err != nil {
			return contract.SessionReceipt{}, fmt.Errorf("read the preparation's receipt: %w", err)
		}
		if ok {
			return rec.Receipt, nil
		}
		select {
		case <-p.done:
			if p.err != nil {
				return contract.SessionReceipt{}, p.err
			}
			return p.rec.Receipt, nil
		case <-ctx.Done():
			return contract.SessionReceipt{}, ctx.Err()
		case <-b.clock.After(50 * time.Millisecond):
		}
	}
}

// join runs f once per identity; a concurrent duplicate waits for the
// first and gets its answer.
func (b *Broker) join(id string, f func(*preparation, context.Context) (Record, error)) (*preparation, error) {
	b.mu.Lock()
	if b.stoppingLocked() {
		b.mu.Unlock()
		return nil, StoppingErr()
	}
	if p, ok := b.inflight[id]; ok {
		b.mu.Unlock()
		return p, nil
	}
	pctx, cancel := context.WithCancel(b.ctx)
	p := &preparation{done: make(chan struct{}), cancel: cancel}
	b.inflight[id] = p
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		defer cancel()
		rec, err := f(p, pctx)
		b.mu.Lock()
		p.rec, p.err = rec, err
		delete(b.inflight, id)
		b.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// run is one preparation: replay, resolve, admit, lease, settle.
func (b *Broker) run(ctx context.Context, call *dispatch.Call, od, id string, cfg contract.SessionConfig, exp *Export) (Record, error) {
	started := b.now()
	// The identity's own receipt answers first, also once its request id
	// was abandoned: abandoning a session ends it on that receipt (with
	// its session id and device), which session.status and the abandon
	// answer read too.
	if cur, ok, err := b.st.SessionReceipt(ctx, id); err != nil {
		return Record{}, err
	} else if ok {
		if exp != nil {
			if _, _, err := b.st.CommitSessionReceipt(ctx, cur, exp); err != nil {
				return Record{}, err
			}
		}
		return cur, nil
	}
	// An abandoned request id answers every other configuration of it.
	if tomb, ok, err := b.st.SessionReceipt(ctx, AbandonIdentity(od, cfg.RequestID)); err != nil {
		return Record{}, err
	} else if ok {
		return tomb, nil
	}
	nowMs := started.UnixMilli()
	rec := Record{Identity: id, OwnerDigest: od, Instance: b.instance, Principal: call.Session.Principal,
		Receipt: contract.SessionReceipt{ContractVersion: 1, RequestID: cfg.RequestID, CreatedAtMs: nowMs, UpdatedAtMs: nowMs,
			IdleTimeoutMs: cfg.IdleTimeoutMs}}
	if rec.Receipt.IdleTimeoutMs == 0 {
		rec.Receipt.IdleTimeoutMs = msDur(b.cfg.DefaultIdleTimeoutMs, time.Hour).Milliseconds()
	}
	refuse := func(f contract.SessionFailure) (Record, error) {
		rec.Receipt.Status = contract.SessionFailed
		rec.Receipt.Failure = &f
		got, _, err := b.st.CommitSessionReceipt(ctx, rec, exp)
		return got, err
	}
	profile, err := b.Resolve(ctx, cfg.Device)
	if err != nil {
		// A refusal before admission is the operation's answer, forever.
		f := b.failureOf(err)
		f.RetryRequires = ""
		if f.Retryable {
			f.RetryRequires = retryNewRequest
		}
		return refuse(f)
	}
	rec.Receipt.Profile = &profile

	b.admitMu.Lock()
	verdict, evicted := b.admit(ctx, profile)
	switch verdict {
	case SessionCapReached, DeviceCapReached:
		b.admitMu.Unlock()
		limits := Limits{SessionCap: b.cfg.Limits.SessionCap, TotalDeviceCap: b.cfg.Limits.TotalDeviceCap}
		return refuse(CapRefusal(verdict, limits, capRetryMs))
	case EvictionPending:
		b.admitMu.Unlock()
		if b.destroyGaveUp() {
			return refuse(failure(contract.CodeSessionPreparationFailed, "an earlier session's device could not be destroyed; its capacity stays taken until an operator removes it", ""))
		}
		f := failure(contract.CodeEvictionPending, "an earlier session's device is still being destroyed", retryNewRequest)
		f.Retryable = true
		ra := int64(evictionRetryMs)
		f.RetryAfterMs = &ra
		return refuse(f)
	}
	rec.Receipt.SessionID = uuid.NewString()
	rec.Receipt.Status = contract.SessionPending
	admitMs := b.now().Sub(started).Milliseconds()
	admission := contract.AdmissionCreate
	if evicted {
		admission = contract.AdmissionEvictThenCreate
	}
	rec.Receipt.Timing = &contract.SessionTiming{Acquisition: &contract.SessionAcquisition{Admission: admission,
		Outcome: contract.SessionPending, StartedAtMs: nowMs, AdmissionWaitMs: &admitMs}}
	got, created, err := b.st.CommitSessionReceipt(ctx, rec, exp)
	if err != nil || !created {
		b.admitMu.Unlock()
		return got, err // not persisted: no result is claimed
	}
	sid := rec.Receipt.SessionID
	owner := b.principalOf(rec)
	b.mu.Lock()
	b.live[sid] = &liveSession{identity: id, idle: time.Duration(rec.Receipt.IdleTimeoutMs) * time.Millisecond, owner: owner, ownerDigest: od}
	b.mu.Unlock()
	b.admitMu.Unlock()

	lr := LeaseRequest(profile)
	r := core.Request{Spec: core.SpecRequest{Platform: lr.Platform, Model: lr.Model, OSVersion: lr.OSVersion},
		TTL: b.leaseTTL(), RequesterID: sessionRequester(call.Session, sid), OwnerID: owner,
		IdempotencyKey: IdempotencyKey(id), Release: b.releasePolicy(profile.Platform), OwnerSystem: System}
	g, err := b.engine.Request(ctx, r, func(p core.Progress) { b.preparing(sid, p) })
	if err != nil {
		return b.settleFailed(id, sid, err)
	}
	return b.settleReady(ctx, id, g, started, evicted)
}

// sessionRequester is the requester id of a session's lease: in an
// agent's namespace (ADR 0016), so the agent can pass it to device.exec as
// read back from the lease.
func sessionRequester(s contract.Session, sid string) string {
	if s.Role == contract.RoleAdmin {
		return "session/" + sid
	}
	return s.Principal + "/session/" + sid
}

// settleFailed ends an admitted preparation whose lease request failed.
func (b *Broker) settleFailed(id, sid string, cause error) (Record, error) {
	ctx := context.WithoutCancel(b.ctx)
	rec, ok, err := b.st.SessionReceipt(ctx, id)
	if err != nil || !ok {
		return rec, fmt.Errorf("session %s: read receipt: %w", sid, err)
	}
	f := b.failureOf(cause)
	b.mu.Lock()
	stopping := b.stopping
	b.mu.Unlock()
	switch {
	case b.abandoned(id):
		f = failure(contract.CodeSessionAbandoned, "the request was abandoned", retryNewRequest)
	case stopping || errors.Is(cause, core.ErrStopping):
		f = StoppedFailure(StoppingRetryMs)
	}
	Fail(&rec.Receipt, f, b.now())
	// A device the preparation was building is torn down by the core
	// (never leased, nobody waits for it): until its destruction is
	// confirmed the receipt says so and the device counts against the cap.
	dev, left := b.leftBehind(sid)
	if left {
		cd := b.host.DeviceOut(dev, "")
		rec.Receipt.Device = &cd
		rec.Receipt.CleanupPending = true
		if rec.Receipt.Timing == nil {
			rec.Receipt.Timing = &contract.SessionTiming{}
		}
		rec.Receipt.Timing.Reset = &contract.SessionReset{Mode: contract.ResetDestroy, Outcome: contract.ResetOutcomePending, StartedAtMs: b.now().UnixMilli()}
	}
	if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
		return rec, err
	}
	if left {
		b.emit(EvSessionReleased, rec, "preparation_failed", map[string]any{"resetMode": contract.ResetDestroy})
		b.trackCleanupUntil(sid, id, dev.ID, "", nil, b.deviceGone(dev.ID))
		return rec, nil
	}
	b.emit(EvSessionEnded, rec, "preparation_failed", nil)
	b.mu.Lock()
	delete(b.live, sid)
	b.mu.Unlock()
	return rec, nil
}

func (b *Broker) abandoned(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.inflight[id]
	return ok && p.abandon
}

// acquisitionOf maps the core's per-lease timing record onto the
// session's acquisition record; it measures nothing itself.
func acquisitionOf(a *contract.SessionAcquisition, t *core.Timing, started, now time.Time) {
	a.Outcome = contract.SessionReady
	done := now.UnixMilli()
	total := now.Sub(started).Milliseconds()
	a.CompletedAtMs, a.TotalMs = &done, &total
	if t == nil {
		return
	}
	q := t.QueueWait.Milliseconds()
	a.QueueMs = &q
	switch t.Path {
	case core.PathWarm, core.PathBoot:
		a.Admission = contract.AdmissionReuse
	case core.PathEvictThenProvision:
		a.Admission = contract.AdmissionEvictThenCreate
	default:
		a.Admission = contract.AdmissionCreate
	}
	phase := func(name string) *int64 {
		if v, ok := t.Phases[name]; ok {
			ms := v.Milliseconds()
			return &ms
		}
		return nil
	}
	a.CreateMs, a.BootMs, a.ReadyMs = phase(core.PhaseProvision), phase(core.PhaseBoot), phase(core.PhaseReadiness)
	if a.Admission == contract.AdmissionReuse {
		zero := int64(0)
		a.CreateMs = &zero
		if t.Path == core.PathWarm {
			a.BootMs = &zero
		}
	}
}

// settleReady records the grant on the receipt and starts watching the
// session's lease.
func (b *Broker) settleReady(ctx context.Context, id string, g core.Grant, started time.Time, evicted bool) (Record, error) {
	rec, ok, err := b.st.SessionReceipt(ctx, id)
	if err != nil || !ok {
		return rec, fmt.Errorf("session: read receipt: %w", err)
	}
	r := &rec.Receipt
	now := b.now()
	if err := Move(r, contract.SessionReady, now); err != nil {
		return rec, err // abandoned while the lease was granted: abandon destroys it
	}
	r.LeaseID = g.Lease.ID
	dev := b.host.DeviceOut(g.Device, g.Lease.ID)
	r.Device = &dev
	acquisitionOf(r.Timing.Acquisition, g.Lease.Timing, started, now)
	if evicted && r.Timing.Acquisition.Admission == contract.AdmissionCreate {
		// The broker destroyed an idle session device for this create.
		r.Timing.Acquisition.Admission = contract.AdmissionEvictThenCreate
	}
	r.Timing.Acquisition.ReuseCount = g.Device.ReuseCount
	if err := b.st.UpdateSessionReceipt(context.WithoutCancel(ctx), rec); err != nil {
		// Not claimed: a replay of the identity finds the core's request
		// by its key and the same lease.
		return rec, err
	}
	b.adopt(rec, g.Lease.ID, g.Device.ID, 0)
	extra := map[string]any{"admission": string(r.Timing.Acquisition.Admission)}
	if t := r.Timing.Acquisition.TotalMs; t != nil {
		extra["totalMs"] = *t
	}
	b.emit(EvSessionPrepared, rec, "", extra)
	return rec, nil
}

// adopt registers a ready session: its idle timer and the watch on its
// lease's end.
func (b *Broker) adopt(rec Record, leaseID, deviceID string, grace time.Duration) {
	sid := rec.Receipt.SessionID
	rec.Receipt.LeaseID = leaseID
	owner := b.principalOf(rec)
	b.mu.Lock()
	s, ok := b.live[sid]
	if !ok {
		s = &liveSession{identity: rec.Identity, idle: time.Duration(rec.Receipt.IdleTimeoutMs) * time.Millisecond}
		b.live[sid] = s
	}
	if s.owner == "" {
		s.owner = owner
	}
	s.ownerDigest = rec.OwnerDigest
	s.leaseID, s.deviceID, s.lastTouch, s.lastBeat = leaseID, deviceID, b.now(), b.now().Add(grace)
	b.armIdleLocked(sid, s)
	b.armBeatLocked(sid, s)
	b.mu.Unlock()
	ended := b.watch.LeaseEnded(leaseID)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		select {
		case <-ended:
			b.leaseEnded(sid)
		case <-b.ctx.Done():
		}
	}()
}

func (b *Broker) armIdleLocked(sid string, s *liveSession) {
	if s.idle <= 0 {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	wait := s.idle - b.now().Sub(s.lastTouch)
	s.timer = b.clock.AfterFunc(wait, func() { b.idleCheck(sid) })
}

func (b *Broker) idleCheck(sid string) {
	b.mu.Lock()
	s, ok := b.live[sid]
	if !ok || s.cleanup || b.stopping {
		b.mu.Unlock()
		return
	}
	if b.now().Sub(s.lastTouch) < s.idle {
		b.armIdleLocked(sid, s)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.log.Info("session idle; releasing", "session", sid)
	if _, err := b.beginRelease(context.Background(), sid, "idle_timeout", nil); err != nil {
		b.log.Warn("idle release failed", "session", sid, "err", err)
	}
}

func (b *Broker) armBeatLocked(sid string, s *liveSession) {
	if s.beat != nil {
		s.beat.Stop()
	}
	s.beat = b.clock.AfterFunc(b.heartbeatTTL()-b.now().Sub(s.lastBeat), func() { b.beatCheck(sid) })
}

// beatCheck ends a session whose keeper stopped heartbeating: the owner
// exited, and its device is destroyed whatever the session's reset.
func (b *Broker) beatCheck(sid string) {
	b.mu.Lock()
	s, ok := b.live[sid]
	if !ok || s.cleanup || b.stopping {
		b.mu.Unlock()
		return
	}
	if b.now().Sub(s.lastBeat) < b.heartbeatTTL() {
		b.armBeatLocked(sid, s)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.log.Info("session keeper stopped heartbeating; the owner exited", "session", sid)
	if _, err := b.beginRelease(context.Background(), sid, OwnerExited, nil); err != nil {
		b.log.Warn("owner-exit release failed", "session", sid, "err", err)
	}
}

// liveLease answers a heartbeat from memory: the lease of a ready session
// that is not releasing, when token is its owner's. ok is false when the
// broker's memory cannot decide (not live here, preparing, releasing or
// cleaning up); the durable receipt then answers.
func (b *Broker) liveLease(call *dispatch.Call, sid, token string) (leaseID string, mismatch, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, live := b.live[sid]
	_, releasing := b.releases[sid]
	if !live || s.cleanup || releasing || s.leaseID == "" || s.ownerDigest == "" {
		return "", false, false
	}
	if !holdsToken(call, s.ownerDigest, s.owner, token) {
		return "", true, true
	}
	return s.leaseID, false, true
}

// beat records a keeper's heartbeat.
func (b *Broker) beat(sid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.live[sid]; ok && !s.cleanup && b.now().After(s.lastBeat) {
		s.lastBeat = b.now()
	}
}

// TouchLease marks a device call on a session's lease (device.exec,
// resources.*, device.upload): the idle window starts again.
func (b *Broker) TouchLease(leaseID string) {
	if b == nil || b.cfg == nil {
		return // sessions are not configured: no session holds a lease
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.live {
		if s.leaseID == leaseID && !s.cleanup {
			s.lastTouch = b.now()
			return
		}
	}
}

// leaseEnded handles a session's lease ending without a release of ours:
// the heartbeat lapsed (the owner exited) or the device was lost.
func (b *Broker) leaseEnded(sid string) {
	b.mu.Lock()
	_, releasing := b.releases[sid]
	s, ok := b.live[sid]
	stopping := b.stopping
	b.mu.Unlock()
	if releasing || !ok || stopping {
		return
	}
	ctx := context.WithoutCancel(b.ctx)
	rec, found, err := b.st.SessionReceipt(ctx, s.identity)
	if err != nil || !found {
		return
	}
	if Fail(&rec.Receipt, failure(contract.CodeSessionOwnerExited, "the session's keeper stopped heartbeating", retryNewRequest), b.now()) {
		rec.Receipt.EndReason = OwnerExited
		rec.Receipt.CleanupPending = true
		if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
			b.log.Warn("record owner exit", "session", sid, "err", err)
		} else {
			b.emit(EvSessionReleased, rec, OwnerExited, nil)
		}
		b.log.Info("session owner exited", "session", sid)
	}
	b.trackCleanup(sid, rec.Identity, s.deviceID, s.leaseID, nil)
}
