package core

import (
	"context"
	"errors"

	"github.com/simlock/simlock/internal/core/events"
)

// ErrMaintenance refuses work while a reset runs.
var ErrMaintenance = errors.New("an operator reset is in progress")

// NukeReport says what a reset did.
type NukeReport struct {
	ReleasedLeases    []string
	CancelledRequests []string
	DestroyedDevices  []string
	Failed            map[string]string // device id -> error
}

// Nuke resets the daemon's devices: every lease released, every pending
// request cancelled, in-flight purges drained (a device mid-reclaim would
// otherwise be skipped by the very reset meant to take it down), then every
// managed device destroyed, and every golden its driver keeps (they are
// not in the registry; each is reported as destroyed under its planner id,
// golden:<platform>:<handle>). Requests arriving meanwhile are refused.
func (m MaintenanceDesk) Nuke(ctx context.Context) (NukeReport, error) {
	e := m.e
	rep := NukeReport{Failed: map[string]string{}}
	var cancelled []*waiter
	var busy bool
	e.section(func() {
		if e.halt.maintenance {
			busy = true
			return
		}
		e.halt.maintenance = true
		for _, id := range sortedLeaseIDs(e.reg.leases) {
			if e.releaseLocked(*e.reg.leases[id], "reset") == nil {
				rep.ReleasedLeases = append(rep.ReleasedLeases, id)
			}
		}
		for _, w := range e.queue.Entries() {
			if !w.working {
				cancelled = append(cancelled, w)
				rep.CancelledRequests = append(rep.CancelledRequests, w.requester)
			} else {
				w.abandoned = true
			}
		}
		for _, w := range cancelled {
			e.queue.remove(w)
			e.emitLocked(events.Event{Type: "request.cancelled", RequesterID: w.requester, Platform: w.spec.Platform,
				Reason: "reset", Data: e.reqs.refusalData(w.owner, ErrCancelled)})
		}
		e.quarantine.stopTimersLocked()
	})
	if busy {
		return rep, ErrMaintenance
	}
	defer e.section(func() {
		e.halt.maintenance = false
		e.goldens.forgetLocked()
		e.emitLocked(events.Event{Type: "daemon.reset", Data: map[string]any{
			"releasedLeases": len(rep.ReleasedLeases), "destroyedDevices": len(rep.DestroyedDevices), "failed": len(rep.Failed)}})
		e.scheduleLocked()
	})
	for _, w := range cancelled {
		w.deliver(result{err: ErrCancelled})
	}
	// Drain: every purge, boot or provision in flight settles first.
	e.wg.Wait()
	for _, d := range e.Devices() {
		if _, ok := e.drivers[d.Platform]; !ok {
			continue
		}
		// Reported from this goroutine only; a settlement the store
		// refused is retried later by the executor and must not write here.
		var cerr error
		first := true
		o := e.destroyOp(d.ID, "nuke", "destroy-failed", func(d DeviceRecord) {
			e.emitLocked(events.Event{Type: "device.destroyed", DeviceID: d.ID, Platform: d.Platform, Reason: "reset"})
		})
		settle := o.settle
		o.settle = func(o *deviceOp, err error) error {
			if err != nil {
				return nil // a reset reports a failed destroy and leaves the device as it was
			}
			serr := settle(o, err)
			if first {
				cerr, first = serr, false
			}
			return serr
		}
		begun, err := e.runOp(ctx, o)
		switch {
		case !begun:
			rep.Failed[d.ID] = "busy"
		case err != nil:
			rep.Failed[d.ID] = err.Error()
		case cerr != nil:
			rep.Failed[d.ID] = cerr.Error()
		default:
			rep.DestroyedDevices = append(rep.DestroyedDevices, d.ID)
		}
	}
	for _, p := range e.Platforms() {
		gr, ok := e.drivers[p].(GoldenRemover)
		if !ok {
			continue
		}
		removed, err := gr.RemoveGoldens(ctx)
		for _, h := range removed {
			rep.DestroyedDevices = append(rep.DestroyedDevices, "golden:"+p+":"+h)
		}
		if err != nil {
			rep.Failed["golden:"+p] = err.Error()
		}
	}
	return rep, nil
}
