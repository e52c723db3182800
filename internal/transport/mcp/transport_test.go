package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// rawAgent speaks MCP's wire format by hand, so it can send lines no SDK
// client would.
type rawAgent struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

func (a *rawAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatalf("write %q: %v", line, err)
	}
}

// next reads the next response (skipping notifications and requests
// from the server).
func (a *rawAgent) next() map[string]json.RawMessage {
	a.t.Helper()
	type res struct {
		m   map[string]json.RawMessage
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			b, err := a.out.ReadBytes('\n')
			if err != nil {
				ch <- res{err: err}
				return
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				ch <- res{err: fmt.Errorf("server wrote %q: %w", b, err)}
				return
			}
			if _, isCall := m["method"]; !isCall {
				ch <- res{m: m}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			a.t.Fatal(r.err)
		}
		return r.m
	case <-time.After(testhost.Scale(15 * time.Second)):
		a.t.Fatal("no response within 15s")
		return nil
	}
}

func (a *rawAgent) callTool(id int, name, args string) string {
	a.t.Helper()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
	m := a.next()
	if string(m["id"]) != fmt.Sprint(id) || m["error"] != nil {
		a.t.Fatalf("tools/call %s: %s %s", name, m["id"], m["error"])
	}
	return string(m["result"])
}

// TestAMalformedLineIsAnsweredAndTheSessionKeepsItsLease: truncated JSON,
// non-JSON, an array, deep nesting and a non-message each get a JSON-RPC
// error answer; the session keeps serving and keeps its lease.
func TestAMalformedLineIsAnsweredAndTheSessionKeepsItsLease(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, h.options("agent", newLogs()), inR, outW); outW.Close() }()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		select {
		case <-done:
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Error("Run did not return")
		}
	})
	a := &rawAgent{t: t, in: inW, out: bufio.NewReader(outR)}
	a.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := a.next(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	res := a.callTool(2, ToolLeaseSimulator, `{"platform":"ios"}`)
	var out struct {
		StructuredContent leaseSimulatorOut `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(res), &out); err != nil || out.StructuredContent.Lease.LeaseID == "" {
		t.Fatalf("lease_simulator: %s", res)
	}
	leaseID := out.StructuredContent.Lease.LeaseID

	deep := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	for _, tc := range []struct {
		name, line string
		code       int
		id         string
	}{
		{"truncated", `{"jsonrpc":"2.0","id":3,"method":"tools/li`, -32700, "null"},
		{"not JSON", `hello there`, -32700, "null"},
		{"array", `[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`, -32700, "null"},
		{"deep nesting", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":` + deep + `}`, -32700, "null"},
		{"not a message", `{"jsonrpc":"2.0","id":6,"method":7}`, -32600, "6"},
	} {
		a.send(tc.line)
		m := a.next()
		var e struct {
			Code int `json:"code"`
		}
		if err := json.Unmarshal(m["error"], &e); err != nil || e.Code != tc.code || string(m["id"]) != tc.id {
			t.Fatalf("%s: answered %v, want code %d id %s", tc.name, m, tc.code, tc.id)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the session ended after malformed lines: %v", err)
	default:
	}
	if res := a.callTool(7, ToolLeaseStatus, `{}`); !strings.Contains(res, leaseID) {
		t.Fatalf("lease_status after malformed lines lacks %s: %s", leaseID, res)
	}
	if _, ok := h.d.Engine().Lease(leaseID); !ok {
		t.Fatal("the daemon no longer has the session's lease")
	}
}
