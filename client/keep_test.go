package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
)

// scriptedPeer is a daemon that answers hello and then each
// session.heartbeat with the next scripted answer (an error code, or ""
// for a deadline ttl ahead of its clock); heartbeats past the script
// succeed. It records what every heartbeat carried.
type scriptedPeer struct {
	clock  *fake.Clock
	ttl    time.Duration
	script []contract.Code

	mu    sync.Mutex
	beats []contract.SessionHeartbeatIn
}

func (p *scriptedPeer) dial(t *testing.T) *client.Client {
	t.Helper()
	cs, ss := net.Pipe()
	go p.serve(ss)
	c, err := client.NewConn(context.Background(), cs, client.Options{Principal: "keeper-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (p *scriptedPeer) serve(conn net.Conn) {
	defer conn.Close()
	enc := json.NewEncoder(conn)
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil {
			return
		}
		var result any
		var ce *contract.Error
		switch req.Method {
		case contract.Hello.Name:
			result = contract.HelloOut{Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
				Selected: contract.ProtocolMax, Role: contract.RoleAgent, Principal: "keeper-test"}
		case contract.SessionHeartbeat.Name:
			var in contract.SessionHeartbeatIn
			_ = json.Unmarshal(req.Params, &in)
			p.mu.Lock()
			n := len(p.beats)
			p.beats = append(p.beats, in)
			p.mu.Unlock()
			if n < len(p.script) && p.script[n] != "" {
				ce = contract.Errorf(p.script[n], "scripted")
			} else {
				result = contract.SessionHeartbeatOut{SessionID: in.SessionID, ExpiresAtMs: p.clock.Now().Add(p.ttl).UnixMilli()}
			}
		default:
			ce = contract.Errorf(contract.CodeBadRequest, "the scripted peer serves no %s", req.Method)
		}
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if ce != nil {
			msg["error"] = map[string]any{"code": -32000, "message": ce.Message, "data": ce}
		} else {
			msg["result"] = result
		}
		if enc.Encode(msg) != nil {
			return
		}
	}
}

func (p *scriptedPeer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.beats)
}

// waitFor spins until cond holds; the keeper runs on its own goroutine
// and the fake clock only moves when the test says so.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type keepRun struct {
	done chan struct{}
	err  error
}

func keep(ctx context.Context, o client.KeepSessionOptions) *keepRun {
	r := &keepRun{done: make(chan struct{})}
	go func() { defer close(r.done); r.err = client.KeepSession(ctx, o) }()
	return r
}

func (r *keepRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("the keeper did not return")
		return nil
	}
}

// The keeper heartbeats at once, then at a third of the
// deadline each answer gives, and half a second after a failure, which
// OnRetry hears about; ending ctx returns nil with the session left live.
func TestKeepSessionPacesHeartbeatsAndRetries(t *testing.T) {
	clock := fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p := &scriptedPeer{clock: clock, ttl: 9 * time.Second, script: []contract.Code{"", contract.CodeConnectionLost, ""}}
	c := p.dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var retried []error
	var mu sync.Mutex
	r := keep(ctx, client.KeepSessionOptions{SessionID: "s1", OwnerToken: "tok", Clock: clock,
		Conn: func(context.Context) (*client.Client, error) { return c, nil },
		OnRetry: func(_ context.Context, err error) {
			mu.Lock()
			retried = append(retried, err)
			mu.Unlock()
		}})
	waitFor(t, "the first heartbeat", func() bool { return p.count() == 1 && clock.Pending() == 1 })
	clock.Advance(3*time.Second - time.Millisecond)
	if p.count() != 1 {
		t.Fatal("the second heartbeat came before a third of the deadline")
	}
	clock.Advance(time.Millisecond)
	waitFor(t, "the failing heartbeat", func() bool { return p.count() == 2 && clock.Pending() == 1 })
	mu.Lock()
	if len(retried) != 1 || !client.IsCode(retried[0], contract.CodeConnectionLost) {
		t.Fatalf("OnRetry heard %v, want the CONNECTION_LOST", retried)
	}
	mu.Unlock()
	clock.Advance(500 * time.Millisecond)
	waitFor(t, "the retry", func() bool { return p.count() == 3 && clock.Pending() == 1 })
	cancel()
	if err := r.wait(t); err != nil {
		t.Fatalf("a keeper stopped by its ctx returned %v, want nil", err)
	}
	for i, b := range p.beats {
		if b.SessionID != "s1" || b.OwnerToken != "tok" {
			t.Errorf("heartbeat %d carried %+v", i, b)
		}
	}
}

// Each code that means the session can never be kept again stops the
// keeper with that error, without a retry. SESSIONS_NOT_CONFIGURED is the
// one the MCP keeper used to retry forever while `session hold` stopped.
func TestKeepSessionStopsWhenTheSessionIsGone(t *testing.T) {
	for _, code := range []contract.Code{contract.CodeSessionEnded, contract.CodeSessionOwnerMismatch, contract.CodeSessionsNotConfigured} {
		t.Run(string(code), func(t *testing.T) {
			clock := fake.NewClock(time.Unix(1_700_000_000, 0))
			p := &scriptedPeer{clock: clock, ttl: 9 * time.Second, script: []contract.Code{"", code}}
			c := p.dial(t)
			retries := 0
			r := keep(context.Background(), client.KeepSessionOptions{SessionID: "s", OwnerToken: "t", Clock: clock,
				Conn:    func(context.Context) (*client.Client, error) { return c, nil },
				OnRetry: func(context.Context, error) { retries++ }})
			waitFor(t, "the first heartbeat", func() bool { return p.count() == 1 && clock.Pending() == 1 })
			clock.Advance(3 * time.Second)
			if err := r.wait(t); !client.IsCode(err, code) {
				t.Fatalf("the keeper returned %v, want %s", err, code)
			}
			if retries != 0 || p.count() != 2 {
				t.Fatalf("%d retries, %d heartbeats; want none after the %s", retries, p.count(), code)
			}
		})
	}
}

// With GiveUpAfter the keeper returns the last error once heartbeats
// failed for longer than that; a failing Conn counts as a failed
// heartbeat.
func TestKeepSessionGivesUpAfterFailingForLong(t *testing.T) {
	clock := fake.NewClock(time.Unix(1_700_000_000, 0))
	lost := contract.Errorf(contract.CodeDaemonNotRunning, "no daemon")
	var calls atomic.Int32
	r := keep(context.Background(), client.KeepSessionOptions{SessionID: "s", OwnerToken: "t", Clock: clock,
		GiveUpAfter: 2 * time.Second,
		Conn:        func(context.Context) (*client.Client, error) { calls.Add(1); return nil, lost }})
	for {
		waitFor(t, "the keeper to wait again or return", func() bool {
			select {
			case <-r.done:
				return true
			default:
				return clock.Pending() == 1
			}
		})
		select {
		case <-r.done:
			if !client.IsCode(r.err, contract.CodeDaemonNotRunning) {
				t.Fatalf("the keeper gave up with %v, want the last failure", r.err)
			}
			// Failing from 0 s: attempts at 0, 0.5, 1, 1.5, 2 and 2.5 s;
			// the last is the first more than 2 s after the first failure.
			if n := calls.Load(); n != 6 {
				t.Fatalf("%d attempts before giving up, want 6", n)
			}
			return
		default:
		}
		if calls.Load() > 20 {
			t.Fatal("the keeper never gave up")
		}
		clock.Advance(500 * time.Millisecond)
	}
}
