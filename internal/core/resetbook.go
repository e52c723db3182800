package core

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// A session's release runs the reset its release policy names (ADR 0048)
// instead of the pool's purge. The reset is one tracked record per
// released lease (ResetOf); its device operations go through the op
// executor like every other device operation, and the policy sits in the
// device's intent from the release's own commit on, so a restart that
// finds it destroys the device rather than trusting a reset it cannot
// see the end of.

// resetRetention is how long a settled reset stays readable by ResetOf:
// long enough for the session layer to copy it onto its durable receipt.
const resetRetention = time.Hour

// resetTrack is one released lease's reset.
type resetTrack struct {
	rec     contract.SessionReset
	done    chan struct{}
	pending int             // members whose reset has not settled yet
	members map[string]bool // the devices the reset runs on
	started time.Time
	settled time.Time
	retired bool // a member was destroyed for reaching its uses
}

// resetBook is the session resets of released leases (ADR 0048) and the
// figures the pool's purge chooses its reset kind by (resetchoice.go). Its
// methods run inside the decision section, except those that do device
// work on the op path outside it: the modes (resetmodes.go), step,
// takeResetBoot and the purge (resetchoice.go), which enter the section
// themselves where they decide. It reaches the engine only through
// resetEngine.
type resetBook struct {
	eng   resetEngine
	reg   *registry // the device records and their commits
	queue *queue    // the queue's demand, which the reset kind choice weighs
	log   *slog.Logger
	hooks OpHooks
	// quarantine takes a device whose destroy failed out of service for a
	// destroy retry (quarantineBook.enterLocked).
	quarantine func(id, reason string, op OpKind, causes ...events.Event) error

	byLease map[string]*resetTrack
	boots   chan struct{} // erase boots in flight (Config.MaxConcurrentResetBoots); nil: no bound
	// figures are the measured durations the reset kind choice follows;
	// they have their own lock, being read and fed outside the section.
	figures *resetFigures
}

// resetEngine is what resets need of the engine, all of it satisfied by
// *Engine: its clock and facts, the disposal of a device, the one
// device-operation path and the waiter a baseline capture grants.
type resetEngine interface {
	deviceWork
	startOrDeferOpLocked(o *deviceOp) error
	runUnrecorded(ctx context.Context, info OpInfo, f func(ctx context.Context) error) error
	purgeByErase(ctx context.Context, drv Driver, d DeviceRecord) (stopped bool, err error)
	keepRunningAfterPurgeLocked(id string) bool
	finishWorkLocked(w *waiter, id string)
}

func newResetBook(eng resetEngine, reg *registry, q *queue, cfg Config, d Deps, quarantine func(id, reason string, op OpKind, causes ...events.Event) error) resetBook {
	b := resetBook{eng: eng, reg: reg, queue: q, log: d.Logger, hooks: d.Hooks, quarantine: quarantine, figures: &resetFigures{}}
	if cfg.MaxConcurrentResetBoots > 0 {
		b.boots = make(chan struct{}, cfg.MaxConcurrentResetBoots)
	}
	return b
}

func (b *resetBook) get(leaseID string) *resetTrack {
	return b.byLease[leaseID]
}

// open starts tracking a lease's reset; settled tracks past their
// retention are dropped on the way.
func (b *resetBook) open(leaseID string, t *resetTrack, now time.Time) {
	if b.byLease == nil {
		b.byLease = map[string]*resetTrack{}
	}
	for id, x := range b.byLease {
		if !x.settled.IsZero() && now.Sub(x.settled) > resetRetention {
			delete(b.byLease, id)
		}
	}
	b.byLease[leaseID] = t
}

func (b *resetBook) addDevice(leaseID, id string) {
	if t := b.get(leaseID); t != nil {
		if t.members == nil {
			t.members = map[string]bool{}
		}
		t.members[id] = true
	}
}

// ResetDesk is the reset book's counter: the session broker
// (internal/sessions) reads a released lease's reset record and, like the
// claims system's ownership check, ends a lease with a release policy other
// than its own. Each entry enters the decision section as the engine's own
// entries do. Engine.Resets hands one out; the zero value is not usable.
type ResetDesk struct{ e *Engine }

// Resets is the reset book's desk (internal/sessions and internal/claims use it).
func (e *Engine) Resets() ResetDesk { return ResetDesk{e} }

// ResetOf reports the reset of released lease leaseID: its mode, outcome
// (pending until it settled), native phases in milliseconds, the reason of
// a fallback or destroy, the device's reuse count and timestamps. done is
// closed once the reset settled. ok is false for a lease whose release ran
// no reset (the pool's purge) or that this engine does not know.
func (r ResetDesk) ResetOf(leaseID string) (rec contract.SessionReset, done <-chan struct{}, ok bool) {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.rs.get(leaseID)
	if t == nil {
		return contract.SessionReset{}, nil, false
	}
	rec = t.rec
	rec.Phases = maps.Clone(t.rec.Phases)
	if t.rec.CompletedAtMs != nil {
		c := *t.rec.CompletedAtMs
		rec.CompletedAtMs = &c
	}
	if t.rec.TotalMs != nil {
		c := *t.rec.TotalMs
		rec.TotalMs = &c
	}
	return rec, t.done, true
}

