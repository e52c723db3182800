package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/testhost"
)

func (w *world) mcpWith(t *testing.T, args ...string) *mcpAgent {
	t.Helper()
	cmd := w.cmd(append([]string{"mcp"}, args...)...)
	a := &mcpAgent{t: t, cmd: cmd, progress: make(chan *mcpsdk.ProgressNotificationParams, 64)}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e-device-agent", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.cs = cs
	t.Cleanup(func() { cs.Close(); cmd.Wait() })
	return a
}

func (a *mcpAgent) toolNames() []string {
	a.t.Helper()
	tools, err := a.cs.ListTools(context.Background(), nil)
	if err != nil {
		a.t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	return names
}

func (a *mcpAgent) callRaw(name string, args map[string]any) *mcpsdk.CallToolResult {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(60*time.Second))
	defer cancel()
	res, err := a.cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	return res
}

// screenshot calls device_screenshot and decodes the PNG it returns.
func (a *mcpAgent) screenshot(args map[string]any) (w, h int) {
	a.t.Helper()
	pic := a.screenshotBytes(args)
	img, err := png.Decode(bytes.NewReader(pic))
	if err != nil {
		a.t.Fatalf("device_screenshot's image is no PNG (%d bytes): %v", len(pic), err)
	}
	return img.Bounds().Dx(), img.Bounds().Dy()
}

func (a *mcpAgent) screenshotBytes(args map[string]any) []byte {
	a.t.Helper()
	res := a.callRaw("device_screenshot", args)
	if res.IsError || len(res.Content) == 0 {
		a.t.Fatalf("device_screenshot: %+v", res.Content)
	}
	img, ok := res.Content[0].(*mcpsdk.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		a.t.Fatalf("device_screenshot returned %T first", res.Content[0])
	}
	return img.Data
}

func errorCodeOf(t *testing.T, text string) string {
	t.Helper()
	var v struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("not an error object: %s", text)
	}
	return v.Error.Code
}

