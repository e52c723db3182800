package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

// Managed-slot timing. The daemon ends an execution's lease about 10 s
// after its owner's last heartbeat, so a beat every 2 s survives a few lost
// ones. The release at the end waits as long as the daemon may take to
// answer it (its settle wait plus the registry write behind the
// registry's busy timeout, one contract constant), so the proxy does not
// report a failure the daemon then turns into a success, and still never
// hangs its launcher for long.
const (
	slotHeartbeatEvery = 2 * time.Second
	slotReleaseWait    = time.Duration(contract.SlotReleaseReplyBudgetMs) * time.Millisecond
)

// SlotOptions make the MCP session one execution of a managed slot.
type SlotOptions struct {
	// Config is the validated launch configuration (LoadSlotConfig).
	Config contract.SlotLaunchConfig
	// Backend reaches the slot operations (default: the daemon, through
	// the session's client).
	Backend SlotBackend
	// OwnerWatch ends the execution when its owner is gone (default:
	// executionOwnerPid, or the launching parent, polled every second).
	OwnerWatch ports.ParentWatch
	// HeartbeatEvery and ReleaseWait override the timing (tests).
	HeartbeatEvery time.Duration
	ReleaseWait    time.Duration
}

// SlotBackend is what an execution needs from the daemon.
type SlotBackend interface {
	Acquire(ctx context.Context, in contract.SlotAcquireIn) (contract.ManagedSlotsResult, error)
	Heartbeat(ctx context.Context, in contract.SlotHeartbeatIn) (contract.SlotHeartbeatOut, error)
	Release(ctx context.Context, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error)
}

// scopeReporter is a SlotBackend that also reports, while an acquisition
// runs, the key of the scope the daemon admitted (the scope-resolved
// progress push), so a failure the proxy decides itself after that point
// still names the scope.
type scopeReporter interface {
	AcquireReporting(ctx context.Context, in contract.SlotAcquireIn, resolved func(scopeKey string)) (contract.ManagedSlotsResult, error)
}

// daemonSlots is the SlotBackend over the session's client. Only the
// acquisition may start a daemon: once the execution runs, a daemon that
// went away is waited for, never replaced by this proxy.
type daemonSlots struct{ s *session }

func (d daemonSlots) Acquire(ctx context.Context, in contract.SlotAcquireIn) (contract.ManagedSlotsResult, error) {
	c, err := d.s.conn(ctx, true)
	if err != nil {
		return contract.ManagedSlotsResult{}, err
	}
	return client.Do(ctx, c, contract.SlotAcquire, in)
}

func (d daemonSlots) AcquireReporting(ctx context.Context, in contract.SlotAcquireIn, resolved func(string)) (contract.ManagedSlotsResult, error) {
	c, err := d.s.conn(ctx, true)
	if err != nil {
		return contract.ManagedSlotsResult{}, err
	}
	var out contract.ManagedSlotsResult
	err = c.Call(ctx, contract.SlotAcquire.Name, in, &out, func(method string, params json.RawMessage) {
		var p contract.Progress
		if method == contract.NotifyProgress && json.Unmarshal(params, &p) == nil && p.Phase == contract.SlotPhaseScopeResolved && p.ScopeKey != "" {
			resolved(p.ScopeKey)
		}
	})
	return out, err
}

func (d daemonSlots) Heartbeat(ctx context.Context, in contract.SlotHeartbeatIn) (contract.SlotHeartbeatOut, error) {
	c, err := d.s.conn(ctx, false)
	if err != nil {
		return contract.SlotHeartbeatOut{}, err
	}
	return client.Do(ctx, c, contract.SlotHeartbeat, in)
}

func (d daemonSlots) Release(ctx context.Context, in contract.SlotReleaseIn) (contract.SlotReleaseOut, error) {
	c, err := d.s.conn(ctx, false)
	if err != nil {
		return contract.SlotReleaseOut{}, err
	}
	return client.Do(ctx, c, contract.SlotRelease, in)
}

