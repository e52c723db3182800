package claims

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// IdleCommand is the command a device's transient claim names once the
// device runs for this daemon's pool without a lease (ADR 0022).
const IdleCommand = "pool"

// leaseWriteDelay is how long the lease writer lets grants and releases
// pile up before writing them. A lease that ends within it costs no write
// at all, and a burst of short leases costs one write per device, not one
// per grant: the writes share the disk with the home store, whose commits
// are on the grant's path.
const leaseWriteDelay = 250 * time.Millisecond

// claimWriteTimeout bounds one registry write made by a hook that has no
// context of its own (AfterOp) or by the lease writer.
const claimWriteTimeout = 30 * time.Second

// claims implements core.OpHooks over the host registry: this home holds
// a claim on a device from the first operation that mutates it until a
// shutdown or destroy of it succeeded; a shut-down idle device has none
// (ADR 0022). It remembers what it holds, so an operation on a device it
// already claimed costs no registry I/O.
type claims struct {
	store Store
	self  hostreg.Owner
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
	key   func(platform, handle string, attrs map[string]string) (hostreg.Key, error)
	kick  func()
	log   *slog.Logger

	mu   sync.Mutex
	held map[hostreg.Key]*heldClaim
	// admit, when set, admits a start against the whole host before any
	// platform command (hostadmit.go); starting lists the devices whose
	// start row is recorded, so it is ended once.
	admit    func(ctx context.Context, op core.OpInfo) error
	endStart func(deviceID string)
	smu      sync.Mutex
	starting map[string]bool

	// The lease writer: lease ids noted from the bus, by device, written
	// to the claim records in the background (writeLeases).
	lmu    sync.Mutex
	leases map[string]string // device id -> lease id ("" once released)
	lwake  chan struct{}
	done   chan struct{} // closed when the writer has returned
}

// heldClaim is one claim this daemon holds, as last written.
type heldClaim struct {
	device string // the engine's device id ("" for an unrecorded device)
	lease  string
	state  hostreg.State
	// explicit: an explicit release (device.release) marked the claim
	// releasing before any teardown op began (beginRelease).
	explicit bool
}

var _ core.OpHooks = (*claims)(nil)

func newClaims(store Store, self hostreg.Owner, clock ports.Clock,
	key func(platform, handle string, attrs map[string]string) (hostreg.Key, error), kick func(), log *slog.Logger) *claims {
	return &claims{store: store, self: self, now: clock.Now, after: clock.After, key: key, kick: kick, log: log,
		held: map[hostreg.Key]*heldClaim{}, leases: map[string]string{}, lwake: make(chan struct{}, 1), done: make(chan struct{})}
}

func releasing(k core.OpKind) bool { return k == core.OpKindShutdown || k == core.OpKindDestroy }

