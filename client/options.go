package client

import (
	"time"

	"github.com/simlock/simlock/contract"
)

// A CallOption gives one of a request's durations as a time.Duration. The
// wire counts milliseconds (ttlMs, timeoutMs, waitMs, ...); the option
// writes the request's field, so a caller never multiplies by hand and a
// typed method's signature says what it accepts. A positive duration under
// a millisecond rounds up to one, because 0 on the wire means "the default"
// or "no bound", the opposite of a short wait. An option the operation has
// no field for, or a negative duration, is BAD_REQUEST before anything is
// sent.
type CallOption struct {
	kind durationKind
	d    time.Duration
}

type durationKind string

const (
	kindTTL          durationKind = "TTL"
	kindQueueTimeout durationKind = "QueueTimeout"
	kindTimeout      durationKind = "Timeout"
	kindWait         durationKind = "Wait"
	kindReplyBudget  durationKind = "ReplyBudget"
	kindWindow       durationKind = "Window"
)

// TTL is a lease's width: lease.request's ttlMs (0 is the daemon's
// lease.defaultTtlMs), or lease.renew's new width (without it a renew
// extends by the lease's stored TTL).
func TTL(d time.Duration) CallOption { return CallOption{kindTTL, d} }

// QueueTimeout bounds lease.request's wait in the queue (timeoutMs); the
// daemon answers QUEUE_TIMEOUT when it runs out. Without it the request
// waits as long as ctx allows.
func QueueTimeout(d time.Duration) CallOption { return CallOption{kindQueueTimeout, d} }

// Timeout bounds a whole resources.set or resources.reconcile call on the
// daemon's side (timeoutMs; default 5 minutes).
func Timeout(d time.Duration) CallOption { return CallOption{kindTimeout, d} }

// Wait bounds how long session.prepare waits for its device before it
// answers with the pending receipt, or slot.resetScope's settle wait
// (waitMs).
func Wait(d time.Duration) CallOption { return CallOption{kindWait, d} }

// ReplyBudget bounds how long session.release waits for the session's
// cleanup before it answers (replyBudgetMs, clamped by the daemon to 30 s);
// ReplyBudget(0) answers at once.
func ReplyBudget(d time.Duration) CallOption { return CallOption{kindReplyBudget, d} }

// Window is how far back session.stats reads receipts (windowMs; default
// 24 h, at most 30 days).
func Window(d time.Duration) CallOption { return CallOption{kindWindow, d} }

// millis converts d for the wire, rounding a positive remainder up.
func millis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// setter returns what writes o into in, or nil when in has no such field.
func (o CallOption) setter(in any) func(int64) {
	ptr := func(p **int64) func(int64) { return func(v int64) { *p = &v } }
	val := func(p *int64) func(int64) { return func(v int64) { *p = v } }
	switch in := in.(type) {
	case *contract.LeaseRequestIn:
		switch o.kind {
		case kindTTL:
			return val(&in.TTLMs)
		case kindQueueTimeout:
			return val(&in.TimeoutMs)
		}
	case *contract.LeaseRenewIn:
		if o.kind == kindTTL {
			return val(&in.TTLMs)
		}
	case *contract.ResourcesSetIn:
		if o.kind == kindTimeout {
			return val(&in.TimeoutMs)
		}
	case *contract.ResourcesReconcileIn:
		if o.kind == kindTimeout {
			return val(&in.TimeoutMs)
		}
	case *contract.SessionPrepareIn:
		if o.kind == kindWait {
			return val(&in.WaitMs)
		}
	case *contract.SlotResetScopeIn:
		if o.kind == kindWait {
			return ptr(&in.WaitMs)
		}
	case *contract.SessionReleaseIn:
		if o.kind == kindReplyBudget {
			return ptr(&in.ReplyBudgetMs)
		}
	case *contract.SessionStatsIn:
		if o.kind == kindWindow {
			return val(&in.WindowMs)
		}
	}
	return nil
}

// apply writes opts into in (a pointer to op's input); later options win.
func apply(op string, in any, opts []CallOption) error {
	for _, o := range opts {
		if o.d < 0 {
			return contract.Errorf(contract.CodeBadRequest, "%s(%s) is negative", o.kind, o.d).WithDetails("operation", op)
		}
		set := o.setter(in)
		if set == nil {
			return contract.Errorf(contract.CodeBadRequest, "%s does not apply to %s", o.kind, op).WithDetails("operation", op)
		}
		set(millis(o.d))
	}
	return nil
}
