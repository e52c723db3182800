package claims

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
func (s *System) setupHostWaiters() {
	hw := &hostWaiters{kick: make(chan struct{}, 1), done: make(chan struct{}), others: map[string]int{}}
	s.waiters = hw
	s.hostDesk.OnHostWaitChange(func() {
		select {
		case hw.kick <- struct{}{}:
		default:
		}
	})
	s.OnHostChange(func([]hostreg.Status) { s.readWaiters(context.Background(), false) })
}

// othersWaiting is what pushHostUsage hands the engine.
func (s *System) othersWaiting() map[string]int {
	hw := s.waiters
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
func (s *System) readWaiters(ctx context.Context, push bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all, err := s.host.Waiters(ctx)
	if err != nil {
		s.log.Warn("read the host registry's waiters; keeping the last view", "err", err)
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
		if w.Owner.Home != s.self.Home {
			others[w.Platform] += w.Count
		}
	}
	if len(stale) > 0 {
		if n, err := s.host.PruneWaiters(ctx, stale); err != nil {
			s.log.Warn("prune waiters of owners that are gone", "err", err)
		} else if n > 0 {
			s.log.Info("pruned waiters of owners that are gone", "rows", n, "home", stale[0].Owner.Home, "why", stale[0].Detail)
		}
	}
	hw := s.waiters
	hw.mu.Lock()
	changed := !maps.Equal(hw.others, others)
	hw.live, hw.others = live, others
	hw.mu.Unlock()
	if changed && len(others) > 0 {
		s.log.Info("another home waits for host room", "waiting", others)
	}
	if changed && push {
		s.pushHostUsage()
	}
}

// publishWaiters writes this home's account each time it changes, until
// ctx ends; then it clears this home's rows so no other home yields to a
// daemon that stopped. While other homes' rows are seen it reads them
// again every few polls, so a waiter whose daemon died (it wrote nothing
// more, so the generation may not move) stops counting.
func (s *System) publishWaiters(ctx context.Context) {
	hw := s.waiters
	defer close(hw.done)
	every := time.Duration(s.hostCfg.PollIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	for {
		recheck := s.clock.After(5 * every)
		if err := s.syncWaiters(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("publish this home's waiters; retrying", "err", err)
			}
			recheck = s.clock.After(every)
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			hw.writeMu.Lock()
			if err := s.host.SetWaiters(cctx, s.self, nil); err != nil {
				s.log.Warn("clear this home's waiters at stop", "err", err)
			}
			hw.closed = true
			hw.writeMu.Unlock()
			cancel()
			return
		case <-hw.kick:
		case <-recheck:
			if len(s.othersWaiting()) > 0 {
				s.readWaiters(ctx, true)
			}
		}
	}
}

// syncWaiters writes the engine's current account when it differs from
// what this home last wrote. It is called by the publisher and before
// every device operation (waitFirstHooks), so a waiter's row is gone
// before the claim of the device that serves it is written.
func (s *System) syncWaiters(ctx context.Context) error {
	hw := s.waiters
	hw.writeMu.Lock()
	defer hw.writeMu.Unlock()
	if hw.closed {
		return nil
	}
	now := s.hostDesk.HostWaits()
	if hw.written && sameHostWaits(now, hw.last) {
		return nil
	}
	if err := s.host.SetWaiters(ctx, s.self, s.waiterRows(now)); err != nil {
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
	s *System
}

func (h waitFirstHooks) BeforeOp(ctx context.Context, op core.OpInfo) error {
	if hw := h.s.waiters; hw != nil && hw.started.Load() {
		if err := h.s.syncWaiters(ctx); err != nil && ctx.Err() == nil {
			h.s.log.Warn("publish this home's waiters before a device operation", "device", op.DeviceID, "err", err)
		}
	}
	return h.OpHooks.BeforeOp(ctx, op)
}

func (s *System) waiterRows(ws []core.HostWait) []hostreg.Waiter {
	out := make([]hostreg.Waiter, 0, len(ws))
	for _, w := range ws {
		out = append(out, hostreg.Waiter{Owner: s.self, Platform: w.Platform, Limit: w.Limit, Count: w.Count, Since: w.Since})
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
func (s *System) hostWaitersOut() []contract.HostWaiter {
	out := []contract.HostWaiter{}
	hw := s.waiters
	if hw == nil {
		return out
	}
	hw.mu.Lock()
	live := hw.live
	hw.mu.Unlock()
	now := s.clock.Now()
	for _, w := range live {
		out = append(out, contract.HostWaiter{Home: w.Owner.Home, Self: w.Owner.Home == s.self.Home, Platform: w.Platform,
			Limit: w.Limit, Count: w.Count, Since: w.Since, AgeMs: max(0, now.Sub(w.Since).Milliseconds())})
	}
	return out
}
