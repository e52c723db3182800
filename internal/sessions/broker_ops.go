package sessions

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
)

func (b *Broker) Status(ctx context.Context, call *dispatch.Call, in contract.SessionStatusIn) (contract.SessionReceipt, error) {
	if err := b.configured(); err != nil {
		return contract.SessionReceipt{}, err
	}
	rec, ok, _, err := b.receiptByRequest(ctx, call, in.OwnerToken, in.RequestID)
	if err != nil {
		return contract.SessionReceipt{}, err
	}
	if !ok {
		// Keyed by the owner digest: another owner's request id reads as
		// unknown, so a token cannot probe for others' requests.
		return contract.SessionReceipt{}, contract.Errorf(contract.CodeUnknownRequest, "no session request %q under this owner token", in.RequestID)
	}
	return rec.Receipt, nil
}

// Abandon consumes a request id's identity, seen or not: it writes the
// tombstone first, so a late prepare of it finds SESSION_ABANDONED, then
// ends whatever the id already holds.
func (b *Broker) Abandon(ctx context.Context, call *dispatch.Call, in contract.SessionAbandonIn) (contract.SessionReceipt, error) {
	if err := b.configured(); err != nil {
		return contract.SessionReceipt{}, err
	}
	if b.isStopping() {
		return contract.SessionReceipt{}, StoppingErr()
	}
	if err := checkOwnerToken(in.OwnerToken); err != nil {
		return contract.SessionReceipt{}, err
	}
	if in.RequestID == "" {
		return contract.SessionReceipt{}, contract.Errorf(contract.CodeBadRequest, "requestId is required")
	}
	// An admin abandoning an agent's request writes the tombstone under
	// the agent's key, where the agent's next prepare of it looks.
	cur, had, od, err := b.receiptByRequest(ctx, call, in.OwnerToken, in.RequestID)
	if err != nil {
		return contract.SessionReceipt{}, err
	}
	now := b.now()
	f := failure(contract.CodeSessionAbandoned, "the request was abandoned", retryNewRequest)
	tomb := Record{Identity: AbandonIdentity(od, in.RequestID), OwnerDigest: od, Abandoned: true,
		Receipt: contract.SessionReceipt{ContractVersion: 1, RequestID: in.RequestID, Status: contract.SessionFailed, Failure: &f,
			CreatedAtMs: now.UnixMilli(), UpdatedAtMs: now.UnixMilli(), EndReason: "abandoned"}}
	if call != nil {
		tomb.Principal = call.Session.Principal
	}
	tomb, _, err = b.st.CommitSessionReceipt(ctx, tomb, nil)
	if err != nil {
		return contract.SessionReceipt{}, err
	}
	if !had || cur.Abandoned {
		return tomb.Receipt, nil
	}
	// A preparation still running is cancelled and ends SESSION_ABANDONED.
	b.mu.Lock()
	p, running := b.inflight[cur.Identity]
	if running {
		p.abandon = true
		p.cancel()
	}
	b.mu.Unlock()
	if running {
		select {
		case <-p.done:
		case <-ctx.Done():
			cur.Receipt.CleanupPending = true
			return cur.Receipt, nil
		}
	}
	cur, _, err = b.st.SessionReceipt(ctx, cur.Identity)
	if err != nil {
		return contract.SessionReceipt{}, err
	}
	if cur.Receipt.Status == contract.SessionReady {
		if _, err := b.beginRelease(ctx, cur.Receipt.SessionID, "abandoned", &f); err != nil {
			return contract.SessionReceipt{}, err
		}
		cur, _, err = b.st.SessionReceipt(ctx, cur.Identity)
		if err != nil {
			return contract.SessionReceipt{}, err
		}
	}
	return cur.Receipt, nil
}

// notYours is the refusal of a session call by a caller that does not own
// the session, and equally of one naming a session id the daemon does not
// know (ADR 0058): one code and one message, which names no id, so two
// ids' answers compare byte for byte and tell no one whether another
// owner's session exists. It is true of both: no session of that id is
// the caller's.
func notYours() error {
	return contract.Errorf(contract.CodeSessionOwnerMismatch, "no such session under this owner")
}