// The device tools are listed only with --device-tools, drive the
// session's own leased device (a screenshot is a real PNG, exec returns
// output, install lands on the device) and refuse every other lease.
func TestMCPDeviceToolsDriveOnlyTheSessionsLease(t *testing.T) {
	w := newWorld(t, confineConfig)
	plain := w.mcpWith(t)
	for _, n := range plain.toolNames() {
		if strings.HasPrefix(n, "device_") {
			t.Fatalf("device tool %s listed without --device-tools: %v", n, plain.toolNames())
		}
	}
	a := w.mcpWith(t, "--device-tools")
	want := "device_exec,device_install,device_open_url,device_screenshot,get_device_resources,lease_simulator,lease_status,list_devices,release_simulator"
	if names := strings.Join(a.toolNames(), ","); names != want {
		t.Fatalf("tools %s\nwant  %s", names, want)
	}

	// Before any lease there is nothing to act on.
	if text, isErr := a.call("device_exec", map[string]any{"tool": "simctl", "args": []string{"list"}}, nil); !isErr || errorCodeOf(t, text) != "BAD_REQUEST" {
		t.Fatalf("exec without a lease: %s", text)
	}

	text, isErr := a.call("lease_simulator", map[string]any{"platform": "ios", "model": "iPhone 16"}, nil)
	if isErr {
		t.Fatal(text)
	}
	mine := leaseIDIn(t, text)
	var granted struct {
		Lease struct {
			Device struct{ UDID string } `json:"device"`
		} `json:"lease"`
	}
	json.Unmarshal([]byte(text), &granted)
	udid := granted.Lease.Device.UDID
	if wd, ht := a.screenshot(map[string]any{}); wd != 390 || ht != 844 {
		t.Fatalf("iOS screenshot %dx%d", wd, ht)
	}
	// It is the leased device's screen: the same picture the operator's
	// own exec takes of that UDID.
	shot := filepath.Join(t.TempDir(), "op.png")
	w.mustRun("exec", mine, "--", "simctl", "io", udid, "screenshot", shot)
	if op, err := os.ReadFile(shot); err != nil || !bytes.Equal(op, a.screenshotBytes(map[string]any{"leaseId": mine})) {
		t.Fatalf("device_screenshot differs from simctl io %s screenshot (%v)", udid, err)
	}
	text, isErr = a.call("device_exec", map[string]any{"tool": "simctl", "args": []string{"list", "devices"}}, nil)
	var out struct {
		ExitCode int
		Stdout   string
	}
	if json.Unmarshal([]byte(text), &out); isErr || out.ExitCode != 0 || !strings.Contains(out.Stdout, udid) {
		t.Fatalf("device_exec simctl list: %s", text)
	}
	// device_open_url reaches the leased simulator: the simulated device
	// records what simctl openurl delivered to it.
	if text, isErr := a.call("device_open_url", map[string]any{"url": "myapp://orders/42"}, nil); isErr {
		t.Fatalf("device_open_url: %s", text)
	}
	var st struct{ Devices []device }
	w.json(&st, "list", "--json")
	set := ""
	for _, d := range st.Devices {
		if d.UDID == udid {
			set = d.DeviceSet
		}
	}
	var simDev struct{ OpenedURLs []string }
	if raw, err := os.ReadFile(filepath.Join(set, udid, "device.json")); err != nil || json.Unmarshal(raw, &simDev) != nil ||
		!slices.Contains(simDev.OpenedURLs, "myapp://orders/42") {
		t.Fatalf("the simulator %s was not handed the URL (%v): %+v", udid, err, simDev)
	}
	// The pin still applies: simctl may name only the leased UDID.
	if text, isErr := a.call("device_exec", map[string]any{"tool": "simctl", "args": []string{"io", "booted", "screenshot", "-"}}, nil); !isErr || errorCodeOf(t, text) != "PASSTHROUGH_REFUSED" {
		t.Fatalf("simctl io booted: %s", text)
	}

	// Another lease, even on this machine, is not this session's.
	other := w.leaseFor("someone-else", "--platform", "ios", "--model", "iPhone 16")
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"device_exec", map[string]any{"leaseId": other.LeaseID, "tool": "simctl", "args": []string{"list"}}},
		{"device_screenshot", map[string]any{"leaseId": other.LeaseID}},
		{"device_install", map[string]any{"leaseId": other.LeaseID, "path": "/tmp"}},
		{"device_open_url", map[string]any{"leaseId": other.LeaseID, "url": "https://example.com"}},
	} {
		res := a.callRaw(call.tool, call.args)
		if !res.IsError || errorCodeOf(t, res.Content[0].(*mcpsdk.TextContent).Text) != "FORBIDDEN" {
			t.Errorf("%s on another lease: %+v", call.tool, res.Content)
		}
	}
	if text, isErr := a.call("release_simulator", map[string]any{"leaseId": mine}, nil); isErr {
		t.Fatal(text)
	}

	// Android: the screenshot goes through screencap and adb pull; an app
	// from a path this server can read is installed.
	if text, isErr := a.call("lease_simulator", map[string]any{"platform": "android", "model": "pixel_6"}, nil); isErr {
		t.Fatal(text)
	}
	if wd, ht := a.screenshot(map[string]any{}); wd != 540 || ht != 1200 {
		t.Fatalf("Android screenshot %dx%d", wd, ht)
	}
	apk := filepath.Join(t.TempDir(), "com.example.tools.apk")
	if err := os.WriteFile(apk, []byte("PK"), 0o600); err != nil {
		t.Fatal(err)
	}
	if text, isErr := a.call("device_install", map[string]any{"path": apk}, nil); isErr || !strings.Contains(text, "Success") {
		t.Fatalf("device_install: %s", text)
	}
	text, isErr = a.call("device_exec", map[string]any{"tool": "adb", "args": []string{"shell", "pm", "list", "packages", "-3"}}, nil)
	if isErr || !strings.Contains(text, "package:com.example.tools") {
		t.Fatalf("installed package not listed: %s", text)
	}
	if text, isErr := a.call("device_install", map[string]any{"path": "relative.apk"}, nil); !isErr || errorCodeOf(t, text) != "BAD_REQUEST" {
		t.Fatalf("relative path: %s", text)
	}
	if text, isErr := a.call("device_open_url", map[string]any{"url": "no scheme"}, nil); !isErr || errorCodeOf(t, text) != "BAD_REQUEST" {
		t.Fatalf("url without a scheme: %s", text)
	}
}
