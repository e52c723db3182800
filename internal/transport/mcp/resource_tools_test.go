package mcp

import (
	"slices"
	"testing"

	"github.com/simlock/simlock/contract"
)

// set_device_resources and reconcile_device_resources are served only when
// asked for by name, or when the daemon's config enables resources.
func TestResourceWriteToolsAreOptIn(t *testing.T) {
	h := newHarness(t)
	plain := toolNames(t, serve(t, h.options("agent-a", newLogs())))
	if slices.Contains(plain, ToolSetResources) || slices.Contains(plain, ToolReconcileResources) || !slices.Contains(plain, ToolGetResources) {
		t.Fatalf("default tools %v", plain)
	}
	o := h.options("agent-b", newLogs())
	o.EnableTools = []string{ToolSetResources}
	one := toolNames(t, serve(t, o))
	if !slices.Contains(one, ToolSetResources) || slices.Contains(one, ToolReconcileResources) {
		t.Fatalf("with --enable-tool set_device_resources: %v", one)
	}
	o = h.options("agent-c", newLogs())
	o.ResourcesEnabled = true
	both := toolNames(t, serve(t, o))
	if !slices.Contains(both, ToolSetResources) || !slices.Contains(both, ToolReconcileResources) {
		t.Fatalf("with resources.enabled: %v", both)
	}
}

// The resource tools act on the session's own lease only, and a driver
// without the resource port answers unsupported rather than failing.
func TestResourceToolsAreConfinedToTheSessionsLease(t *testing.T) {
	h := newHarness(t)
	o := h.options("agent", newLogs())
	o.EnableTools = []string{ToolSetResources}
	s := serve(t, o)
	if _, cerr := s.call(ToolGetResources, map[string]any{}, nil); cerr == nil || cerr.Code != contract.CodeBadRequest {
		t.Fatalf("without a lease: %+v", cerr)
	}
	l := s.lease(map[string]any{"platform": "ios"})
	var got contract.ResourceResult
	s.ok(ToolGetResources, map[string]any{}, &got)
	if got.DeviceID != l.DeviceID || got.Resources["animations"].State != contract.ResourceUnsupported {
		t.Fatalf("get %+v", got)
	}
	_, cerr := s.call(ToolGetResources, map[string]any{"leaseId": "lse_someone_else"}, nil)
	wantCode(t, cerr, contract.CodeForbidden)
	// The daemon keeps tuning off for a lease that did not ask for it.
	_, cerr = s.call(ToolSetResources, map[string]any{"resources": map[string]any{"animations": "disabled"}}, nil)
	wantCode(t, cerr, contract.CodeResourcesDisabled)
}