// sessionOf reads a session's receipt for its owner. An admin is told an
// unknown id apart from another owner's; anyone else gets notYours for
// both.
func (b *Broker) sessionOf(ctx context.Context, call *dispatch.Call, sid, token string) (Record, error) {
	if err := b.configured(); err != nil {
		return Record{}, err
	}
	rec, ok, err := b.st.SessionReceiptBySession(ctx, sid)
	if err != nil {
		return rec, err
	}
	mine := ok && holdsToken(call, rec.OwnerDigest, b.principalOf(rec), token)
	switch {
	case mine:
		return rec, nil
	case !isAdmin(call):
		return rec, notYours()
	case !ok:
		return rec, contract.Errorf(contract.CodeSessionEnded, "no session %s", sid)
	default:
		return rec, contract.Errorf(contract.CodeSessionOwnerMismatch, "session %s was prepared under another owner token", sid)
	}
}

// Heartbeat renews a session's lease. A keeper sends one every few
// seconds, so its heartbeat on a live session is answered from the
// broker's memory (its lease and owner digest, set when the ready receipt
// was committed or adopted) and reads no receipt: that is the hot path.
// Only a session the memory cannot decide for reads its receipt, which
// stays the truth after a restart.
//
// A foreign token on a live session is known to be refused from the
// memory alone, but it still makes the receipt read an unknown or ended
// id makes (sessionOf, the same path to the same notYours): answered from
// memory it was one indexed read faster, and averaging probes would tell
// live ids from the rest (ADR 0058, section 3). The read costs only the
// callers that are refused anyway.
func (b *Broker) Heartbeat(ctx context.Context, call *dispatch.Call, in contract.SessionHeartbeatIn) (contract.SessionHeartbeatOut, error) {
	if err := b.configured(); err != nil {
		return contract.SessionHeartbeatOut{}, err
	}
	leaseID, mismatch, ok := b.liveLease(call, in.SessionID, in.OwnerToken)
	switch {
	case mismatch && !isAdmin(call):
		if _, err := b.sessionOf(ctx, call, in.SessionID, in.OwnerToken); err != nil {
			return contract.SessionHeartbeatOut{}, err
		}
		// The receipt agreed with the token after all (it cannot: the
		// memory's owner digest is the receipt's); the memory's refusal
		// stands.
		return contract.SessionHeartbeatOut{}, notYours()
	case mismatch:
		return contract.SessionHeartbeatOut{}, contract.Errorf(contract.CodeSessionOwnerMismatch, "session %s was prepared under another owner token", in.SessionID)
	case !ok:
		rec, err := b.sessionOf(ctx, call, in.SessionID, in.OwnerToken)
		if err != nil {
			return contract.SessionHeartbeatOut{}, err
		}
		if rec.Receipt.Status != contract.SessionReady || rec.Releasing {
			return contract.SessionHeartbeatOut{}, contract.Errorf(contract.CodeSessionEnded, "session %s is %s", in.SessionID, rec.Receipt.Status)
		}
		leaseID = rec.Receipt.LeaseID
	}
	// The beat counts from its arrival, before the renew's durable commit:
	// that commit waits for an fsync, and on a loaded disk one slower than
	// the TTL let the lapse check end a session whose keeper was on time.
	b.beat(in.SessionID)
	// Always the session's width: a handed-off lease carries a longer one
	// for the restart, and the first heartbeat ends that grace.
	_, err := b.engine.Renew(leaseID, b.leaseTTL())
	if errors.Is(err, core.ErrUnknownLease) {
		return contract.SessionHeartbeatOut{}, contract.Errorf(contract.CodeSessionEnded, "session %s has ended", in.SessionID)
	}
	if err != nil {
		return contract.SessionHeartbeatOut{}, err
	}
	// The keeper's deadline is the heartbeat TTL, not the lease's wider
	// backstop.
	return contract.SessionHeartbeatOut{SessionID: in.SessionID, ExpiresAtMs: b.now().Add(b.heartbeatTTL()).UnixMilli()}, nil
}

