package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/transport/socket"
)

// epochMetaKey is where the newest gateway epoch survives a worker restart.
const epochMetaKey = "gateway.epoch"

// epochFence remembers the newest leader epoch any gateway session has
// presented, so a deposed leader can never act on this worker (ADR 0103).
// Epoch 0 means "no epochs": it passes until a nonzero epoch is seen.
type epochFence struct {
	db     *store.DB
	mu     sync.Mutex // serialises raises, so the store never goes backwards
	newest atomic.Uint64
	// raised is closed and replaced, under mu, each time newest grows.
	raised chan struct{}
}

func loadEpochFence(ctx context.Context, db *store.DB) (*epochFence, error) {
	f := &epochFence{db: db, raised: make(chan struct{})}
	v, ok, err := db.GetMeta(ctx, epochMetaKey)
	if err != nil || !ok {
		return f, err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("meta %s: %w", epochMetaKey, err)
	}
	f.newest.Store(n)
	return f, nil
}

// admit accepts a session's epoch if it is not older than the newest,
// raising and persisting the newest first when it is newer.
func (f *epochFence) admit(ctx context.Context, epoch uint64) (stale bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.newest.Load()
	if epoch < cur {
		return true, nil
	}
	if epoch > cur {
		// Persisted before it counts: a restart must not forget an epoch
		// a session was admitted under.
		if err := f.db.SetMeta(ctx, epochMetaKey, strconv.FormatUint(epoch, 10)); err != nil {
			return false, err
		}
		f.newest.Store(epoch)
		close(f.raised)
		f.raised = make(chan struct{})
	}
	return false, nil
}

// watch returns a channel closed the next time newest grows.
func (f *epochFence) watch() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raised
}

// overtaken is the per-call check: one atomic load.
func (f *epochFence) overtaken(epoch uint64) bool { return epoch < f.newest.Load() }

// uplinkSession is one gateway session on one uplink connection: the
// uplinkAdapter plus the epoch its hello was admitted under.
type uplinkSession struct {
	uplinkAdapter
	fence    *epochFence
	epoch    atomic.Uint64
	admitted atomic.Bool
	// fenced is set once this connection was refused as stale; the
	// connection then closes after the refusal is written.
	fenced atomic.Bool
}

func (s *uplinkSession) refuse(presented uint64, method string) *contract.Error {
	s.fenced.Store(true)
	newest := s.fence.newest.Load()
	s.d.bus.Publish(events.Event{Type: "gateway.fenced", Reason: "stale-epoch",
		Data: map[string]any{"epoch": presented, "newest": newest, "method": method}})
	return contract.Errorf(contract.CodeStaleGatewayEpoch,
		"this worker has seen gateway epoch %d; a session of epoch %d is a deposed leader's", newest, presented).
		WithDetails("epoch", presented, "newest", newest)
}

func (s *uplinkSession) Hello(ctx context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	if s.fenced.Load() {
		return contract.HelloOut{}, contract.Session{}, s.refuse(in.Epoch, contract.Hello.Name)
	}
	out, sess, herr := s.uplinkAdapter.Hello(ctx, in)
	if herr != nil {
		return out, sess, herr
	}
	stale, err := s.fence.admit(ctx, in.Epoch)
	if err != nil {
		return contract.HelloOut{}, contract.Session{}, contract.Errorf(contract.CodeInternal, "record the gateway epoch: %v", err)
	}
	if stale {
		// No session: the socket server keeps refusing until a hello passes.
		return contract.HelloOut{}, contract.Session{}, s.refuse(in.Epoch, contract.Hello.Name)
	}
	s.epoch.Store(in.Epoch)
	s.admitted.Store(true)
	return out, sess, nil
}

func (s *uplinkSession) Dispatch(ctx context.Context, sess contract.Session, method string, params json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	if e := s.epoch.Load(); s.fenced.Load() || s.fence.overtaken(e) {
		return nil, nil, s.refuse(e, method)
	}
	return s.uplinkAdapter.Dispatch(ctx, sess, method, params, notify)
}

// fencedConn closes the uplink after any write once its session was
// fenced, so the refusal is the last thing a deposed leader reads and the
// connector moves on to another gateway.
type fencedConn struct {
	net.Conn
	s *uplinkSession
}

func (c fencedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.s.fenced.Load() {
		c.Conn.Close()
	}
	return n, err
}

// serveUplink serves one uplink connection as one gateway session; its
// error tells the connector that the gateway was a deposed leader.
func (d *Daemon) serveUplink(ctx context.Context, fence *epochFence, log *slog.Logger, c net.Conn) error {
	s := &uplinkSession{uplinkAdapter: uplinkAdapter{socketAdapter{d}}, fence: fence}
	// Once a newer session overtakes this one, its commands in flight (a
	// lease.request waiting in the queue) are withdrawn as if the
	// connection had closed, so a deposed leader's request is never granted.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			raised := fence.watch()
			if s.admitted.Load() && fence.overtaken(s.epoch.Load()) {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-raised:
			}
		}
	}()
	// A server per connection: the session's epoch is this connection's.
	srv := &socket.Server{D: s, Log: log}
	srv.ServeConn(ctx, fencedConn{Conn: c, s: s})
	if s.fenced.Load() {
		return fmt.Errorf("the gateway was fenced (%s)", contract.CodeStaleGatewayEpoch)
	}
	return nil
}
