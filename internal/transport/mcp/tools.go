package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// Tool names, as agents see them.
const (
	ToolListDevices      = "list_devices"
	ToolLeaseSimulator   = "lease_simulator"
	ToolLeaseStatus      = "lease_status"
	ToolReleaseSimulator = "release_simulator"
)

const instructions = `simlock lends this agent an exclusive iOS Simulator or Android Emulator.
Flow: list_devices (optional) -> lease_simulator -> drive the device with the commands it returns -> release_simulator.
While this server runs it renews your lease at a third of its TTL; it releases the lease when the session ends.
Errors are JSON {"error":{code,message,retryable,nextAction}}: follow nextAction, and retry only when retryable is true.`

// Tool inputs and outputs. Schemas are derived from these declarations by
// the contract's generator; the descriptions below are added to them.

type listDevicesIn struct {
	Platform string `json:"platform,omitempty"`
}

type listDevicesOut struct {
	// Health is the daemon's state; "starting" means devices are not
	// loaded yet.
	Health     string                     `json:"health"`
	Platforms  []contract.PlatformCatalog `json:"platforms"`
	Devices    []contract.Device          `json:"devices"`
	Capacity   contract.Capacity          `json:"capacity"`
	QueueDepth int                        `json:"queueDepth"`
}

type leaseSimulatorIn struct {
	Platform      string          `json:"platform,omitempty"`
	Model         string          `json:"model,omitempty"`
	OSVersion     string          `json:"osVersion,omitempty"`
	TTL           json.RawMessage `json:"ttl,omitempty"`
	Timeout       json.RawMessage `json:"timeout,omitempty"`
	AllowDownload bool            `json:"allowDownload,omitempty"`
	// Resources tunes the device before the grant (no opt-in needed).
	Resources map[string]contract.ResourceState `json:"resources,omitempty"`
	// Devices leases several devices at once, all or none (ADR 0043).
	Devices []contract.DeviceSpec `json:"devices,omitempty"`
}

type leaseSimulatorOut struct {
	Lease contract.Lease `json:"lease"`
	Drive drive          `json:"drive"`
}

// drive tells the agent how to reach the leased device.
type drive struct {
	Commands []string          `json:"commands"`
	Env      map[string]string `json:"env,omitempty"`
	Hint     string            `json:"hint"`
}

type leaseStatusIn struct{}

type releaseSimulatorIn struct {
	LeaseID string `json:"leaseId,omitempty"`
}

// tool is one MCP tool: its declaration and what it runs.
type tool struct {
	decl *mcpsdk.Tool
	run  func(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error)
}

func (s *session) server() *mcpsdk.Server {
	instr := instructions
	if s.o.DeviceTools {
		instr += deviceInstructions
	}
	opts := &mcpsdk.ServerOptions{Instructions: instr, Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}}}
	if s.acquired != nil {
		s.acquired.decorate(opts)
	}
	if s.slot != nil {
		s.slot.decorate(opts)
	}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "simlock", Title: "simlock", Version: s.o.Version}, opts)
	tools := append(s.tools(), s.resourceTools()...)
	if s.o.DeviceTools {
		tools = append(tools, s.deviceTools()...)
	}
	if s.acquired != nil {
		tools = s.acquired.tools(tools)
		s.acquired.install(srv)
	}
	if s.slot != nil {
		tools = s.slot.tools(tools)
		s.slot.install(srv)
	}
	for _, t := range tools {
		srv.AddTool(t.decl, s.handler(t.run))
	}
	return srv
}

