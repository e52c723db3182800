package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// sessionDefaults are operator defaults for both platforms of the
// simulated SDK (a reset other than destroy needs its platform's).
const sessionDefaults = `"defaults":{
  "ios":{"policyVersion":"e2e-ios-1","hardware":{"omitted":"phone",
    "archetypes":[{"archetype":"phone","modelType":{"family":"iphone"}}],
    "modelTypes":[{"modelType":{"family":"iphone"},"model":{"namespace":"simlock-model","value":"iPhone 15"}}]},
    "os":{"selector":{"kind":"exact","version":"18.0"}}},
  "android":{"policyVersion":"e2e-android-1","hardware":{"omitted":"phone","profiles":[{"archetype":"phone","profileId":"pixel_7"}]},
    "os":{"selector":{"kind":"exact","version":"15"}}}},
 "androidProfileArchetypes":{"pixel_7":"phone"}`

// sessionsConfig is a daemon with the session broker: room for two iOS
// devices, the given reset and caps, a long heartbeat TTL (the CLI has no
// keeper) and the periodic work quiet so the command log is the sessions'.
func sessionsConfig(reset string, caps string) string {
	return `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":2}},
 "health":{"intervalMs":600000},"cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000},
 "sessions":{"heartbeatTtlMs":600000,"limits":{` + caps + `},"reset":{` + reset + `},` + sessionDefaults + `}}`
}

type sessionReceipt struct {
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
	LeaseID   string `json:"leaseId"`
	Failure   *struct {
		Code          string `json:"code"`
		RetryRequires string `json:"retryRequires"`
	} `json:"failure"`
	Device         *device `json:"device"`
	CleanupPending bool    `json:"cleanupPending"`
	Timing         *struct {
		Acquisition *struct {
			Admission  string `json:"admission"`
			ReuseCount int    `json:"reuseCount"`
			CreateMs   *int64 `json:"createMs"`
			TotalMs    *int64 `json:"totalMs"`
		} `json:"acquisition"`
		Reset *struct {
			Mode    string `json:"mode"`
			Outcome string `json:"outcome"`
		} `json:"reset"`
	} `json:"timing"`
}

func sessionJSON(req string) string {
	return `{"contractVersion":1,"requestId":"` + req + `","device":{"schemaVersion":1,"platform":"ios",` +
		`"hardware":{"kind":"model","model":{"namespace":"simlock-model","value":"iPhone 15"}},"os":{"kind":"exact","version":"18.0"}}}`
}

func (w *world) prepare(req, token string) sessionReceipt {
	w.t.Helper()
	var r sessionReceipt
	w.json(&r, "session", "prepare", "--config", sessionJSON(req), "--owner-token-file", w.tokenFile(token), "--json")
	return r
}

func (w *world) sessionStatus(req, token string) sessionReceipt {
	w.t.Helper()
	var r sessionReceipt
	w.json(&r, "session", "status", req, "--owner-token-file", w.tokenFile(token), "--json")
	return r
}

// lines of the command log that contain every word.
// booting reports whether the tool log shows a simulator boot: the
// driver boots with one `simctl bootstatus <udid> -b`, which boots and
// waits; a plain `simctl boot` counts too.
func booting(log []string) bool {
	for _, l := range log {
		if strings.Contains(l, "simctl") && (strings.Contains(l, " boot ") || (strings.Contains(l, " bootstatus ") && strings.HasSuffix(strings.TrimSpace(l), " -b"))) {
			return true
		}
	}
	return false
}

func matching(log []string, words ...string) []int {
	var at []int
	for i, l := range log {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			at = append(at, i)
		}
	}
	return at
}

