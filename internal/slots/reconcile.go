package slots

// The reconciler decides, from the host registry's assignment and journal
// and the daemon's inventory, whether the slot's device is reused, created,
// adopted from the free pool or replaced, and drives the steps through two
// small ports (Registry, Devices). It owns no device and no lease: the
// Manager leases the result.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/hostreg"
)

// Registry is the slice of the host registry a reconciliation uses.
type Registry interface {
	ClaimSlot(ctx context.Context, scope string, slot int, owner hostreg.SlotOwner, now time.Time) (hostreg.SlotClaim, error)
	OpenIntent(ctx context.Context, in hostreg.SlotIntent, token string, gen int64, now time.Time) (hostreg.SlotIntent, int64, error)
	NoteIntentDevice(ctx context.Context, id int64, stableID string) error
	CloseIntent(ctx context.Context, id int64, now time.Time) error
	CommitBinding(ctx context.Context, scope string, slot int, token string, gen int64, b hostreg.Binding, now time.Time) (hostreg.SlotRecord, error)
	MarkCleanupPending(ctx context.Context, scope string, slot int, token string) (hostreg.SlotRecord, error)
	FreePool(ctx context.Context) ([]hostreg.FreeDevice, error)
}

// Device is one device of the daemon's inventory, as a slot sees it.
type Device struct {
	ID       string // the daemon's device id
	StableID string // UDID or AVD name
	Name     string
	Platform string
	Running  bool
	Resolved contract.SlotSpec
}

// Devices is the daemon's inventory and device work.
type Devices interface {
	// Home is the daemon's home (recorded as an assignment's device home).
	Home() string
	// List reads the platform's inventory once (one SDK listing): the
	// stable ids present. ok is false when it could not be read in full,
	// so absence is not proven.
	List(ctx context.Context, platform string) (present map[string]bool, ok bool)
	// Find is the daemon's device with this stable id, given whether a
	// listing showed it present: a record whose device the listing lacks
	// was deleted out of band and is dropped, not returned.
	Find(ctx context.Context, platform, stableID string, present bool) (Device, bool)
	// ByID finds a device by the daemon's id.
	ByID(id string) (Device, bool)
	// Create makes a new device for the spec, marked as slotKey's before
	// anyone can see it, named namePrefix plus a unique suffix; recorded
	// runs with its id before the driver acts.
	Create(ctx context.Context, platform string, spec contract.SlotSpec, slotKey, namePrefix string, recorded func(id string) error) (Device, error)
	// Destroy deletes an idle device and returns once it is gone.
	Destroy(ctx context.Context, d Device) error
	// CheckSpec answers SPEC_UNSUPPORTED (a *contract.Error) when a
	// device for spec could not be made on this host: a runtime, image or
	// device type that is not installed, or a key the daemon cannot apply.
	// It changes nothing, so it runs before anything is deleted.
	CheckSpec(ctx context.Context, platform string, spec contract.SlotSpec) error
	// MayBoot answers CAPACITY_EXHAUSTED (a *contract.Error) when a new
	// device of platform and spec could not boot now, counting freeing as
	// gone. Where an idle device (warm, or a slot's with no execution) can
	// yield its running room, it shuts that device down and answers nil.
	MayBoot(ctx context.Context, platform string, spec contract.SlotSpec, freeing *Device) error
	// MayRestart answers CAPACITY_EXHAUSTED the same way when the slot's
	// own shut-down device d could not boot now (nor once an idle device
	// yields its room), so a reuse at the limit is refused at once rather
	// than left to wait out the acquisition's deadline.
	MayRestart(d Device) error
}

// Clock is the reconciler's time source.
type Clock interface{ Now() time.Time }

// Reconciler reconciles one slot at a time.
type Reconciler struct {
	Reg   Registry
	Devs  Devices
	Clock Clock
}

// Outcome is one reconciled slot: its registry record, the device the
// execution leases, and the evidence.
type Outcome struct {
	Record      hostreg.SlotRecord
	Device      Device
	Disposition string
	Decisions   []contract.SlotDecision
	Fingerprint contract.SpecFingerprint
}