// BeforeOp claims the device unless this daemon holds it already, and
// marks a teardown as under way. A device another owner holds refuses
// the operation before any platform command.
func (c *claims) BeforeOp(ctx context.Context, op core.OpInfo) error {
	if err := c.admitStart(ctx, op); err != nil {
		return err
	}
	if op.Handle == "" {
		return nil // not created yet (Created claims it) or never reached the platform
	}
	key, err := c.key(op.Platform, op.Handle, op.Attrs)
	if err != nil {
		return fmt.Errorf("claim device %s: %w", op.Handle, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.takeLocked(ctx, key, op.DeviceID, string(op.Kind))
	if err != nil {
		return err
	}
	if releasing(op.Kind) && h.state == hostreg.StateClaimed {
		if err := c.store.MarkReleasing(ctx, key, c.self); err != nil {
			return fmt.Errorf("mark %s releasing: %w", key, err)
		}
		h.state = hostreg.StateReleasing
		c.kick()
	}
	return nil
}

// Created claims a device a provision has just created, before it boots.
func (c *claims) Created(ctx context.Context, op core.OpInfo) error {
	key, err := c.key(op.Platform, op.Handle, op.Attrs)
	if err != nil {
		return fmt.Errorf("claim device %s: %w", op.Handle, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err = c.takeLocked(ctx, key, op.DeviceID, string(op.Kind))
	return err
}

// AfterOp settles the claim: a teardown that succeeded clears it (the
// last step of the teardown), one that failed keeps it with the failed
// step. A purge that left the device shut down (OpInfo.LeftDown) counts
// as a teardown that succeeded. Anything else keeps it, a failed boot
// included, until a later shutdown or destroy settles the device.
func (c *claims) AfterOp(op core.OpInfo, opErr error) {
	c.finishStart(op.DeviceID)
	if op.Handle == "" {
		return
	}
	// A purge that erased the device and left it shut down ended like a
	// shutdown: the device no longer runs, so its claim goes too.
	if !releasing(op.Kind) && !(op.LeftDown && opErr == nil) {
		return
	}
	key, err := c.key(op.Platform, op.Handle, op.Attrs)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[key]
	if !ok {
		return // BeforeOp refused: nothing of ours to settle
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimWriteTimeout)
	defer cancel()
	if opErr != nil {
		if err := c.store.MarkReleaseFailed(ctx, key, c.self, []string{string(op.Kind)}); err != nil {
			c.log.Error("record a failed teardown on the device's claim", "key", key, "err", err)
		} else {
			h.state = hostreg.StateReleaseFailed
		}
		c.kick()
		return
	}
	if err := c.store.Release(ctx, key, c.self); err != nil {
		// The claim stays "releasing": nobody else takes the device, and
		// `simlock device status` says why; the next teardown of the device
		// or this home's next start clears it.
		c.log.Error("clear the claim of a device torn down", "key", key, "err", err)
		return
	}
	delete(c.held, key)
	c.kick()
}

// takeLocked returns this daemon's claim on key, claiming it first if it
// does not hold it. A claim its own home's previous daemon left (proven
// dead) is adopted: this home's store knows the device. Any other holder
// refuses with core.ErrHeldElsewhere wrapping the *hostreg.ConflictError.
func (c *claims) takeLocked(ctx context.Context, key hostreg.Key, device, command string) (*heldClaim, error) {
	if h, ok := c.held[key]; ok {
		if h.device == "" {
			h.device = device
		}
		return h, nil
	}
	cl := hostreg.Claim{Key: key, Kind: hostreg.KindTransient, Command: command, Owner: c.self, ClaimedAt: c.now()}
	err := c.store.Claim(ctx, cl)
	var ce *hostreg.ConflictError
	if errors.As(err, &ce) && ce.Classification == hostreg.ClassOrphaned && ce.Owner.Home == c.self.Home {
		var prev hostreg.Claim
		if prev, err = c.store.Adopt(ctx, cl); err == nil {
			c.log.Info("adopted a claim this home's previous daemon left", "key", key, "pid", prev.Owner.PID, "state", prev.State, "failedSteps", prev.FailedSteps)
		}
	}
	if errors.As(err, &ce) {
		return nil, fmt.Errorf("%w: %w", core.ErrHeldElsewhere, ce)
	}
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", key, err)
	}
	h := &heldClaim{device: device, state: hostreg.StateClaimed}
	c.held[key] = h
	// The claim counts the device from here on; its start row would count
	// it twice.
	c.finishStart(device)
	c.kick()
	return h, nil
}

// holds reports whether this daemon holds key's claim.
func (c *claims) holds(key hostreg.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.held[key]
	return ok
}

// ---- the lease writer ----

// noteLease records that device's lease is now lease ("" once released)
// and wakes the writer. It never touches the registry: it runs on the
// bus observer, behind a grant that must not wait for the host.
func (c *claims) noteLease(device, lease string) {
	c.lmu.Lock()
	c.leases[device] = lease
	c.lmu.Unlock()
	select {
	case c.lwake <- struct{}{}:
	default:
	}
}

// followLeases feeds the writer from the bus: grants and releases only.
// It starts before convergence, so no lease restored or granted is missed.
func (c *claims) followLeases(ctx context.Context, follow func(context.Context, func(events.Event)), devicesOf func(events.Event) []string) {
	follow(ctx, func(e events.Event) {
		switch e.Type {
		case "lease.granted":
			for _, id := range devicesOf(e) {
				c.noteLease(id, e.LeaseID)
			}
		case "lease.released":
			for _, id := range devicesOf(e) {
				c.noteLease(id, "")
			}
		}
	})
}

// writeLeases writes the noted lease ids to the claim records, a moment
// after the first of them (leaseWriteDelay), coalescing whatever piled up
// meanwhile: only each device's latest lease is written, and none when it
// is what the record already says. It returns when ctx ends.
func (c *claims) writeLeases(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.lwake:
		}
		select {
		case <-ctx.Done():
			return
		case <-c.after(leaseWriteDelay):
		}
		c.lmu.Lock()
		batch := c.leases
		c.leases = map[string]string{}
		c.lmu.Unlock()
		for device, lease := range batch {
			c.writeLease(ctx, device, lease)
		}
	}
}

// writeLease re-claims device's key as this daemon (which replaces its own
// record) with the lease on it, or as idle once the lease is gone. A device
// it does not hold, or whose teardown began, is left alone: the claim must
// never come back after its release.
func (c *claims) writeLease(ctx context.Context, device, lease string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var key hostreg.Key
	var h *heldClaim
	for k, x := range c.held {
		if x.device == device {
			key, h = k, x
			break
		}
	}
	if h == nil || (h.state == hostreg.StateClaimed && h.lease == lease) {
		return
	}
	// A device granted again after an explicit release that never reached
	// its teardown (its reclaim failed, then a retry brought it back) is
	// claimed again, with the new lease.
	regrant := h.explicit && h.state == hostreg.StateReleasing && lease != ""
	if h.state != hostreg.StateClaimed && !regrant {
		return
	}
	cl := hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: lease, Owner: c.self, ClaimedAt: c.now()}
	if lease == "" {
		cl.Kind, cl.Command = hostreg.KindTransient, IdleCommand
	}
	wctx, cancel := context.WithTimeout(ctx, claimWriteTimeout)
	defer cancel()
	if err := c.store.Claim(wctx, cl); err != nil {
		// Ownership is unchanged (this daemon still holds the device); only
		// the lease shown by `device status` lags. The next grant or release
		// of the device writes it again.
		c.log.Warn("write the lease on a device's claim", "key", key, "lease", lease, "err", err)
		return
	}
	h.lease, h.state, h.explicit = lease, hostreg.StateClaimed, false
	c.kick()
}