// ReleaseWith releases lease leaseID with policy p instead of the lease's
// own: an owner that exited or a session abandoned destroys its device
// whatever the session asked for. reason goes on lease.released ("" reads
// as released).
func (r ResetDesk) ReleaseWith(leaseID string, p ReleasePolicy, reason string) error {
	e := r.e
	if reason == "" {
		reason = ReasonReleased
	}
	var err error
	derr := e.sectionDurable(func() {
		l, ok := e.reg.leases[leaseID]
		if !ok {
			err = ErrUnknownLease
			return
		}
		rec := *l
		rec.Release = p
		err = e.releaseLocked(rec, reason)
	})
	if err == nil {
		err = derr
	}
	e.notifyPositions()
	return err
}

// ResetFigure reports the moving figure of a reset kind for a spec key as
// measured on this machine (status, tests).
func (r ResetDesk) ResetFigure(specKey, kind string) (time.Duration, bool) {
	e := r.e
	return e.rs.figures.figure(specKey, kind)
}

// resetModeOf names the mode a policy runs, for the record.
func resetModeOf(p ReleasePolicy) string {
	if p.Mode == "" {
		return contract.ResetDestroy
	}
	return p.Mode
}

// openResetLocked starts the record of lease l's reset (the release has
// committed). Its reuse count is the primary device's.
func (b *resetBook) openResetLocked(l LeaseRecord, members int) {
	now := b.eng.now()
	reuse := 0
	if d := b.reg.device(l.DeviceID); d != nil {
		reuse = d.ReuseCount
	}
	b.open(l.ID, &resetTrack{
		rec: contract.SessionReset{Mode: resetModeOf(l.Release), Outcome: contract.ResetOutcomePending,
			ReuseCount: reuse, StartedAtMs: now.UnixMilli()},
		done: make(chan struct{}), pending: members, started: now,
	}, now)
}

// resetResult is what one device's reset came to.
type resetResult struct {
	mode    string // the mode that left the device clean (a fallback's own)
	outcome string
	reason  string
	phases  map[string]int64
	destroy bool // the device must be destroyed now
	retired bool // destroyed because it reached its uses
	reuse   int  // the device's reuse count after a clean reset
}

func (r *resetResult) phase(name string, d time.Duration) {
	if r.phases == nil {
		r.phases = map[string]int64{}
	}
	r.phases[name] += d.Milliseconds()
}

// fail records why the reset gives up on the device: it is destroyed.
func (r *resetResult) fail(reason string) {
	r.destroy = true
	if r.reason == "" {
		r.reason = reason
	} else {
		r.reason += "; " + reason
	}
}

// outcomeRank orders reset outcomes from best to worst; pending, the
// record's opening value, ranks below every settled one.
func outcomeRank(o string) int {
	switch {
	case o == contract.ResetOutcomeDestroyed:
		return 3
	case strings.HasPrefix(o, contract.ResetOutcomeFallbackPrefix):
		return 2
	case o == contract.ResetOutcomeClean:
		return 1
	}
	return 0
}

// fold adds what one member's reset measured to its lease's
// record without settling it.
func (t *resetTrack) fold(r resetResult) {
	for k, v := range r.phases {
		if t.rec.Phases == nil {
			t.rec.Phases = map[string]int64{}
		}
		t.rec.Phases[k] += v
	}
	if r.reason != "" && t.rec.FallbackReason == "" {
		t.rec.FallbackReason = r.reason
	}
}

// merge takes a settled member's outcome into the record: a group's
// reset reads as its worst member.
func (t *resetTrack) merge(r resetResult) {
	t.rec.ReuseCount = max(t.rec.ReuseCount, r.reuse)
	if r.outcome != "" && outcomeRank(r.outcome) >= outcomeRank(t.rec.Outcome) {
		// A group's reset reads as its worst member: destroyed over a
		// fallback over clean, whatever order the members settled in.
		t.rec.Outcome = r.outcome
	}
	t.retired = t.retired || r.retired
}

// settleResetLocked folds one member's result into its lease's record;
// the last member settles it and emits device.reset.
func (b *resetBook) settleResetLocked(leaseID, deviceID, platform string, r resetResult) {
	t := b.get(leaseID)
	if t == nil || !t.settled.IsZero() {
		return
	}
	t.fold(r)
	t.merge(r)
	t.pending--
	if t.pending > 0 {
		return
	}
	now := b.eng.now()
	t.settled = now
	c, total := now.UnixMilli(), now.Sub(t.started).Milliseconds()
	t.rec.CompletedAtMs, t.rec.TotalMs = &c, &total
	close(t.done)
	data := map[string]any{"mode": t.rec.Mode, "outcome": t.rec.Outcome, "totalMs": total, "reuseCount": t.rec.ReuseCount}
	if len(t.rec.Phases) > 0 {
		ph := map[string]any{}
		for k, v := range t.rec.Phases {
			ph[k] = v
		}
		data["phases"] = ph
	}
	if t.rec.FallbackReason != "" {
		data["fallbackReason"] = t.rec.FallbackReason
	}
	if t.retired {
		data["retired"] = true
	}
	b.eng.emitLocked(events.Event{Type: "device.reset", LeaseID: leaseID, DeviceID: deviceID, Platform: platform, Data: data})
}

// resetDeviceGoneLocked settles a pending reset whose device another
// path (a quarantine retry of its destroy) has just destroyed.
func (b *resetBook) resetDeviceGoneLocked(d DeviceRecord) {
	for id, t := range b.byLease {
		if t.settled.IsZero() && t.members[d.ID] {
			b.settleResetLocked(id, d.ID, d.Platform, resetResult{outcome: contract.ResetOutcomeDestroyed})
		}
	}
}