// The same prepare twice, and again after kill -9 and a restart, is one
// receipt and one device; a different request id is another device.
func TestSessionPrepareIsOneReceiptAndOneDeviceAcrossKill9(t *testing.T) {
	w := newWorld(t, sessionsConfig("", ""))
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	var caps struct{ Contracts []string }
	w.json(&caps, "capabilities", "--json")
	if len(caps.Contracts) < 2 || caps.Contracts[0] != "session-broker/v1" || caps.Contracts[1] != "session-broker-export/v1" {
		t.Fatalf("capabilities %+v", caps)
	}
	first := w.prepare("run-1", "owner-a")
	again := w.prepare("run-1", "owner-a")
	if first.Status != "ready" || first.Device == nil || again.SessionID != first.SessionID || again.Device.UDID != first.Device.UDID {
		t.Fatalf("prepare twice: %+v then %+v", first, again)
	}
	other := w.prepare("run-2", "owner-a")
	if other.SessionID == first.SessionID || other.Device == nil || other.Device.UDID == first.Device.UDID {
		t.Fatalf("a new request id shares the session: %+v", other)
	}
	creates := len(matching(w.commandLog(logPath), "simctl", "create"))
	w.kill9()
	w.mustRun("daemon", "start")
	after := w.prepare("run-1", "owner-a")
	// The crashed daemon's sessions end as owner-exited; the replay answers
	// that receipt and allocates nothing.
	if after.SessionID != first.SessionID || after.Status != "failed" || after.Failure == nil || after.Failure.Code != "SESSION_OWNER_EXITED" {
		t.Fatalf("after kill -9 and a restart: %+v", after)
	}
	if n := len(matching(w.commandLog(logPath), "simctl", "create")); n != creates {
		t.Fatalf("the replay after the restart created %d more devices", n-creates)
	}
	eventually(t, "the crashed daemon's session devices to be destroyed", 30*time.Second, func() bool {
		r := w.sessionStatus("run-1", "owner-a")
		return !r.CleanupPending && len(matching(w.commandLog(logPath), "simctl", "delete", first.Device.UDID)) > 0
	})
}

// Zero pooling: the released device is deleted in the SDK before the next
// session's device is created, and the facts come in that order.
func TestSessionZeroPoolingDeletesBeforeCapacityReturns(t *testing.T) {
	w := newWorld(t, sessionsConfig("", `"totalDeviceCap":1,"sessionCap":1`))
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	one := w.prepare("one", "o")
	if one.Status != "ready" {
		t.Fatalf("first %+v", one)
	}
	var rel struct {
		Outcome string         `json:"outcome"`
		Receipt sessionReceipt `json:"receipt"`
	}
	w.json(&rel, "session", "release", one.SessionID, "--owner-token-file", w.tokenFile("o"), "--json")
	if rel.Outcome != "released" || rel.Receipt.Timing.Reset.Mode != "destroy" || rel.Receipt.Timing.Reset.Outcome != "destroyed" {
		t.Fatalf("release %+v reset %+v", rel, rel.Receipt.Timing.Reset)
	}
	two := w.prepare("two", "o")
	if two.Status != "ready" || two.Device.UDID == one.Device.UDID {
		t.Fatalf("second %+v", two)
	}
	log := w.commandLog(logPath)
	del := matching(log, "simctl", "delete", one.Device.UDID)
	// Devices in the root only: once the first device is gone the daemon
	// may build a golden in its own set (ADR 0057), which is no device.
	creates := matching(log, "simctl", "devices/ios create")
	if len(del) == 0 || len(creates) != 2 || del[0] > creates[1] {
		t.Fatalf("delete of the first device at %v, creates at %v: the next device was made before the first was gone\n%s", del, creates, strings.Join(log, "\n"))
	}
	var destroyed, granted uint64
	for _, e := range w.events() {
		if e.Type == "device.destroyed" && e.DeviceID == one.Device.ID && destroyed == 0 {
			destroyed = e.Seq
		}
		if e.Type == "lease.granted" && e.LeaseID == two.LeaseID {
			granted = e.Seq
		}
	}
	if destroyed == 0 || granted == 0 || destroyed > granted {
		t.Fatalf("device.destroyed at %d, the next grant at %d", destroyed, granted)
	}
}

