package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/hostreg"
)

// The ownership invariant's daemon side (ADR 0059): a lease whose device's
// claim is not this home's ends as lost, at startup before the readiness
// gate opens and at runtime as soon as the host watcher sees it; and the
// other homes' proven orphans are reclaimed by the watcher of whichever
// daemon gets there first.

// lostClaim is a device a lease of this home holds whose claim is not (or
// no longer) this daemon's.
type lostClaim struct {
	key    hostreg.Key
	device string
	lease  string // the lease judged at startup ("" at runtime: every lease holding device)
	trust  hostreg.Trust
}

// restoredTrust judges the restored leases' devices on the registry as
// read after convergence (hostreg.LeaseTrust). It returns the devices
// whose claims are not this home's, and the keys of those trusted only
// once their previous daemon's claim is adopted, with the lease they
// serve. The caller holds c.mu.
func (c *claims) restoredTrust(byKey map[hostreg.Key]core.DeviceRecord, leases []core.LeaseRecord, statuses []hostreg.Status) (lost []lostClaim, adopt map[hostreg.Key]string) {
	keyOf := map[string]hostreg.Key{}
	for k, d := range byKey {
		keyOf[d.ID] = k
	}
	stOf := map[hostreg.Key]hostreg.Status{}
	for _, st := range statuses {
		stOf[st.Key] = st
	}
	adopt = map[hostreg.Key]string{}
	for _, l := range leases {
		for _, id := range l.DeviceIDs() {
			k, ok := keyOf[id]
			if !ok {
				continue // no handle yet: never reached the platform, nothing to own
			}
			st, found := stOf[k]
			tr := hostreg.LeaseTrust(c.self, st, found)
			switch {
			case !tr.Trusted:
				lost = append(lost, lostClaim{key: k, device: id, lease: l.ID, trust: tr})
			case tr.Adopt:
				adopt[k] = l.ID
			}
		}
	}
	return lost, adopt
}