// slotExec is the execution's state: the acquisition result, the lease it
// holds, and whether the daemon is away or the execution has ended.
type slotExec struct {
	o     SlotOptions
	be    SlotBackend
	log   *slog.Logger
	clock ports.Clock
	token string

	mu      sync.Mutex
	result  contract.ManagedSlotsResult
	leaseID string
	// awaySince is set while heartbeats cannot reach a daemon.
	awaySince    time.Time
	awayAttempts int
	awayErr      string
	// awayDials is the session's dial count when the daemon went away; a
	// re-bind over a new connection means the daemon restarted.
	awayDials int
	// notice is said once, on the next tool call after a re-bind.
	notice    string
	dials     func() int
	ended     *contract.SlotExecutionEnded
	endReason string
	hb        ports.Timer
	closing   bool
}

func newSlotExec(o SlotOptions, be SlotBackend, clock ports.Clock, log *slog.Logger) *slotExec {
	if o.HeartbeatEvery <= 0 {
		o.HeartbeatEvery = slotHeartbeatEvery
	}
	if o.ReleaseWait <= 0 {
		o.ReleaseWait = slotReleaseWait
	}
	return &slotExec{o: o, be: be, clock: clock, log: log.With("managedSlot", o.Config.Requests[0].SlotIndex),
		token: newOwnerToken()}
}

// newOwnerToken names one execution; a fresh one per process, so a later
// execution on the same slot never passes for this one.
func newOwnerToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "exec-" + hex.EncodeToString(b)
}

// acquire runs slot.acquire under the preparation deadline, aborted early
// when stdin ends or the owner goes (abort) or ctx ends (a signal). Its
// outcome, ready or failed, is what the server then publishes.
func (x *slotExec) acquire(ctx context.Context, abort <-chan string) {
	cfg := x.o.Config
	prep := time.Duration(cfg.EffectivePreparationTimeoutMs()) * time.Millisecond
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tctx, tcancel := context.WithTimeoutCause(actx, prep, errPrepTimeout)
	defer tcancel()
	go func() {
		select {
		case why := <-abort:
			cancel(fmt.Errorf("%w: %s", errAcquireAborted, why))
		case <-tctx.Done():
		}
	}()
	start := time.Now()
	var smu sync.Mutex
	var scopeKey string
	in := contract.SlotAcquireIn{Config: cfg, OwnerToken: x.token}
	var res contract.ManagedSlotsResult
	var err error
	if r, ok := x.be.(scopeReporter); ok {
		res, err = r.AcquireReporting(tctx, in, func(k string) {
			smu.Lock()
			scopeKey = k
			smu.Unlock()
		})
	} else {
		res, err = x.be.Acquire(tctx, in)
	}
	if err == nil && res.Outcome == contract.SlotOutcomeReady && (len(res.Slots) == 0 || res.Slots[0].LeaseID == "") {
		err = contract.Errorf(contract.CodeInternal, "the daemon answered a ready acquisition without a lease")
	}
	if err != nil {
		if tctx.Err() != nil {
			err = acquireCancelled(context.Cause(tctx), prep)
		}
		res = failedResult(cfg, err)
		smu.Lock()
		if scopeKey != "" {
			// The daemon had admitted the scope: the failure names it.
			k := scopeKey
			res.Scope.ScopeKey = &k
		}
		smu.Unlock()
	}
	if res.ContractVersion == 0 {
		res.ContractVersion = 1
	}
	x.mu.Lock()
	x.result = res
	if res.Outcome == contract.SlotOutcomeReady {
		x.leaseID = res.Slots[0].LeaseID
	}
	x.mu.Unlock()
	x.log.Info("managed slot acquisition done", "outcome", res.Outcome, "leaseId", x.leaseID,
		"elapsed", time.Since(start).Round(time.Millisecond), "failure", failureCode(res))
}

var (
	errPrepTimeout    = errors.New("preparationTimeoutMs elapsed")
	errAcquireAborted = errors.New("acquisition aborted")
)

