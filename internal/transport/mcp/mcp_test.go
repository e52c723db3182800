package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
)

// harness is one real in-process daemon on a temporary home, with the fake
// driver, that a test can stop and start again on the same home.
type harness struct {
	t      *testing.T
	home   string
	cfg    config.Config
	drv    *fakedrv.Driver
	d      *daemon.Daemon
	marker string // created by the launch command, if anything launches
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	home, err := os.MkdirTemp("", "slm-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4}
	h := &harness{t: t, home: home, cfg: cfg, drv: fakedrv.New("ios"), marker: filepath.Join(home, "launched")}
	t.Cleanup(func() {
		h.stop()
		os.RemoveAll(home)
	})
	h.start()
	return h
}

func (h *harness) start() {
	h.t.Helper()
	d, err := daemon.Start(context.Background(), daemon.Options{Home: h.home, Config: h.cfg, Version: "test",
		Drivers: []core.Driver{h.drv}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.d = d
}

func (h *harness) stop() {
	if h.d != nil {
		h.d.Stop()
		h.d = nil
	}
}

// admin dials the daemon with its admin secret, to check what it holds.
func (h *harness) admin() *client.Client {
	h.t.Helper()
	b, err := os.ReadFile(config.PathsFor(h.home).AdminToken)
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), client.Options{Socket: config.PathsFor(h.home).Socket,
		Principal: "test-admin", Credential: strings.TrimSpace(string(b))})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

func (h *harness) leases() []contract.Lease {
	h.t.Helper()
	out, err := client.Do(context.Background(), h.admin(), contract.LeaseList, contract.LeaseListIn{})
	if err != nil {
		h.t.Fatal(err)
	}
	return out.Leases
}

func (h *harness) launched() bool {
	_, err := os.Stat(h.marker)
	return err == nil
}

// options for a session on this harness. Launching runs a shell that only
// leaves a marker file, so a test sees whether anything tried to launch.
func (h *harness) options(principal string, logs *logRecorder) Options {
	return Options{
		Socket:      config.PathsFor(h.home).Socket,
		Principal:   principal,
		Launch:      client.LaunchOptions{Exe: "/bin/sh", Args: []string{"-c", "touch '" + h.marker + "'"}, Wait: 300 * time.Millisecond},
		ParentWatch: &fakeParent{gone: make(chan struct{})},
		Logger:      slog.New(logs),
		Version:     "test",
	}
}

type fakeParent struct {
	once sync.Once
	gone chan struct{}
}

func (p *fakeParent) Watch(context.Context) <-chan struct{} { return p.gone }
func (p *fakeParent) die()                                  { p.once.Do(func() { close(p.gone) }) }

// logRecorder is a slog handler that keeps messages so a test can wait for
// one instead of sleeping.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func newLogs() *logRecorder { return &logRecorder{added: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	close(l.added)
	l.added = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// count reports how many messages contain s, and a channel closed at the
// next message.
func (l *logRecorder) count(s string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n, l.added
}

// wait blocks until n messages contain s.
func (l *logRecorder) wait(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.After(testhost.Scale(5 * time.Second))
	for {
		got, next := l.count(s)
		if got >= n {
			return
		}
		select {
		case <-next:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("no log %q after 5s; logs:\n%s", s, strings.Join(l.lines, "\n"))
		}
	}
}

// session is an MCP client talking to Run over in-memory pipes, exactly as
// an agent talks to `simlock mcp` over its stdin and stdout.
type testSession struct {
	t        *testing.T
	cs       *mcpsdk.ClientSession
	stdin    io.WriteCloser
	cancel   context.CancelFunc
	done     chan struct{} // closed when Run has returned runErr
	runErr   error
	progress chan *mcpsdk.ProgressNotificationParams
}

func serve(t *testing.T, o Options) *testSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &testSession{t: t, stdin: inW, cancel: cancel, done: make(chan struct{}),
		progress: make(chan *mcpsdk.ProgressNotificationParams, 64)}
	go func() {
		s.runErr = Run(ctx, o, inR, outW)
		outW.Close()
		close(s.done)
	}()
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "simlock-test", Version: "0"}, &mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcpsdk.ProgressNotificationClientRequest) {
			s.progress <- r.Params
		}})
	cs, err := cl.Connect(ctx, &mcpsdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.cs = cs
	t.Cleanup(func() {
		cancel()
		cs.Close()
		select {
		case <-s.done:
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Error("Run did not return")
		}
	})
	return s
}