// devicePrefix marks a journal's new-device reference made before the
// driver named the device: the daemon's device id, resolved on retry.
const devicePrefix = "device:"

type run struct {
	r     *Reconciler
	req   contract.SlotRequest
	scope string
	owner hostreg.SlotOwner
	fp    contract.SpecFingerprint
	start time.Time
	out   Outcome
	// listed holds this run's inventory listings by platform. A listing
	// stands until the run itself changes the inventory (a create or a
	// delete), so one decision lists once, and a proof of absence is
	// always a listing taken after the last deletion.
	listed map[string]map[string]bool
}

// listing is the run's current listing of platform, read only if the run
// has none.
func (x *run) listing(ctx context.Context, platform string) (map[string]bool, bool) {
	if present, ok := x.listed[platform]; ok {
		return present, true
	}
	present, ok := x.r.Devs.List(ctx, platform)
	if !ok {
		return nil, false
	}
	if x.listed == nil {
		x.listed = map[string]map[string]bool{}
	}
	x.listed[platform] = present
	return present, true
}

// lookup finds stable's device through the run's listing of platform.
func (x *run) lookup(ctx context.Context, platform, stable string) (d Device, found, complete bool) {
	present, ok := x.listing(ctx, platform)
	if !ok {
		return Device{}, false, false
	}
	d, found = x.r.Devs.Find(ctx, platform, stable, present[stable])
	return d, found, true
}

// changed forgets the run's listings: it made or deleted a device.
func (x *run) changed() { x.listed = nil }

func (x *run) destroy(ctx context.Context, d Device) error {
	defer x.changed()
	return x.r.Devs.Destroy(ctx, d)
}

func (x *run) note(step, format string, args ...any) {
	x.out.Decisions = append(x.out.Decisions, contract.SlotDecision{Step: step, Detail: fmt.Sprintf(format, args...),
		AtMs: x.r.Clock.Now().Sub(x.start).Milliseconds()})
}

// SpecMatches reports whether an assigned device answers req: every field
// req names must equal what the assignment was requested with or resolved
// to; an omitted field is unconstrained.
func SpecMatches(platform string, req contract.SlotSpec, assignedPlatform string, requested, resolved contract.SlotSpec) bool {
	if platform != assignedPlatform {
		return false
	}
	eq := func(want, a, b string) bool { return want == "" || want == a || want == b }
	if !eq(req.Runtime, requested.Runtime, resolved.Runtime) || !eq(req.DeviceType, requested.DeviceType, resolved.DeviceType) ||
		!eq(req.DisplayCutout, requested.DisplayCutout, resolved.DisplayCutout) {
		return false
	}
	for k, v := range req.Configuration {
		if requested.Configuration[k] != v && resolved.Configuration[k] != v {
			return false
		}
	}
	return true
}

func decodeSpec(raw json.RawMessage) contract.SlotSpec {
	var s contract.SlotSpec
	_ = json.Unmarshal(raw, &s) // a row we wrote; a bad one matches nothing but empty requests
	return s
}

