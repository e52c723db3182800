package core

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core/events"
)

// CleanupView is the read-only picture cleanup rules decide from.
type CleanupView struct {
	Now     time.Time
	Devices []DeviceRecord
	Leased  map[string]bool // device id -> has a lease
	Claimed map[string]bool // device id -> the general pool may not use it (an operation holds it, ...)
	Keep    map[string]bool // device id -> counted toward a warm-pool target
	// ShutdownOnly marks idle slot devices: not the general pool's, yet the
	// idle-shutdown rule may stop them; nothing destroys them (ADR 0062).
	ShutdownOnly map[string]bool
	// DiskFree is free space on the devices' volume; DiskKnown is false
	// when it could not be read.
	DiskFree  uint64
	DiskKnown bool
	Policy    CleanupPolicy
}

// Pressure reports whether free disk space is below the threshold.
func (v CleanupView) Pressure() bool {
	return v.DiskKnown && v.DiskFree < v.Policy.DiskPressureFreeBytes
}

// Idle is how long a device has sat unused.
func (v CleanupView) Idle(d DeviceRecord) time.Duration {
	t := d.CreatedAt
	for _, x := range []time.Time{d.LastReleasedAt, d.LastLeasedAt, d.StateSince} {
		if x.After(t) {
			t = x
		}
	}
	return v.Now.Sub(t)
}

// Cleanup actions.
const (
	ActionShutdown = "shutdown"
	ActionDestroy  = "destroy"
)

// CleanupProposal is one action a rule proposes.
type CleanupProposal struct {
	Rule     string
	DeviceID string
	Action   string
	Reason   string
}

// CleanupRule is pure decision logic over a view.
type CleanupRule interface {
	Name() string
	Propose(v CleanupView) []CleanupProposal
}

// CleanupRules is the static rule list; adding a rule is a new type and one
// line here.
func CleanupRules() []CleanupRule {
	return []CleanupRule{idleShutdown{}, idleDestroy{}}
}

// idleShutdown stops warm devices idle past T1 to give RAM back.
type idleShutdown struct{}

func (idleShutdown) Name() string { return "idle-shutdown" }

func (idleShutdown) Propose(v CleanupView) []CleanupProposal {
	var out []CleanupProposal
	for _, d := range v.Devices {
		if d.State == StateReady && v.Idle(d) > v.Policy.IdleShutdown {
			out = append(out, CleanupProposal{Rule: "idle-shutdown", DeviceID: d.ID, Action: ActionShutdown,
				Reason: fmt.Sprintf("ready and idle for %s (more than %s)", v.Idle(d).Round(time.Second), v.Policy.IdleShutdown)})
		}
	}
	return out
}

// idleDestroy deletes devices idle past T2 to give disk back; under disk
// pressure it uses T1, reading the pressure off the view itself rather than
// depending on the disk.pressure-detected event.
type idleDestroy struct{}

func (idleDestroy) Name() string { return "idle-destroy" }

func (idleDestroy) Propose(v CleanupView) []CleanupProposal {
	limit := v.Policy.IdleDestroy
	why := ""
	if v.Pressure() {
		limit = v.Policy.IdleShutdown
		why = " under disk pressure"
	}
	var out []CleanupProposal
	for _, d := range v.Devices {
		if (d.State == StateReady || d.State == StateShutdown) && v.Idle(d) > limit {
			out = append(out, CleanupProposal{Rule: "idle-destroy", DeviceID: d.ID, Action: ActionDestroy,
				Reason: fmt.Sprintf("idle for %s (more than %s%s)", v.Idle(d).Round(time.Second), limit, why)})
		}
	}
	return out
}

// reconcile collects every rule's proposals, keeps one per device (destroy
// beats shutdown), drops obviously unsafe targets and orders the result.
func reconcile(v CleanupView, rules []CleanupRule) []CleanupProposal {
	by := map[string]CleanupProposal{}
	for _, r := range rules {
		for _, p := range r.Propose(v) {
			if v.Leased[p.DeviceID] || v.Claimed[p.DeviceID] || v.Keep[p.DeviceID] {
				continue
			}
			if v.ShutdownOnly[p.DeviceID] && p.Action != ActionShutdown {
				continue
			}
			if cur, ok := by[p.DeviceID]; ok && cur.Action == ActionDestroy {
				continue
			}
			by[p.DeviceID] = p
		}
	}
	out := make([]CleanupProposal, 0, len(by))
	for _, p := range by {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceID < out[j].DeviceID })
	return out
}

// CleanupResult is one proposal and what became of it.
type CleanupResult struct {
	CleanupProposal
	Executed bool
	Skipped  string // why the executor refused it on re-validation
	Err      string
}