// wait returns what Run returned.
func (s *testSession) wait() error {
	s.t.Helper()
	select {
	case <-s.done:
		return s.runErr
	case <-time.After(testhost.Scale(10 * time.Second)):
		s.t.Fatal("Run did not return")
		return nil
	}
}

// end closes the agent's side of stdin (EOF) and returns what Run returned.
func (s *testSession) end() error {
	s.stdin.Close()
	return s.wait()
}

// call runs a tool; a tool error comes back as the contract error it carries.
func (s *testSession) call(name string, args any, token any) (json.RawMessage, *contract.Error) {
	s.t.Helper()
	p := &mcpsdk.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(15*time.Second))
	defer cancel()
	res, err := s.cs.CallTool(ctx, p)
	if err != nil {
		s.t.Fatalf("%s: protocol error %v", name, err)
	}
	if len(res.Content) != 1 {
		s.t.Fatalf("%s: want one content block, got %d", name, len(res.Content))
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	if res.IsError {
		var e struct {
			Error *contract.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(text), &e); err != nil || e.Error == nil || e.Error.Code == "" {
			s.t.Fatalf("%s: tool error is not a contract error: %s", name, text)
		}
		return nil, e.Error
	}
	if res.StructuredContent == nil {
		s.t.Fatalf("%s: no structured content", name)
	}
	return json.RawMessage(text), nil
}

func (s *testSession) ok(name string, args any, out any) {
	s.t.Helper()
	raw, cerr := s.call(name, args, nil)
	if cerr != nil {
		s.t.Fatalf("%s: %v", name, cerr)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		s.t.Fatal(err)
	}
}

func (s *testSession) lease(args map[string]any) contract.Lease {
	s.t.Helper()
	var out leaseSimulatorOut
	s.ok(ToolLeaseSimulator, args, &out)
	return out.Lease
}

func (s *testSession) status() []contract.Lease {
	s.t.Helper()
	var out contract.LeaseListOut
	s.ok(ToolLeaseStatus, map[string]any{}, &out)
	return out.Leases
}

func wantCode(t *testing.T, cerr *contract.Error, code contract.Code) {
	t.Helper()
	if cerr == nil || cerr.Code != code {
		t.Fatalf("want %s, got %+v", code, cerr)
	}
	if cerr.Message == "" || (cerr.NextAction == "" && code != contract.CodeRequestCancelled) {
		t.Fatalf("error without message or next action: %+v", cerr)
	}
}

func ids(ls []contract.Lease) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.LeaseID)
	}
	return out
}

func TestToolsListShowsFourToolsWithSchemas(t *testing.T) {
	h := newHarness(t)
	s := serve(t, h.options("agent", newLogs()))
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if len(tl.Description) < 200 {
			t.Errorf("%s: description too thin for an agent to act on: %q", tl.Name, tl.Description)
		}
		in, _ := tl.InputSchema.(map[string]any)
		if in["type"] != "object" || in["additionalProperties"] != false {
			t.Errorf("%s: input schema %v", tl.Name, tl.InputSchema)
		}
		if out, _ := tl.OutputSchema.(map[string]any); out["type"] != "object" {
			t.Errorf("%s: output schema %v", tl.Name, tl.OutputSchema)
		}
	}
	slices.Sort(names)
	// The resource tools that write are opt-in (resource_tools_test.go);
	// the read is always served.
	if want := []string{ToolGetResources, ToolLeaseSimulator, ToolLeaseStatus, ToolListDevices, ToolReleaseSimulator}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, tl := range res.Tools {
		if tl.Name != ToolLeaseSimulator {
			continue
		}
		in := tl.InputSchema.(map[string]any)
		props := in["properties"].(map[string]any)
		for _, p := range []string{"platform", "model", "osVersion", "ttl", "timeout", "allowDownload", "devices"} {
			if props[p] == nil || props[p].(map[string]any)["description"] == nil {
				t.Errorf("lease_simulator input lacks a described %q", p)
			}
		}
		// platform or devices (ADR 0043): neither is required alone, and
		// the daemon refuses a call that names neither (BAD_REQUEST).
		if in["required"] != nil {
			t.Errorf("required %v", in["required"])
		}
		out := tl.OutputSchema.(map[string]any)["properties"].(map[string]any)
		if out["lease"] == nil || out["drive"] == nil {
			t.Errorf("lease_simulator output schema %v", out)
		}
	}
}

