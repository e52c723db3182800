package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
)

func (b *Broker) releaseLease(leaseID string, destroy bool) error {
	var err error
	if b.resets != nil && destroy {
		err = b.resets.ReleaseWith(leaseID, core.ReleasePolicy{Mode: contract.ResetDestroy}, OwnerExited)
	} else {
		err = b.engine.Release(leaseID)
	}
	if errors.Is(err, core.ErrUnknownLease) {
		return nil // ended already (expired, lost): its teardown runs anyway
	}
	return err
}

func (b *Broker) replyBudget(in *int64) time.Duration {
	ms := b.cfg.ReleaseReplyBudgetMs
	if ms <= 0 || ms > maxReplyBudgetMs {
		ms = maxReplyBudgetMs
	}
	if in != nil {
		ms = max(0, min(*in, maxReplyBudgetMs))
	}
	return time.Duration(ms) * time.Millisecond
}

// Release ends a session for the holder of its owner token. Without the
// token a session is unknown_session to the caller, exactly as an id
// that never existed (ADR 0058): the daemon cannot check a token against a
// receipt it does not have, so "no session of yours" is the one answer
// true of both. An admin is told another token's session apart.
func (b *Broker) Release(ctx context.Context, call *dispatch.Call, in contract.SessionReleaseIn) (contract.SessionReleaseOut, error) {
	if err := b.configured(); err != nil {
		return contract.SessionReleaseOut{}, err
	}
	rec, ok, err := b.st.SessionReceiptBySession(ctx, in.SessionID)
	if err != nil {
		return contract.SessionReleaseOut{}, err
	}
	if !ok || !holdsToken(call, rec.OwnerDigest, b.principalOf(rec), in.OwnerToken) {
		if ok && isAdmin(call) {
			return contract.SessionReleaseOut{}, contract.Errorf(contract.CodeSessionOwnerMismatch, "session %s was prepared under another owner token", in.SessionID)
		}
		return contract.SessionReleaseOut{Outcome: contract.ReleaseUnknownSession}, nil
	}
	if in.Reason != "" && in.Reason != OwnerExited {
		return contract.SessionReleaseOut{}, contract.Errorf(contract.CodeBadRequest, "reason is %q or empty, not %q", OwnerExited, in.Reason)
	}
	budget := b.replyBudget(in.ReplyBudgetMs)
	t, err := b.beginRelease(ctx, in.SessionID, in.Reason, nil)
	if err != nil {
		return contract.SessionReleaseOut{}, err
	}
	outcome := contract.ReleaseReleased
	switch {
	case t != nil && in.Reason == OwnerExited:
		// The keeper's owner is gone and nobody waits for the teardown:
		// the terminal receipt is committed, so the answer acknowledges
		// the release and the destruction finishes as tracked work.
		outcome = contract.ReleaseCleanupPending
	case t != nil:
		select {
		case <-t.done:
		case <-b.clock.After(budget):
			outcome = contract.ReleaseCleanupPending
		case <-ctx.Done():
			outcome = contract.ReleaseCleanupPending
		}
	}
	rec, _, err = b.st.SessionReceiptBySession(context.WithoutCancel(ctx), in.SessionID)
	if err != nil {
		return contract.SessionReleaseOut{}, err
	}
	if rec.Receipt.CleanupPending {
		outcome = contract.ReleaseCleanupPending
	}
	return contract.SessionReleaseOut{Outcome: outcome, Receipt: &rec.Receipt}, nil
}

