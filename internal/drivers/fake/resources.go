package fake

import (
	"context"
	"fmt"
	"slices"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Resourced is the fake with the optional core.ResourceController ability.
// Every group of the platform starts enabled on a new or erased device (a
// purge drops whatever was written, as an erase does on a real one); a
// test scripts groups the device cannot control (SetResourceUnsupported),
// writes that do not stick (SetResourceNoStick), driver errors (Fail
// "resources") and a gate to hold a call in flight (ResourceGate).
type Resourced struct{ *Driver }

var _ core.ResourceController = Resourced{}

// Observing is Resourced without the reconcile ability (no
// core.ResourceReconciler), as the Android driver: it observes and
// applies, and a reconcile of its devices must be refused before it is
// called.
type Observing struct{ *Driver }

var _ core.ResourceController = Observing{}

// ObserveResources is Resourced's.
func (o Observing) ObserveResources(ctx context.Context, r core.DeviceRef) (contract.ResourceResult, error) {
	return Resourced(o).ObserveResources(ctx, r)
}

// ApplyResources is Resourced's.
func (o Observing) ApplyResources(ctx context.Context, r core.DeviceRef, c core.ResourceChange) (contract.ResourceResult, error) {
	return Resourced(o).ApplyResources(ctx, r, c)
}

// resState is the fake's per-driver resource script and per-device state.
type resState struct {
	groups      map[string]map[string]contract.ResourceState // handle -> group -> state
	owned       map[string]map[string]bool                   // handle -> groups simlock wrote
	boots       map[string]int                               // handle -> boot count (the receipt's boot id)
	unsupported map[string]bool
	noStick     map[string]bool
}

func (d *Driver) resLocked() *resState {
	if d.res == nil {
		d.res = &resState{groups: map[string]map[string]contract.ResourceState{}, owned: map[string]map[string]bool{},
			boots: map[string]int{}, unsupported: map[string]bool{}, noStick: map[string]bool{}}
	}
	return d.res
}

// SetResourceUnsupported makes group one the device cannot control.
func (d *Driver) SetResourceUnsupported(group string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resLocked().unsupported[group] = true
}

// SetResourceNoStick makes writes to group appear to succeed but change
// nothing an independent read would see.
func (d *Driver) SetResourceNoStick(group string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resLocked().noStick[group] = true
}

// ResourceState is the state the fake holds for handle's group.
func (d *Driver) ResourceState(handle, group string) contract.ResourceState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stateLocked(handle, group)
}

func (d *Driver) stateLocked(handle, group string) contract.ResourceState {
	r := d.resLocked()
	if r.unsupported[group] {
		return contract.ResourceUnsupported
	}
	if s, ok := r.groups[handle][group]; ok {
		return s
	}
	return contract.ResourceEnabled
}

// resetResourcesLocked forgets what was written to handle (an erase).
func (d *Driver) resetResourcesLocked(handle string) {
	if d.res == nil {
		return
	}
	delete(d.res.groups, handle)
	delete(d.res.owned, handle)
	d.res.boots[handle]++
}

