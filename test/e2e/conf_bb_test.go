package e2e

// Conformance of the backbone and gateway (issue 23, "Backbone and
// gateway"): each test drives the real binary on the simulated SDK and
// names the statement of simlock-architecture.txt it proves.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// Gateway and worker modes, Aggregation: a gateway's catalog.get is the
// union of its workers' catalogs "each model and runtime annotated with the
// workers that have it", and its status.get has "every device and lease
// carrying a workerId".
func TestConfBBGatewayCatalogAndStatusNameTheirWorkers(t *testing.T) {
	gw, _, _ := fleet(t, 2)
	var ids []string
	for _, v := range gw.workers() {
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)

	var cat struct {
		Platforms []struct {
			Platform string
			Models   []struct {
				Identifier string
				Workers    []string
			}
			Runtimes []struct {
				Identifier string
				Workers    []string
			}
		}
	}
	gw.json(&cat, "catalog", "--json")
	if len(cat.Platforms) == 0 {
		t.Fatal("the gateway's catalog is empty")
	}
	for _, pc := range cat.Platforms {
		if len(pc.Models) == 0 || len(pc.Runtimes) == 0 {
			t.Fatalf("%s: no models or runtimes", pc.Platform)
		}
		// Both workers run the same simulated SDK, so each entry is on both.
		for _, m := range pc.Models {
			if got := slices.Sorted(slices.Values(m.Workers)); !slices.Equal(got, ids) {
				t.Fatalf("%s model %s names workers %v, want %v", pc.Platform, m.Identifier, m.Workers, ids)
			}
		}
		for _, r := range pc.Runtimes {
			if got := slices.Sorted(slices.Values(r.Workers)); !slices.Equal(got, ids) {
				t.Fatalf("%s runtime %s names workers %v, want %v", pc.Platform, r.Identifier, r.Workers, ids)
			}
		}
	}

	var l lease
	gw.json(&l, "lease", "--platform", "ios", "--detach", "--requester", "agent-a")
	wid := workerOf(t, l.LeaseID)
	var st struct {
		Leases []struct {
			LeaseID  string `json:"leaseId"`
			WorkerID string `json:"workerId"`
			Worker   *struct{ ID string }
		}
		Devices []struct {
			ID       string
			WorkerID string `json:"workerId"`
		}
	}
	gw.json(&st, "status", "--json")
	if len(st.Leases) != 1 || st.Leases[0].LeaseID != l.LeaseID || st.Leases[0].WorkerID != wid ||
		st.Leases[0].Worker == nil || st.Leases[0].Worker.ID != wid {
		t.Fatalf("gateway status leases %+v, want workerId %s on %s", st.Leases, wid, l.LeaseID)
	}
	for _, d := range st.Devices {
		if d.WorkerID == "" {
			t.Fatalf("device %s has no workerId", d.ID)
		}
	}
	// lease.get through the gateway carries it too.
	var got struct {
		WorkerID string `json:"workerId"`
	}
	gw.json(&got, "lease", "get", l.LeaseID, "--json")
	if got.WorkerID != wid {
		t.Fatalf("lease get workerId %q, want %s", got.WorkerID, wid)
	}
}

// Warm pool and quarantine: "device.purge-failed still fires as it always
// did; device.quarantined ... are the follow-up facts": the failure that
// causes a quarantine is published before the quarantine itself.
func TestConfBBPurgeFailureIsPublishedBeforeItsQuarantine(t *testing.T) {
	w := newWorld(t, healConfig)
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=erase-fail@1")
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	w.mustRun("release", l.LeaseID)
	eventually(t, "quarantine and recovery", 30*time.Second, func() bool {
		return w.countEvents("device.quarantine-recovered", l.Device.ID) == 1
	})
	var failed, quarantined uint64
	for _, e := range w.events() {
		if e.DeviceID != l.Device.ID {
			continue
		}
		switch e.Type {
		case "device.purge-failed":
			failed = e.Seq
		case "device.quarantined":
			quarantined = e.Seq
		}
	}
	if failed == 0 || quarantined == 0 || failed > quarantined {
		t.Fatalf("device.purge-failed at seq %d, device.quarantined at seq %d: the cause must come first", failed, quarantined)
	}
}

