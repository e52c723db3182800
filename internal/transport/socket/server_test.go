package socket

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// echo is a minimal dispatcher: hello grants agent; "echo" returns params.
type echo struct{}

func (echo) Hello(_ context.Context, in contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	s := contract.Session{Principal: in.Principal, Role: contract.RoleAgent, Compatible: true}
	return contract.HelloOut{Role: contract.RoleAgent}, s, nil
}

func (echo) Dispatch(_ context.Context, _ contract.Session, method string, params json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	if method != "echo" {
		return nil, nil, contract.Errorf(contract.CodeUnknownOperation, "no %s", method)
	}
	notify("progress", map[string]any{"phase": "working"})
	return json.RawMessage(params), nil, nil
}

func serve(t testing.TB) (net.Conn, *bufio.Reader) {
	srv := &Server{D: echo{}}
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.ServeConn(ctx, a); close(done) }()
	t.Cleanup(func() { cancel(); b.Close(); <-done })
	return b, bufio.NewReader(b)
}

func TestNotificationCarriesRequestIDAndPrecedesResponse(t *testing.T) {
	c, r := serve(t)
	go c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":5,"max":5}}}` + "\n" +
		`{"jsonrpc":"2.0","id":"x","method":"echo","params":{"a":1}}` + "\n"))
	var lines []map[string]any
	for len(lines) < 3 {
		b, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		lines = append(lines, m)
	}
	push := lines[1]
	if push["method"] != "progress" || push["params"].(map[string]any)["requestId"] != "x" {
		t.Fatalf("push %v", push)
	}
	if lines[2]["id"] != "x" || lines[2]["result"].(map[string]any)["a"] != 1.0 {
		t.Fatalf("response %v", lines[2])
	}
}

func TestOversizedLineClosesOnlyThatConnection(t *testing.T) {
	c, r := serve(t)
	go func() {
		c.Write([]byte(strings.Repeat("x", MaxLine+10)))
		c.Write([]byte("\n"))
	}()
	c.SetReadDeadline(time.Now().Add(testhost.Scale(5 * time.Second)))
	b, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "BAD_REQUEST") {
		t.Fatalf("got %s", b)
	}
}

// FuzzServeLine feeds arbitrary bytes as one request line. The server must
// never panic, and everything it writes back must be valid JSON-RPC.
func FuzzServeLine(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":5,"max":5},"x":1}}`))
	f.Add([]byte(`{"jsonrpc":"1.0","method":"echo"}`))
	f.Add([]byte(`[1,2,3]`))
	f.Add([]byte(`{"id":{},"method":""}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if strings.ContainsRune(string(line), '\n') {
			return
		}
		c, r := serve(t)
		go func() {
			c.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"hello","params":{"protocol":{"min":5,"max":5}}}` + "\n"))
			c.Write(append(line, '\n'))
			c.Write([]byte(`{"jsonrpc":"2.0","id":"last","method":"echo","params":{}}` + "\n"))
		}()
		c.SetReadDeadline(time.Now().Add(testhost.Scale(5 * time.Second)))
		for {
			b, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("connection died on %q: %v", line, err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("server wrote invalid JSON %q", b)
			}
			if string(m["id"]) == `"last"` {
				return
			}
		}
	})
}

// flooder pushes a flood to whoever calls "flood", timing every notify
// call; "echo" answers at once.
type flooder struct {
	echo
	slowest chan time.Duration
}

func (f flooder) Dispatch(ctx context.Context, s contract.Session, method string, params json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	if method != "flood" {
		return f.echo.Dispatch(ctx, s, method, params, notify)
	}
	chunk := strings.Repeat("x", 4<<10)
	var worst time.Duration
	for i := 0; i < 4000; i++ {
		start := time.Now()
		notify(contract.NotifyEvent, map[string]any{"i": i, "chunk": chunk})
		notify(contract.NotifyProgress, map[string]any{"i": i})
		worst = max(worst, time.Since(start))
	}
	f.slowest <- worst
	return map[string]any{}, nil, nil
}

// signalHandler is a slog handler that reports each record's message.
type signalHandler struct{ msgs chan logged }

type logged struct {
	msg string
	at  time.Time
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- logged{r.Message, time.Now()}:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

func dialHello(t *testing.T, path, principal string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, `{"jsonrpc":"2.0","id":0,"method":"hello","params":{"protocol":{"min":5,"max":5},"principal":%q}}`+"\n", principal)
	return c, bufio.NewReader(c)
}