// cleanupBook is what the cleanup passes keep between passes: the last
// disk pressure reading, so the pressure fact is edge-triggered. Its
// methods run inside the decision section, but for readDisk, which a pass
// calls before it enters.
type cleanupBook struct {
	policy   CleanupPolicy
	log      *slog.Logger
	diskFree func() (uint64, error) // nil: unknown, disk pressure never detected
	pressure bool                   // last disk pressure reading

	eng     cleanupWork
	reg     *registry
	pool    *pool
	drivers map[string]Driver
}

// cleanupWork is the engine as a cleanup pass's executor sees it: the
// section, facts and the device-operation path, satisfied by *Engine.
type cleanupWork interface {
	section(f func())
	emitLocked(ev events.Event)
	destroyOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	shutdownOp(id, lock, failReason string, done func(d DeviceRecord)) *deviceOp
	runOp(ctx context.Context, o *deviceOp) (begun bool, err error)
}

func newCleanupBook(p CleanupPolicy, d Deps, eng cleanupWork, reg *registry, pl *pool, drivers map[string]Driver) cleanupBook {
	return cleanupBook{policy: p, log: d.Logger, diskFree: d.DiskFree, eng: eng, reg: reg, pool: pl, drivers: drivers}
}

// viewLocked is the picture the cleanup rules decide from: the registry
// now, keep (the devices the warm targets account for), and the disk
// reading.
func (b *cleanupBook) viewLocked(now time.Time, keep map[string]bool, free uint64, known bool) CleanupView {
	v := CleanupView{Now: now, Leased: map[string]bool{}, Claimed: map[string]bool{}, Keep: keep,
		ShutdownOnly: map[string]bool{}, DiskFree: free, DiskKnown: known, Policy: b.policy}
	for _, d := range b.reg.devices {
		v.Devices = append(v.Devices, *d)
		// Cleanup acts only on idle inventory the general pool owns, and
		// stops (only) idle slot devices.
		switch {
		case b.pool.slotYields(d):
			v.ShutdownOnly[d.ID] = true
		case !b.pool.general(d):
			v.Claimed[d.ID] = true
		}
	}
	for _, l := range b.reg.leases {
		for _, id := range l.DeviceIDs() {
			v.Leased[id] = true
		}
	}
	sortDevices(v.Devices)
	return v
}

func (b *cleanupBook) readDisk() (uint64, bool) {
	if b.diskFree == nil {
		return 0, false
	}
	free, err := b.diskFree()
	if err != nil {
		b.log.Warn("cleanup: read free disk space", "err", err)
		return 0, false
	}
	return free, true
}

// notePressureLocked records v's disk pressure reading and emits one
// disk.pressure-detected per crossing into pressure.
func (b *cleanupBook) notePressureLocked(v CleanupView, free uint64, emit func(events.Event)) {
	if p := v.Pressure(); p != b.pressure {
		b.pressure = p
		if p {
			emit(events.Event{Type: "disk.pressure-detected", Data: map[string]any{
				"freeBytes": free, "thresholdBytes": b.policy.DiskPressureFreeBytes}})
		}
	}
}

// CleanupDesk is the cleanup reaper's counter: the daemon starts the
// reaper and runs a pass on request. Each entry enters the decision
// section as the engine's own entries do. Engine.Cleanup hands one out;
// the zero value is not usable.
type CleanupDesk struct{ e *Engine }

// Cleanup is the cleanup book's desk (internal/daemon uses it).
func (e *Engine) Cleanup() CleanupDesk { return CleanupDesk{e} }

// RunCleanup runs one reconciliation pass. rule, when set, limits it to one
// named rule; dryRun only reports the proposals.
func (c CleanupDesk) RunCleanup(ctx context.Context, dryRun bool, rule string) ([]CleanupResult, error) {
	e := c.e
	rules := CleanupRules()
	if rule != "" {
		var sel []CleanupRule
		var names []string
		for _, r := range rules {
			names = append(names, r.Name())
			if r.Name() == rule {
				sel = append(sel, r)
			}
		}
		if len(sel) == 0 {
			return nil, fmt.Errorf("%w: no cleanup rule %q (rules: %v)", ErrBadRequest, rule, names)
		}
		rules = sel
	}
	ctx, done, ok := e.enterPass(ctx, &e.mu, &e.halt)
	if !ok {
		return nil, ErrStopping
	}
	defer done()
	free, known := e.cleanup.readDisk()
	var props []CleanupProposal
	e.section(func() {
		v := e.cleanup.viewLocked(e.clock.Now(), e.warm.keep(e.viewLocked()), free, known)
		e.cleanup.notePressureLocked(v, free, e.emitLocked)
		props = reconcile(v, rules)
	})
	out := make([]CleanupResult, 0, len(props))
	for _, p := range props {
		r := CleanupResult{CleanupProposal: p}
		if !dryRun {
			r.Executed, r.Skipped, r.Err = e.cleanup.execute(ctx, p)
		}
		out = append(out, r)
	}
	return out, nil
}