func (s *session) tools() []tool {
	return []tool{
		{decl: &mcpsdk.Tool{
			Name:  ToolListDevices,
			Title: "List leasable simulators",
			Description: `List what simlock can lease on this machine. Returns {health, platforms, devices, capacity, queueDepth}:
platforms is the catalog (per platform: the models and OS runtimes it can serve; runtimes with available=false need allowDownload),
devices are the devices simlock manages now with their state (ready = booted and free, leased = held by someone,
provisioning/reclaiming = being prepared, quarantined = failing health checks). A model need not have a device yet:
simlock creates one on demand. Next: call lease_simulator with a platform, model and osVersion taken from here.
Errors (JSON {"error":{code,message,retryable,nextAction}}): DAEMON_STARTUP_FAILED / DAEMON_NOT_RUNNING (the daemon could not be
reached or started; follow nextAction), PROTOCOL_VERSION_UNSUPPORTED (simlock versions differ; tell the user), CONNECTION_LOST (call again).`,
			Annotations: &mcpsdk.ToolAnnotations{Title: "List leasable simulators", ReadOnlyHint: true, OpenWorldHint: new(false)},
			InputSchema: schemaFor[listDevicesIn](map[string]any{
				"platform": map[string]any{"enum": []string{"ios", "android"},
					"description": "Only this platform (default: every platform the daemon serves)."},
			}),
			OutputSchema: schemaFor[listDevicesOut](nil),
		}, run: s.listDevices},
		{decl: &mcpsdk.Tool{
			Name:  ToolLeaseSimulator,
			Title: "Lease a simulator or emulator",
			Description: `Lease one booted, clean iOS Simulator or Android Emulator for your exclusive use. If none is free the call waits in a
fair FIFO queue (bounded by timeout); send a progressToken to get notifications/progress (queue position, provisioning, booting).
Returns {lease, drive}: lease.leaseId, lease.expiresAt, lease.ttlMs and lease.device (udid and deviceSet for iOS, serial and env for
Android); drive.commands are ready-to-run examples (for example "simlock simctl install <udid> App.app",
"xcrun simctl --set <deviceSet> ...", "simlock adb -s <serial> ...").
While this MCP server runs it renews the lease at a third of its TTL, and it releases it when the session ends; call
release_simulator as soon as you are done. One lease per session: while you hold one, a second call fails with
REQUESTER_ALREADY_LEASED (details.leaseId names it; release it first, or use lease_status to find it again).
Other errors (JSON {"error":{code,message,retryable,nextAction}}): UNSUPPORTED_PLATFORM / UNKNOWN_MODEL / OS_VERSION_OUT_OF_RANGE
(pick values from list_devices), RUNTIME_NOT_INSTALLED (retry with allowDownload: true, a multi-GB download), DOWNLOAD_FORBIDDEN,
QUEUE_TIMEOUT (retry with a longer timeout), NO_CAPACITY, DEVICE_FAILED and INSUFFICIENT_DISK_SPACE (retryable), BAD_REQUEST
(fix the arguments; ttl above the daemon's maximum is refused, not clamped), DAEMON_STARTUP_FAILED, CONNECTION_LOST (call lease_status
first: the lease may have been granted).`,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Lease a simulator or emulator", DestructiveHint: new(false), OpenWorldHint: new(false)},
			InputSchema: schemaFor[leaseSimulatorIn](map[string]any{
				"platform":  map[string]any{"enum": []string{"ios", "android"}, "description": "ios (Simulator) or android (Emulator); required unless devices is given."},
				"model":     map[string]any{"description": `Device model, e.g. "iPhone 16" or "Pixel 8" (default: the platform's default). See list_devices.`},
				"osVersion": map[string]any{"description": `OS version, e.g. "18.0" or "35" (default: the newest installed that runs the model).`},
				"ttl": map[string]any{"type": []string{"string", "integer"}, "examples": []any{"15m", 900000},
					"description": `Lease width: a duration like "15m" or "90s", or milliseconds. The lease ends this long after its last renew; this session renews it while it runs (default: the daemon's lease.defaultTtlMs).`},
				"timeout": map[string]any{"type": []string{"string", "integer"}, "examples": []any{"5m", 300000},
					"description": `Give up waiting in the queue after this long (QUEUE_TIMEOUT): a duration like "5m" or milliseconds (default: wait until a device is free).`},
				"allowDownload": map[string]any{"description": "Permit installing a missing OS runtime (multi-GB, slow). Default false."},
				"devices":       map[string]any{"description": `Several devices in one lease, granted all at once or not at all, e.g. [{"platform":"ios","model":"iPhone 16"},{"platform":"android"}] (instead of platform, model and osVersion; at most the daemon's queue.maxGroupSize). lease.devices lists them in this order; lease.device is the first. Renew and release act on all of them.`},
				"resources":     map[string]any{"description": `Tune the device before it is granted: a map of resource group to "enabled" or "disabled", e.g. {"animations": "disabled"} (see get_device_resources for the groups). The result is lease.resources; on iOS a group that cannot be proven fails the lease with RESOURCE_PROFILE_UNPROVEN (details.resourceDrift) and leaves no device behind.`},
			}),
			OutputSchema: schemaFor[leaseSimulatorOut](nil),
		}, run: s.leaseSimulator},
		{decl: &mcpsdk.Tool{
			Name:  ToolLeaseStatus,
			Title: "Show your leases",
			Description: `Show the leases you hold, straight from the daemon (one lease.list call, nothing cached here). Returns {leases: [...]},
each with leaseId, expiresAt, lastRenewedAt, ttlMs and the device (udid/serial, deviceSet, env, state). Use it to find your lease and
device again (after a reconnect it is the same lease, never a new one) or to check it is still alive; an empty list means you hold
nothing: call lease_simulator. Errors (JSON {"error":{code,message,retryable,nextAction}}): DAEMON_STARTUP_FAILED /
DAEMON_NOT_RUNNING (follow nextAction), CONNECTION_LOST (call again).`,
			Annotations:  &mcpsdk.ToolAnnotations{Title: "Show your leases", ReadOnlyHint: true, OpenWorldHint: new(false)},
			InputSchema:  schemaFor[leaseStatusIn](nil),
			OutputSchema: schemaFor[contract.LeaseListOut](nil),
		}, run: s.leaseStatus},
		{decl: &mcpsdk.Tool{
			Name:  ToolReleaseSimulator,
			Title: "Release a simulator",
			Description: `Give a leased device back. leaseId defaults to the lease this session holds. Returns {leaseId, released: true} at once;
simlock resets the device in the background for the next user, so do not erase or shut it down yourself. Call it as soon as you
are done with the device. Errors (JSON {"error":{code,message,retryable,nextAction}}): UNKNOWN_LEASE (the lease already ended,
expired or released: nothing left to do), FORBIDDEN (the lease belongs to someone else; you can release only your own),
BAD_REQUEST (no leaseId given and this session holds no lease, or several), DAEMON_STARTUP_FAILED, CONNECTION_LOST (call again).`,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Release a simulator", DestructiveHint: new(true), IdempotentHint: true, OpenWorldHint: new(false)},
			InputSchema: schemaFor[releaseSimulatorIn](map[string]any{
				"leaseId": map[string]any{"description": "The lease to release (default: the one this session holds)."},
			}),
			OutputSchema: schemaFor[contract.LeaseReleaseOut](nil),
		}, run: s.releaseSimulator},
	}
}

