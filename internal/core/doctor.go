package core

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// Doctor finding kinds.
const (
	FindingOrphan            = "orphan"               // in a root, unknown to the registry
	FindingMissing           = "missing-from-root"    // in the registry, gone from its root
	FindingForeignState      = "foreign-state-change" // running when it should not be, or the reverse
	FindingStalledTransition = "stalled-transition"   // provisioning/reclaiming past its driver-derived threshold
	FindingProvenanceDrift   = "provenance-drift"     // the device's mark no longer matches
)

// Finding is one discrepancy between the registry and driver reality.
type Finding struct {
	Kind     string
	Platform string
	DeviceID string // empty for orphans
	Handle   string
	Detail   string
	Fixed    bool
	Action   string // what --fix did or would do
	Err      string
}

// DoctorOptions select what Doctor may change. With neither set it only
// reports.
type DoctorOptions struct {
	Fix          bool
	PurgeOrphans bool
}

// stallThreshold is how long a transition may take before doctor calls it
// stalled: three times the driver's own estimate plus slack, because
// measured boot times vary by a third.
func stallThreshold(drv Driver, st DeviceState) time.Duration {
	op := OpReclaim
	if st == StateProvisioning {
		op = OpBoot
	}
	return 3*(drv.Estimate(op)+drv.Estimate(OpProvision)) + 2*time.Minute
}

// MaintenanceDesk is the operator's maintenance counter: doctor's
// reconnaissance and repairs (Doctor) and the reset of the daemon's
// devices (Nuke, nuke.go). Each entry enters the decision section as the
// engine's own entries do. Engine.Maintenance hands one out; the zero
// value is not usable.
type MaintenanceDesk struct{ e *Engine }

// Maintenance is the doctor and reset desk (internal/daemon uses it).
func (e *Engine) Maintenance() MaintenanceDesk { return MaintenanceDesk{e} }

// doctorBook holds doctor's repair rules: how a finding is fixed once
// Doctor re-checked it. It keeps no state between passes; its Locked
// methods run only inside the decision section, and it reaches the engine
// only through doctorWork and the books it repairs through.
type doctorBook struct {
	eng        doctorWork
	reg        *registry
	health     *healthBook     // a lost leased device's lease ends (giveUpLocked)
	quarantine *quarantineBook // a stalled or drifted device is taken out of service
}

// doctorWork is the engine as doctor's repairs see it: the section,
// facts and commits, the planner, and the device-operation path,
// satisfied by *Engine.
type doctorWork interface {
	section(f func())
	emitLocked(ev events.Event)
	commitLocked(c Changes) error
	scheduleLocked()
	shutdownOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	runOp(ctx context.Context, o *deviceOp) (begun bool, err error)
	runUnrecorded(ctx context.Context, info OpInfo, f func(ctx context.Context) error) error
}

// Doctor compares the registry with what each driver finds in its root and
// reports (and with Fix, repairs) the discrepancies. It is reconnaissance:
// it shells out once per platform and may run alongside live work.
func (m MaintenanceDesk) Doctor(ctx context.Context, o DoctorOptions) ([]Finding, error) {
	e := m.e
	ctx, done, ok := e.enterPass(ctx, &e.mu, &e.halt)
	if !ok {
		return nil, ErrStopping
	}
	defer done()
	var findings []Finding
	for _, p := range e.Platforms() {
		drv := e.drivers[p]
		obs, err := drv.ListManaged(ctx)
		if err != nil {
			findings = append(findings, Finding{Kind: "driver-error", Platform: p, Detail: err.Error()})
			continue
		}
		byHandle := map[string]Observed{}
		for _, ob := range obs {
			byHandle[ob.Handle] = ob
		}
		var fs []Finding
		e.section(func() {
			known := map[string]bool{}
			now := e.clock.Now()
			for _, d := range e.Sorted() {
				if d.Platform != p {
					continue
				}
				known[d.Handle] = true
				if d.Handle == "" {
					continue // never reached the driver
				}
				ob, present := byHandle[d.Handle]
				f, ok := diagnose(d, ob, present, e.reg.opLocks[d.ID] != "", e.reg.leased(d.ID), now, drv)
				if !ok {
					continue
				}
				fs = append(fs, f)
			}
			for _, ob := range obs {
				if !known[ob.Handle] {
					fs = append(fs, Finding{Kind: FindingOrphan, Platform: p, Handle: ob.Handle,
						Detail: "in simlock's root but not in the registry", Action: "destroy (with purge-orphans)"})
				}
			}
		})
		if o.Fix || o.PurgeOrphans {
			for i := range fs {
				e.doctor.fixFinding(ctx, drv, &fs[i], o)
			}
		}
		findings = append(findings, fs...)
	}
	sort.SliceStable(findings, func(i, j int) bool { return findings[i].Platform < findings[j].Platform })
	return findings, nil
}