// beginRelease marks key's claim releasing as an explicit release
// (device.release) starts: from the release of its lease on, the device's
// teardown is under way, and `device status` reads releasing even while a
// reclaim hangs, long before the shutdown that clears the claim. A device
// this daemon holds no claim on, or whose teardown began, is left alone.
func (c *claims) beginRelease(ctx context.Context, key hostreg.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[key]
	if !ok || h.state != hostreg.StateClaimed {
		return nil
	}
	if err := c.store.MarkReleasing(ctx, key, c.self); err != nil {
		return fmt.Errorf("mark %s releasing: %w", key, err)
	}
	h.state, h.explicit = hostreg.StateReleasing, true
	c.kick()
	return nil
}

// endRelease undoes beginRelease when the release ended with the device
// still in this home's hands and no teardown under way (refused, or the
// device taken again): the claim reads claimed again, with lease ("" for
// an idle device).
func (c *claims) endRelease(ctx context.Context, key hostreg.Key, lease string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[key]
	if !ok || !h.explicit || h.state != hostreg.StateReleasing {
		return
	}
	cl := hostreg.Claim{Key: key, Kind: hostreg.KindLease, LeaseID: lease, Owner: c.self, ClaimedAt: c.now()}
	if lease == "" {
		cl.Kind, cl.Command = hostreg.KindTransient, IdleCommand
	}
	wctx, cancel := context.WithTimeout(ctx, claimWriteTimeout)
	defer cancel()
	if err := c.store.Claim(wctx, cl); err != nil {
		c.log.Warn("mark a device claimed again after a release that did not tear it down", "key", key, "err", err)
		return
	}
	h.lease, h.state, h.explicit = lease, hostreg.StateClaimed, false
	c.kick()
}

// ---- restart ----

