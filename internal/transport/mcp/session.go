package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

// session is the process's one agent session. It holds one client at a
// time and builds a new one lazily once the old one is lost, because the
// client never reconnects itself. The two triggers differ in power: a tool
// call may start a daemon when nothing listens, the renew timer only
// reconnects to a daemon that already does.
type session struct {
	o    Options
	log  *slog.Logger
	life context.Context // ends when the MCP transport does

	// calls is a one-slot semaphore: tool calls run one at a time.
	calls chan struct{}
	// dialMu makes concurrent triggers share one dial.
	dialMu sync.Mutex

	mu      sync.Mutex
	c       *client.Client
	dials   int
	held    map[string]*heldLease
	closing bool

	// acquired is the broker session this process keeps (session_acquire.go).
	acquired *acquired
	// slot is the managed-slot execution this session serves, if any.
	slot *slotExec
}

// heldLease is a lease this session renews and releases on exit.
type heldLease struct {
	ttl   time.Duration
	timer ports.Timer
}

func newSession(o Options, life context.Context) *session {
	return &session{o: o, log: o.Logger, life: life, calls: make(chan struct{}, 1), held: map[string]*heldLease{}}
}

// conn returns the live client, dialling a new one when there is none.
// With launch (tool calls only) a daemon is started when nothing listens,
// never after a version mismatch or a refused handshake.
func (s *session) conn(ctx context.Context, launch bool) (*client.Client, error) {
	s.dialMu.Lock()
	defer s.dialMu.Unlock()
	if s.acquired != nil {
		launch = false // a session's keeper reaches its daemon, never starts one
	}
	if s.slot != nil && s.slot.ready() {
		launch = false // a managed execution waits for its daemon, never starts one
	}
	s.mu.Lock()
	old := s.c
	s.mu.Unlock()
	if old != nil {
		select {
		case <-old.Done():
			old.Close()
		default:
			return old, nil
		}
	}
	o := client.Options{Socket: s.o.Socket, Principal: s.o.Principal, Credential: s.o.Credential(),
		Name: "simlock-mcp " + s.o.Version}
	var c *client.Client
	var err error
	if launch {
		c, err = client.DialOrLaunch(ctx, o, s.o.Launch)
	} else {
		c, err = client.Dial(ctx, o)
	}
	if err != nil {
		return nil, s.dialError(ctx, launch, err)
	}
	c.OnConnectionLost(func(err error) {
		s.mu.Lock()
		if s.c == c {
			s.c = nil
		}
		closing := s.closing
		s.mu.Unlock()
		if !closing {
			s.log.Warn("daemon connection lost; the next tool call or renew reconnects", "err", err)
		}
	})
	s.mu.Lock()
	s.c = c
	s.dials++
	again := s.dials > 1
	s.mu.Unlock()
	s.log.Info("connected to the daemon", "role", c.Hello().Role, "principal", c.Hello().Principal,
		"daemonVersion", c.Hello().Version, "reconnect", again)
	if again && s.slot == nil { // a slot's lease is held by its heartbeat, not renewed here
		s.pickUp(ctx, c)
	}
	return c, nil
}

// dialError explains a failed dial. A launch that never came to listen is
// DAEMON_STARTUP_FAILED rather than a bare DAEMON_NOT_RUNNING.
func (s *session) dialError(ctx context.Context, launch bool, err error) error {
	if ctx.Err() != nil {
		return err
	}
	ce := contract.AsError(err)
	switch {
	case ce == nil:
		return contract.Errorf(contract.CodeDaemonStartupFailed, "could not start the simlock daemon: %v", err).
			WithDetails("socket", s.o.Socket)
	case launch && ce.Code == contract.CodeDaemonNotRunning:
		e := contract.Errorf(contract.CodeDaemonStartupFailed, "started a simlock daemon, but it did not listen on %s in time", s.o.Socket).
			WithDetails("socket", s.o.Socket)
		if s.o.Launch.LogFile != "" {
			e = e.WithDetails("log", s.o.Launch.LogFile).
				WithNext("read " + s.o.Launch.LogFile + " (or `simlock daemon logs`), fix the cause, then call the tool again")
		}
		return e
	}
	return err
}

// pickUp reconciles the held set with the daemon after a reconnect (or an
// interrupted request): every lease the daemon says this principal owns is
// held and renewed, so a surviving lease is taken up again rather than
// requested anew; a held lease the daemon no longer has is dropped.
func (s *session) pickUp(ctx context.Context, c *client.Client) {
	out, err := client.Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
	if err != nil {
		s.log.Warn("could not list leases after reconnecting", "err", err)
		return
	}
	me := c.Hello().Principal
	alive := map[string]bool{}
	for _, l := range out.Leases {
		if l.OwnerID != me {
			continue
		}
		alive[l.LeaseID] = true
		if !s.holds(l.LeaseID) {
			s.log.Info("picked up a surviving lease", "leaseId", l.LeaseID, "expiresAt", l.ExpiresAt)
			s.track(l)
		}
	}
	s.mu.Lock()
	var gone []string
	for id := range s.held {
		if !alive[id] {
			gone = append(gone, id)
		}
	}
	s.mu.Unlock()
	for _, id := range gone {
		s.drop(id, "the daemon no longer has it (expired or released while disconnected)")
	}
}