// diagnose is doctor's verdict on registry record d against ob, the
// driver's reading of it (present: the root has it), and whether there is
// a finding at all; locked says an operation holds the device, leased that
// a lease does. Like the planner it decides from what it is given only.
func diagnose(d DeviceRecord, ob Observed, present, locked, leased bool, now time.Time, drv Driver) (Finding, bool) {
	f := Finding{Platform: d.Platform, DeviceID: d.ID, Handle: d.Handle}
	switch {
	case (d.State == StateProvisioning || d.State == StateReclaiming) && now.Sub(d.StateSince) > stallThreshold(drv, d.State):
		f.Kind = FindingStalledTransition
		f.Detail = fmt.Sprintf("%s for %s", d.State, now.Sub(d.StateSince).Round(time.Second))
		if locked {
			f.Detail += " (its operation is still in flight)"
		} else {
			f.Action = "quarantine"
		}
	case !present:
		f.Kind = FindingMissing
		f.Detail = fmt.Sprintf("registry says %s, the root has no such device", d.State)
		f.Action = "forget"
		if leased {
			f.Action = "release lease as device-lost"
		}
	case ob.Run == RunRunning && ob.MarkOK != nil && !*ob.MarkOK:
		f.Kind = FindingProvenanceDrift
		f.Detail = "the device's provenance mark does not match"
		f.Action = "quarantine"
		if leased {
			f.Action = "release lease as device-lost"
		}
	case d.State == StateReady && ob.Run == RunStopped:
		f.Kind = FindingForeignState
		f.Detail = "registry says ready, the device is not running"
		f.Action = "mark shutdown"
	case d.State == StateShutdown && ob.Run == RunRunning:
		f.Kind = FindingForeignState
		f.Detail = "registry says shutdown, the device is running"
		f.Action = "shut down"
	case d.State == StateLeased && ob.Run == RunStopped:
		f.Kind = FindingForeignState
		f.Detail = "leased but not running; the health monitor recovers it"
	default:
		return Finding{}, false
	}
	if locked && f.Kind != FindingStalledTransition {
		f.Action = ""
		f.Detail += " (busy; left alone)"
	}
	return f, true
}

func (b *doctorBook) fixFinding(ctx context.Context, drv Driver, f *Finding, o DoctorOptions) {
	if f.Kind == FindingOrphan {
		if !o.PurgeOrphans {
			return
		}
		// Reporting can live with a proof taken at start; destroying
		// cannot: re-prove the root is ours right before.
		if err := drv.RevalidateRoot(ctx); err != nil {
			f.Err = "root no longer proven to be simlock's: " + err.Error()
			return
		}
		if err := b.eng.runUnrecorded(ctx, OpInfo{Kind: OpKindDestroy, Lock: "doctor", Platform: f.Platform, Handle: f.Handle}, func(ctx context.Context) error {
			return drv.Destroy(ctx, DeviceRef{Handle: f.Handle, Name: f.Handle})
		}); err != nil {
			f.Err = err.Error()
			return
		}
		f.Fixed = true
		b.eng.section(func() {
			b.eng.emitLocked(events.Event{Type: "device.orphan-purged", Platform: f.Platform, Data: map[string]any{"handle": f.Handle}})
		})
		return
	}
	if !o.Fix || f.Action == "" {
		return
	}
	var shutdown *deviceOp
	b.eng.section(func() {
		d, ok := b.reg.devices[f.DeviceID]
		if !ok || b.reg.opLocks[d.ID] != "" {
			f.Err = "changed since it was inspected; run doctor again"
			return
		}
		var lease *LeaseRecord
		for _, l := range b.reg.leases {
			if l.Holds(d.ID) {
				lc := *l
				lease = &lc
			}
		}
		switch {
		case lease != nil && (f.Kind == FindingMissing || f.Kind == FindingProvenanceDrift):
			b.health.giveUpLocked(*lease, *d, f.Kind)
		case f.Kind == FindingMissing:
			if err := b.eng.commitLocked(Changes{DeleteDevices: []string{d.ID}}); err != nil {
				f.Err = err.Error()
				return
			}
		case f.Kind == FindingStalledTransition || f.Kind == FindingProvenanceDrift:
			if err := b.quarantine.enterLocked(d.ID, f.Kind, OpKindReclaim); err != nil {
				f.Err = err.Error()
				return
			}
		case f.Kind == FindingForeignState && d.State == StateReady:
			if _, err := b.reg.setState(d.ID, StateShutdown); err != nil {
				f.Err = err.Error()
				return
			}
		case f.Kind == FindingForeignState && d.State == StateShutdown:
			// Driver work: the op executor runs it after this section.
			shutdown = b.eng.shutdownOp(d.ID, "doctor", "shutdown-failed", nil)
			return
		default:
			return
		}
		b.fixedLocked(f, *d)
	})
	if shutdown != nil {
		begun, err := b.eng.runOp(ctx, shutdown)
		switch {
		case !begun:
			f.Err = "changed since it was inspected; run doctor again"
		case err != nil:
			f.Err = err.Error()
		default:
			b.eng.section(func() {
				if d, ok := b.reg.devices[f.DeviceID]; ok {
					b.fixedLocked(f, *d)
				}
			})
		}
	}
}

func (b *doctorBook) fixedLocked(f *Finding, d DeviceRecord) {
	f.Fixed = true
	b.eng.emitLocked(events.Event{Type: "doctor.fixed", DeviceID: d.ID, Platform: d.Platform, Reason: f.Kind, Data: map[string]any{"action": f.Action}})
	b.eng.scheduleLocked()
}