// beginRelease commits a session's release durably and starts its tracked
// cleanup; it returns the tracked release to wait on, or nil when the
// session is settled already. Every later call joins the same one.
func (b *Broker) beginRelease(ctx context.Context, sid, reason string, f *contract.SessionFailure) (*tracked, error) {
	b.mu.Lock()
	if t, ok := b.releases[sid]; ok {
		b.mu.Unlock()
		return t, nil
	}
	t := &tracked{done: make(chan struct{})}
	b.releases[sid] = t // before the commit, so the lease's end is ours
	s := b.live[sid]
	b.mu.Unlock()
	drop := func() {
		b.mu.Lock()
		delete(b.releases, sid)
		b.mu.Unlock()
	}
	ctx = context.WithoutCancel(ctx)
	rec, ok, err := b.st.SessionReceiptBySession(ctx, sid)
	if err != nil || !ok {
		drop()
		return nil, err
	}
	r := &rec.Receipt
	switch {
	case Terminal(r.Status) && !r.CleanupPending:
		drop()
		return nil, nil
	case Terminal(r.Status) || rec.Releasing:
		// Ended, teardown unconfirmed (a restart): track it again.
		b.trackCleanup(sid, rec.Identity, deviceOf(r), r.LeaseID, t)
		return t, nil
	case r.Status == contract.SessionPending:
		drop()
		return nil, contract.Errorf(contract.CodeSessionEnded, "session %s is still preparing; abandon its request instead", sid)
	}
	now := b.now()
	destroy := reason == OwnerExited || f != nil
	switch {
	case f != nil:
		Fail(r, *f, now)
	case reason == OwnerExited:
		Fail(r, failure(contract.CodeSessionOwnerExited, "the session's owner exited", retryNewRequest), now)
	default:
		// Ready until the reset settles: released is the settled answer.
		rec.Releasing = true
		r.UpdatedAtMs = now.UnixMilli()
	}
	r.EndReason = reason
	if r.EndReason == "" {
		r.EndReason = contract.SessionReleased
	}
	r.CleanupPending = true
	mode := b.releasePolicy(r.Profile.Platform).Mode
	if !destroy && mode != contract.ResetDestroy && b.idlePoolFull(sid) {
		// The idle pool is full (idlePoolCap; 0 is zero pooling): the
		// device is retired instead of reset for another session.
		destroy = true
		b.log.Info("idle pool full; the session's device is destroyed instead of reset", "session", sid, "idlePoolCap", b.cfg.Limits.IdlePoolCap)
	}
	if destroy {
		mode = contract.ResetDestroy
	}
	if r.Timing == nil {
		r.Timing = &contract.SessionTiming{}
	}
	r.Timing.Reset = &contract.SessionReset{Mode: mode, Outcome: contract.ResetOutcomePending, StartedAtMs: now.UnixMilli()}
	// Durable before anything is acknowledged or torn down.
	if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
		drop()
		return nil, err
	}
	b.emit(EvSessionReleased, rec, r.EndReason, map[string]any{"resetMode": mode})
	// The timers are re-armed under b.mu by their own checks, so they are
	// stopped under it too.
	b.mu.Lock()
	if s != nil {
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.beat != nil {
			s.beat.Stop()
		}
		if !destroy {
			s.reuse = true
		}
	}
	b.mu.Unlock()
	if err := b.releaseLease(r.LeaseID, destroy); err != nil {
		b.log.Warn("session lease release", "session", sid, "err", err)
	}
	b.trackCleanup(sid, rec.Identity, deviceOf(r), r.LeaseID, t)
	return t, nil
}

// idlePoolFull reports whether another reset device may not wait for the
// next session: reset devices idle in the pool (ready, unleased, reset at
// least once) plus the resets still running count against idlePoolCap.
func (b *Broker) idlePoolFull(self string) bool {
	n := 0
	for _, d := range b.engine.Devices() {
		if IsSessionDevice(d) && d.State == core.StateReady && d.ReuseCount > 0 {
			n++
		}
	}
	b.mu.Lock()
	for sid, s := range b.live {
		if sid != self && s.cleanup && s.reuse {
			n++
		}
	}
	b.mu.Unlock()
	return n >= b.cfg.Limits.IdlePoolCap
}

func deviceOf(r *contract.SessionReceipt) string {
	if r.Device == nil {
		return ""
	}
	return r.Device.ID
}

// trackCleanup waits for a session's device teardown, then records the
// reset and clears cleanupPending. Until then the device counts against
// totalDeviceCap, so capacity is offered again only once it is confirmed.
func (b *Broker) trackCleanup(sid, identity, deviceID, leaseID string, t *tracked) {
	b.trackCleanupUntil(sid, identity, deviceID, leaseID, t, nil)
}