// schemaFor derives T's JSON Schema with the contract's generator and merges
// props into its properties (descriptions, enums, widened types).
func schemaFor[T any](props map[string]any) map[string]any {
	s := contract.Schema(reflect.TypeFor[T]())
	have, _ := s["properties"].(map[string]any)
	for name, extra := range props {
		p, ok := have[name].(map[string]any)
		if !ok {
			panic(fmt.Sprintf("schema of %s has no property %q", reflect.TypeFor[T](), name))
		}
		for k, v := range extra.(map[string]any) {
			p[k] = v
		}
	}
	return s
}

// handler runs a tool serialized with every other tool call, cancelled when
// the session ends, and shapes its answer: the output as structured content
// (and as JSON text), or a tool error carrying the contract error object.
func (s *session) handler(run func(context.Context, *mcpsdk.CallToolRequest) (any, error)) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.life, cancel)()
		if err := s.acquire(ctx); err != nil {
			return errorResult(err), nil
		}
		defer s.releaseSlot()
		out, err := run(ctx, req)
		if err != nil {
			if s.slot != nil {
				err = s.slot.toolError(err)
			}
			return errorResult(err), nil
		}
		if r, ok := out.(*mcpsdk.CallToolResult); ok {
			return r, nil // shaped by the tool itself (an image)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return errorResult(contract.Errorf(contract.CodeInternal, "encode result: %v", err)), nil
		}
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}},
			StructuredContent: json.RawMessage(b)}, nil
	}
}

