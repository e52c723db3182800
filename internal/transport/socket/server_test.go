package socket

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
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
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
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
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
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