// acquireCancelled names why an acquisition stopped before its answer.
func acquireCancelled(cause error, prep time.Duration) error {
	if errors.Is(cause, errPrepTimeout) {
		return contract.Errorf(contract.CodePreparationTimeout, "the slot was not ready within preparationTimeoutMs (%s)", prep).
			WithNext("raise preparationTimeoutMs (and the launcher's MCP initialize timeout with it), then relaunch the execution")
	}
	return contract.Errorf(contract.CodeRequestCancelled, "the acquisition was cancelled: %v", cause).
		WithNext("relaunch the execution")
}

// failedResult is the result of an acquisition that got no answer the
// daemon shaped itself: the scope as configured, and no scope key unless
// the daemon reported the scope admitted (acquire adds it).
func failedResult(cfg contract.SlotLaunchConfig, err error) contract.ManagedSlotsResult {
	ce := asContractError(err)
	if ce.Code == contract.CodeUnknownOperation {
		ce = contract.Errorf(contract.CodeContractUnsupported, "the daemon does not serve managed-slots/v1: %s", ce.Message).
			WithNext("run a simlock daemon that serves managed-slots/v1 (`simlock capabilities --json`)")
	}
	f := slotFailure(ce)
	res := contract.ManagedSlotsResult{ContractVersion: 1, Outcome: contract.SlotOutcomeFailed, IdleTimeoutMs: cfg.EffectiveIdleTimeoutMs(),
		Scope: contract.SlotScope{ManagedHostScope: cfg.ManagedHostScope, RunnerNamespace: cfg.RunnerNamespace,
			RunnerIncarnation: cfg.RunnerIncarnation},
		Failure: f, Slots: []contract.SlotResult{}}
	for _, r := range cfg.Requests {
		res.Slots = append(res.Slots, contract.SlotResult{SlotIndex: r.SlotIndex, Role: r.Role, Platform: r.Platform,
			RequestedSpec: r.RequestedSpec, Failure: f})
	}
	return res
}

func slotFailure(ce *contract.Error) *contract.SlotFailure {
	next := ce.NextAction
	if next == "" {
		next = ce.Info().NextAction
	}
	return &contract.SlotFailure{Code: ce.Code, Retryable: ce.Info().Retryable, Message: ce.Message, NextAction: next,
		RetryAfterMs: ce.RetryAfterMs, Details: ce.Details}
}

// failureOf is the acquisition's failure: the scope's, else the first
// failed slot's.
func failureOf(res contract.ManagedSlotsResult) *contract.SlotFailure {
	if res.Failure != nil {
		return res.Failure
	}
	for _, s := range res.Slots {
		if s.Failure != nil {
			return s.Failure
		}
	}
	return nil
}

func failureCode(res contract.ManagedSlotsResult) contract.Code {
	if f := failureOf(res); f != nil {
		return f.Code
	}
	return ""
}

func (x *slotExec) ready() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.result.Outcome == contract.SlotOutcomeReady
}

// snapshot is the result as the managed-slots resource shows it now: the
// acquisition evidence, plus executionEnded on the slot once its lease
// ended for good.
func (x *slotExec) snapshot() contract.ManagedSlotsResult {
	x.mu.Lock()
	defer x.mu.Unlock()
	res := x.result
	res.Slots = append([]contract.SlotResult(nil), x.result.Slots...)
	if x.ended != nil {
		for i := range res.Slots {
			if res.Slots[i].LeaseID == x.leaseID {
				e := *x.ended
				res.Slots[i].ExecutionEnded = &e
			}
		}
	}
	return res
}

// ownSlot is the slot this execution holds, ok only once it is ready.
func (x *slotExec) ownSlot() (contract.SlotResult, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.result.Outcome != contract.SlotOutcomeReady || len(x.result.Slots) == 0 {
		return contract.SlotResult{}, false
	}
	return x.result.Slots[0], true
}

// start begins holding the execution: heartbeats every HeartbeatEvery.
func (x *slotExec) start() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.result.Outcome == contract.SlotOutcomeReady {
		x.armLocked()
	}
}

func (x *slotExec) armLocked() {
	if x.closing || x.ended != nil {
		return
	}
	x.hb = x.clock.AfterFunc(x.o.HeartbeatEvery, x.beat)
}