func (d Resourced) begin(ctx context.Context, verb string, r core.DeviceRef) error {
	if d.ResourceGate != nil {
		select {
		case <-d.ResourceGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := d.record(verb, r.Handle); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.devices[r.Handle]
	if !ok {
		return core.ErrDeviceNotFound
	}
	if !dev.running {
		return fmt.Errorf("fake: %s is not running", r.Handle)
	}
	return nil
}

// observeLocked reads groups as an independent observation would.
func (d Resourced) observeLocked(r core.DeviceRef, groups []string) (map[string]contract.ResourceObservation, []contract.ServiceEvidence) {
	obs := map[string]contract.ResourceObservation{}
	ev := []contract.ServiceEvidence{}
	for _, g := range groups {
		s := d.stateLocked(r.Handle, g)
		o := contract.ResourceObservation{State: s}
		if s == contract.ResourceUnsupported {
			o.Reason = "no service of the group is installed on this device"
		} else {
			ev = append(ev, contract.ServiceEvidence{Group: g, Service: "fake." + g, Observed: s})
		}
		obs[g] = o
	}
	return obs, ev
}

func (d Resourced) result(r core.DeviceRef) contract.ResourceResult {
	return contract.ResourceResult{DeviceID: r.ID, Platform: d.platform, Changed: []string{},
		Verification: contract.ResourceVerificationCurrentBoot}
}

func (d Resourced) ObserveResources(ctx context.Context, r core.DeviceRef) (contract.ResourceResult, error) {
	if err := d.begin(ctx, "resources-get", r); err != nil {
		return contract.ResourceResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res := d.result(r)
	res.Resources, res.Services = d.observeLocked(r, contract.ResourceGroupsFor(d.platform))
	res.Success = true
	return res, nil
}

func (d Resourced) ApplyResources(ctx context.Context, r core.DeviceRef, c core.ResourceChange) (contract.ResourceResult, error) {
	if err := d.begin(ctx, "resources-set", r); err != nil {
		return contract.ResourceResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rs := d.resLocked()
	res := d.result(r)
	want := c.Resources
	if c.Restore != nil {
		if c.Restore.Serial != r.Handle || c.Restore.BootID != fmt.Sprint(rs.boots[r.Handle]) {
			return contract.ResourceResult{}, fmt.Errorf("%w: it is for %s boot %s", core.ErrReceiptMismatch, c.Restore.Serial, c.Restore.BootID)
		}
		want = map[string]contract.ResourceState{}
		for _, e := range c.Restore.Entries {
			want[e.Key] = contract.ResourceState(e.Value)
		}
	}
	res.Requested = want
	res.Fingerprint = contract.ResourceFingerprint(want)
	receipt := &contract.RestoreReceipt{Serial: r.Handle, BootID: fmt.Sprint(rs.boots[r.Handle]), Entries: []contract.RestoreEntry{}}
	groups := sortedGroups(want)
	for _, g := range groups {
		prior := d.stateLocked(r.Handle, g)
		if prior == contract.ResourceUnsupported || prior == want[g] {
			continue
		}
		receipt.Entries = append(receipt.Entries, contract.RestoreEntry{Kind: "setting", Namespace: "fake", Key: g, Value: string(prior)})
		res.Changed = append(res.Changed, g)
		if rs.noStick[g] {
			continue // the write "succeeds" and changes nothing
		}
		if rs.groups[r.Handle] == nil {
			rs.groups[r.Handle] = map[string]contract.ResourceState{}
			rs.owned[r.Handle] = map[string]bool{}
		}
		rs.groups[r.Handle][g] = want[g]
		rs.owned[r.Handle][g] = want[g] == contract.ResourceDisabled
	}
	res.Resources, res.Services = d.observeLocked(r, groups)
	res.Success = true
	for _, g := range groups {
		if rs.noStick[g] && slices.Contains(res.Changed, g) {
			// The re-read disagrees with the write: no evidence either way.
			res.Resources[g] = contract.ResourceObservation{State: contract.ResourceUnknown, Reason: "the write did not stick"}
		}
		res.Success = res.Success && res.Resources[g].State == want[g]
	}
	for i := range res.Services {
		res.Services[i].Written = slices.Contains(res.Changed, res.Services[i].Group)
	}
	if d.platform == "android" {
		res.Restore = receipt
	}
	return res, nil
}

func (d Resourced) ReconcileResources(ctx context.Context, r core.DeviceRef, rc core.ResourceReconcile) (contract.ResourceResult, error) {
	if err := d.begin(ctx, "resources-reconcile", r); err != nil {
		return contract.ResourceResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rs := d.resLocked()
	drift := func() contract.ResourceDrift {
		res := d.result(r)
		res.Requested = rc.Resources
		res.Resources, _ = d.observeLocked(r, sortedGroups(rc.Resources))
		dr := core.DriftOf(res)
		for _, g := range sortedGroups(rs.owned[r.Handle]) {
			if _, asked := rc.Resources[g]; !asked && rs.owned[r.Handle][g] {
				dr.OwnedExtra = append(dr.OwnedExtra, g)
			}
		}
		return dr
	}
	before := drift()
	res := d.result(r)
	if rc.Repair {
		for _, g := range append(append([]string{}, before.MissingRequested...), before.CommandFailure...) {
			res.Changed = append(res.Changed, g)
			if !rs.noStick[g] && !rs.unsupported[g] {
				if rs.groups[r.Handle] == nil {
					rs.groups[r.Handle] = map[string]contract.ResourceState{}
				}
				rs.groups[r.Handle][g] = rc.Resources[g]
			}
		}
	}
	if rc.ReleaseOwnedExtras {
		for _, g := range before.OwnedExtra {
			res.Changed = append(res.Changed, g)
			rs.groups[r.Handle][g] = contract.ResourceEnabled
			delete(rs.owned[r.Handle], g)
		}
	}
	after := drift()
	res.Requested = rc.Resources
	res.Fingerprint = contract.ResourceFingerprint(rc.Resources)
	res.Resources, res.Services = d.observeLocked(r, sortedGroups(rc.Resources))
	res.Drift, res.FinalDrift = &before, &after
	res.Success = after.Empty()
	return res, nil
}

func sortedGroups[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
