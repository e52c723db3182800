package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
)

// Holder keeps one lease alive: it renews it every third of its TTL, redials
// when the connection is lost (a daemon restart keeps leases, so the lease
// is still there to renew), and reports when the lease is lost. Make one
// with Client.Hold.
type Holder struct {
	id      string // the lease's id, fixed
	stop    context.CancelFunc
	stopped chan struct{} // closed when the renew loop has returned
	lost    chan struct{} // closed when the lease is lost

	mu     sync.Mutex
	c      *Client // the connection in use
	own    bool    // c was dialled by the holder, which closes it
	lease  contract.Lease
	err    error
	redial int
}

// Retry bounds for a renew that failed: soon enough that a daemon back
// from a restart is reached well within the lease's TTL.
const (
	holdRetryMin = 50 * time.Millisecond
	holdRetryMax = time.Second
)

// Hold starts renewing l on c at a third of its TTL until ctx ends, Release
// is called, or the lease is lost. When c's connection dies the holder
// dials a new one the way c was dialled (Redial) and carries on; it never
// starts a daemon. Lost is closed when the daemon says the lease has ended
// (a renew answered UNKNOWN_LEASE, or a lease-lost push, reported as
// LEASE_ENDED) or that this connection's principal may not renew it
// (FORBIDDEN); Err then says which. Any other failure is retried within a
// second, so a restarting daemon is reached well inside the TTL. Ending ctx stops renewing without
// releasing: the lease then ends at its expiry unless someone renews it.
// The holder never closes c itself; it closes the connections it dialled.
func (c *Client) Hold(ctx context.Context, l contract.Lease) *Holder {
	ctx, stop := context.WithCancel(ctx)
	h := &Holder{id: l.LeaseID, stop: stop, stopped: make(chan struct{}), lost: make(chan struct{}), c: c, lease: l}
	// Listening before Hold returns: a lease-lost push that arrives before
	// the loop's goroutine first runs would otherwise be missed, and the
	// loss heard only at the next renew, most of a TTL later.
	h.watch(c)
	go h.run(ctx)
	return h
}

// Lost is closed when the lease is lost; Err says why.
func (h *Holder) Lost() <-chan struct{} { return h.lost }

// Done is closed when the holder has stopped, for whatever reason.
func (h *Holder) Done() <-chan struct{} { return h.stopped }

// Err is why the holder stopped: a *contract.Error with UNKNOWN_LEASE,
// LEASE_ENDED or FORBIDDEN when the lease was lost, the context's error when ctx ended,
// nil while it runs or after Release.
func (h *Holder) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Lease is the lease as the last renew returned it.
func (h *Holder) Lease() contract.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Reconnects counts the connections the holder has dialled.
func (h *Holder) Reconnects() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.redial
}

// Release stops renewing and releases the lease, redialling first if the
// connection is gone. A lease that has already ended is not an error.
func (h *Holder) Release(ctx context.Context) error {
	h.stop()
	<-h.stopped
	h.mu.Lock()
	if h.err != nil && !h.isLost() {
		h.err = nil // stopped by Release, not by the caller's ctx
	}
	h.mu.Unlock()
	defer h.closeOwn()
	for delay := holdRetryMin; ; delay = min(delay*2, holdRetryMax) {
		c, err := h.conn(ctx)
		if err == nil {
			_, err = c.LeaseRelease(ctx, h.id)
			if err == nil || IsCode(err, contract.CodeUnknownLease) {
				return nil
			}
		}
		if !reconnectable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

func (h *Holder) isLost() bool {
	select {
	case <-h.lost:
		return true
	default:
		return false
	}
}

func (h *Holder) closeOwn() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.own {
		h.c.Close()
		h.own = false
	}
}

// reconnectable says whether err is the connection's fault (a daemon that
// is restarting or gone), which a new connection may cure.
func reconnectable(err error) bool {
	for _, code := range []contract.Code{contract.CodeConnectionLost, contract.CodeDaemonNotRunning,
		contract.CodeDaemonStopping, contract.CodeWorkerUnreachable} {
		if IsCode(err, code) {
			return true
		}
	}
	return false
}

// conn returns a live connection, dialling one if the current one is dead.
func (h *Holder) conn(ctx context.Context) (*Client, error) {
	h.mu.Lock()
	c := h.c
	h.mu.Unlock()
	select {
	case <-c.Done():
	default:
		return c, nil
	}
	n, err := c.Redial(ctx)
	if IsCode(err, contract.CodeAdminAuthFailed) && c.opts != nil && c.opts.Credential != "" {
		// The admin secret changes at every daemon start; the lease belongs
		// to the principal, which an agent session of the same name can renew.
		o := *c.opts
		o.Credential = ""
		n, err = Dial(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	h.watch(n)
	h.mu.Lock()
	if h.own {
		h.c.Close()
	}
	h.c, h.own = n, true
	h.redial++
	h.mu.Unlock()
	return n, nil
}

// watch turns a lease-lost push on c into the holder's end.
func (h *Holder) watch(c *Client) {
	c.OnNotice(func(n contract.LeaseNotice) {
		select {
		case <-h.stopped:
			return // a notice after the holder ended says nothing it should report
		default:
		}
		if n.LeaseID == h.id && n.Type == contract.NotifyLeaseLost {
			h.lose(contract.Errorf(contract.CodeLeaseEnded, "lease %s was lost: %s", n.LeaseID, n.Reason).
				WithDetails("reason", n.Reason))
		}
	})
}

// lose records why the lease is gone and stops the loop.
func (h *Holder) lose(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.isLost() {
		return
	}
	h.err = err
	close(h.lost)
	h.stop()
}

func (h *Holder) every() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := time.Duration(h.lease.TTLMs) * time.Millisecond / 3; d > 0 {
		return d
	}
	return time.Second
}

func (h *Holder) run(ctx context.Context) {
	defer close(h.stopped)
	wait := h.every()
	retry := holdRetryMin
	var dead *Client // a connection whose loss was already acted on
	for {
		h.mu.Lock()
		c := h.c
		h.mu.Unlock()
		done := c.Done()
		if c == dead {
			done = nil
		}
		select {
		case <-ctx.Done():
			h.mu.Lock()
			if h.err == nil {
				h.err = ctx.Err()
			}
			h.mu.Unlock()
			return
		case <-done:
			// Lost the connection: renew at once over a new one, since the
			// daemon may have been down for part of the TTL.
			dead = c
		case <-time.After(wait):
		}
		if ctx.Err() != nil {
			continue
		}
		err := h.renew(ctx)
		switch {
		case err == nil:
			wait, retry = h.every(), holdRetryMin
		case IsCode(err, contract.CodeUnknownLease), IsCode(err, contract.CodeLeaseEnded), IsCode(err, contract.CodeForbidden):
			h.lose(err)
		default:
			// Retried soon; a restarting daemon comes back within seconds.
			wait, retry = retry, min(retry*2, holdRetryMax)
		}
	}
}

func (h *Holder) renew(ctx context.Context) error {
	c, err := h.conn(ctx)
	if err != nil {
		return err
	}
	l, err := c.LeaseRenew(ctx, h.id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.lease = l
	h.mu.Unlock()
	return nil
}