// Info takes no owner token, so the session's principal (principalOf)
// stands in for one, live or ended alike: an ended session's receipt still
// names its device and profile. An unknown id and another principal's
// session take the same path to the same refusal; an admin reads any
// receipt and is told when there is none.
func (b *Broker) Info(ctx context.Context, call *dispatch.Call, in contract.SessionInfoIn) (contract.SessionInfoOut, error) {
	if err := b.configured(); err != nil {
		return contract.SessionInfoOut{}, err
	}
	rec, ok, err := b.st.SessionReceiptBySession(ctx, in.SessionID)
	if err != nil {
		return contract.SessionInfoOut{}, err
	}
	if !mayRead(call, b.principalOf(rec)) || !ok {
		if isAdmin(call) {
			return contract.SessionInfoOut{}, contract.Errorf(contract.CodeSessionEnded, "no session %s", in.SessionID)
		}
		return contract.SessionInfoOut{}, notYours()
	}
	out := contract.SessionInfoOut{SessionID: in.SessionID, Status: rec.Receipt.Status, Profile: rec.Receipt.Profile, Device: rec.Receipt.Device}
	if l, held := b.engine.Lease(rec.Receipt.LeaseID); held && rec.Receipt.Status == contract.SessionReady {
		if dev, ok := b.engine.Device(l.DeviceID); ok {
			cd := b.host.DeviceOut(dev, l.ID)
			out.Device = &cd
		}
	}
	return out, nil
}

func (b *Broker) Stats(ctx context.Context, _ *dispatch.Call, in contract.SessionStatsIn) (contract.SessionStatsOut, error) {
	if err := b.configured(); err != nil {
		return contract.SessionStatsOut{}, err
	}
	w, limit, err := StatsBounds(in)
	if err != nil {
		return contract.SessionStatsOut{}, err
	}
	until := b.now()
	since := until.Add(-w)
	recs, trunc, err := b.st.RecentSessionReceipts(ctx, since, limit)
	if err != nil {
		return contract.SessionStatsOut{}, err
	}
	rs := make([]contract.SessionReceipt, 0, len(recs))
	for _, r := range recs {
		rs = append(rs, r.Receipt)
	}
	return Compute(rs, since, until, limit, trunc), nil
}

// export reads the caller's export and its receipt: links are scoped by
// the original owner token's digest (recovery never changes who may read
// it), so another owner's export of the same prepare id is not even read.
// A caller without the token gets SESSION_EXPORT_NOT_FOUND, as for an
// export that was never linked, on the same path (both reads run either
// way), and only the owner learns of a digest mismatch. An admin is told
// the precise refusal: one more read tells another owner's export from
// none.
func (b *Broker) export(ctx context.Context, call *dispatch.Call, in contract.SessionExportIn) (Export, Record, error) {
	if err := b.configured(); err != nil {
		return Export{}, Record{}, err
	}
	od := ownerKey(call, in.OwnerToken)
	e, found, err := b.st.SessionExport(ctx, od, in.PrepareID)
	if err != nil {
		return e, Record{}, err
	}
	rec, linked, err := b.st.SessionReceipt(ctx, e.Identity)
	if err != nil {
		return e, rec, err
	}
	notFound := contract.Errorf(contract.CodeSessionExportNotFound, "no such session export under this owner token")
	switch {
	case !found || !linked || !holdsToken(call, rec.OwnerDigest, b.principalOf(rec), in.OwnerToken):
		if !isAdmin(call) {
			return e, rec, notFound
		}
		theirs, err := b.st.SessionExportLinked(ctx, in.PrepareID)
		if err != nil {
			return e, rec, err
		}
		if theirs {
			return e, rec, contract.Errorf(contract.CodeSessionOwnerMismatch, "session export %q belongs to another owner token", in.PrepareID)
		}
		return e, rec, notFound
	case e.RequestDigest != in.RequestDigest:
		return e, rec, contract.Errorf(contract.CodeSessionExportMismatch, "session export %q was linked with another request digest", in.PrepareID)
	}
	return e, rec, nil
}