// beat is one heartbeat. While the daemon is away the execution is
// waited for, not given up: the next beat probes again, and the first one
// a daemon answers re-binds the same lease.
func (x *slotExec) beat() {
	x.mu.Lock()
	id, closing := x.leaseID, x.closing
	x.mu.Unlock()
	if closing || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(2*x.o.HeartbeatEvery, 5*time.Second))
	_, err := x.be.Heartbeat(ctx, contract.SlotHeartbeatIn{LeaseID: id, OwnerToken: x.token})
	cancel()
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case err == nil:
		if !x.awaySince.IsZero() {
			x.notice = "daemon_stall_resumed"
			if x.dials != nil && x.dials() != x.awayDials {
				x.notice = "daemon_restart_resumed"
			}
			x.log.Info("the daemon answers again; the execution is re-bound", "leaseId", id, "notice", x.notice,
				"awayFor", x.clock.Now().Sub(x.awaySince).Round(time.Millisecond), "attempts", x.awayAttempts)
		}
		x.awaySince, x.awayAttempts, x.awayErr = time.Time{}, 0, ""
	case endsExecution(err):
		x.endLocked(err)
		return
	case daemonAway(err):
		x.markAwayLocked(err)
	default:
		x.log.Warn("heartbeat refused; trying again at the next beat", "leaseId", id, "err", err)
	}
	x.armLocked()
}

func (x *slotExec) markAwayLocked(err error) {
	if x.awaySince.IsZero() {
		x.awaySince = x.clock.Now()
		if x.dials != nil {
			x.awayDials = x.dials()
		}
		x.log.Warn("the daemon is away; waiting to reclaim the execution", "leaseId", x.leaseID, "err", err)
	}
	x.awayAttempts++
	x.awayErr = err.Error()
}

// endLocked records that the daemon ended the execution's lease.
func (x *slotExec) endLocked(err error) {
	if x.ended != nil {
		return
	}
	reason, idle := "session_not_found", false
	if ce := contract.AsError(err); ce != nil {
		if r, ok := ce.Details["reason"].(string); ok && r != "" {
			reason = r
		}
		idle, _ = ce.Details["idle"].(bool)
	}
	x.ended = &contract.SlotExecutionEnded{Reason: reason, Idle: idle, NextAction: "relaunch_execution"}
	x.log.Info("the execution's lease ended", "leaseId", x.leaseID, "reason", reason, "idle", idle)
}

// endsExecution says the daemon no longer has the execution's lease.
func endsExecution(err error) bool {
	return client.IsCode(err, contract.CodeExecutionEnded) || client.IsCode(err, contract.CodeUnknownLease) ||
		client.IsCode(err, contract.CodeLeaseEnded)
}

// daemonAway says an error means no daemon answered, as opposed to one
// that answered no.
func daemonAway(err error) bool {
	ce := contract.AsError(err)
	if ce == nil {
		return !errors.Is(err, context.Canceled)
	}
	switch ce.Code {
	case contract.CodeDaemonStartupFailed, contract.CodeDaemonStopping, contract.CodeDaemonRestarted, contract.CodeDaemonStalled:
		return true
	}
	return ce.Info().Kind == contract.KindTransport
}

// gate refuses a tool call the execution's state does not allow: after a
// failed acquisition, after the lease ended, and while the daemon is away.
func (x *slotExec) gate() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.result.Outcome != contract.SlotOutcomeReady {
		f := failureOf(x.result)
		msg := "the managed slot's acquisition failed"
		if f != nil {
			msg += ": " + string(f.Code) + ": " + f.Message
		}
		return contract.Errorf(contract.CodeSlotAcquisitionFailed, "%s", msg).WithDetails("acquisitionFailure", f).
			WithNext("read simlock://managed-slots for the failure, fix it, and relaunch the execution")
	}
	slot := x.result.Slots[0]
	if x.ended != nil {
		e := contract.Errorf(contract.CodeExecutionEnded, "this execution's lease on slot %d ended (%s); the slot keeps its device",
			slot.SlotIndex, x.ended.Reason).
			WithDetails("reason", x.ended.Reason, "slotIndex", slot.SlotIndex, "assignmentGeneration", slot.AssignmentGeneration,
				"nextAction", "relaunch_execution").
			WithNext("relaunch_execution: start a new execution on the same slot; it reuses the device with a fresh lease")
		if x.ended.Idle {
			e = e.WithDetails("idle", true)
		}
		return e
	}
	if !x.awaySince.IsZero() {
		return contract.Errorf(contract.CodeDaemonStalled, "the daemon is not answering (lease %s, %d heartbeat attempts); this server re-binds the execution once it does",
			x.leaseID, x.awayAttempts).
			WithDetails("leaseIds", []string{x.leaseID}, "attempts", x.awayAttempts,
				"recovery", map[string]any{"action": "wait_for_managed_reclaim", "awayMs": x.clock.Now().Sub(x.awaySince).Milliseconds()}).
			WithNext("retry the call later; do not acquire another device")
	}
	return nil
}

