package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// floodBackend accepts any token as an agent and answers every operation
// after pushing a flood, timing each notify call.
type floodBackend struct {
	worst chan time.Duration // the longest wait of a push that must never wait
	paced chan time.Duration // the longest wait of an exec output push
	ended chan struct{}      // closed when a flood's call context ends
}

func (b *floodBackend) Authenticate(context.Context, string) (string, string, bool, error) {
	return contract.TokenRoleAgent, "token:t", true, nil
}

func (b *floodBackend) Hello(context.Context, contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	return contract.HelloOut{}, contract.Session{}, nil
}

func (b *floodBackend) Dispatch(ctx context.Context, _ contract.Session, method string, _ json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	if notify == nil || method == contract.EventsSubscribe.Name { // plain JSON, or the notice follower
		return contract.EventsSubscribeOut{Events: []contract.Event{}}, nil, nil
	}
	chunk := strings.Repeat("x", 4<<10)
	var worst, paced time.Duration
	for i := 0; i < 4000; i++ {
		t0 := time.Now()
		notify(contract.NotifyEvent, map[string]any{"i": i, "chunk": chunk})
		notify(contract.NotifyProgress, map[string]any{"phase": "booting"})
		worst = max(worst, time.Since(t0))
		t0 = time.Now()
		notify(contract.NotifyOutput, map[string]any{"i": i, "chunk": chunk})
		paced = max(paced, time.Since(t0))
	}
	b.worst <- worst
	b.paced <- paced
	go func() { <-ctx.Done(); close(b.ended) }()
	return map[string]any{}, nil, nil
}

func serveReal(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// TestAnNDJSONClientThatStopsReadingDelaysNoPush: the pushes of a call
// whose client stopped reading only queue; the client is cut off within
// the write deadline and its call's context ends (a queued request is
// withdrawn, as on the socket). Exec output alone is paced by its reader
// (outbox.SendPaced), and even that waits no longer than the deadline.
func TestAnNDJSONClientThatStopsReadingDelaysNoPush(t *testing.T) {
	b := &floodBackend{worst: make(chan time.Duration, 1), paced: make(chan time.Duration, 1), ended: make(chan struct{})}
	s := New(Options{Backend: b})
	// A push that waited for the client would wait the whole write stall;
	// one that did not waits for the machine only. A 4 s stall with the
	// bound at half of it keeps the two apart by 2 s either way, more than
	// a loaded 2-core machine's GC and scheduling stalls under -race.
	s.writeStall = 4 * time.Second
	addr := serveReal(t, s)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/ops/status.get HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nAccept: application/x-ndjson\r\nContent-Length: 2\r\n\r\n{}")
	select {
	case worst := <-b.worst:
		if worst > s.writeStall/2 {
			t.Fatalf("a push waited %s for a client that does not read", worst)
		}
		if paced := <-b.paced; paced > s.writeStall+time.Second {
			t.Fatalf("an output push waited %s, past the %s write deadline", paced, s.writeStall)
		}
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("the flood never finished: a push blocked")
	}
	select {
	case <-b.ended:
		if d := time.Since(start); d > 4*s.writeStall+testhost.Scale(5*time.Second) {
			t.Fatalf("the call ended %s after its client stopped reading", d)
		}
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("the call of a client that stopped reading never ended")
	}
}

// TestAnUnauthenticatedConnectionIsClosedAtTheAuthDeadline: an idle
// connection, and one that only reads public routes, are closed; an
// authenticated one is not.
func TestAnUnauthenticatedConnectionIsClosedAtTheAuthDeadline(t *testing.T) {
	s := New(Options{Backend: &floodBackend{worst: make(chan time.Duration, 1), ended: make(chan struct{})}})
	// The authenticated connection must send its request within the
	// deadline, and the test must read the idle one's close before its own
	// read deadline: 1 s, a 5 s bound on the idle close and 10 s read
	// deadlines leave a loaded machine's 2-3 s stall room, while a missing
	// auth deadline still never closes the idle connection.
	s.authDeadline = time.Second
	addr := serveReal(t, s)

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	authed, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Close()
	// An unknown route still authenticates first (the document is public
	// now, so it would prove nothing); the token is checked, then 404.
	fmt.Fprintf(authed, "GET /v1/no-such-route HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n")
	ar := bufio.NewReader(authed)
	resp, err := http.ReadResponse(ar, nil)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("authenticated request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)

	idle.SetReadDeadline(time.Now().Add(testhost.Scale(10 * time.Second)))
	start := time.Now()
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
	if d := time.Since(start); d > testhost.Scale(5*time.Second) {
		t.Fatalf("idle connection closed after %s", d)
	}
	// The authenticated connection is still served.
	fmt.Fprintf(authed, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	authed.SetReadDeadline(time.Now().Add(testhost.Scale(10 * time.Second)))
	if resp, err := http.ReadResponse(ar, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("authenticated connection after the deadline: %v %v", resp, err)
	}
}

// TestConnectionsPerListenerAreCapped: past the cap a connection waits in
// the backlog, unserved, until a slot frees.
func TestConnectionsPerListenerAreCapped(t *testing.T) {
	s := New(Options{Backend: &floodBackend{worst: make(chan time.Duration, 1), ended: make(chan struct{})}, MaxConns: 2})
	addr := serveReal(t, s)
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr) // completes in the kernel's backlog
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprintf(third, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection past the cap was served")
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(testhost.Scale(5 * time.Second)))
	if resp, err := http.ReadResponse(bufio.NewReader(third), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("once a slot freed: %v %v", resp, err)
	}
}