// Acquire claims the slot for owner and reconciles it to req. The scope
// must have been admitted. On error the slot is left claimed by owner; the
// caller releases it.
func (r *Reconciler) Acquire(ctx context.Context, scope string, req contract.SlotRequest, owner hostreg.SlotOwner) (Outcome, error) {
	x := &run{r: r, req: req, scope: scope, owner: owner, fp: contract.SlotSpecFingerprint(req.Platform, req.RequestedSpec), start: r.Clock.Now()}
	x.out.Fingerprint = x.fp
	claim, err := r.Reg.ClaimSlot(ctx, scope, req.SlotIndex, owner, x.start)
	if err != nil {
		return x.out, err
	}
	x.note("claim", "slot %d claimed at generation %d (state %s)", req.SlotIndex, claim.Slot.Generation, claim.Slot.State)
	cur := claim.Slot
	gen := cur.Generation

	// A crash left journal entries: converge them first. A device a
	// create step made for this same spec is bound; any other is deleted.
	var carried []int64
	for _, in := range claim.Journal {
		x.note("journal", "open %s intent %d (spec %.12s) from %s", in.Step, in.ID, in.FPHash, in.OpenedAt.Format(time.RFC3339))
		made, ok := x.journalDevice(ctx, in)
		if ok && in.FPHash == x.fp.Hash && cur.Device.StableID == in.OldStableID {
			if in.OldStableID != "" {
				if err := x.ensureGone(ctx, cur, in.OldStableID); err != nil {
					return x.out, err
				}
			}
			disp := contract.SlotCreated
			if in.Step == hostreg.StepReplace {
				disp = contract.SlotReplaced
			}
			x.note("journal", "binding %s, made by the interrupted %s", made.StableID, in.Step)
			return x.bind(ctx, gen, made, []int64{in.ID}, disp, false)
		}
		if ok {
			x.note("journal", "deleting %s, made for another spec", made.StableID)
			if err := x.destroy(ctx, made); err != nil {
				return x.out, x.fail(contract.CodeCleanupPending, err, "the interrupted step's device could not be deleted")
			}
		}
		carried = append(carried, in.ID)
	}
	for _, id := range carried {
		if err := r.Reg.CloseIntent(ctx, id, r.Clock.Now()); err != nil {
			return x.out, err
		}
	}

	if cur.Device.StableID != "" {
		requested, resolved := decodeSpec(cur.Requested), decodeSpec(cur.Device.Resolved)
		matches := SpecMatches(req.Platform, req.RequestedSpec, cur.Device.Platform, requested, resolved) && cur.State != hostreg.SlotCleanupPending
		d, found, complete := x.lookup(ctx, cur.Device.Platform, cur.Device.StableID)
		switch {
		case matches && found:
			x.note("reuse", "assigned device %s matches the spec", d.StableID)
			if err := x.restartable(d); err != nil {
				return x.out, err
			}
			return x.lease(cur, d, contract.SlotReused)
		case !complete:
			return x.out, x.fail(contract.CodeDiscoveryIncomplete, nil, "the %s inventory is partial, so the assigned device's absence cannot be proven", cur.Device.Platform)
		case !found && cur.Device.DeviceHome != "" && cur.Device.DeviceHome != r.Devs.Home():
			return x.out, x.elsewhere(cur)
		case matches:
			x.note("recreate", "assigned device %s was deleted out of band; recreating it", cur.Device.StableID)
			return x.create(ctx, gen, cur, contract.SlotReused, hostreg.StepCreate)
		}
		// Replace: a spec this host can serve and capacity first, then
		// delete, prove absence, create.
		if err := r.Devs.CheckSpec(ctx, req.Platform, req.RequestedSpec); err != nil {
			x.note("spec", "refused: %v", err)
			return x.out, err
		}
		var freeing *Device
		if found {
			freeing = &d
		}
		if err := r.Devs.MayBoot(ctx, req.Platform, req.RequestedSpec, freeing); err != nil {
			x.note("capacity", "refused: %v", err)
			return x.out, err
		}
		in, ngen, err := r.Reg.OpenIntent(ctx, hostreg.SlotIntent{ScopeKey: scope, SlotIndex: req.SlotIndex, FPHash: x.fp.Hash, Step: hostreg.StepReplace,
			Platform: req.Platform, OldStableID: cur.Device.StableID}, owner.Token, gen, r.Clock.Now())
		if err != nil {
			return x.out, err
		}
		x.note("replace", "spec changed; replacing %s (generation %d)", cur.Device.StableID, ngen)
		if err := x.ensureGone(ctx, cur, cur.Device.StableID); err != nil {
			return x.out, err
		}
		return x.createWith(ctx, ngen, in, contract.SlotReplaced)
	}

	// No device: adopt a matching free-pool device of a retired scope, or
	// create one.
	free, err := r.Reg.FreePool(ctx)
	if err != nil {
		return x.out, err
	}
	for _, f := range free {
		if !SpecMatches(req.Platform, req.RequestedSpec, f.Platform, decodeSpec(f.Resolved), decodeSpec(f.Resolved)) && f.FPHash != x.fp.Hash {
			continue
		}
		// One listing per platform serves every candidate.
		d, found, _ := x.lookup(ctx, f.Platform, f.StableID)
		if !found {
			continue
		}
		x.note("adopt", "free-pool device %s of a retired scope matches", f.StableID)
		if err := x.restartable(d); err != nil {
			return x.out, err
		}
		return x.bind(ctx, gen, d, nil, contract.SlotAdopted, true)
	}
	return x.create(ctx, gen, cur, contract.SlotCreated, hostreg.StepCreate)
}

