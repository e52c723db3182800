package sessions

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports/fake"
)

// Fakes of the broker's dependencies (deps.go), each doing only what the
// tests here ask of it; a call a test does not expect panics on the nil
// embedded interface, which is the failure it should be.

// newTestBroker builds a broker from c, filling in what c leaves out: the
// sessions config (a 60 s heartbeat TTL), a host whose stop has not begun,
// a recording bus, a fake clock at the epoch and a silent logger. Its
// goroutines are joined when the test ends.
func newTestBroker(t *testing.T, c Config) *Broker {
	t.Helper()
	if c.Sessions == nil {
		c.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000}
	}
	if c.Host == nil {
		c.Host = idleHost{}
	}
	if c.Bus == nil {
		c.Bus = &recordingBus{}
	}
	if c.Clock == nil {
		c.Clock = fake.NewClock(time.Unix(0, 0))
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MapError == nil {
		c.MapError = func(err error) *contract.Error {
			if ce := contract.AsError(err); ce != nil {
				return ce
			}
			return contract.Errorf(contract.CodeInternal, "%s", err.Error())
		}
	}
	b := NewBroker(c)
	t.Cleanup(func() { b.Wait(context.Background()) })
	return b
}

// idleHost is a daemon whose stop has not begun.
type idleHost struct {
	Host
}

func (idleHost) StopBegun() bool { return false }

// leaseEngine holds leases and no devices: what principalOf and
// session.info ask of the core.
type leaseEngine struct {
	Engine // the calls these tests make are the ones below
	leases map[string]core.LeaseRecord
}

func (e leaseEngine) Lease(id string) (core.LeaseRecord, bool) {
	l, ok := e.leases[id]
	return l, ok
}

func (leaseEngine) Device(string) (core.DeviceRecord, bool) { return core.DeviceRecord{}, false }

func (leaseEngine) LeaseEnded(string) <-chan struct{} { return make(chan struct{}) }

// recordingBus keeps what is published.
type recordingBus struct {
	mu  sync.Mutex
	evs []events.Event
}

func (b *recordingBus) Publish(e events.Event) events.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.evs = append(b.evs, e)
	return e
}

func (*recordingBus) Subscribe(int) (<-chan events.Event, func()) { return nil, func() {} }

func (b *recordingBus) last(typ string) (events.Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.evs) - 1; i >= 0; i-- {
		if b.evs[i].Type == typ {
			return b.evs[i], true
		}
	}
	return events.Event{}, false
}

func agentCall(principal string) *dispatch.Call {
	return &dispatch.Call{Session: contract.Session{Role: contract.RoleAgent, Principal: principal}}
}