func (b *Broker) GetExport(ctx context.Context, call *dispatch.Call, in contract.SessionExportIn) (contract.SessionExportOut, error) {
	e, rec, err := b.export(ctx, call, in)
	if err != nil {
		return contract.SessionExportOut{}, err
	}
	return contract.SessionExportOut{ContractVersion: 1, PrepareID: e.PrepareID, RequestDigest: e.RequestDigest,
		Acknowledged: !e.AcknowledgedAt.IsZero(), Result: rec.Receipt}, nil
}

func (b *Broker) AcknowledgeExport(ctx context.Context, call *dispatch.Call, in contract.SessionExportIn) (contract.SessionAcknowledgeOut, error) {
	_, _, err := b.export(ctx, call, in)
	if ce := contract.AsError(err); ce != nil && ce.Code == contract.CodeSessionExportNotFound {
		return contract.SessionAcknowledgeOut{PrepareID: in.PrepareID, Outcome: "unknown_export"}, nil
	}
	if err != nil {
		return contract.SessionAcknowledgeOut{}, err
	}
	if err := b.st.AcknowledgeSessionExport(ctx, ownerKey(call, in.OwnerToken), in.PrepareID, b.now()); err != nil {
		return contract.SessionAcknowledgeOut{}, err
	}
	return contract.SessionAcknowledgeOut{PrepareID: in.PrepareID, Outcome: "acknowledged"}, nil
}

// ---- restart ----

// Recover runs once the engine has converged and before the gate opens:
// sessions a graceful stop handed off are adopted under the same ids;
// after a crash (no handoff mark) every open session ends
// SESSION_OWNER_EXITED and its device is destroyed.
func (b *Broker) Recover(ctx context.Context) {
	if b.cfg == nil {
		return
	}
	mark, _, err := b.meta.GetMeta(ctx, MetaHandoff)
	if err != nil {
		b.log.Error("read the session handoff mark", "err", err)
	}
	handedOff := mark != ""
	if handedOff {
		if err := b.meta.SetMeta(ctx, MetaHandoff, ""); err != nil {
			b.log.Error("clear the session handoff mark", "err", err)
		}
	}
	open, err := b.st.OpenSessionReceipts(ctx)
	if err != nil {
		b.log.Error("read open session receipts", "err", err)
		return
	}
	now := b.now()
	exited := failure(contract.CodeSessionOwnerExited, "the daemon that held the session stopped without handing it off", retryNewRequest)
	for _, rec := range open {
		r := &rec.Receipt
		sid := r.SessionID
		switch r.Status {
		case contract.SessionPending:
			// A preparation the stop or the crash interrupted: its core
			// request may have been granted since; that lease goes.
			f := exited
			if handedOff {
				f = StoppedFailure(StoppingRetryMs)
			}
			Fail(r, f, now)
			for _, l := range b.engine.Leases() {
				if strings.HasSuffix(l.RequesterID, "session/"+sid) {
					r.LeaseID = l.ID
					if dev, ok := b.engine.Device(l.DeviceID); ok {
						cd := b.host.DeviceOut(dev, l.ID)
						r.Device = &cd
					}
					r.CleanupPending = true
				}
			}
			if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
				b.log.Error("end an interrupted preparation", "session", sid, "err", err)
				continue
			}
			if r.CleanupPending {
				_ = b.releaseLease(r.LeaseID, true)
				b.trackCleanup(sid, rec.Identity, deviceOf(r), r.LeaseID, nil)
			}
		case contract.SessionReady:
			if rec.Releasing {
				if !handedOff {
					// Cut off mid-reset by a crash: the device is uncertain
					// (the core destroys it from its intent) and the
					// session ends as its owner's exit, on every replay.
					Fail(r, exited, now)
					r.EndReason = OwnerExited
					if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
						b.log.Error("end a session cut off mid-reset", "session", sid, "err", err)
						continue
					}
				}
				b.trackCleanup(sid, rec.Identity, deviceOf(r), r.LeaseID, nil)
				continue
			}
			l, held := b.engine.Lease(r.LeaseID)
			if handedOff && rec.HandedOff && held {
				rec.HandedOff, rec.Instance = false, b.instance
				r.UpdatedAtMs = now.UnixMilli()
				if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
					b.log.Error("adopt a handed-off session", "session", sid, "err", err)
					continue
				}
				b.adopt(rec, l.ID, l.DeviceID, handoffGrace)
				b.log.Info("session adopted after a restart", "session", sid)
				continue
			}
			Fail(r, exited, now)
			r.EndReason = OwnerExited
			r.CleanupPending = true
			r.Timing.Reset = &contract.SessionReset{Mode: contract.ResetDestroy, Outcome: contract.ResetOutcomePending, StartedAtMs: now.UnixMilli()}
			if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
				b.log.Error("end a session of a crashed daemon", "session", sid, "err", err)
				continue
			}
			if held {
				_ = b.releaseLease(r.LeaseID, true)
			}
			b.log.Info("session of a crashed daemon ended", "session", sid)
			b.trackCleanup(sid, rec.Identity, deviceOf(r), r.LeaseID, nil)
		default:
			// Ended; its teardown was not confirmed before the stop.
			b.trackCleanup(sid, rec.Identity, deviceOf(r), r.LeaseID, nil)
		}
	}
	b.prune(ctx)
}