// restartable refuses, before anything is committed, a device that is shut
// down and could not boot now.
func (x *run) restartable(d Device) error {
	if d.Running {
		return nil
	}
	if err := x.r.Devs.MayRestart(d); err != nil {
		x.note("capacity", "refused: %v", err)
		return err
	}
	return nil
}

// journalDevice resolves an intent's new-device reference.
func (x *run) journalDevice(ctx context.Context, in hostreg.SlotIntent) (Device, bool) {
	ref := in.NewStableID
	if ref == "" {
		return Device{}, false
	}
	if id, ok := strings.CutPrefix(ref, devicePrefix); ok {
		return x.r.Devs.ByID(id)
	}
	d, found, _ := x.lookup(ctx, in.Platform, ref)
	return d, found
}

// ensureGone deletes the old device (if this daemon still has it) and
// proves its absence from a complete inventory. If it cannot, the slot
// keeps the old assignment as cleanup_pending.
//
// The first lookup reuses the listing the decision was made on; the proof
// after a deletion is a fresh one (destroy forgets the listing).
func (x *run) ensureGone(ctx context.Context, cur hostreg.SlotRecord, stable string) error {
	d, found, complete := x.lookup(ctx, cur.Device.Platform, stable)
	if !complete {
		return x.fail(contract.CodeDiscoveryIncomplete, nil, "the %s inventory is partial; the old device's absence cannot be proven", cur.Device.Platform)
	}
	if found {
		if err := x.destroy(ctx, d); err != nil {
			x.markCleanup(ctx)
			return x.fail(contract.CodeCleanupPending, err, "deleting the old device %s failed", stable)
		}
	}
	listed, ok := x.listing(ctx, cur.Device.Platform)
	present := listed[stable]
	switch {
	case !ok:
		x.markCleanup(ctx)
		return x.fail(contract.CodeDiscoveryIncomplete, nil, "the %s inventory could not be read after the deletion", cur.Device.Platform)
	case present:
		x.markCleanup(ctx)
		return x.fail(contract.CodeCleanupPending, nil, "the old device %s is still present after its deletion", stable)
	}
	x.note("verify-absent", "old device %s is gone from the %s inventory", stable, cur.Device.Platform)
	return nil
}

func (x *run) markCleanup(ctx context.Context) {
	if _, err := x.r.Reg.MarkCleanupPending(ctx, x.scope, x.req.SlotIndex, x.owner.Token); err != nil {
		x.note("cleanup", "could not mark cleanup_pending: %v", err)
	}
}

// create journals a create step and makes the device.
func (x *run) create(ctx context.Context, gen int64, cur hostreg.SlotRecord, disp, step string) (Outcome, error) {
	if err := x.r.Devs.CheckSpec(ctx, x.req.Platform, x.req.RequestedSpec); err != nil {
		x.note("spec", "refused: %v", err)
		return x.out, err
	}
	if err := x.r.Devs.MayBoot(ctx, x.req.Platform, x.req.RequestedSpec, nil); err != nil {
		x.note("capacity", "refused: %v", err)
		return x.out, err
	}
	in, ngen, err := x.r.Reg.OpenIntent(ctx, hostreg.SlotIntent{ScopeKey: x.scope, SlotIndex: x.req.SlotIndex, FPHash: x.fp.Hash, Step: step,
		Platform: x.req.Platform, OldStableID: cur.Device.StableID}, x.owner.Token, gen, x.r.Clock.Now())
	if err != nil {
		return x.out, err
	}
	return x.createWith(ctx, ngen, in, disp)
}

