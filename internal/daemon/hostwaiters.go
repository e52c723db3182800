package daemon

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// Host-wide fairness (ADR 0061). This home publishes its requests held
// back only by a host limit in the host registry's waiters table, on every
// change of the engine's account (never per poll); it reads the other
// homes' waiters each time the host watcher sees the generation move and
// hands them to the engine as HostUsage.Waiting, where they count as demand
// wherever warmth is weighed. A dead owner's rows are ignored and pruned.

// hostWaiters is this daemon's side of the waiters table.
type hostWaiters struct {
	kick chan struct{} // the engine's account changed
	done chan struct{} // closed when publish has cleared this home's rows
	// started: publishWaiters runs (set by convergence's goroutine; read
	// by device operations and by shutdown).
	started atomic.Bool

	// writeMu orders writes of this home's rows; last is what was last
	// written (written: at all), closed: the rows were cleared at stop.
	writeMu sync.Mutex
	last    []core.HostWait
	written bool
	closed  bool

	mu     sync.Mutex
	live   []hostreg.WaiterStatus // every home's live waiters, last read
	others map[string]int         // other homes' live waiters, by platform
}

// setupHostWaiters subscribes to the engine's account and to the host
// watcher. Call it before setupHostUsage: its watcher subscriber then runs
// first, so the push that follows a generation move carries the claims and
// the waiters of the same read (a waiter just served and its new claim are
// never counted twice).
func (d *Daemon) setupHostWaiters() {
	hw := &hostWaiters{kick: make(chan struct{}, 1), done: make(chan struct{}), others: map[string]int{}}
	d.waiters = hw
	d.engine.OnHostWaitChange(func() {
		select {
		case hw.kick <- struct{}{}:
		default:
		}
	})
	d.onHostChange(func([]hostreg.Status) { d.readWaiters(context.Background(), false) })
}

// othersWaiting is what pushHostUsage hands the engine.
func (d *Daemon) othersWaiting() map[string]int {
	hw := d.waiters
	if hw == nil {
		return nil
	}
	hw.mu.Lock()
	defer hw.mu.Unlock()
	return maps.Clone(hw.others)
}

// readWaiters reads every waiter row, keeps the live ones and prunes the
// rows of owners proven gone; with push it tells the engine when the other
// homes' share changed (the watcher's own push follows otherwise). A failed
// read keeps the last view.
func (d *Daemon) readWaiters(ctx context.Context, push bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all, err := d.host.Waiters(ctx)
	if err != nil {
		d.log.Warn("read the host registry's waiters; keeping the last view", "err", err)
		return
	}
	var live, stale []hostreg.WaiterStatus
	others := map[string]int{}
	for _, w := range all {
		if !w.Live() {
			stale = append(stale, w)
			continue
		}
		live = append(live, w)
		if w.Owner.Home != d.self.Home {
			others[w.Platform] += w.Count
		}
	}
	if len(stale) > 0 {
		if n, err := d.host.PruneWaiters(ctx, stale); err != nil {
			d.log.Warn("prune waiters of owners that are gone", "err", err)
		} else if n > 0 {
			d.log.Info("pruned waiters of owners that are gone", "rows", n, "home", stale[0].Owner.Home, "why", stale[0].Detail)
		}
	}
	hw := d.waiters
	hw.mu.Lock()
	changed := !maps.Equal(hw.others, others)
	hw.live, hw.others = live, others
	hw.mu.Unlock()
	if changed && len(others) > 0 {
		d.log.Info("another home waits for host room", "waiting", others)
	}
	if changed && push {
		d.pushHostUsage()
	}
}

// publishWaiters writes this home's account each time it changes, until
// ctx ends; then it clears this home's rows so no other home yields to a
// daemon that stopped. While other homes' rows are seen it reads them
// again every few polls, so a waiter whose daemon died (it wrote nothing
// more, so the generation may not move) stops counting.
func (d *Daemon) publishWaiters(ctx context.Context) {
	hw := d.waiters
	defer close(hw.done)
	every := time.Duration(d.cfg.Capacity.Host.PollIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	for {
		recheck := d.clock.After(5 * every)
		if err := d.syncWaiters(ctx); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("publish this home's waiters; retrying", "err", err)
			}
			recheck = d.clock.After(every)
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			hw.writeMu.Lock()
			if err := d.host.SetWaiters(cctx, d.self, nil); err != nil {
				d.log.Warn("clear this home's waiters at stop", "err", err)
			}
			hw.closed = true
			hw.writeMu.Unlock()
			cancel()
			return
		case <-hw.kick:
		case <-recheck:
			if len(d.othersWaiting()) > 0 {
				d.readWaiters(ctx, true)
			}
		}
	}
}

// syncWaiters writes the engine's current account when it differs from
// what this home last wrote. It is called by the publisher and before
// every device operation (waitFirstHooks), so a waiter's row is gone
// before the claim of the device that serves it is written.
func (d *Daemon) syncWaiters(ctx context.Context) error {
	hw := d.waiters
	hw.writeMu.Lock()
	defer hw.writeMu.Unlock()
	if hw.closed {
		return nil
	}
	now := d.engine.HostWaits()
	if hw.written && sameHostWaits(now, hw.last) {
		return nil
	}
	if err := d.host.SetWaiters(ctx, d.self, d.waiterRows(now)); err != nil {
		return err
	}
	hw.last, hw.written = now, true
	return nil
}

// waitFirstHooks runs syncWaiters before the claim hooks of each device
// operation. A waiter being served and the claim of its device are two
// writes; written in this order, another daemon's watcher, which reads the
// claims before the waiters, can never count both (that would cost it one
// more warm device for a waiter already served).
type waitFirstHooks struct {
	core.OpHooks
	d *Daemon
}

func (h waitFirstHooks) BeforeOp(ctx context.Context, op core.OpInfo) error {
	if hw := h.d.waiters; hw != nil && hw.started.Load() {
		if err := h.d.syncWaiters(ctx); err != nil && ctx.Err() == nil {
			h.d.log.Warn("publish this home's waiters before a device operation", "device", op.DeviceID, "err", err)
		}
	}
	return h.OpHooks.BeforeOp(ctx, op)
}

func (d *Daemon) waiterRows(ws []core.HostWait) []hostreg.Waiter {
	out := make([]hostreg.Waiter, 0, len(ws))
	for _, w := range ws {
		out = append(out, hostreg.Waiter{Owner: d.self, Platform: w.Platform, Limit: w.Limit, Count: w.Count, Since: w.Since})
	}
	return out
}

func sameHostWaits(a, b []core.HostWait) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Platform != b[i].Platform || a[i].Limit != b[i].Limit || a[i].Count != b[i].Count || !a[i].Since.Equal(b[i].Since) {
			return false
		}
	}
	return true
}

// hostWaitersOut is status.get's list of the host's waiters.
func (d *Daemon) hostWaitersOut() []contract.HostWaiter {
	out := []contract.HostWaiter{}
	hw := d.waiters
	if hw == nil {
		return out
	}
	hw.mu.Lock()
	live := hw.live
	hw.mu.Unlock()
	now := d.clock.Now()
	for _, w := range live {
		out = append(out, contract.HostWaiter{Home: w.Owner.Home, Self: w.Owner.Home == d.self.Home, Platform: w.Platform,
			Limit: w.Limit, Count: w.Count, Since: w.Since, AgeMs: max(0, now.Sub(w.Since).Milliseconds())})
	}
	return out
}
