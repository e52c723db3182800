package core

import (
	"context"
	"errors"
	"fmt"
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

// DefaultResetTimeout bounds a whole reset when its policy sets none.
const DefaultResetTimeout = 10 * time.Minute

// EraseVerifier is the driver ability the erase reset needs on top of
// Eraser: a fresh read of the device proving it is still the exact device
// type and runtime it was, available, and booted. Without it an erase
// cannot be trusted and the reset destroys the device.
type EraseVerifier interface {
	VerifyErased(ctx context.Context, dev DeviceRef) error
}

// KeepBootedCleaner is the driver ability behind the keep-booted reset:
// the device stays booted and is cleaned back to a baseline captured for
// its incarnation (its stable identity plus its current boot).
type KeepBootedCleaner interface {
	// CaptureBaseline records the device's baseline unless its current
	// incarnation has one already. It runs after a boot, before the
	// session that asked for keep-booted uses the device.
	CaptureBaseline(ctx context.Context, dev DeviceRef) error
	// CleanToBaseline undoes what a session changed, by the baseline of
	// the current incarnation; phases are its native phases and what each
	// took. No baseline for the incarnation is an error.
	CleanToBaseline(ctx context.Context, dev DeviceRef) (phases map[string]time.Duration, err error)
	// CheckHealth proves the cleaned device usable (booted, its package
	// manager answering).
	CheckHealth(ctx context.Context, dev DeviceRef) error
}

// SnapshotRestorer is the optional driver ability to restore a device's
// baseline snapshot and nothing else (no fallback of its own), so the
// snapshot reset can tell a restore from the data wipe it falls back to.
// Without it the snapshot reset uses the driver's purge (Reclaim).
type SnapshotRestorer interface {
	RestoreSnapshot(ctx context.Context, dev DeviceRef) error
}

// DataWiper is the optional driver ability the snapshot reset falls back
// to when the snapshot cannot be restored: restart the device with its
// data wiped.
type DataWiper interface {
	WipeData(ctx context.Context, dev DeviceRef) error
}

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

// resetBook keeps the resets of released leases (under the engine's lock).
type resetBook struct {
	byLease map[string]*resetTrack
	boots   chan struct{} // erase boots in flight (Config.MaxConcurrentResetBoots)
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

// ResetOf reports the reset of released lease leaseID: its mode, outcome
// (pending until it settled), native phases in milliseconds, the reason of
// a fallback or destroy, the device's reuse count and timestamps. done is
// closed once the reset settled. ok is false for a lease whose release ran
// no reset (the pool's purge) or that this engine does not know.
func (e *Engine) ResetOf(leaseID string) (rec contract.SessionReset, done <-chan struct{}, ok bool) {
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
func (e *Engine) ReleaseWith(leaseID string, p ReleasePolicy, reason string) error {
	if reason == "" {
		reason = ReasonReleased
	}
	var err error
	derr := e.sectionDurable(func() {
		l, ok := e.leases[leaseID]
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

// resetModeOf names the mode a policy runs, for the record.
func resetModeOf(p ReleasePolicy) string {
	if p.Mode == "" {
		return contract.ResetDestroy
	}
	return p.Mode
}

// openResetLocked starts the record of lease l's reset (the release has
// committed). Its reuse count is the primary device's.
func (e *Engine) openResetLocked(l LeaseRecord, members int) {
	now := e.now()
	reuse := 0
	if d, ok := e.devices[l.DeviceID]; ok {
		reuse = d.ReuseCount
	}
	e.rs.open(l.ID, &resetTrack{
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
func (e *Engine) settleResetLocked(leaseID, deviceID, platform string, r resetResult) {
	t := e.rs.get(leaseID)
	if t == nil || !t.settled.IsZero() {
		return
	}
	t.fold(r)
	t.merge(r)
	t.pending--
	if t.pending > 0 {
		return
	}
	now := e.now()
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
	e.emitLocked(events.Event{Type: "device.reset", LeaseID: leaseID, DeviceID: deviceID, Platform: platform, Data: data})
}

// resetDeviceGoneLocked settles a pending reset whose device another
// path (a quarantine retry of its destroy) has just destroyed.
func (e *Engine) resetDeviceGoneLocked(d DeviceRecord) {
	for id, t := range e.rs.byLease {
		if t.settled.IsZero() && t.members[d.ID] {
			e.settleResetLocked(id, d.ID, d.Platform, resetResult{outcome: contract.ResetOutcomeDestroyed})
		}
	}
}

// resetDestroyFailed is the quarantine reason of a reset whose destroy
// failed: its retry destroys again, and settles the reset when it lands.
const resetDestroyFailed = "reset-destroy-failed"

// startResetLocked runs device id's reset for released lease leaseID by
// policy p: the destroy directly, any other mode as a reset operation
// whose settlement returns the device to the pool or destroys it.
func (e *Engine) startResetLocked(id, leaseID string, p ReleasePolicy) {
	e.rs.addDevice(leaseID, id)
	if p.Mode == "" || p.Mode == contract.ResetDestroy {
		e.startResetDestroyLocked(id, leaseID, p, resetResult{outcome: contract.ResetOutcomeDestroyed})
		return
	}
	o := e.resetOp(id, leaseID, p)
	if e.opLocks[id] != "" {
		e.deferOpLocked(o)
		return
	}
	if err := e.startOpLocked(o); err != nil {
		e.log.Warn("session reset not started", "device", id, "err", err)
	}
}

func (b *resetBook) addDevice(leaseID, id string) {
	if t := b.get(leaseID); t != nil {
		if t.members == nil {
			t.members = map[string]bool{}
		}
		t.members[id] = true
	}
}

// keepIntent keeps the release's policy and lease in the intent of every
// operation of a reset, so a restart at any step recognises the device.
func keepIntent(id string, p ReleasePolicy, leaseID string) func(d *DeviceRecord) {
	return func(d *DeviceRecord) {
		d.Intent.Release, d.Intent.LeaseID = p, leaseID
		if d.Intent.Release.IsZero() {
			// A zero policy would read as the pool's purge on restart.
			d.Intent.Release = ReleasePolicy{Mode: contract.ResetDestroy}
		}
	}
}

// startResetDestroyLocked destroys device id as (the end of) a reset, r
// carrying what the reset measured so far. The record stays, counted
// against capacity, until the driver has confirmed the device absent.
func (e *Engine) startResetDestroyLocked(id, leaseID string, p ReleasePolicy, r resetResult) {
	o := e.resetDestroyOp(id, leaseID, p, r)
	if e.opLocks[id] != "" {
		e.deferOpLocked(o)
		return
	}
	if err := e.startOpLocked(o); err != nil {
		e.log.Warn("session reset destroy not started", "device", id, "err", err)
	}
}

// resetDestroyOp deletes the device, then proves it gone from a fresh
// listing: only then is the record dropped, which is what frees its
// capacity. A destroy that fails or leaves the device listed quarantines
// it for a destroy retry; the reset stays pending until that lands.
func (e *Engine) resetDestroyOp(id, leaseID string, p ReleasePolicy, r resetResult) *deviceOp {
	var took time.Duration
	return &deviceOp{kind: OpKindDestroy, lock: "reset", id: id, mark: keepIntent(id, p, leaseID),
		run: func(ctx context.Context, o *deviceOp) error {
			if o.rec.Handle == "" {
				return nil
			}
			start := e.now()
			defer func() { took = e.now().Sub(start) }()
			return e.destroyConfirmed(ctx, o.drv, o.rec)
		},
		settle: func(o *deviceOp, err error) error {
			r.phase("destroy", took)
			if err != nil {
				e.log.Warn("session reset: destroy failed", "device", id, "err", err)
				if qerr := e.quarantineLocked(id, resetDestroyFailed, OpKindDestroy); qerr != nil {
					return qerr
				}
				if t := e.rs.get(leaseID); t != nil {
					t.fold(r) // the quarantine's destroy settles the reset (resetDeviceGoneLocked)
				}
				e.scheduleLocked()
				return nil
			}
			if cerr := e.commitLocked(Changes{DeleteDevices: []string{id}}); cerr != nil {
				return cerr
			}
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: id, Platform: o.rec.Platform, Reason: "session-reset"})
			r.outcome = contract.ResetOutcomeDestroyed
			e.settleResetLocked(leaseID, id, o.rec.Platform, r)
			e.scheduleLocked()
			return nil
		}}
}

// errStillPresent is a destroy the driver reported done while a fresh
// listing still shows the device.
var errStillPresent = errors.New("device still listed after its destroy")

// destroyConfirmed destroys dev and confirms from a fresh listing that it
// is gone.
func (e *Engine) destroyConfirmed(ctx context.Context, drv Driver, d DeviceRecord) error {
	if err := drv.Destroy(ctx, d.Ref()); err != nil && !errors.Is(err, ErrDeviceNotFound) {
		return err
	}
	obs, err := drv.ListManaged(ctx)
	if err != nil {
		return fmt.Errorf("confirm the destroy: %w", err)
	}
	for _, o := range obs {
		if o.Handle == d.Handle {
			return errStillPresent
		}
	}
	return nil
}

// resetOp is a reuse reset (erase, keep-booted, snapshot): its run does
// the platform work, its settlement returns the device to the pool when
// the reset left it clean, and destroys it otherwise.
func (e *Engine) resetOp(id, leaseID string, p ReleasePolicy) *deviceOp {
	var r resetResult
	return &deviceOp{kind: OpKindReclaim, lock: "reset", id: id, mark: keepIntent(id, p, leaseID),
		run: func(ctx context.Context, o *deviceOp) error {
			timeout := p.Timeout
			if timeout <= 0 {
				timeout = DefaultResetTimeout
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r = e.runReset(ctx, o, p)
			return nil
		},
		settle: func(o *deviceOp, _ error) error {
			if r.destroy {
				// The destroy is a teardown of its own (its host claim goes
				// with it). Nothing is committed before it begins, so the
				// record keeps the release's intent until the destroy's own
				// replaces it: a crash in between still destroys.
				e.startResetDestroyLocked(id, leaseID, p, r)
				return nil
			}
			d, err := e.updateLocked(id, func(d *DeviceRecord) { d.ReuseCount++ })
			if err != nil {
				return err
			}
			r.reuse = d.ReuseCount
			e.settleResetLocked(leaseID, id, d.Platform, r)
			// A reuse reset leaves the device booted: ready, or shut down
			// when running capacity is over its limit.
			return e.disposeLocked(id, "device.reclaimed", "reset", map[string]any{"durationMs": o.elapsed(e.now()), "reset": r.mode})
		}}
}

// runReset does a reuse reset's platform work by mode.
func (e *Engine) runReset(ctx context.Context, o *deviceOp, p ReleasePolicy) resetResult {
	switch p.Mode {
	case contract.ResetErase:
		return e.runErase(ctx, o)
	case contract.ResetKeepBooted:
		return e.runKeepBooted(ctx, o, p)
	case contract.ResetSnapshot:
		var r resetResult
		e.runSnapshot(ctx, o, &r, "")
		return r
	case contract.ResetNone:
		// A slot's device goes back to its slot as the execution left it:
		// booted, its caches warm.
		return resetResult{mode: contract.ResetNone, outcome: contract.ResetOutcomeClean}
	default:
		var r resetResult
		r.fail(fmt.Sprintf("unknown reset mode %q", p.Mode))
		return r
	}
}

// step runs one native phase, timing it into r under name.
func (e *Engine) step(r *resetResult, name string, f func() error) error {
	start := e.now()
	err := f()
	r.phase(name, e.now().Sub(start))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// recoverResetLocked is the restart rule for a device found mid-reset:
// it is destroyed, and the reset is reported under its lease as
// destroyed for the interruption.
func (e *Engine) recoverResetLocked(d DeviceRecord) *deviceOp {
	l := LeaseRecord{ID: d.Intent.LeaseID, DeviceID: d.ID, Release: d.Intent.Release}
	if l.ID != "" && e.rs.get(l.ID) == nil {
		e.openResetLocked(l, 1)
	}
	e.rs.addDevice(l.ID, d.ID)
	e.emitLocked(events.Event{Type: "device.reset-interrupted", DeviceID: d.ID, Platform: d.Platform, LeaseID: l.ID,
		Data: map[string]any{"mode": resetModeOf(d.Intent.Release), "op": string(d.Intent.Op)}})
	return e.resetDestroyOp(d.ID, l.ID, d.Intent.Release,
		resetResult{reason: "interrupted by a restart during the " + resetModeOf(d.Intent.Release) + " reset"})
}