func (x *run) createWith(ctx context.Context, gen int64, in hostreg.SlotIntent, disp string) (Outcome, error) {
	key := hostreg.SlotKey(x.scope, x.req.SlotIndex)
	x.note("create", "creating a %s device for the spec", x.req.Platform)
	// Opaque to everyone but people: scope prefix, slot, the generation
	// the binding will take (at least), then the adapter's unique suffix.
	name := fmt.Sprintf("simlock-slot-%.8s-%d-g%d", x.scope, x.req.SlotIndex, gen+1)
	d, err := x.r.Devs.Create(ctx, x.req.Platform, x.req.RequestedSpec, key, name, func(id string) error {
		return x.r.Reg.NoteIntentDevice(ctx, in.ID, devicePrefix+id)
	})
	x.changed()
	if err != nil {
		if d.ID != "" {
			_ = x.destroy(ctx, d)
		}
		return x.out, err
	}
	// The handle is known now: the journal names the device as the registry does.
	if err := x.r.Reg.NoteIntentDevice(ctx, in.ID, d.StableID); err != nil {
		return x.out, err
	}
	return x.bind(ctx, gen, d, []int64{in.ID}, disp, false)
}

func (x *run) bind(ctx context.Context, gen int64, d Device, intents []int64, disp string, fromFree bool) (Outcome, error) {
	res, _ := json.Marshal(d.Resolved)
	req, _ := json.Marshal(x.req.RequestedSpec)
	rec, err := x.r.Reg.CommitBinding(ctx, x.scope, x.req.SlotIndex, x.owner.Token, gen, hostreg.Binding{
		Device:    hostreg.SlotDevice{Platform: d.Platform, StableID: d.StableID, Name: d.Name, DeviceHome: x.r.Devs.Home(), Resolved: res, FPHash: x.fp.Hash},
		Requested: req, FPVersion: x.fp.Version, Intents: intents, FromFreePool: fromFree}, x.r.Clock.Now())
	if err != nil {
		return x.out, err
	}
	x.note("bind", "slot %d bound to %s at generation %d (%s)", x.req.SlotIndex, d.StableID, rec.Generation, disp)
	return x.lease(rec, d, disp)
}

func (x *run) lease(rec hostreg.SlotRecord, d Device, disp string) (Outcome, error) {
	x.out.Record, x.out.Device, x.out.Disposition = rec, d, disp
	return x.out, nil
}

// elsewhere refuses a slot whose device lives in another home's device
// root: this daemon can neither reach it nor prove it gone, and a retry
// here never changes that, so the refusal is final for this daemon and
// names the daemon that can serve the slot (ADR 0069).
func (x *run) elsewhere(cur hostreg.SlotRecord) error {
	home := cur.Device.DeviceHome
	x.note("failed", "%s: the slot's device %s lives in home %s", contract.CodeDeviceOutsideSlots, cur.Device.StableID, home)
	return contract.Errorf(contract.CodeDeviceOutsideSlots,
		"slot %d's device %s lives in the device root of home %s, which this daemon (home %s) cannot reach",
		x.req.SlotIndex, cur.Device.StableID, home, x.r.Devs.Home()).
		WithNext(fmt.Sprintf("acquire the slot through the daemon of home %s (SIMLOCK_HOME=%s), or reset the scope to give the slot a device here", home, home)).
		WithDetails("slotIndex", x.req.SlotIndex, "reason", "host", "deviceHome", home, "stableId", cur.Device.StableID)
}

// fail builds a typed failure and records it in the trail.
func (x *run) fail(code contract.Code, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	x.note("failed", "%s: %s", code, msg)
	ce := contract.Errorf(code, "%s", msg).WithDetails("slotIndex", x.req.SlotIndex)
	if cause != nil {
		return errors.Join(ce, cause)
	}
	return ce
}