func TestLeaseStatusRelease(t *testing.T) {
	h := newHarness(t)
	s := serve(t, h.options("agent", newLogs()))

	var devs listDevicesOut
	s.ok(ToolListDevices, map[string]any{"platform": "ios"}, &devs)
	if devs.Health != "running" || len(devs.Platforms) != 1 || devs.Platforms[0].Platform != "ios" {
		t.Fatalf("list_devices %+v", devs)
	}

	var out leaseSimulatorOut
	s.ok(ToolLeaseSimulator, map[string]any{"platform": "ios", "ttl": "15m"}, &out)
	l := out.Lease
	if l.TTLMs != 15*60*1000 || l.OwnerID != "agent" || l.Device == nil || l.Device.UDID == "" {
		t.Fatalf("lease %+v", l)
	}
	if len(out.Drive.Commands) == 0 || !strings.Contains(out.Drive.Commands[0], l.Device.UDID) {
		t.Fatalf("drive %+v", out.Drive)
	}

	if got := s.status(); len(got) != 1 || got[0].LeaseID != l.LeaseID {
		t.Fatalf("lease_status %v, want [%s]", ids(got), l.LeaseID)
	}
	s.ok(ToolListDevices, nil, &devs)
	if len(devs.Devices) != 1 || devs.Devices[0].Runtime.Lifecycle != contract.StateLeased {
		t.Fatalf("devices %+v", devs.Devices)
	}

	var rel contract.LeaseReleaseOut
	s.ok(ToolReleaseSimulator, map[string]any{}, &rel) // defaults to the session's lease
	if !rel.Released || rel.LeaseID != l.LeaseID {
		t.Fatalf("release %+v", rel)
	}
	if got := s.status(); len(got) != 0 {
		t.Fatalf("lease_status after release %v", ids(got))
	}
	_, cerr := s.call(ToolReleaseSimulator, map[string]any{"leaseId": l.LeaseID}, nil)
	wantCode(t, cerr, contract.CodeUnknownLease)
}

func TestBadArgumentsAreContractErrors(t *testing.T) {
	h := newHarness(t)
	s := serve(t, h.options("agent", newLogs()))
	for name, args := range map[string]map[string]any{
		"unknown field":  {"platform": "ios", "color": "blue"},
		"bad ttl":        {"platform": "ios", "ttl": "soon"},
		"negative ttl":   {"platform": "ios", "ttl": -5},
		"fractional ttl": {"platform": "ios", "timeout": 1.5},
		"no platform":    {},
	} {
		_, cerr := s.call(ToolLeaseSimulator, args, nil)
		if cerr == nil || cerr.Code != contract.CodeBadRequest {
			t.Errorf("%s: want BAD_REQUEST, got %+v", name, cerr)
		}
	}
	_, cerr := s.call(ToolLeaseSimulator, map[string]any{"platform": "tvos"}, nil)
	wantCode(t, cerr, contract.CodeUnsupportedPlatform)
	_, cerr = s.call(ToolReleaseSimulator, map[string]any{}, nil)
	wantCode(t, cerr, contract.CodeBadRequest)
	if len(h.leases()) != 0 {
		t.Fatal("a refused request left a lease")
	}
}