// executeCleanup re-validates a proposal against the registry as it is
// now (still managed, not leased, not locked, in a state the action
// applies to) before the op executor runs it on this goroutine.
func (b *cleanupBook) execute(ctx context.Context, p CleanupProposal) (executed bool, skipped, errText string) {
	var o *deviceOp
	b.eng.section(func() {
		cur, ok := b.reg.devices[p.DeviceID]
		switch {
		case !ok:
			skipped = "no longer managed"
		case b.reg.opLocks[cur.ID] != "":
			skipped = "busy with " + b.reg.opLocks[cur.ID]
		case b.reg.leased(cur.ID):
			skipped = "leased"
		case p.Action == ActionShutdown && cur.State != StateReady,
			p.Action == ActionDestroy && cur.State != StateReady && cur.State != StateShutdown:
			skipped = "now " + string(cur.State)
		case p.Action == ActionShutdown && b.pool.slotYields(cur):
			// An idle slot device: stopped, never destroyed (ADR 0062).
		case !b.pool.general(cur):
			skipped = "not the general pool's"
		case b.drivers[cur.Platform] == nil:
			skipped = "no driver"
		}
	})
	if skipped != "" {
		return false, skipped, ""
	}
	executedFact := func(d DeviceRecord) {
		b.eng.emitLocked(events.Event{Type: "cleanup.executed", DeviceID: d.ID, Platform: d.Platform, Reason: p.Reason,
			Data: map[string]any{"rule": p.Rule, "action": p.Action}})
	}
	if p.Action == ActionDestroy {
		o = b.eng.destroyOp(p.DeviceID, "cleanup", p.Action+"-failed", func(d DeviceRecord) {
			b.eng.emitLocked(events.Event{Type: "device.destroyed", DeviceID: d.ID, Platform: d.Platform, Reason: p.Rule})
			executedFact(d)
		})
	} else {
		o = b.eng.shutdownOp(p.DeviceID, "cleanup", p.Action+"-failed", executedFact)
	}
	begun, err := b.eng.runOp(ctx, o)
	if !begun {
		// Taken by something else (or the engine is stopping) since the
		// check above.
		return false, err.Error(), ""
	}
	if err != nil {
		return false, "", err.Error()
	}
	return true, "", ""
}

// StartReaper runs cleanup passes on its triggers: lease.released,
// disk.pressure-detected and daemon.started facts, plus a periodic tick.
// It returns when ctx ends or the engine stops; Stop waits for it.
func (c CleanupDesk) StartReaper(ctx context.Context) {
	e := c.e
	if e.bus == nil || !e.enterLoop(&e.mu, &e.halt) {
		return
	}
	ch, cancel := e.bus.Subscribe(256)
	ctx, cancelCtx := context.WithCancel(ctx)
	stopAfter := context.AfterFunc(e.bg, cancelCtx) // a stop that gives up waiting aborts a pass too
	go func() {
		defer e.loops.Done()
		defer cancel()
		defer cancelCtx()
		defer stopAfter()
		var tick <-chan time.Time
		arm := func() {
			if e.cfg.Cleanup.Interval > 0 {
				tick = e.clock.After(e.cfg.Cleanup.Interval)
			}
		}
		arm()
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.quit:
				return
			case ev := <-ch:
				switch ev.Type {
				case "lease.released", "disk.pressure-detected", "daemon.started":
				default:
					continue
				}
			case <-tick:
				arm()
			}
			if _, err := c.RunCleanup(ctx, false, ""); err != nil && err != ErrStopping {
				e.log.Warn("cleanup pass failed", "err", err)
			}
		}
	}()
}

// enterPass is enterLoop for a pass that runs on its caller's context: the
// context it returns also ends when a stop gives up waiting, so a hung
// driver call cannot hold Stop past its deadline. done must be called.
func (r *running) enterPass(ctx context.Context, mu *sync.Mutex, h *halt) (context.Context, func(), bool) {
	if !r.enterLoop(mu, h) {
		return ctx, func() {}, false
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.bg, cancel)
	return ctx, func() { stop(); cancel(); r.loops.Done() }, true
}

// enterLoop registers a pass or loop with the engine's wait group, unless
// the engine is stopping. Registering under the lock (mu, the decision
// section) after the stopping check means nothing can join after Stop
// began waiting. They are the background work's own (running), given the
// section and its halt.
func (r *running) enterLoop(mu *sync.Mutex, h *halt) bool {
	mu.Lock()
	defer mu.Unlock()
	if h.stopping {
		return false
	}
	r.loops.Add(1)
	return true
}