func (s *session) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id] != nil
}

// heldIDs lists the held leases in a stable order.
func (s *session) heldIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// track holds l and (re)arms its renew timer at a third of its TTL. While
// the session is closing it is only recorded, so close releases it.
func (s *session) track(l contract.Lease) { s.update(l, true) }

// update re-arms a held lease after a renew; with add it also starts
// holding one. A renew that raced a release does not bring the lease back.
func (s *session) update(l contract.Lease, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[l.LeaseID]
	if h == nil {
		if !add {
			return
		}
		h = &heldLease{}
		s.held[l.LeaseID] = h
	}
	if l.TTLMs > 0 {
		h.ttl = time.Duration(l.TTLMs) * time.Millisecond
	}
	s.armLocked(l.LeaseID, h)
}

func (s *session) armLocked(id string, h *heldLease) {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if s.closing {
		return
	}
	every := h.ttl / 3
	if every <= 0 {
		every = time.Second
	}
	h.timer = s.o.Clock.AfterFunc(every, func() { s.renew(id) })
}

// drop stops holding a lease.
func (s *session) drop(id, why string) {
	s.mu.Lock()
	h := s.held[id]
	delete(s.held, id)
	if h != nil && h.timer != nil {
		h.timer.Stop()
	}
	s.mu.Unlock()
	if h != nil {
		s.log.Info("stopped holding lease", "leaseId", id, "why", why)
	}
}

// renew is the renew timer's tick for one lease. It sends no TTL, so the
// daemon reapplies the lease's stored width. A dead client is replaced by
// dialling a daemon that is already listening; this trigger never starts
// one, so an operator's `simlock daemon stop` is not undone by an idle
// session. A failure is retried at the next tick; UNKNOWN_LEASE ends it.
func (s *session) renew(id string) {
	s.mu.Lock()
	h := s.held[id]
	closing := s.closing
	var ttl time.Duration
	if h != nil {
		ttl = h.ttl
	}
	s.mu.Unlock()
	if h == nil || closing {
		return
	}
	ctx, cancel := context.WithTimeout(s.life, max(ttl/3, 5*time.Second))
	defer cancel()
	c, err := s.conn(ctx, false)
	if err == nil {
		if !s.holds(id) {
			return // the reconnect found it gone
		}
		var l contract.Lease
		l, err = client.Do(ctx, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: id})
		if err == nil {
			s.log.Debug("renewed lease", "leaseId", id, "expiresAt", l.ExpiresAt)
			s.update(l, false)
			return
		}
		if client.IsCode(err, contract.CodeUnknownLease) {
			s.drop(id, "renew answered UNKNOWN_LEASE: the daemon already ended it")
			return
		}
	}
	s.log.Warn("renew failed; retrying at the next tick", "leaseId", id, "err", err)
	s.mu.Lock()
	if h := s.held[id]; h != nil {
		s.armLocked(id, h)
	}
	s.mu.Unlock()
}

// acquire takes the tool-call slot, or gives up with ctx.
func (s *session) acquire(ctx context.Context) error {
	select {
	case s.calls <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) releaseSlot() { <-s.calls }

// close ends the session: no more renews, wait for the tool call in flight
// (the transport's end has cancelled it), then release every held lease on
// a daemon that is listening (never a launched one) and drop the client.
func (s *session) close() error {
	s.mu.Lock()
	s.closing = true
	for _, h := range s.held {
		if h.timer != nil {
			h.timer.Stop()
			h.timer = nil
		}
	}
	s.mu.Unlock()
	s.calls <- struct{}{} // held for good: no tool call runs after this

	var errs []error
	if s.slot != nil {
		if err := s.slot.release(); err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Loop rather than range: a reconnect on the way may pick up a lease
	// granted while its answer was lost.
	for ids := s.heldIDs(); len(ids) > 0; ids = s.heldIDs() {
		id := ids[0]
		c, err := s.conn(ctx, false)
		if err == nil {
			_, err = client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: id})
		}
		switch {
		case err == nil:
			s.log.Info("released lease at session end", "leaseId", id)
		case client.IsCode(err, contract.CodeUnknownLease):
			s.log.Info("lease had already ended", "leaseId", id)
		default:
			s.log.Error("could not release lease at session end; it stays until its deadline", "leaseId", id, "err", err)
			errs = append(errs, fmt.Errorf("release %s: %w", id, err))
		}
		s.drop(id, "session ended")
	}
	s.mu.Lock()
	c := s.c
	s.c = nil
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return errors.Join(errs...)
}