func TestProgressOnlyWithAProgressToken(t *testing.T) {
	h := newHarness(t)
	s := serve(t, h.options("agent", newLogs()))

	// Without a token nothing is relayed, though the daemon pushes progress.
	l := s.lease(map[string]any{"platform": "ios"})
	select {
	case p := <-s.progress:
		t.Fatalf("progress without a token: %+v", p)
	default:
	}
	if _, cerr := s.call(ToolReleaseSimulator, map[string]any{"leaseId": l.LeaseID}, nil); cerr != nil {
		t.Fatal(cerr)
	}

	if _, cerr := s.call(ToolLeaseSimulator, map[string]any{"platform": "ios"}, "tok-7"); cerr != nil {
		t.Fatal(cerr)
	}
	var got []*mcpsdk.ProgressNotificationParams
	timeout := time.After(testhost.Scale(5 * time.Second))
	for len(got) == 0 || !strings.HasPrefix(got[len(got)-1].Message, "granted") {
		select {
		case p := <-s.progress:
			got = append(got, p)
		case <-timeout:
			t.Fatalf("progress so far %+v", got)
		}
	}
	for i, p := range got {
		if p.ProgressToken != "tok-7" || p.Progress != float64(i+1) {
			t.Fatalf("progress %d: %+v", i, p)
		}
	}
}

func TestRenewTimerKeepsTheLeaseAlive(t *testing.T) {
	h := newHarness(t)
	logs := newLogs()
	s := serve(t, h.options("agent", logs))
	// 3 s, renewed every second: a loaded machine that stalls the renew
	// timer for a second still has a second of slack (1.5 s left half one).
	l := s.lease(map[string]any{"platform": "ios", "ttl": 3000})

	time.Sleep(4500 * time.Millisecond) // past the TTL in real time: only renews keep it
	got := s.status()
	if len(got) != 1 || got[0].LeaseID != l.LeaseID || !got[0].LastRenewedAt.After(l.GrantedAt) || got[0].TTLMs != 3000 {
		t.Fatalf("past the TTL: %+v (granted %+v)", got, l)
	}

	// A lease ended behind the session's back answers UNKNOWN_LEASE to the
	// next renew, and the session stops holding it.
	if _, err := client.Do(context.Background(), h.admin(), contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "UNKNOWN_LEASE", 1)
	_, cerr := s.call(ToolReleaseSimulator, map[string]any{}, nil)
	wantCode(t, cerr, contract.CodeBadRequest) // the session holds nothing now
}

func TestSessionEndReleasesTheLease(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		end  func(s *testSession, o Options) error
	}{
		{"stdin EOF", func(s *testSession, _ Options) error { return s.end() }},
		{"signal", func(s *testSession, _ Options) error { s.cancel(); return s.wait() }},
		{"parent death", func(s *testSession, o Options) error { o.ParentWatch.(*fakeParent).die(); return s.wait() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := h.options("agent-"+tc.name, newLogs())
			s := serve(t, o)
			l := s.lease(map[string]any{"platform": "ios"})
			if err := tc.end(s, o); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if slices.Contains(ids(h.leases()), l.LeaseID) {
				t.Fatalf("lease %s survived the session's end", l.LeaseID)
			}
		})
	}
}

func TestReconnectPicksUpTheSurvivingLease(t *testing.T) {
	h := newHarness(t)
	logs := newLogs()
	s := serve(t, h.options("agent", logs))
	l := s.lease(map[string]any{"platform": "ios"})

	h.stop()
	logs.wait(t, "daemon connection lost", 1)
	h.start()

	got := s.status()
	if len(got) != 1 || got[0].LeaseID != l.LeaseID {
		t.Fatalf("after restart lease_status %v, want [%s]", ids(got), l.LeaseID)
	}
	if all := h.leases(); len(all) != 1 || all[0].LeaseID != l.LeaseID {
		t.Fatalf("daemon holds %v", ids(all))
	}
	// A new request is refused, naming the surviving lease: never a second one.
	_, cerr := s.call(ToolLeaseSimulator, map[string]any{"platform": "ios"}, nil)
	wantCode(t, cerr, contract.CodeRequesterLeased)
	if cerr.Details["leaseId"] != l.LeaseID {
		t.Fatalf("details %v", cerr.Details)
	}
	if h.launched() {
		t.Fatal("a daemon was launched although one was listening")
	}
	var rel contract.LeaseReleaseOut
	s.ok(ToolReleaseSimulator, map[string]any{}, &rel) // the picked-up lease is the session's
	if rel.LeaseID != l.LeaseID {
		t.Fatalf("released %s", rel.LeaseID)
	}
}

