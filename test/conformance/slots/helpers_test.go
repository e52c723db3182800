package slots

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

// Room for a slot device and a replacement beside it; cleanup slowed out
// of the way so nothing but the slot touches its device.
const worldConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

// The simulated SDK's iOS runtime the specs ask for.
const iosRuntime = "com.apple.CoreSimulator.SimRuntime.iOS-18-0"

// launch is a slot launch configuration; extra fields are merged in at
// the top level (nil deletes one).
func launch(namespace, incarnation, model string, extra map[string]any) string {
	spec := map[string]any{"runtime": iosRuntime}
	if model != "" {
		spec["deviceType"] = model
	}
	cfg := map[string]any{"contractVersion": 1, "managedHostScope": "host-1", "runnerNamespace": namespace,
		"runnerIncarnation": incarnation, "localSlotCapacity": 1, "preparationTimeoutMs": 60000,
		"requests": []any{map[string]any{"slotIndex": 0, "role": "main", "platform": "ios", "requestedSpec": spec}}}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg)
	return string(b)
}

// proxy is one `simlock mcp --slot-config` execution and its MCP client.
type proxy struct {
	t  *testing.T
	cs *mcpsdk.ClientSession
	// initialize is the managed-slots result of the initialize answer.
	initialize map[string]any
}

// startProxy launches the slot proxy with args (after `mcp`) and connects
// to it; the initialize answer comes after the acquisition. The proxy's
// stdin is closed when the test ends.
func startProxy(t *testing.T, w *harness.World, args ...string) *proxy {
	t.Helper()
	cmd := w.Cmd(append([]string{"mcp"}, args...)...)
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "conformance-runner", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(90*time.Second))
	defer cancel()
	cs, err := cl.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, cs: cs}
	t.Cleanup(p.end)
	raw, _ := json.Marshal(cs.InitializeResult().Capabilities.Experimental["simlock/managedSlots"])
	if err := json.Unmarshal(raw, &p.initialize); err != nil || p.initialize["outcome"] == nil {
		t.Fatalf("initialize carries no managed-slots result: %s", raw)
	}
	return p
}

// end closes the proxy's stdin and waits for it to exit (the SDK's
// command transport owns the process).
func (p *proxy) end() { _ = p.cs.Close() }

// resource reads the managed-slots resource.
func (p *proxy) resource() map[string]any {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(30*time.Second))
	defer cancel()
	r, err := p.cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: "simlock://managed-slots"})
	if err != nil || len(r.Contents) != 1 {
		p.t.Fatalf("read simlock://managed-slots: %v %+v", err, r)
	}
	if mt := r.Contents[0].MIMEType; mt != "application/json" {
		p.t.Fatalf("the resource's type is %q", mt)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.Contents[0].Text), &v); err != nil {
		p.t.Fatalf("the resource %q: %v", r.Contents[0].Text, err)
	}
	return v
}

// slot is the result's one slot entry.
func slot(res map[string]any) map[string]any {
	s, _ := res["slots"].([]any)
	if len(s) != 1 {
		return map[string]any{}
	}
	m, _ := s[0].(map[string]any)
	return m
}

// str reads a string at a path of keys.
func str(v any, path ...string) string {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// num reads a number at a path of keys (-1 when absent).
func num(v any, path ...string) float64 {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	if f, ok := v.(float64); ok {
		return f
	}
	return -1
}

// slotList is `slot list --json`, as far as these tests read it.
type slotList struct {
	Assignments []struct {
		RunnerNamespace      string `json:"runnerNamespace"`
		State                string `json:"state"`
		AssignmentGeneration int64  `json:"assignmentGeneration"`
		LeaseID              string `json:"leaseId"`
		Device               *struct {
			StableID string `json:"stableId"`
		} `json:"device"`
	} `json:"assignments"`
}