func (b *Broker) prune(ctx context.Context) {
	n, err := b.st.PruneSessionReceipts(ctx, b.now(), msDur(b.cfg.ReceiptRetentionMs, DefaultReceiptRetention),
		msDur(b.cfg.ExportMaxAgeMs, DefaultExportMaxAge))
	if err != nil {
		b.log.Warn("prune session receipts", "err", err)
	} else if n > 0 {
		b.log.Info("pruned session receipts", "count", n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopping {
		b.clock.AfterFunc(time.Hour, func() { b.prune(context.WithoutCancel(b.ctx)) })
	}
}

// Stop begins the broker's shutdown, before the engine stops: new
// prepares and abandons are refused (SESSION_BROKER_STOPPING), running
// preparations are cancelled and store their terminal receipt, and every
// live session is marked handed off, its lease widened by a grace so the
// keeper can reach the next daemon.
func (b *Broker) Stop() {
	b.mu.Lock()
	if b.stopping {
		b.mu.Unlock()
		return
	}
	b.stopping = true
	var waits []chan struct{}
	for _, p := range b.inflight {
		p.cancel()
		waits = append(waits, p.done)
	}
	live := map[string]liveSession{}
	for sid, s := range b.live {
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.beat != nil {
			s.beat.Stop()
		}
		if !s.cleanup && s.leaseID != "" {
			live[sid] = *s
		}
	}
	b.mu.Unlock()
	if b.cfg == nil {
		b.cancel()
		return
	}
	deadline := b.clock.After(10 * time.Second)
	for _, w := range waits {
		select {
		case <-w:
		case <-deadline:
		}
	}
	ctx := context.Background()
	for sid, s := range live {
		if _, err := b.engine.Renew(s.leaseID, b.leaseTTL()+handoffGrace); err != nil {
			continue // ended meanwhile: its receipt says how
		}
		rec, ok, err := b.st.SessionReceipt(ctx, s.identity)
		if err != nil || !ok {
			continue
		}
		rec.HandedOff = true
		if err := b.st.UpdateSessionReceipt(ctx, rec); err != nil {
			b.log.Warn("mark a session handed off", "session", sid, "err", err)
		}
	}
	if err := b.meta.SetMeta(ctx, MetaHandoff, b.instance); err != nil {
		b.log.Warn("write the session handoff mark", "err", err)
	}
	b.cancel()
}

// Wait joins the broker's goroutines (bounded by ctx) once it is stopped.
func (b *Broker) Wait(ctx context.Context) {
	b.cancel()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
