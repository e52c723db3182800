package uplink

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
	"github.com/simlock/simlock/internal/transport/socket"
)

// MetaStore keeps small facts across restarts; the home store is one.
type MetaStore interface {
	GetMeta(ctx context.Context, key string) (string, bool, error)
	SetMeta(ctx context.Context, key, value string) error
}

// epochMetaKey is where the newest gateway epoch survives a worker restart.
const epochMetaKey = "gateway.epoch"

// EpochFence remembers the newest leader epoch any gateway session has
// presented, so a deposed leader can never act on this worker (ADR 0103).
// Epoch 0 means "no epochs": it passes until a nonzero epoch is seen.
type EpochFence struct {
	db     MetaStore
	mu     sync.Mutex // serialises raises, so the store never goes backwards
	newest atomic.Uint64
	// raised is closed and replaced, under mu, each time newest grows.
	raised chan struct{}
}

// LoadEpochFence reads the newest epoch db kept.
func LoadEpochFence(ctx context.Context, db MetaStore) (*EpochFence, error) {
	f := &EpochFence{db: db, raised: make(chan struct{})}
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

// Admit accepts a session's epoch if it is not older than the newest,
// raising and persisting the newest first when it is newer.
func (f *EpochFence) Admit(ctx context.Context, epoch uint64) (stale bool, err error) {
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
func (f *EpochFence) watch() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raised
}

// overtaken is the per-call check: one atomic load.
func (f *EpochFence) overtaken(epoch uint64) bool { return epoch < f.newest.Load() }

// uplinkSession is one gateway session on one uplink connection: the
// worker's dispatcher plus the epoch its hello was admitted under.
type uplinkSession struct {
	socket.Dispatcher
	publish  func(typ, reason string, data map[string]any)
	fence    *EpochFence
	epoch    atomic.Uint64
	admitted atomic.Bool
	// fenced is set once this connection was refused as stale; the
	// connection then closes after the refusal is written.
	fenced atomic.Bool
}

func (s *uplinkSession) refuse(presented uint64, method string) *contract.Error {
	s.fenced.Store(true)
	newest := s.fence.newest.Load()
	s.publish("gateway.fenced", "stale-epoch", map[string]any{"epoch": presented, "newest": newest, "method": method})
	return contract.Errorf(contract.CodeStaleGatewayEpoch,
		"this worker has seen gateway epoch %d; a session of epoch %d is a deposed leader's", newest, presented).
		WithDetails("epoch", presented, "newest", newest)
}

func (s *uplinkSession) Hello(ctx context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	if s.fenced.Load() {
		return contract.HelloOut{}, contract.Session{}, s.refuse(in.Epoch, contract.Hello.Name)
	}
	out, sess, herr := s.Dispatcher.Hello(ctx, in)
	if herr != nil {
		return out, sess, herr
	}
	stale, err := s.fence.Admit(ctx, in.Epoch)
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
	return s.Dispatcher.Dispatch(ctx, sess, method, params, notify)
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

// Serve serves one uplink connection as one gateway session of d; its
// error tells the connector that the gateway was a deposed leader.
// publish records each refusal as a fact.
func (fence *EpochFence) Serve(ctx context.Context, d socket.Dispatcher, publish func(typ, reason string, data map[string]any), log *slog.Logger, c net.Conn) error {
	s := &uplinkSession{Dispatcher: d, publish: publish, fence: fence}
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

// Fenced returns c ready to run: every uplink it opens is served by d as
// one gateway session checked against the newest epoch db has kept
// (ADR 0103), and each refusal is published.
func Fenced(ctx context.Context, db MetaStore, c *Connector, d socket.Dispatcher, publish func(typ, reason string, data map[string]any)) (*Connector, error) {
	fence, err := LoadEpochFence(ctx, db)
	if err != nil {
		return nil, err
	}
	c.Serve = func(ctx context.Context, conn net.Conn) error { return fence.Serve(ctx, d, publish, c.Log, conn) }
	return c, nil
}