func TestReconnectReconcilesWithTheDaemon(t *testing.T) {
	h := newHarness(t)
	logs := newLogs()
	s := serve(t, h.options("agent", logs))
	l1 := s.lease(map[string]any{"platform": "ios"})

	h.stop()
	logs.wait(t, "daemon connection lost", 1)
	h.start()
	h.leases() // parks until the daemon has converged (lease.release would not: it is authorized first)
	// While the session is disconnected its lease ends, and the daemon
	// grants the same principal another one (as when a grant's answer is
	// lost with the connection).
	if _, err := client.Do(context.Background(), h.admin(), contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l1.LeaseID}); err != nil {
		t.Fatal(err)
	}
	same, err := client.Dial(context.Background(), client.Options{Socket: config.PathsFor(h.home).Socket, Principal: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	l2, err := same.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The reconnect drops the ended lease and picks the live one up.
	var rel contract.LeaseReleaseOut
	s.ok(ToolReleaseSimulator, map[string]any{}, &rel)
	if rel.LeaseID != l2.LeaseID {
		t.Fatalf("released %s, want the picked-up %s", rel.LeaseID, l2.LeaseID)
	}
}

func TestInterruptedLeaseRequestIsWithdrawn(t *testing.T) {
	h := newHarness(t)
	bob, err := client.Dial(context.Background(), client.Options{Socket: config.PathsFor(h.home).Socket, Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	for _, r := range []string{"bob-1", "bob-2"} { // every running slot
		if _, err := bob.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", RequesterID: r}, nil); err != nil {
			t.Fatal(err)
		}
	}
	logs := newLogs()
	s := serve(t, h.options("agent", logs))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		p := &mcpsdk.CallToolParams{Name: ToolLeaseSimulator, Arguments: map[string]any{"platform": "ios"}}
		p.SetProgressToken(1)
		_, err := s.cs.CallTool(ctx, p)
		done <- err
	}()
	select {
	case p := <-s.progress:
		if p.Message != "queued at position 1" {
			t.Fatalf("progress %+v", p)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("no queued progress")
	}
	cancel() // the agent gives up: the client sends notifications/cancelled
	<-done
	logs.wait(t, "withdrew the interrupted lease request", 1)
	st, err := client.Do(context.Background(), h.admin(), contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		t.Fatal(err)
	}
	if st.QueueDepth != 0 || len(st.Leases) != 2 {
		t.Fatalf("queue %d, leases %v", st.QueueDepth, ids(st.Leases))
	}
}

func TestRenewTimerReconnectsButNeverLaunches(t *testing.T) {
	h := newHarness(t)
	logs := newLogs()
	clk := fake.NewClock(time.Now())
	o := h.options("agent", logs)
	o.Clock = clk
	s := serve(t, o)
	l := s.lease(map[string]any{"platform": "ios", "ttl": "30m"})
	tick := 10 * time.Minute // TTL/3

	h.stop()
	logs.wait(t, "daemon connection lost", 1)
	clk.Advance(tick) // the renew finds nothing listening
	clk.Advance(tick)
	if n, _ := logs.count("renew failed"); n != 2 {
		t.Fatalf("%d failed renews, want 2", n)
	}
	if h.launched() {
		t.Fatal("the renew timer launched a daemon")
	}
	if _, err := os.Stat(o.Socket); !os.IsNotExist(err) {
		t.Fatal("a daemon is listening")
	}

	h.start()
	clk.Advance(tick) // reconnects to the listening daemon and renews
	all := h.leases()
	if len(all) != 1 || all[0].LeaseID != l.LeaseID || !all[0].LastRenewedAt.After(l.LastRenewedAt) {
		t.Fatalf("after the renew tick the daemon holds %+v (granted %+v)", all, l)
	}
	if n, _ := logs.count("reconnect=true"); n != 1 {
		t.Fatalf("%d reconnects, want 1", n)
	}

	// A tool call, unlike the timer, starts a daemon when nothing listens.
	h.stop()
	logs.wait(t, "daemon connection lost", 2)
	_, cerr := s.call(ToolLeaseStatus, map[string]any{}, nil)
	wantCode(t, cerr, contract.CodeDaemonStartupFailed)
	if !h.launched() {
		t.Fatal("a tool call with nothing listening did not launch a daemon")
	}
	h.start() // so the session's end can release
}

func TestReleasingAnotherPrincipalsLeaseIsForbidden(t *testing.T) {
	h := newHarness(t)
	bob, err := client.Dial(context.Background(), client.Options{Socket: config.PathsFor(h.home).Socket, Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	lb, err := bob.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, h.options("agent", newLogs()))
	_, cerr := s.call(ToolReleaseSimulator, map[string]any{"leaseId": lb.LeaseID}, nil)
	wantCode(t, cerr, contract.CodeForbidden)
	if !slices.Contains(ids(h.leases()), lb.LeaseID) {
		t.Fatal("bob's lease is gone")
	}
	if got := s.status(); len(got) != 0 {
		t.Fatalf("the agent sees %v", ids(got))
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{``, 0, true}, {`null`, 0, true}, {`"15m"`, 15 * time.Minute, true}, {`"1h30m"`, 90 * time.Minute, true},
		{`900000`, 15 * time.Minute, true}, {`"1500"`, 1500 * time.Millisecond, true}, {`0`, 0, true},
		{`"soon"`, 0, false}, {`-1`, 0, false}, {`"-1s"`, 0, false}, {`1.5`, 0, false}, {`"1us"`, 0, false},
		{`true`, 0, false}, {`{}`, 0, false},
	} {
		got, err := parseDuration("ttl", json.RawMessage(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: got %v, %v", tc.in, got, err)
		}
		if err != nil && !client.IsCode(err, contract.CodeBadRequest) {
			t.Errorf("%s: %v is not BAD_REQUEST", tc.in, err)
		}
	}
}

func TestDriveHints(t *testing.T) {
	ios := driveFor(contract.Lease{Device: &contract.Device{UDID: "U-1", DeviceSet: "/Users/a b/.simlock/devices/ios"}})
	if !slices.ContainsFunc(ios.Commands, func(c string) bool {
		return strings.Contains(c, "--set '/Users/a b/.simlock/devices/ios'") && strings.Contains(c, "U-1")
	}) {
		t.Errorf("ios %+v", ios)
	}
	android := driveFor(contract.Lease{Device: &contract.Device{Serial: "emulator-5560",
		Env: map[string]string{"ANDROID_ADB_SERVER_PORT": "5099"}}})
	if !slices.ContainsFunc(android.Commands, func(c string) bool {
		return strings.HasPrefix(c, "ANDROID_ADB_SERVER_PORT=5099 adb -s emulator-5560")
	}) || android.Env["ANDROID_ADB_SERVER_PORT"] != "5099" {
		t.Errorf("android %+v", android)
	}
	if d := describe(contract.Progress{Phase: "queued", QueuePosition: 2}); d != "queued at position 2" {
		t.Errorf("describe %q", d)
	}
	if d := describe(contract.Progress{Phase: "booting", DeviceID: "dev-1", EtaMs: 29_600}); d != "booting dev-1 (about 30s)" {
		t.Errorf("describe %q", d)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(ios); err != nil || !strings.Contains(buf.String(), `"commands"`) {
		t.Errorf("encode %s %v", buf.String(), err)
	}
}
