package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
)

func toolNames(t *testing.T, s *testSession) []string {
	t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil || tl.Description == "" {
			t.Errorf("%s lacks a schema or a description", tl.Name)
		}
	}
	return names
}

// The device tools exist only when asked for.
func TestDeviceToolsAreOptIn(t *testing.T) {
	h := newHarness(t)
	device := []string{ToolDeviceExec, ToolDeviceScreenshot, ToolDeviceInstall, ToolDeviceOpenURL}
	plain := toolNames(t, serve(t, h.options("agent", newLogs())))
	o := h.options("agent2", newLogs())
	o.DeviceTools = true
	with := toolNames(t, serve(t, o))
	for _, name := range device {
		if slices.Contains(plain, name) {
			t.Errorf("%s listed without DeviceTools", name)
		}
		if !slices.Contains(with, name) {
			t.Errorf("%s missing with DeviceTools: %v", name, with)
		}
	}
}

// A lease of the same principal taken outside the session is still not the
// session's: the daemon would let the principal drive it, the session does
// not. With no lease at all there is nothing to act on.
func TestDeviceToolsRefuseALeaseTheSessionDoesNotHold(t *testing.T) {
	h := newHarness(t)
	o := h.options("agent", newLogs())
	o.DeviceTools = true
	s := serve(t, o)
	_, cerr := s.call(ToolDeviceExec, map[string]any{"tool": "fakectl", "args": []string{"list"}}, nil)
	wantCode(t, cerr, contract.CodeBadRequest)

	twin, err := client.Dial(context.Background(), client.Options{Socket: config.PathsFor(h.home).Socket, Principal: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer twin.Close()
	other, err := twin.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", RequesterID: "agent-elsewhere"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := s.lease(map[string]any{"platform": "ios"})
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{ToolDeviceExec, map[string]any{"leaseId": other.LeaseID, "tool": "fakectl", "args": []string{"list"}}},
		{ToolDeviceScreenshot, map[string]any{"leaseId": other.LeaseID}},
		{ToolDeviceInstall, map[string]any{"leaseId": other.LeaseID, "upload": "app.apk"}},
		{ToolDeviceOpenURL, map[string]any{"leaseId": other.LeaseID, "url": "https://example.com"}},
	} {
		_, cerr := s.call(tc.tool, tc.args, nil)
		wantCode(t, cerr, contract.CodeForbidden)
		if !strings.Contains(cerr.Message, "not this session's") {
			t.Errorf("%s: refused by the daemon, not the session: %s", tc.tool, cerr.Message)
		}
	}
	// The session's own lease is the default; the fake driver's tool is
	// not one the device tools know, so install names the platform.
	_, cerr = s.call(ToolDeviceInstall, map[string]any{"path": "/", "leaseId": mine.LeaseID}, nil)
	if cerr != nil && cerr.Code == contract.CodeForbidden {
		t.Fatalf("own lease refused: %+v", cerr)
	}
	_, cerr = s.call(ToolDeviceInstall, map[string]any{"path": "/", "upload": "x"}, nil)
	if cerr == nil || cerr.Code != contract.CodeBadRequest {
		t.Fatalf("path and upload together: %+v", cerr)
	}
}

func TestCappedKeepsTheHeadOfAStream(t *testing.T) {
	var c capped
	c.add(string(make([]byte, maxToolOutput-1)))
	c.add("ab")
	c.add("cd")
	if c.b.Len() != maxToolOutput || !c.cut {
		t.Fatalf("len %d cut %v", c.b.Len(), c.cut)
	}
}