// TestASlowReaderIsDisconnectedAndDelaysNobody: a client that stops
// reading while a flood of pushes (its own request's and daemon-wide
// notices) is sent to it costs no producer any wait, is disconnected
// within the write deadline, and meanwhile another client's request is
// answered and its notices arrive.
func TestASlowReaderIsDisconnectedAndDelaysNobody(t *testing.T) {
	// A Push or notify that waited for the slow client would wait the whole
	// write deadline; one that did not waits only for the machine, whose
	// GC and scheduling stalls under -race on a loaded 2-core runner reach
	// seconds. A 4s deadline with the bound at half of it keeps the two
	// apart by ~2s either way (as httpapi's slow-client test does).
	const deadline = 4 * time.Second
	logs := make(chan logged, 64)
	f := flooder{slowest: make(chan time.Duration, 1)}
	srv := &Server{D: f, Log: slog.New(signalHandler{logs}), WriteTimeout: deadline}
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(served) }()
	t.Cleanup(func() { cancel(); srv.CloseAll(); <-served })

	slow, slowR := dialHello(t, path, "slow")
	if _, err := slowR.ReadBytes('\n'); err != nil { // the hello answer; then it stops reading
		t.Fatal(err)
	}
	fast, fastR := dialHello(t, path, "fast")
	if _, err := fastR.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	fmt.Fprintf(slow, `{"jsonrpc":"2.0","id":"f","method":"flood","params":{}}`+"\n")
	// The daemon-wide relay floods the slow principal too.
	relayDone := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		for i := 0; i < 2000; i++ {
			t0 := time.Now()
			srv.Push("slow", "lease.device-unhealthy", map[string]any{"i": i})
			if i%10 == 0 { // a live reader's share: a burst its queue holds
				srv.Push("fast", "lease.device-unhealthy", map[string]any{"i": i})
			}
			worst = max(worst, time.Since(t0))
		}
		relayDone <- worst
	}()

	// Meanwhile the fast client is served and receives its notices. The
	// bounds below tell "delayed by the slow client" (which would be
	// forever: a blocked writer never gives up) from "slow because the
	// machine is busy" (the flood marshals 32 MB, which takes seconds under
	// -race on a loaded machine), so they are generous on purpose.
	fast.SetReadDeadline(time.Now().Add(testhost.Scale(20 * time.Second)))
	fmt.Fprintf(fast, `{"jsonrpc":"2.0","id":"e","method":"echo","params":{"ok":true}}`+"\n")
	answered, notices := false, 0
	for !answered || notices < 200 {
		b, err := fastR.ReadBytes('\n')
		if err != nil {
			t.Fatalf("fast client after %d notices (answered %v): %v", notices, answered, err)
		}
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		switch {
		case string(m["id"]) == `"e"`:
			answered = true
		case string(m["method"]) == `"lease.device-unhealthy"`:
			notices++
		}
	}
	if d := time.Since(start); d > testhost.Scale(10*time.Second) {
		t.Fatalf("the fast client waited %s for its answer and notices", d)
	}

	select {
	case worst := <-f.slowest:
		if worst > deadline/2 {
			t.Fatalf("a request's notify blocked for %s", worst)
		}
	case <-time.After(testhost.Scale(60 * time.Second)):
		t.Fatal("the flooding request never finished: notify blocked")
	}
	if worst := <-relayDone; worst > deadline/2 {
		t.Fatalf("Push blocked for %s", worst)
	}
	for {
		select {
		case l := <-logs:
			if l.msg != "disconnecting a client that is not reading" {
				continue
			}
			if d := l.at.Sub(start); d > deadline+testhost.Scale(5*time.Second) {
				t.Fatalf("the slow client was disconnected after %s (deadline %s)", d, deadline)
			}
			// Its connection is really gone: reading drains what the
			// kernel buffered, then ends.
			slow.SetReadDeadline(time.Now().Add(testhost.Scale(5 * time.Second)))
			if _, err := io.Copy(io.Discard, slowR); err != nil {
				t.Fatalf("the slow connection was not closed: %v", err)
			}
			return
		case <-time.After(testhost.Scale(20 * time.Second)):
			t.Fatal("the slow client was never disconnected")
		}
	}
}

// flakyListener fails its first accepts with EMFILE, as a process out of
// file descriptors does.
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptRidesOutRunningOutOfFileDescriptors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{D: echo{}}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, &flakyListener{Listener: ln, fails: 5}) }()
	t.Cleanup(func() { cancel(); srv.CloseAll(); <-served })
	c, r := dialHello(t, path, "p")
	c.SetReadDeadline(time.Now().Add(testhost.Scale(5 * time.Second)))
	if _, err := r.ReadBytes('\n'); err != nil {
		t.Fatalf("no hello answer after EMFILE: %v", err)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve stopped: %v", err)
	default:
	}
}