// Erase and reuse: the next session reuses the erased simulator, and a
// file the first session wrote into its data is gone.
func TestSessionEraseReuseWipesTheFirstSessionsFile(t *testing.T) {
	w := newWorld(t, sessionsConfig(`"ios":"erase"`, `"idlePoolCap":1`))
	w.mustRun("daemon", "start")
	one := w.prepare("one", "o")
	if one.Status != "ready" || one.Device == nil || one.Device.DeviceSet == "" {
		t.Fatalf("first %+v", one)
	}
	written := filepath.Join(one.Device.DeviceSet, one.Device.UDID, "data", "Documents", "from-session-1.txt")
	if err := os.MkdirAll(filepath.Dir(written), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(written, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	var rel struct {
		Outcome string         `json:"outcome"`
		Receipt sessionReceipt `json:"receipt"`
	}
	w.json(&rel, "session", "release", one.SessionID, "--owner-token-file", w.tokenFile("o"), "--json")
	if rel.Outcome != "released" || rel.Receipt.Timing.Reset.Mode != "erase" || rel.Receipt.Timing.Reset.Outcome != "clean" {
		t.Fatalf("erase release %+v reset %+v", rel, rel.Receipt.Timing.Reset)
	}
	two := w.prepare("two", "o")
	a := two.Timing.Acquisition
	if two.Device.UDID != one.Device.UDID || a.Admission != "reuse" || a.ReuseCount != 1 {
		t.Fatalf("second session %+v acquisition %+v, want a reuse of %s", two.Device, a, one.Device.UDID)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Fatalf("the first session's file survived into the second: %v", err)
	}
	var st struct {
		Groups []struct {
			Acquisitions int     `json:"acquisitions"`
			Resets       int     `json:"resets"`
			ReuseHitRate float64 `json:"reuseHitRate"`
		} `json:"groups"`
	}
	w.json(&st, "session", "stats", "--json")
	if len(st.Groups) != 1 || st.Groups[0].Acquisitions != 2 || st.Groups[0].Resets != 1 || st.Groups[0].ReuseHitRate != 0.5 {
		t.Fatalf("stats %+v", st)
	}
}

// `simlock mcp --session-config` with an unsatisfiable requirement answers
// initialize promptly (well before a boot could finish) with the typed
// failure and no tools, and creates nothing.
func TestMCPSessionConfigUnsatisfiableAnswersAtOnce(t *testing.T) {
	w := newWorld(t, sessionsConfig("", ""))
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	cfg := `{"contractVersion":1,"requestId":"m1","device":{"schemaVersion":1,"platform":"ios","hardware":{"kind":"archetype","archetype":"foldable"}}}`
	c := w.cmd("mcp", "--session-config", cfg)
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	start := time.Now()
	lines := make(chan string, 8)
	go func() {
		buf := make([]byte, 0, 1<<16)
		b := make([]byte, 4096)
		for {
			n, err := stdout.Read(b)
			buf = append(buf, b[:n]...)
			for {
				i := strings.IndexByte(string(buf), '\n')
				if i < 0 {
					break
				}
				lines <- string(buf[:i])
				buf = buf[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	send := func(s string) {
		if _, err := stdin.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the MCP server closed stdout")
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			return m
		case <-time.After(testhost.Scale(10 * time.Second)):
			t.Fatal("no answer from the MCP server")
		}
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`)
	init := next()
	took := time.Since(start)
	res, _ := init["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	exp, _ := caps["experimental"].(map[string]any)
	sess, _ := exp["simlock/session"].(map[string]any)
	f, _ := sess["failure"].(map[string]any)
	if sess["status"] != "failed" || f == nil || f["code"] != "UNSUPPORTED_HARDWARE" {
		t.Fatalf("initialize %v", init)
	}
	t.Logf("initialize answered in %s", took)
	// A boot or a prepare's wait would take tens of seconds; 5 s leaves a
	// loaded machine's stall of 2-3 s room, and that no simulator was
	// created is checked below regardless.
	if took > testhost.Scale(5*time.Second) {
		t.Fatalf("initialize took %s, want under %s", took, testhost.Scale(5*time.Second))
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	tl := next()
	if tools, _ := tl["result"].(map[string]any)["tools"].([]any); len(tools) != 0 {
		t.Fatalf("tools %v, want none", tl)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lease_simulator","arguments":{"platform":"ios"}}}`)
	call := next()
	if b, _ := json.Marshal(call); !strings.Contains(string(b), "UNSUPPORTED_HARDWARE") {
		t.Fatalf("a tool call got %s", b)
	}
	stdin.Close()
	_ = c.Wait()
	if n := len(matching(w.commandLog(logPath), "simctl", "create")); n != 0 {
		t.Fatalf("the refused session created %d devices", n)
	}
}

// Android keep-booted: a package installed and a setting changed in one
// session are gone in the next, which gets the same emulator; after
// maxUses the device is retired.
func TestSessionAndroidKeepBootedCleansAndRetires(t *testing.T) {
	w, prepare, release := androidKeepBootedSessions(t, 2)
	one := prepare("a1")
	apk := filepath.Join(t.TempDir(), "com.example.session.apk")
	if err := os.WriteFile(apk, []byte("not a real apk"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.mustRun("adb", "-s", one.Device.Serial, "install", apk)
	w.mustRun("adb", "-s", one.Device.Serial, "shell", "settings", "put", "system", "screen_off_timeout", "5000")
	if r := release(one.SessionID); r.Timing.Reset.Mode != "keep-booted" || r.Timing.Reset.Outcome != "clean" {
		t.Fatalf("first reset %+v", r.Timing.Reset)
	}
	two := prepare("a2")
	if two.Device.ID != one.Device.ID || two.Timing.Acquisition.Admission != "reuse" {
		t.Fatalf("second session %+v on %s, want a reuse of %s", two.Timing.Acquisition, two.Device.ID, one.Device.ID)
	}
	if out := w.mustRun("adb", "-s", two.Device.Serial, "shell", "pm", "list", "packages", "-3"); strings.Contains(out, "com.example.session") {
		t.Errorf("the first session's package is visible to the second: %q", out)
	}
	if got := strings.TrimSpace(w.mustRun("adb", "-s", two.Device.Serial, "shell", "settings", "get", "system", "screen_off_timeout")); got == "5000" {
		t.Errorf("the first session's setting survived: %q", got)
	}
	// maxUses 2: the second release retires the device.
	if r := release(two.SessionID); r.Timing.Reset.Outcome != "destroyed" {
		t.Fatalf("second reset %+v, want the device retired", r.Timing.Reset)
	}
	eventually(t, "the retired emulator to leave the registry", 30*time.Second, func() bool {
		for _, d := range w.status().Devices {
			if d.ID == one.Device.ID {
				return false
			}
		}
		return true
	})
	var st struct {
		Groups []struct {
			Resets      int `json:"resets"`
			Retirements int `json:"retirements"`
		} `json:"groups"`
	}
	w.json(&st, "session", "stats", "--json")
	if len(st.Groups) != 1 || st.Groups[0].Resets != 2 || st.Groups[0].Retirements != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// kill -9 while a session's erase reset hangs: on restart the uncertain
// simulator is destroyed and the request stays failed/SESSION_OWNER_EXITED,
// also on replay, with no new device.
func TestSessionKill9MidResetDestroysTheUncertainDevice(t *testing.T) {
	w := newWorld(t, sessionsConfig(`"ios":"erase"`, `"idlePoolCap":1`))
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath, "SIMLOCK_SIMSDK_FAULTS=shutdown-hang@1")
	w.mustRun("daemon", "start")
	// The hanging shutdown outlives the killed daemon; end it (by pid,
	// found by this world's own home) when the test ends.
	t.Cleanup(func() {
		out, _ := exec.Command("pgrep", "-f", w.home).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	one := w.prepare("one", "o")
	if one.Status != "ready" {
		t.Fatalf("prepare %+v", one)
	}
	var rel struct {
		Outcome string         `json:"outcome"`
		Receipt sessionReceipt `json:"receipt"`
	}
	w.json(&rel, "session", "release", one.SessionID, "--owner-token-file", w.tokenFile("o"), "--reply-budget-ms", "0", "--json")
	if rel.Outcome != "cleanup_pending" || !rel.Receipt.CleanupPending {
		t.Fatalf("release under a hanging shutdown %+v", rel)
	}
	eventually(t, "the reset to reach its shutdown", 10*time.Second, func() bool {
		return len(matching(w.commandLog(logPath), "simctl", "shutdown", one.Device.UDID)) > 0
	})
	creates := len(matching(w.commandLog(logPath), "simctl", "create"))
	w.kill9()
	w.mustRun("daemon", "start")
	st := w.sessionStatus("one", "o")
	if st.Status != "failed" || st.Failure == nil || st.Failure.Code != "SESSION_OWNER_EXITED" || st.SessionID != one.SessionID {
		t.Fatalf("after the restart %+v", st)
	}
	eventually(t, "the uncertain simulator to be deleted", 30*time.Second, func() bool {
		return len(matching(w.commandLog(logPath), "simctl", "delete", one.Device.UDID)) > 0 && !w.sessionStatus("one", "o").CleanupPending
	})
	if rp := w.prepare("one", "o"); rp.Status != "failed" || rp.Failure.Code != "SESSION_OWNER_EXITED" || rp.SessionID != one.SessionID {
		t.Fatalf("replay %+v", rp)
	}
	if n := len(matching(w.commandLog(logPath), "simctl", "create")); n != creates {
		t.Fatalf("the replay created %d devices", n-creates)
	}
}

// `simlock session hold` keeps a session past its heartbeat TTL, follows it
// across a graceful daemon restart (the next daemon adopts the same
// session id), and releases it when its stdin closes. The 3 s TTL leaves a
// keeper slowed by a loaded machine two seconds of slack; 1.5 s left one.
func TestSessionHoldKeepsTheSessionAcrossAGracefulRestart(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":2}},"sessions":{"heartbeatTtlMs":3000}}`)
	w.mustRun("daemon", "start")
	one := w.prepare("held", "o")
	if one.Status != "ready" {
		t.Fatalf("prepare %+v", one)
	}
	hold := w.cmd("session", "hold", one.SessionID)
	hold.Env = append(append([]string{}, w.env...), "SIMLOCK_SESSION_OWNER_TOKEN=o") // never on the command line
	stdin, err := hold.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	hold.Stderr = &stderr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer hold.Process.Kill()
	time.Sleep(4 * time.Second) // past the TTL
	if st := w.sessionStatus("held", "o"); st.Status != "ready" || st.CleanupPending {
		t.Fatalf("a held session past its TTL: %+v", st)
	}
	w.mustRun("daemon", "stop")
	w.mustRun("daemon", "start")
	time.Sleep(4 * time.Second)
	if st := w.sessionStatus("held", "o"); st.Status != "ready" || st.SessionID != one.SessionID || st.LeaseID != one.LeaseID {
		t.Fatalf("after a graceful restart: %+v, want %s adopted", st, one.SessionID)
	}
	stdin.Close()
	if err := hold.Wait(); err != nil {
		t.Fatalf("hold: %v\n%s", err, stderr.String())
	}
	if st := w.sessionStatus("held", "o"); st.Status != "released" {
		t.Fatalf("after the hold's stdin closed: %+v\n%s", st, stderr.String())
	}
}

// androidReceipt is a session receipt with the Android device's serial.
type androidReceipt struct {
	sessionReceipt
	Device *struct {
		ID     string `json:"id"`
		Serial string `json:"serial"`
	} `json:"device"`
}

// androidKeepBootedSessions starts a daemon serving pixel_7 / Android 15
// sessions with the keep-booted reset (maxUses uses per device, one
// running), and returns it with prepare and release through the CLI that
// fail the test unless the session is ready and released.
func androidKeepBootedSessions(t *testing.T, maxUses int) (*world, func(req string) androidReceipt, func(sid string) sessionReceipt) {
	t.Helper()
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "sessions":{"heartbeatTtlMs":600000,"limits":{"idlePoolCap":1},"reset":{"android":"keep-booted","androidKeepBootedMaxUses":`+strconv.Itoa(maxUses)+`},`+sessionDefaults+`}}`)
	w.mustRun("daemon", "start")
	cfg := func(req string) string {
		return `{"contractVersion":1,"requestId":"` + req + `","device":{"schemaVersion":1,"platform":"android",` +
			`"hardware":{"kind":"model","model":{"namespace":"simlock-model","value":"pixel_7"}},"os":{"kind":"exact","version":"15"}}}`
	}
	prepare := func(req string) androidReceipt {
		var r androidReceipt
		w.json(&r, "session", "prepare", "--config", cfg(req), "--owner-token-file", w.tokenFile("o"), "--json")
		if r.Status != "ready" || r.Device == nil || r.Device.Serial == "" {
			t.Fatalf("prepare %s: %+v", req, r)
		}
		return r
	}
	release := func(sid string) sessionReceipt {
		var rel struct {
			Outcome string         `json:"outcome"`
			Receipt sessionReceipt `json:"receipt"`
		}
		w.json(&rel, "session", "release", sid, "--owner-token-file", w.tokenFile("o"), "--json")
		if rel.Outcome != "released" {
			t.Fatalf("release %s: %+v", sid, rel)
		}
		return rel.Receipt
	}
	return w, prepare, release
}
