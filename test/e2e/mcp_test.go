package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/testhost"
)

// mcpAgent is an MCP client built with the go-sdk, spawning `simlock mcp`.
type mcpAgent struct {
	t        *testing.T
	cs       *mcpsdk.ClientSession
	cmd      *exec.Cmd
	progress chan *mcpsdk.ProgressNotificationParams
}

func (w *world) mcp(t *testing.T) *mcpAgent {
	cmd := w.cmd("mcp")
	a := &mcpAgent{t: t, cmd: cmd, progress: make(chan *mcpsdk.ProgressNotificationParams, 64)}
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e-agent", Version: "1"}, &mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcpsdk.ProgressNotificationClientRequest) { a.progress <- r.Params },
	})
	cs, err := cl.Connect(context.Background(), &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.cs = cs
	return a
}

func (a *mcpAgent) call(name string, args map[string]any, token any) (string, bool) {
	a.t.Helper()
	p := &mcpsdk.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(60*time.Second))
	defer cancel()
	res, err := a.cs.CallTool(ctx, p)
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcpsdk.TextContent).Text, res.IsError
}

func leaseIDIn(t *testing.T, text string) string {
	var v struct {
		Lease struct {
			LeaseID string `json:"leaseId"`
		} `json:"lease"`
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil || v.Lease.LeaseID == "" {
		t.Fatalf("no lease in %s", text)
	}
	return v.Lease.LeaseID
}

func TestMCPAgentLeasesThroughTheRealBinary(t *testing.T) {
	w := newWorld(t, oneRunning)
	a := w.mcp(t)
	tools, err := a.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil || tl.Description == "" {
			t.Errorf("%s lacks a schema or description", tl.Name)
		}
	}
	sort.Strings(names)
	// The resource tools that write are opt-in (simlock mcp --enable-tool).
	if strings.Join(names, ",") != "get_device_resources,lease_simulator,lease_status,list_devices,release_simulator" {
		t.Fatalf("tools %v", names)
	}
	text, isErr := a.call("lease_simulator", map[string]any{"platform": "ios", "model": "iPhone 16"}, "p1")
	if isErr {
		t.Fatal(text)
	}
	id := leaseIDIn(t, text)
	select {
	case p := <-a.progress:
		if p.ProgressToken != "p1" {
			t.Fatalf("progress %+v", p)
		}
	default:
		t.Fatal("no progress notifications for a call with a progress token")
	}
	if text, _ := a.call("lease_status", map[string]any{}, nil); !strings.Contains(text, id) {
		t.Fatalf("lease_status lacks %s: %s", id, text)
	}
	if text, isErr := a.call("release_simulator", map[string]any{"leaseId": id}, nil); isErr {
		t.Fatal(text)
	}
	if st := w.status(); len(st.Leases) != 0 {
		t.Fatal("release_simulator left the lease")
	}

	// A lease the agent never releases goes when its stdin closes.
	text, _ = a.call("lease_simulator", map[string]any{"platform": "ios"}, nil)
	leaseIDIn(t, text)
	a.cs.Close()
	a.cmd.Wait()
	eventually(t, "the abandoned MCP lease to be released", 20*time.Second, func() bool { return len(w.status().Leases) == 0 })
}

func TestMCPLeaseSurvivesADaemonRestart(t *testing.T) {
	w := newWorld(t, oneRunning)
	a := w.mcp(t)
	defer func() { a.cs.Close(); a.cmd.Wait() }()
	text, isErr := a.call("lease_simulator", map[string]any{"platform": "ios", "ttl": "10m"}, nil)
	if isErr {
		t.Fatal(text)
	}
	id := leaseIDIn(t, text)
	pid := w.status().Daemon.PID
	syscall.Kill(pid, syscall.SIGKILL)
	eventually(t, "the daemon to die", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	w.mustRun("daemon", "start")
	text, _ = a.call("lease_status", map[string]any{}, nil)
	if !strings.Contains(text, id) {
		t.Fatalf("after the restart lease_status shows %s, want %s", text, id)
	}
	if n := strings.Count(text, `"requesterId"`); n != 1 {
		t.Fatalf("%d leases after the restart, want the one surviving lease: %s", n, text)
	}
}

// TestMCPAnswersMalformedLinesAndKeepsItsLease: `simlock mcp` answers
// truncated JSON, non-JSON, an array and deep nesting with a JSON-RPC parse
// error, and keeps serving and holding its lease.
func TestMCPAnswersMalformedLinesAndKeepsItsLease(t *testing.T) {
	w := newWorld(t, oneRunning)
	cmd := w.cmd("mcp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	lines := make(chan map[string]json.RawMessage, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				if _, isCall := m["method"]; !isCall {
					lines <- m
				}
			}
		}
		close(lines)
	}()
	send := func(line string) map[string]json.RawMessage {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write: %v", err)
		}
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("simlock mcp exited after %q", line)
			}
			return m
		case <-time.After(testhost.Scale(30 * time.Second)):
			t.Fatalf("no answer to %q", line)
			return nil
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`+"\n")
	m := send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lease_simulator","arguments":{"platform":"ios"}}}`)
	var res struct {
		Content []struct{ Text string }
	}
	if json.Unmarshal(m["result"], &res) != nil || len(res.Content) == 0 {
		t.Fatalf("lease_simulator answered %v", m)
	}
	id := leaseIDIn(t, res.Content[0].Text)

	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"`,
		`not json at all`,
		`[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`,
		strings.Repeat("[", 500) + strings.Repeat("]", 500),
	} {
		m := send(bad)
		var e struct{ Code int }
		if json.Unmarshal(m["error"], &e) != nil || e.Code != -32700 || string(m["id"]) != "null" {
			t.Fatalf("%.40q answered %v, want a -32700 parse error with id null", bad, m)
		}
	}
	m = send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"lease_status","arguments":{}}}`)
	if !strings.Contains(string(m["result"]), id) {
		t.Fatalf("lease_status after malformed lines: %v", m)
	}
	if st := w.status(); len(st.Leases) != 1 || st.Leases[0].LeaseID != id {
		t.Fatalf("leases %+v, want the MCP session's %s", st.Leases, id)
	}
}