// reconcile runs once convergence is done: it takes back the claims this
// home's previous daemon left (proven dead), clears those on devices this
// home no longer runs, claims every device it runs that has none, and
// puts the lease ids on them. statuses is the host registry as read now.
// It returns the restored leases' devices whose claims are not this
// home's (hostreg.LeaseTrust, judged on statuses before anything is
// adopted): the caller ends those leases before the readiness gate opens,
// and none of those devices is claimed again here.
func (c *claims) reconcile(ctx context.Context, devices []core.DeviceRecord, leases []core.LeaseRecord, statuses []hostreg.Status) []lostClaim {
	byKey := map[hostreg.Key]core.DeviceRecord{}
	for _, d := range devices {
		if d.Handle == "" {
			continue
		}
		if k, err := c.key(d.Platform, d.Handle, d.Attrs); err == nil {
			byKey[k] = d
		}
	}
	running := func(d core.DeviceRecord) bool { return d.State != core.StateShutdown }
	c.mu.Lock()
	defer c.mu.Unlock()
	lost, adopt := c.restoredTrust(byKey, leases, statuses)
	claimed := map[hostreg.Key]bool{}
	for _, st := range statuses {
		claimed[st.Key] = true
		if st.Claim.Owner.Home != c.self.Home || st.Claim.Owner == c.self || st.Class != hostreg.ClassOrphaned {
			continue
		}
		if st.BeingReclaimed() {
			continue // another daemon is shutting the device down: not ours to take back
		}
		cl := hostreg.Claim{Key: st.Key, Kind: hostreg.KindTransient, Command: "restart", Owner: c.self, ClaimedAt: c.now()}
		prev, err := c.store.Adopt(ctx, cl)
		if err != nil {
			c.log.Warn("take back a claim this home's previous daemon left", "key", st.Key, "err", err)
			continue
		}
		d, ok := byKey[st.Key]
		if ok && running(d) {
			c.held[st.Key] = &heldClaim{device: d.ID, state: hostreg.StateClaimed}
			c.log.Info("took back a claim after a restart", "key", st.Key, "device", d.ID, "previousPid", prev.Owner.PID)
			continue
		}
		// This home's store has the device shut down, or not at all: the
		// previous daemon finished with it, and only the claim was left.
		if err := c.store.Release(ctx, st.Key, c.self); err != nil {
			c.log.Warn("clear a claim this home no longer needs", "key", st.Key, "err", err)
			c.held[st.Key] = &heldClaim{device: d.ID, state: hostreg.StateClaimed}
		}
	}
	// A lease trusted on its previous daemon's claim needs the adoption
	// to have happened; one that failed leaves the device someone else's.
	for k, l := range adopt {
		if _, ok := c.held[k]; !ok {
			lost = append(lost, lostClaim{key: k, device: byKey[k].ID, lease: l,
				trust: hostreg.Trust{Reason: hostreg.ReasonClaimHeldElsewhere, Detail: "the previous daemon's claim could not be taken back"}})
		}
	}
	untrusted := map[hostreg.Key]bool{}
	for _, lc := range lost {
		untrusted[lc.key] = true
	}
	for k, d := range byKey {
		if !running(d) || claimed[k] || untrusted[k] {
			continue
		}
		if _, ok := c.held[k]; ok {
			continue
		}
		if _, err := c.takeLocked(ctx, k, d.ID, "restart"); err != nil {
			// Held by another owner: the foreign snapshot keeps it out of
			// the pool; this daemon does not act on it.
			c.log.Warn("a device this home runs is claimed by another owner", "key", k, "device", d.ID, "err", err)
		}
	}
	// A device convergence forgot without a teardown (it vanished from its
	// root) leaves nothing to own: its claim goes.
	known := map[string]bool{}
	for _, d := range devices {
		known[d.ID] = true
	}
	for k, h := range c.held {
		if h.device == "" || known[h.device] || h.state != hostreg.StateClaimed {
			continue
		}
		if err := c.store.Release(ctx, k, c.self); err != nil {
			c.log.Warn("clear the claim of a device that vanished", "key", k, "err", err)
			continue
		}
		delete(c.held, k)
	}
	c.kick()
	for _, l := range leases {
		for _, id := range l.DeviceIDs() {
			c.leasesNoteLocked(id, l.ID)
		}
	}
	return lost
}

// leasesNoteLocked is noteLease for a caller holding c.mu (the writer
// takes c.mu itself, so it only needs the wake-up).
func (c *claims) leasesNoteLocked(device, lease string) {
	c.lmu.Lock()
	if _, newer := c.leases[device]; !newer {
		c.leases[device] = lease
	}
	c.lmu.Unlock()
	select {
	case c.lwake <- struct{}{}:
	default:
	}
}

// foreignFrom derives the engine's foreign-claims snapshot: every device
// of this home whose key another owner holds, whatever its state (a
// release under way, a dead owner's orphan, an unreadable record: none of
// them is free). This home's own previous daemon is not foreign: its
// orphans are adopted on first use.
func (c *claims) foreignFrom(devices []core.DeviceRecord, statuses []hostreg.Status) map[string]string {
	byKey := map[hostreg.Key]string{}
	for _, d := range devices {
		if d.Handle == "" {
			continue
		}
		if k, err := c.key(d.Platform, d.Handle, d.Attrs); err == nil {
			byKey[k] = d.ID
		}
	}
	out := map[string]string{}
	for _, st := range statuses {
		id, ok := byKey[st.Key]
		if !ok || st.Claim.Owner == c.self {
			continue
		}
		if st.Claim.Owner.Home == c.self.Home && st.Class == hostreg.ClassOrphaned {
			continue
		}
		out[id] = fmt.Sprintf("%s by home %s (pid %d)", st.Class, st.Claim.Owner.Home, st.Claim.Owner.PID)
	}
	return out
}

// claimAdopted claims key for taking a device of the shared root into this
// daemon's registry, so no other home takes it meanwhile.
func (c *claims) claimAdopted(ctx context.Context, key hostreg.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.takeLocked(ctx, key, "", "adopt")
	return err
}

// release drops this daemon's claim on key (a device it took in shut down).
func (c *claims) release(ctx context.Context, key hostreg.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.held[key]; !ok {
		return nil
	}
	if err := c.store.Release(ctx, key, c.self); err != nil {
		return err
	}
	delete(c.held, key)
	c.kick()
	return nil
}