// errorResult is a tool error whose text is {"error": <contract error>}.
func errorResult(err error) *mcpsdk.CallToolResult {
	b, _ := json.Marshal(map[string]any{"error": asContractError(err)})
	return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}}}
}

func asContractError(err error) *contract.Error {
	if ce := contract.AsError(err); ce != nil {
		return ce
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return contract.Errorf(contract.CodeRequestCancelled, "the tool call was cancelled before it finished").
			WithNext("call the tool again if you still need it")
	}
	return contract.Errorf(contract.CodeInternal, "%v", err)
}

func decodeArgs(req *mcpsdk.CallToolRequest, v any) error {
	return contract.Decode(req.Params.Arguments, v)
}

func (s *session) listDevices(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in listDevicesIn
	if err := decodeArgs(req, &in); err != nil {
		return nil, err
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, err
	}
	cat, err := client.Do(ctx, c, contract.CatalogGet, contract.CatalogGetIn{Platform: in.Platform})
	if err != nil {
		return nil, err
	}
	st, err := client.Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		return nil, err
	}
	out := listDevicesOut{Health: st.Daemon.Health, Platforms: cat.Platforms, Devices: []contract.Device{},
		Capacity: st.Capacity, QueueDepth: st.QueueDepth}
	if out.Platforms == nil {
		out.Platforms = []contract.PlatformCatalog{}
	}
	for _, d := range st.Devices {
		if in.Platform == "" || d.Platform == in.Platform {
			out.Devices = append(out.Devices, d)
		}
	}
	return out, nil
}

func (s *session) leaseSimulator(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in leaseSimulatorIn
	if err := decodeArgs(req, &in); err != nil {
		return nil, err
	}
	ttl, err := parseDuration("ttl", in.TTL)
	if err != nil {
		return nil, err
	}
	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return nil, err
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, err
	}
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: in.Platform, Model: in.Model, OSVersion: in.OSVersion,
		TTLMs: ttl.Milliseconds(), TimeoutMs: timeout.Milliseconds(), AllowDownload: in.AllowDownload, Resources: in.Resources,
		Devices: in.Devices}, progressRelay(ctx, req))
	if err != nil {
		if ctx.Err() != nil {
			s.withdraw(c)
		}
		return nil, err
	}
	s.track(l)
	s.log.Info("leased", "leaseId", l.LeaseID, "deviceId", l.DeviceID, "ttlMs", l.TTLMs)
	return leaseSimulatorOut{Lease: l, Drive: driveFor(l)}, nil
}

// withdraw takes back a lease request its caller gave up on: the daemon
// keeps a request queued when its connection stops waiting. If the grant
// won the race, the lease is picked up so the session renews and releases it.
func (s *session) withdraw(c *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := client.Do(ctx, c, contract.LeaseCancel, contract.LeaseCancelIn{})
	switch {
	case err == nil:
		s.log.Info("withdrew the interrupted lease request")
	case client.IsCode(err, contract.CodeNoPendingRequest):
		s.log.Info("the interrupted lease request was no longer queued")
	default:
		s.log.Warn("could not withdraw the interrupted lease request", "err", err)
	}
	s.pickUp(ctx, c)
}

func (s *session) leaseStatus(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in leaseStatusIn
	if err := decodeArgs(req, &in); err != nil {
		return nil, err
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, err
	}
	out, err := client.Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
	if out.Leases == nil {
		out.Leases = []contract.Lease{}
	}
	return out, err
}

func (s *session) releaseSimulator(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in releaseSimulatorIn
	if err := decodeArgs(req, &in); err != nil {
		return nil, err
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, err
	}
	id := in.LeaseID
	if id == "" {
		ids := s.heldIDs()
		switch len(ids) {
		case 1:
			id = ids[0]
		case 0:
			return nil, contract.Errorf(contract.CodeBadRequest, "this session holds no lease, and no leaseId was given").
				WithNext("pass leaseId; lease_status lists the leases you hold")
		default:
			return nil, contract.Errorf(contract.CodeBadRequest, "this session holds %d leases (%s); say which with leaseId",
				len(ids), strings.Join(ids, ", ")).WithDetails("leaseIds", ids).WithNext("pass leaseId")
		}
	}
	out, err := client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: id})
	switch {
	case err == nil:
		s.drop(id, "released by the agent")
	case client.IsCode(err, contract.CodeUnknownLease):
		s.drop(id, "the daemon no longer has it")
	}
	return out, err
}