// trackCleanupUntil is trackCleanup with the teardown's end given: until
// closes when it is confirmed (nil: the released lease's reset, or its
// device's settling, as trackCleanup reads it).
func (b *Broker) trackCleanupUntil(sid, identity, deviceID, leaseID string, t *tracked, until <-chan struct{}) {
	b.mu.Lock()
	if t == nil {
		if _, ok := b.releases[sid]; ok {
			b.mu.Unlock()
			return
		}
		t = &tracked{done: make(chan struct{})}
		b.releases[sid] = t
	}
	s, ok := b.live[sid]
	if !ok {
		s = &liveSession{identity: identity, leaseID: leaseID, deviceID: deviceID}
		b.live[sid] = s
	}
	s.cleanup = true
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		rep, hasRep := b.resets, b.resets != nil
		done := until
		if done != nil {
			hasRep = false
		} else if hasRep {
			if _, d, ok := rep.ResetOf(leaseID); ok {
				done = d
			} else {
				hasRep = false
			}
		}
		if done == nil {
			done = b.cleanupDone(deviceID, leaseID)
		}
		select {
		case <-done:
		case <-b.ctx.Done():
			return // stopping: the next start finds cleanupPending and tracks it again
		}
		ctx := context.WithoutCancel(b.ctx)
		rec, ok, err := b.st.SessionReceipt(ctx, identity)
		if err == nil && ok {
			r := &rec.Receipt
			now := b.now()
			if r.Timing == nil {
				r.Timing = &contract.SessionTiming{}
			}
			reset := r.Timing.Reset
			if reset == nil {
				reset = &contract.SessionReset{Mode: contract.ResetDestroy, StartedAtMs: now.UnixMilli()}
			}
			if hasRep {
				if rec, _, ok := rep.ResetOf(leaseID); ok {
					reset = &rec // the core's own record: mode, outcome, native phases
				}
			} else if _, there := b.engine.Device(deviceID); !there {
				reset.Outcome = contract.ResetOutcomeDestroyed
			} else {
				reset.Outcome = contract.ResetOutcomeClean
			}
			if reset.CompletedAtMs == nil {
				ms := now.UnixMilli()
				reset.CompletedAtMs = &ms
			}
			if reset.TotalMs == nil {
				total := *reset.CompletedAtMs - reset.StartedAtMs
				reset.TotalMs = &total
			}
			r.Timing.Reset = reset
			r.CleanupPending = false
			if rec.Releasing && r.Status == contract.SessionReady {
				_ = Move(r, contract.SessionReleased, now)
			}
			rec.Releasing = false
			r.UpdatedAtMs = now.UnixMilli()
			if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
				b.log.Warn("record session cleanup", "session", sid, "err", err)
			} else {
				b.emit(EvSessionEnded, rec, r.EndReason, map[string]any{"resetMode": reset.Mode, "resetOutcome": reset.Outcome})
			}
		}
		b.mu.Lock()
		delete(b.live, sid)
		delete(b.releases, sid)
		b.mu.Unlock()
		close(t.done)
	}()
}

// cleanupDone closes once a released lease's device is torn down: gone
// from the registry (destroyed), or out of its reclaim and the lease's
// hands. It follows the bus rather than polling, so a fake clock needs
// no ticks.
func (b *Broker) cleanupDone(deviceID, leaseID string) <-chan struct{} {
	out := make(chan struct{})
	evs, unsub := b.bus.Subscribe(64)
	settled := func() bool {
		if _, held := b.engine.Lease(leaseID); held && leaseID != "" {
			return false
		}
		d, ok := b.engine.Device(deviceID)
		return deviceID == "" || !ok || (d.State != core.StateReclaiming && d.State != core.StateProvisioning)
	}
	go func() {
		defer unsub()
		for !settled() {
			select {
			case <-evs:
			case <-b.ctx.Done():
				return // never closed: a stop is not a settled teardown
			}
		}
		close(out)
	}()
	return out
}