// lostFrom is the runtime half of the check: every claim this daemon
// believes it holds that the watcher's snapshot shows gone or another
// owner's is read again now, under c.mu (so no claim taken after the
// snapshot is mistaken for a lost one), and, if the fresh read confirms
// it, dropped from what this daemon holds and returned.
func (c *claims) lostFrom(ctx context.Context, statuses []hostreg.Status) []lostClaim {
	mine := map[hostreg.Key]bool{}
	for _, st := range statuses {
		if st.Claim.Owner == c.self && st.Class != hostreg.ClassInconsistent {
			mine[st.Key] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []lostClaim
	for k, h := range c.held {
		if mine[k] {
			continue
		}
		cur, found, err := c.store.Lookup(ctx, k)
		if err != nil {
			continue // an unreadable registry proves nothing; the next pass looks again
		}
		tr := hostreg.LeaseTrust(c.self, cur, found)
		if tr.Trusted && !tr.Adopt {
			continue
		}
		delete(c.held, k)
		out = append(out, lostClaim{key: k, device: h.device, trust: tr})
	}
	return out
}

// endLost ends every lease holding a lost device, through the ordinary
// release path with the claim's reason (a lease-lost notice for its
// owner), after publishing claim.lost with the key. The device's purge
// that follows asks the claim hooks first: a device another owner holds
// is refused before any platform command, and stays out of the pool.
func (s *System) endLost(lost []lostClaim) {
	for _, lc := range lost {
		s.log.Warn("a lease's device claim is not this home's; ending the lease", "key", lc.key, "device", lc.device,
			"reason", lc.trust.Reason, "detail", lc.trust.Detail)
		for _, l := range s.engine.Leases() {
			if !l.Holds(lc.device) || (lc.lease != "" && l.ID != lc.lease) {
				continue
			}
			s.bus.Publish(events.Event{Type: "claim.lost", LeaseID: l.ID, DeviceID: lc.device, RequesterID: l.RequesterID,
				Platform: l.Platform, Reason: lc.trust.Reason,
				Data: map[string]any{"deviceKey": string(lc.key), "detail": lc.trust.Detail, "ownerId": l.OwnerID}})
			if err := s.resets.ReleaseWith(l.ID, l.Release, lc.trust.Reason); err != nil && !errors.Is(err, core.ErrUnknownLease) {
				s.log.Error("end a lease whose device claim was lost", "lease", l.ID, "err", err)
			}
		}
	}
}

// watchOwnership is the host watcher's subscriber for the invariant: it
// ends the leases whose claims another daemon took or cleared.
func (s *System) watchOwnership(ctx context.Context) hostSub {
	return func(st []hostreg.Status) {
		if lost := s.claims.lostFrom(ctx, st); len(lost) > 0 {
			s.endLost(lost)
			s.Kick() // refresh the foreign snapshot with the device now someone else's
		}
	}
}

// ---- proven-orphan reclaim ----

// reclaimer remembers, per orphaned record, when this daemon first saw it
// orphaned: the grace window of a home that may be restarting counts from
// there. It is touched only by reclaimOrphans' goroutine.
type reclaimer struct {
	seen map[string]time.Time
}

func recordID(st hostreg.Status) string {
	c := st.Claim
	return fmt.Sprintf("%s|%s|%d|%s|%d", c.Key, c.Owner.Home, c.Owner.PID, c.Owner.Start, c.ClaimedAt.UnixMilli())
}

// reclaimOrphans polls the registry for other homes' proven orphans every
// capacity.host.pollIntervalMs and reconciles each as
// hostreg.ReclaimDecision says. It polls by itself because an owner's
// death changes no row: the generation counter never announces it.
func (s *System) reclaimOrphans(ctx context.Context) {
	every := time.Duration(s.hostCfg.PollIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	r := &reclaimer{seen: map[string]time.Time{}}
	for {
		s.reclaimPass(ctx, r)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(every):
		}
	}
}

func (s *System) reclaimPass(ctx context.Context, r *reclaimer) {
	orphans, err := s.host.Orphans(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("list the host registry's orphaned claims", "err", err)
		}
		return
	}
	now := s.clock.Now()
	live := map[string]bool{}
	grace := s.hostCfg.OrphanGrace()
	for _, st := range orphans {
		if st.Claim.Owner.Home == s.self.Home {
			continue // this home's own: its restart adopts them
		}
		id := recordID(st)
		live[id] = true
		first, ok := r.seen[id]
		if !ok {
			first, r.seen[id] = now, now
		}
		if ctx.Err() != nil {
			return
		}
		run := s.probeOrphan(ctx, st)
		switch act := hostreg.ReclaimDecision(st, s.self.Home, run, now.Sub(first), grace, now); act {
		case hostreg.ReclaimClear, hostreg.ReclaimShutDown:
			s.reclaim(ctx, st, act, run)
		}
	}
	for id := range r.seen {
		if !live[id] {
			delete(r.seen, id)
		}
	}
}

// reclaim takes one orphan: mark it (one winner), shut its device down
// with the owner's roots when it may run, clear the claim, and say so.
// Any failure leaves the claim (marked, so the next attempt after
// hostreg.ReclaimTimeout starts over); nothing is freed unproven.
func (s *System) reclaim(ctx context.Context, st hostreg.Status, act hostreg.ReclaimAction, run hostreg.DeviceRun) {
	marked, err := s.host.BeginReclaim(ctx, st.Key, st, s.clock.Now())
	if err != nil {
		// Another daemon won, or the owner came back: nothing to do.
		s.log.Debug("orphan not reclaimed here", "key", st.Key, "err", err)
		return
	}
	action := "cleared"
	if act == hostreg.ReclaimShutDown {
		notFound, err := s.owners.Reconcile(ctx, st.Claim.Owner.Home, st.Key)
		if err != nil {
			s.log.Warn("reclaim an orphaned claim: the device could not be shut down, so the claim stays", "key", st.Key,
				"ownerHome", st.Claim.Owner.Home, "err", err)
			return
		}
		action = "shut-down"
		if notFound {
			action = "cleared"
		}
	}
	c := st.Claim
	cleared, err := s.host.FinishReclaim(ctx, st.Key, marked, hostreg.Reclaimed{Key: st.Key, Owner: c.Owner, LeaseID: c.LeaseID,
		Reason: st.Liveness, Action: action, By: s.self, At: s.clock.Now()})
	if err != nil || !cleared {
		s.log.Warn("reclaim an orphaned claim: the claim was not cleared", "key", st.Key, "cleared", cleared, "err", err)
		return
	}
	s.bus.Publish(events.Event{Type: "claim.reclaimed", Platform: st.Key.Platform(), LeaseID: c.LeaseID, Reason: string(st.Liveness),
		Data: map[string]any{"deviceKey": string(st.Key), "ownerHome": c.Owner.Home, "ownerPid": c.Owner.PID, "action": action,
			"device": string(run), "detail": st.Detail}})
	s.Kick()
}

// probeOrphan says whether an orphan's device runs, through its owner's
// roots, without shutting anything down (any doubt is DeviceUnknown).
func (s *System) probeOrphan(ctx context.Context, st hostreg.Status) hostreg.DeviceRun {
	run, err := s.owners.Observe(ctx, st.Claim.Owner.Home, st.Key)
	if err != nil {
		return hostreg.DeviceUnknown
	}
	return run
}