// toolError maps a tool call's failure on a slot connection: no daemon
// answering is DAEMON_STALLED (the execution waits for it), and a lease the
// daemon ended is MANAGED_EXECUTION_ENDED.
func (x *slotExec) toolError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	x.mu.Lock()
	switch {
	case client.IsCode(err, contract.CodeExecutionEnded):
		x.endLocked(err)
	case daemonAway(err) && x.ended == nil && x.result.Outcome == contract.SlotOutcomeReady:
		x.markAwayLocked(err)
	default:
		x.mu.Unlock()
		return err
	}
	x.mu.Unlock()
	if g := x.gate(); g != nil {
		return g
	}
	return err
}

// takeNotice returns the re-bind notice once.
func (x *slotExec) takeNotice() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.notice
	x.notice = ""
	return n
}

// setEndReason remembers the first reason the execution is ending.
func (x *slotExec) setEndReason(why string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.endReason == "" {
		x.endReason = why
	}
}

// release ends the execution at the proxy's exit: no more heartbeats, then
// slot.release with a bounded wait. The slot keeps its device whatever
// happens here; a release that does not land leaves the lease to expire
// about 10 s after the last heartbeat.
func (x *slotExec) release() error {
	x.mu.Lock()
	x.closing = true
	if x.hb != nil {
		x.hb.Stop()
	}
	id, ended, reason := x.leaseID, x.ended != nil, x.endReason
	x.mu.Unlock()
	if id == "" || ended {
		return nil
	}
	if reason == "" {
		reason = "stdin_eof"
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.o.ReleaseWait)
	defer cancel()
	out, err := x.be.Release(ctx, contract.SlotReleaseIn{LeaseID: id, OwnerToken: x.token, Reason: reason})
	x.mu.Lock()
	if x.ended == nil {
		x.ended = &contract.SlotExecutionEnded{Reason: reason, NextAction: "relaunch_execution"}
	}
	x.mu.Unlock()
	switch {
	case err == nil:
		x.log.Info("released the execution", "leaseId", id, "reason", reason, "outcome", out.Outcome)
		return nil
	case endsExecution(err):
		x.log.Info("the execution had already ended", "leaseId", id)
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The daemon finishes a release it began whether or not we wait.
		x.log.Warn("the daemon did not answer the release within its budget; a release it began completes without us", "leaseId", id, "budget", x.o.ReleaseWait)
		return fmt.Errorf("release execution %s: %w", id, err)
	}
	x.log.Error("could not release the execution; its lease ends about 10 s after the last heartbeat", "leaseId", id, "err", err)
	return fmt.Errorf("release execution %s: %w", id, err)
}

// execOwnerWatch ends the execution when its owner is gone: the pid of
// executionOwnerPid, or the launching parent, where re-parenting counts as
// loss, a parent pid of 1 means already orphaned and 0 already exited.
type execOwnerWatch struct {
	pid      int
	interval time.Duration
}

func (w execOwnerWatch) Watch(ctx context.Context) <-chan struct{} {
	gone := func() bool { return !processRunning(w.pid) }
	if w.pid == 0 {
		start := os.Getppid()
		if start <= 1 {
			ch := make(chan struct{})
			close(ch)
			return ch
		}
		gone = func() bool { return os.Getppid() != start }
	}
	return ports.PollUntil(ctx, w.interval, gone)
}