// progressRelay forwards the daemon's progress pushes as
// notifications/progress, only when the client asked with a progress token.
func progressRelay(ctx context.Context, req *mcpsdk.CallToolRequest) func(contract.Progress) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	var n float64 // pushes arrive one at a time on the client's reader
	return func(p contract.Progress) {
		n++
		_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: describe(p)})
	}
}

// describe renders a progress push for a person or an agent.
func describe(p contract.Progress) string {
	msg := p.Phase
	if p.Phase == "queued" && p.QueuePosition > 0 {
		msg = fmt.Sprintf("queued at position %d", p.QueuePosition)
	}
	if p.DeviceID != "" {
		msg += " " + p.DeviceID
	}
	if p.EtaMs > 0 {
		msg += fmt.Sprintf(" (about %s)", (time.Duration(p.EtaMs) * time.Millisecond).Round(time.Second))
	}
	if p.Message != "" {
		msg += ": " + p.Message
	}
	return msg
}

// parseDuration reads a tool duration: a Go duration string ("15m"), or
// whole milliseconds as a number or a string of digits. Absent means 0.
func parseDuration(field string, raw json.RawMessage) (time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	bad := func(format string, args ...any) error {
		return contract.Errorf(contract.CodeBadRequest, field+": "+format, args...).
			WithNext(`pass ` + field + ` as a duration like "15m" or "90s", or as whole milliseconds`)
	}
	var d time.Duration
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		str = strings.TrimSpace(str)
		if ms, err := strconv.ParseInt(str, 10, 64); err == nil {
			d = time.Duration(ms) * time.Millisecond
		} else if d, err = time.ParseDuration(str); err != nil {
			return 0, bad("%q is not a duration", str)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var n json.Number
		if err := dec.Decode(&n); err != nil {
			return 0, bad("want a string or a number, got %s", raw)
		}
		ms, err := n.Int64()
		if err != nil {
			return 0, bad("%s is not a whole number of milliseconds", n)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d < 0 {
		return 0, bad("must not be negative")
	}
	if d > 0 && d < time.Millisecond {
		return 0, bad("must be at least 1ms")
	}
	return d, nil
}

// driveFor says how to reach the leased device from a shell.
func driveFor(l contract.Lease) drive {
	dr := drive{Commands: []string{}, Hint: "This MCP session renews the lease while it runs and releases it when it ends; " +
		"call release_simulator when you are done. simlock resets the device after release: do not erase, shut down or delete it yourself."}
	d := l.Device
	if d == nil {
		return dr
	}
	dr.Env = d.Env
	switch {
	case d.UDID != "":
		dr.Commands = append(dr.Commands,
			"simlock simctl install "+d.UDID+" /path/to/App.app",
			"simlock simctl launch "+d.UDID+" com.example.App",
			"simlock simctl io "+d.UDID+" screenshot screen.png")
		if d.DeviceSet != "" {
			dr.Commands = append(dr.Commands, "xcrun simctl --set "+shellQuote(d.DeviceSet)+" openurl "+d.UDID+" https://example.com")
		}
		dr.Hint = "simlock simctl is xcrun simctl scoped to simlock's device set (deviceSet); a plain `xcrun simctl` " +
			"without --set cannot see this simulator. Always name it by udid " + d.UDID + ". " + dr.Hint
	case d.Serial != "":
		dr.Commands = append(dr.Commands,
			"simlock adb -s "+d.Serial+" install app.apk",
			"simlock adb -s "+d.Serial+" shell getprop ro.build.version.release")
		if prefix := envPrefix(d.Env); prefix != "" {
			dr.Commands = append(dr.Commands, prefix+" adb -s "+d.Serial+" logcat -d")
		}
		dr.Hint = "simlock adb talks to simlock's private adb server; to run adb directly, export env first. Always pass -s " +
			d.Serial + ". " + dr.Hint
	}
	return dr
}

func envPrefix(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+shellQuote(env[k]))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
