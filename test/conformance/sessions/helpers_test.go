package sessions

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

// brokerConfig is a daemon serving iOS sessions on the simulated SDK:
// iPhone 15 on iOS 18.0 for an omitted requirement, zero pooling, a
// heartbeat TTL of 3 s (so a keeper must really keep the session) and the
// periodic work quiet.
const brokerConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":2}},
 "health":{"intervalMs":600000},"cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000},
 "sessions":{"heartbeatTtlMs":3000,"defaults":{
  "ios":{"policyVersion":"conf-ios-1","hardware":{"omitted":"phone",
    "archetypes":[{"archetype":"phone","modelType":{"family":"iphone"}}],
    "modelTypes":[{"modelType":{"family":"iphone"},"model":{"namespace":"simlock-model","value":"iPhone 15"}}]},
    "os":{"selector":{"kind":"exact","version":"18.0"}}}},
  "iosClassifications":{"iPhone 15":"phone"}}}`

// sessionConfig is a consumer's session config for request id req: an
// iOS phone by archetype, the OS left to the operator.
func sessionConfig(req string) string {
	return `{"contractVersion":1,"requestId":"` + req + `","device":{"schemaVersion":1,"platform":"ios",` +
		`"hardware":{"kind":"archetype","archetype":"phone"},"os":{"kind":"omitted"}}}`
}

// brokerWorld is a world with brokerConfig's daemon running, whose
// commands run as principal with owner token token (from the
// environment, never an argument).
func brokerWorld(t *testing.T, principal, token string) *harness.World {
	t.Helper()
	w := harness.NewWorld(t, brokerConfig)
	w.Setenv("SIMLOCK_PRINCIPAL", principal)
	w.Setenv("SIMLOCK_SESSION_OWNER_TOKEN", token)
	w.MustRun("daemon", "start")
	return w
}

type failure struct {
	Code          string `json:"code"`
	Retryable     bool   `json:"retryable"`
	RetryRequires string `json:"retryRequires"`
}

type receipt struct {
	RequestID string   `json:"requestId"`
	SessionID string   `json:"sessionId"`
	Status    string   `json:"status"`
	LeaseID   string   `json:"leaseId"`
	Failure   *failure `json:"failure"`
	Profile   *struct {
		Archetype     string `json:"archetype"`
		Model         string `json:"model"`
		OSVersion     string `json:"osVersion"`
		PolicyVersion string `json:"policyVersion"`
	} `json:"profile"`
	Device *struct {
		ID   string `json:"id"`
		UDID string `json:"udid"`
	} `json:"device"`
	CleanupPending bool `json:"cleanupPending"`
}

func status(w *harness.World, req string) receipt {
	w.T.Helper()
	var r receipt
	w.JSON(&r, "session", "status", req, "--json")
	return r
}

// keeper is `simlock mcp --session-config` speaking MCP over its stdio.
type keeper struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startKeeper(w *harness.World, config string) *keeper {
	w.T.Helper()
	c := w.Cmd("mcp", "--session-config", config)
	stdin, err := c.StdinPipe()
	if err != nil {
		w.T.Fatal(err)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		w.T.Fatal(err)
	}
	if err := c.Start(); err != nil {
		w.T.Fatal(err)
	}
	k := &keeper{t: w.T, cmd: c, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			k.lines <- sc.Text()
		}
		close(k.lines)
	}()
	w.T.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return k
}

func (k *keeper) send(msg string) {
	k.t.Helper()
	if _, err := k.stdin.Write([]byte(msg + "\n")); err != nil {
		k.t.Fatal(err)
	}
}

// next is the keeper's next message; a prepare may boot a device first,
// so the bound is generous.
func (k *keeper) next() map[string]any {
	k.t.Helper()
	select {
	case l, ok := <-k.lines:
		if !ok {
			k.t.Fatal("the keeper closed its stdout")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			k.t.Fatalf("keeper line %q: %v", l, err)
		}
		return m
	case <-time.After(testhost.Scale(90 * time.Second)):
		k.t.Fatal("no answer from the keeper")
	}
	return nil
}

// initialize sends MCP initialize and returns the session the keeper
// published under experimental["simlock/session"].
func (k *keeper) initialize() map[string]any {
	k.t.Helper()
	k.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"conformance","version":"0"}}}`)
	m := k.next()
	res, _ := m["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	exp, _ := caps["experimental"].(map[string]any)
	s, _ := exp["simlock/session"].(map[string]any)
	if s == nil {
		k.t.Fatalf("initialize published no session: %v", m)
	}
	k.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// tools lists the keeper's tool names.
func (k *keeper) tools() map[string]bool {
	k.t.Helper()
	k.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m := k.next()
	out := map[string]bool{}
	res, _ := m["result"].(map[string]any)
	list, _ := res["tools"].([]any)
	for _, tl := range list {
		if tm, ok := tl.(map[string]any); ok {
			name, _ := tm["name"].(string)
			out[name] = true
		}
	}
	return out
}

// close ends the keeper's stdin and waits for it to exit.
func (k *keeper) close() {
	k.t.Helper()
	k.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- k.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			k.t.Fatalf("the keeper exited %v", err)
		}
	case <-time.After(testhost.Scale(60 * time.Second)):
		k.t.Fatal("the keeper did not exit when its stdin closed")
	}
}