// Device identity: "An OS version outside a model's supported range fails
// immediately with the range named in the error". iOS 26 dropped the
// iPhone Xs (the reference's own example): the runtimes that still run it
// bound its range.
func TestConfBBOSOutOfRangeNamesTheModelsRange(t *testing.T) {
	w := newWorld(t, oneRunning)
	r := w.run("lease", "--platform", "ios", "--model", "iPhone Xs", "--os", "26.3", "--no-wait", "--json")
	var out struct {
		Error struct {
			Code       string
			Message    string
			NextAction string
			Details    map[string]any
		}
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil || out.Error.Code != "OS_VERSION_OUT_OF_RANGE" {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
	e := out.Error
	// The simulated SDK installs iOS 17.5, 18.0 and 26.3; the Xs device
	// type starts at iOS 12.0 and only 26.3 lacks it.
	if !strings.Contains(e.Message, "12.0") || !strings.Contains(e.Message, "18.0") {
		t.Fatalf("message %q does not name the range iOS 12.0 to 18.0", e.Message)
	}
	if e.Details["min"] != "12.0" || e.Details["max"] != "18.0" {
		t.Fatalf("details %v", e.Details)
	}
	if !strings.Contains(e.NextAction, "18.0") {
		t.Fatalf("next action %q does not say which version to ask for", e.NextAction)
	}
	if st := w.status(); len(st.Devices) != 0 {
		t.Fatalf("a refused spec created devices: %+v", st.Devices)
	}
}

// httpWorld is a daemon with HTTP on and one running device, its base URL
// and an agent token.
func httpWorld(t *testing.T, config string) (w *world, base, token string) {
	t.Helper()
	w = newWorld(t, config)
	w.mustRun("daemon", "start")
	var st struct{ Daemon struct{ HTTP string } }
	w.json(&st, "status", "--json")
	var tok struct{ Token string }
	w.json(&tok, "token", "create", "--role", "agent", "--name", "ci", "--json")
	return w, "http://" + st.Daemon.HTTP, tok.Token
}

// Wait queue and HTTP: "lease.cancel, and the queued progress state ... all
// mean exactly what they mean on a worker": giving up a queued HTTP
// request is a cancel (REQUEST_CANCELLED, request.cancelled), not a caller
// that went away.
func TestConfBBDeletingAQueuedHTTPRequestCancelsIt(t *testing.T) {
	w, base, tok := httpWorld(t, httpConfig)
	var holder lease
	w.json(&holder, "lease", "--platform", "ios", "--detach", "--requester", "holder")

	req, _ := http.NewRequest("POST", base+"/v1/leases", strings.NewReader(`{"platform":"ios","requesterId":"waiter"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var pend struct{ RequestID string }
	json.NewDecoder(resp.Body).Decode(&pend)
	resp.Body.Close()
	if resp.StatusCode != 202 || pend.RequestID == "" {
		t.Fatalf("POST /v1/leases: %d %+v", resp.StatusCode, pend)
	}
	code, body := httpDo(t, "DELETE", base+"/v1/requests/"+pend.RequestID, tok, "")
	if code != 200 || !strings.Contains(string(body), `"cancelled":true`) {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	var rc struct {
		State       string
		Interrupted bool
		Error       *struct{ Code, Message, NextAction string }
	}
	eventually(t, "the receipt to settle", 10*time.Second, func() bool {
		_, b := httpDo(t, "GET", base+"/v1/lease-requests/"+pend.RequestID, tok, "")
		return json.Unmarshal(b, &rc) == nil && rc.State == "cancelled"
	})
	if rc.Interrupted || rc.Error == nil || rc.Error.Code != "REQUEST_CANCELLED" || strings.Contains(rc.Error.NextAction, "went away") {
		t.Fatalf("receipt after DELETE: %+v %+v", rc, rc.Error)
	}
	// The handle, asked again, answers the same cancel.
	if code, b := httpDo(t, "GET", base+"/v1/requests/"+pend.RequestID, tok, ""); code != 409 || !strings.Contains(string(b), "REQUEST_CANCELLED") {
		t.Fatalf("poll after DELETE: %d %s", code, b)
	}
	var cancelled, abandoned int
	for _, e := range w.events() {
		if e.Type == "request.cancelled" {
			cancelled++
		}
		if e.Type == "request.abandoned" {
			abandoned++
		}
	}
	if cancelled != 1 || abandoned != 0 {
		t.Fatalf("request.cancelled %d, request.abandoned %d; want 1 and 0", cancelled, abandoned)
	}
	if st := w.status(); st.QueueDepth != 0 {
		t.Fatalf("queue depth %d after the cancel", st.QueueDepth)
	}
}

// CLI: simlock lease and run release "on exit, parent death, or
// SIGINT/SIGTERM"; a run stopped by SIGTERM while it waits gives up its
// place, says so, and exits as a shell reports SIGTERM (128+15).
func TestConfBBRunTerminatedWhileQueuedGivesUpItsPlace(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.mustRun("daemon", "start")
	var holder lease
	w.json(&holder, "lease", "--platform", "ios", "--detach", "--requester", "holder")
	for _, args := range [][]string{
		{"run", "--platform", "ios", "--", "true"},
		{"lease", "--platform", "ios"},
	} {
		c := w.cmd(args...)
		var stderr strings.Builder
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, args[0]+" to queue", 20*time.Second, func() bool { return w.status().QueueDepth == 1 })
		c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(testhost.Scale(30 * time.Second)):
			c.Process.Kill()
			t.Fatalf("simlock %s did not end after SIGTERM", args[0])
		}
		if code := c.ProcessState.ExitCode(); code != 143 {
			t.Fatalf("simlock %s: exit %d, want 143; stderr %s", args[0], code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "gave up its place") {
			t.Fatalf("simlock %s: stderr %q does not say it gave up its place", args[0], stderr.String())
		}
		if st := w.status(); st.QueueDepth != 0 {
			t.Fatalf("simlock %s left %d queued", args[0], st.QueueDepth)
		}
	}
	if n := w.countEvents("request.cancelled", ""); n != 2 {
		t.Fatalf("%d request.cancelled facts, want 2", n)
	}
}

// device.exec and simlock run: the lease placeholders ({udid}, {serial},
// {deviceSet}, {leaseId}) mean the same in simlock run, simlock exec and
// MCP device_exec.
func TestConfBBPlaceholdersWorkInRunExecAndMCP(t *testing.T) {
	w := newWorld(t, confineConfig)
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	// simctl getenv names the device: {udid} must become the leased one.
	out := w.mustRun("exec", l.LeaseID, "--", "simctl", "getenv", "{udid}", "SIMULATOR_UDID")
	if strings.TrimSpace(out) != l.Device.UDID {
		t.Fatalf("exec with {udid}: %q, want %s", out, l.Device.UDID)
	}
	// A placeholder the platform has no value for is refused, as run does.
	if r := w.run("exec", l.LeaseID, "--", "simctl", "getenv", "{serial}", "HOME"); r.code == 0 || !strings.Contains(r.stderr, "BAD_REQUEST") {
		t.Fatalf("{serial} on an iOS lease: exit %d stderr %s", r.code, r.stderr)
	}
	w.mustRun("release", l.LeaseID)

	// MCP device_exec, on Android, expands {serial}.
	a := w.mcpWith(t, "--device-tools")
	text, isErr := a.call("lease_simulator", map[string]any{"platform": "android", "model": "pixel_6"}, nil)
	if isErr {
		t.Fatal(text)
	}
	var granted struct {
		Lease struct {
			Device struct{ Serial string } `json:"device"`
		} `json:"lease"`
	}
	json.Unmarshal([]byte(text), &granted)
	serial := granted.Lease.Device.Serial
	text, isErr = a.call("device_exec", map[string]any{"tool": "adb", "args": []string{"-s", "{serial}", "shell", "getprop", "sys.boot_completed"}}, nil)
	var res struct {
		ExitCode int
		Stdout   string
	}
	if json.Unmarshal([]byte(text), &res); isErr || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("device_exec adb -s {serial} (serial %s): %s", serial, text)
	}
	text, isErr = a.call("device_exec", map[string]any{"tool": "adb", "args": []string{"shell", "echo", "{serial}"}}, nil)
	if json.Unmarshal([]byte(text), &res); isErr || strings.TrimSpace(res.Stdout) != serial {
		t.Fatalf("device_exec echo {serial}: %s, want %s", text, serial)
	}
	// And simlock run, as before.
	r := w.run("run", "--platform", "android", "--model", "pixel_6", "--", "echo", "{serial}")
	if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "emulator-") {
		t.Fatalf("run echo {serial}: exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
}

// HTTP: every route answers a refusal as the typed error shape; a
// Last-Event-ID header with bytes HTTP does not allow is no exception.
func TestConfBBJunkLastEventIDGetsTheTypedError(t *testing.T) {
	_, base, tok := httpWorld(t, httpConfig)
	addr := strings.TrimPrefix(base, "http://")
	for _, junk := range []string{"\x01junk", "12\x7f"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nLast-Event-ID: %s\r\n\r\n", addr, tok, junk)
		conn.SetReadDeadline(time.Now().Add(testhost.Scale(20 * time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message, NextAction string }
		}
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || derr != nil ||
			body.Error.Code != "BAD_REQUEST" || body.Error.NextAction == "" {
			t.Fatalf("Last-Event-ID %q: %d %s %+v (%v)", junk, resp.StatusCode, resp.Header.Get("Content-Type"), body, derr)
		}
	}
	// A junk value that is a valid header is the same typed refusal.
	req, _ := http.NewRequest("GET", base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Last-Event-ID", "not-a-seq")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("Last-Event-ID not-a-seq: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// HTTP, the OpenAPI document generated from the contract: every status a
// route answers is declared. GET /v1/catalog?platform=junk and POST
// /v1/sessions with an unserved contract version answer 422.
func TestConfBBOpenAPIDeclaresThe422sItsRoutesAnswer(t *testing.T) {
	cfg := strings.Replace(sessionsConfig("", ""), `{"capacity"`, `{"http":{"enabled":true,"listen":"127.0.0.1:0"},"capacity"`, 1)
	_, base, tok := httpWorld(t, cfg)
	if code, b := httpDo(t, "GET", base+"/v1/catalog?platform=junk", tok, ""); code != 422 {
		t.Fatalf("catalog?platform=junk: %d %s", code, b)
	}
	prep := `{"ownerToken":"owner-1","config":{"contractVersion":2,"requestId":"r-1","device":{"platform":"ios"}}}`
	if code, b := httpDo(t, "POST", base+"/v1/sessions", tok, prep); code != 422 || !strings.Contains(string(b), "CONTRACT_UNSUPPORTED") {
		t.Fatalf("POST /v1/sessions contractVersion 2: %d %s", code, b)
	}
	_, b := httpDo(t, "GET", base+"/v1/openapi.json", tok, "")
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ path, method string }{{"/v1/catalog", "get"}, {"/v1/sessions", "post"}} {
		op, ok := doc.Paths[want.path][want.method]
		if !ok {
			t.Fatalf("no %s %s in the document", want.method, want.path)
		}
		if _, ok := op.Responses["422"]; !ok {
			t.Errorf("%s %s does not declare 422 (declares %v)", strings.ToUpper(want.method), want.path, keys(op.Responses))
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Gateway, device.exec "works everywhere": through a gateway the
// placeholders mean the same, {leaseId} being the fleet lease id the
// client holds.
func TestConfBBPlaceholdersThroughAGateway(t *testing.T) {
	gw, _, _ := fleet(t, 1)
	var l lease
	gw.json(&l, "lease", "--platform", "android", "--model", "pixel_6", "--detach", "--requester", "agent-a")
	var got struct {
		Device struct{ Serial string } `json:"device"`
	}
	gw.json(&got, "lease", "get", l.LeaseID, "--json")
	out := gw.mustRun("exec", l.LeaseID, "--requester", "agent-a", "--", "adb", "shell", "echo", "{leaseId}", "{serial}")
	if want := l.LeaseID + " " + got.Device.Serial; strings.TrimSpace(out) != want || got.Device.Serial == "" {
		t.Fatalf("exec through the gateway printed %q, want %q", out, want)
	}
}
