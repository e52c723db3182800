package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// Conformance of the session broker's deviations listed in issue 23
// (sessions), each against the real binary on the simulated SDK.

// confFailure is a receipt's failure with every field the checks read.
type confFailure struct {
	Code          string `json:"code"`
	Message       string `json:"message"`
	Retryable     bool   `json:"retryable"`
	RetryAfterMs  *int64 `json:"retryAfterMs"`
	RetryRequires string `json:"retryRequires"`
	NextAction    string `json:"nextAction"`
}

type confReceipt struct {
	SessionID      string       `json:"sessionId"`
	Status         string       `json:"status"`
	LeaseID        string       `json:"leaseId"`
	Failure        *confFailure `json:"failure"`
	Device         *device      `json:"device"`
	CleanupPending bool         `json:"cleanupPending"`
	Timing         *struct {
		Reset *struct{ Mode, Outcome string } `json:"reset"`
	} `json:"timing"`
}

func (w *world) confStatus(req, token string) confReceipt {
	w.t.Helper()
	var r confReceipt
	w.json(&r, "session", "status", req, "--owner-token-file", w.tokenFile(token), "--json")
	return r
}

func (w *world) confPrepare(req, token string) confReceipt {
	w.t.Helper()
	var r confReceipt
	w.json(&r, "session", "prepare", "--config", sessionJSON(req), "--owner-token-file", w.tokenFile(token), "--json")
	return r
}

// startKeeper starts `simlock mcp --session-config` for req under token
// and sends initialize, as an agent would.
func (w *world) startKeeper(req, token string) (*exec.Cmd, io.WriteCloser) {
	w.t.Helper()
	k := w.cmd("mcp", "--session-config", sessionJSON(req))
	k.Env = append(k.Env, "SIMLOCK_SESSION_OWNER_TOKEN="+token)
	stdin, err := k.StdinPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := k.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = k.Process.Kill(); _ = k.Wait() })
	_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}` + "\n"))
	return k, stdin
}

// Reference, consumer contract: "EOF and execution-owner exit cancel
// preparation" (issue 23, sessions 1; a signal too). A keeper whose stdin
// ends, or that is sent SIGTERM, while its device still boots cancels the
// preparation: the receipt ends SESSION_ABANDONED without ever going
// ready, no session was handed out, and the half-made device is deleted.
func TestConfSessionKeeperCutOffMidPrepareCancelsIt(t *testing.T) {
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, sessionsConfig("", ""))
			logPath := w.simHome + "-cmds.log"
			// A first boot of about 3 s, to be caught in the middle.
			w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath, "SIMLOCK_SIMSDK_SPEED=0.1")
			w.mustRun("daemon", "start")
			k, stdin := w.startKeeper("cut", "o")
			eventually(t, "the keeper's device to start booting", 20*time.Second, func() bool {
				return booting(w.commandLog(logPath))
			})
			if st := w.confStatus("cut", "o"); st.Status != "pending" {
				t.Fatalf("before the cut the session is %+v, want pending", st)
			}
			if how == "eof" {
				stdin.Close()
			} else if err := k.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = k.Wait(); close(exited) }()
			select {
			case <-exited:
			case <-time.After(testhost.Scale(30 * time.Second)):
				t.Fatal("the keeper did not exit")
			}
			// Read at once: unfixed, the preparation went on to ready here.
			st := w.confStatus("cut", "o")
			if st.Status != "failed" || st.Failure == nil || st.Failure.Code != "SESSION_ABANDONED" || st.LeaseID != "" {
				t.Fatalf("after the keeper's %s: %+v %+v, want failed SESSION_ABANDONED with no lease", how, st, st.Failure)
			}
			eventually(t, "the cancelled preparation's teardown", 30*time.Second, func() bool { return !w.confStatus("cut", "o").CleanupPending })
			if s := w.status(); len(s.Leases) != 0 || len(s.Devices) != 0 {
				t.Fatalf("after the cancelled preparation: %d leases, %d devices", len(s.Leases), len(s.Devices))
			}
		})
	}
}

// Reference, "The token plus the complete request configuration define
// operation identity ... Replay returns the durable receipt", and request
// abandonment ends a ready request on a terminal owner-bound receipt
// (issue 23, sessions 2): after `session abandon` of a ready session,
// status and a replay of the same prepare answer the same receipt, with
// its session id and device.
func TestConfSessionAbandonedReadySessionIsOneReceipt(t *testing.T) {
	w := newWorld(t, sessionsConfig("", ""))
	w.mustRun("daemon", "start")
	live := w.confPrepare("live", "o")
	if live.Status != "ready" || live.Device == nil {
		t.Fatalf("prepare %+v", live)
	}
	var ab confReceipt
	w.json(&ab, "session", "abandon", "live", "--owner-token-file", w.tokenFile("o"), "--json")
	eventually(t, "the abandoned session's teardown", 30*time.Second, func() bool { return !w.confStatus("live", "o").CleanupPending })
	st := w.confStatus("live", "o")
	replay := w.confPrepare("live", "o")
	for name, r := range map[string]confReceipt{"abandon": ab, "status": st, "replay": replay} {
		if r.SessionID != live.SessionID || r.Device == nil || r.Device.UDID != live.Device.UDID ||
			r.Status != "failed" || r.Failure == nil || r.Failure.Code != "SESSION_ABANDONED" {
			t.Fatalf("%s after the abandon: %+v, want session %s on %s, failed SESSION_ABANDONED", name, r, live.SessionID, live.Device.UDID)
		}
	}
}

// confConn is a raw socket connection whose reads report an error rather
// than failing the test: it is used across a daemon's stop.
type confConn struct {
	c net.Conn
	r *bufio.Reader
}

func (w *world) confDial(t *testing.T) *confConn {
	c, err := net.Dial("unix", filepath.Join(w.home, "simlock.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cc := &confConn{c: c, r: bufio.NewReader(c)}
	if m, err := cc.send(`{"jsonrpc":"2.0","id":0,"method":"hello","params":{"protocol":{"min":5,"max":5},"principal":"conf"}}`); err != nil || m["result"] == nil {
		t.Fatalf("hello %v %v", m, err)
	}
	return cc
}

func (cc *confConn) send(line string) (map[string]any, error) {
	_ = cc.c.SetDeadline(time.Now().Add(testhost.Scale(60 * time.Second)))
	if _, err := cc.c.Write([]byte(line + "\n")); err != nil {
		return nil, err
	}
	for {
		b, err := cc.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		if _, push := m["method"]; !push {
			return m, nil
		}
	}
}

func errData(m map[string]any) map[string]any {
	e, _ := m["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	return d
}

// Reference, "Shutdown refusals and retry cadence" (issue 23, sessions
// 3): prepares that arrive once the stop began are refused
// session_broker_stopping, retryable, retryAfterMs 5000; a preparation the
// stop interrupted stores session_broker_stopping with retryRequires
// new_request_id, and its guidance agrees (a new request id).
func TestConfSessionStopRefusalsAndTheInterruptedReceiptAgree(t *testing.T) {
	w := newWorld(t, sessionsConfig("", ""))
	// A boot of about 9 s: the stop comes in the middle of it and waits
	// for the device work in flight, which leaves the prepares below a
	// window on a connection opened before the stop.
	w.env = append(w.env, "SIMLOCK_SIMSDK_SPEED=0.3")
	w.mustRun("daemon", "start")
	cc := w.confDial(t)
	var pending confReceipt
	w.json(&pending, "session", "prepare", "--config", sessionJSON("cut"), "--owner-token-file", w.tokenFile("o"), "--wait-ms", "300", "--json")
	if pending.Status != "pending" {
		t.Fatalf("a slow prepare %+v, want pending", pending)
	}
	stopped := make(chan result, 1)
	go func() { stopped <- w.run("daemon", "stop") }()
	eventually(t, "the stop to begin", 30*time.Second, func() bool {
		_, err := net.Dial("unix", filepath.Join(w.home, "simlock.sock"))
		return err != nil // the listener closes first
	})
	answers := 0
	for i := 0; i < 50; i++ {
		m, err := cc.send(`{"jsonrpc":"2.0","id":1,"method":"session.prepare","params":{"config":` + sessionJSON("late") + `,"ownerToken":"o"}}`)
		if err != nil {
			break // the stop closed the connection
		}
		d := errData(m)
		ra, _ := d["retryAfterMs"].(float64)
		if d["code"] != "SESSION_BROKER_STOPPING" || d["retryable"] != true || ra != 5000 {
			t.Fatalf("a prepare during the stop got %v, want SESSION_BROKER_STOPPING with retryAfterMs 5000", m)
		}
		answers++
	}
	t.Logf("%d prepares answered during the stop", answers)
	if r := <-stopped; r.code != 0 {
		t.Fatalf("daemon stop: %d %s", r.code, r.stderr)
	}
	w.mustRun("daemon", "start")
	st := w.confStatus("cut", "o")
	f := st.Failure
	if st.Status != "failed" || f == nil || f.Code != "SESSION_BROKER_STOPPING" || f.RetryRequires != "new_request_id" ||
		f.RetryAfterMs == nil || *f.RetryAfterMs != 5000 {
		t.Fatalf("the interrupted preparation %+v %+v", st, f)
	}
	if !strings.Contains(f.NextAction, "new request id") || strings.Contains(f.NextAction, "same request") {
		t.Fatalf("its next step %q contradicts retryRequires %q", f.NextAction, f.RetryRequires)
	}
	var replay confReceipt
	w.json(&replay, "session", "prepare", "--config", sessionJSON("cut"), "--owner-token-file", w.tokenFile("o"), "--json")
	if replay.Failure == nil || replay.Failure.NextAction != f.NextAction {
		t.Fatalf("the replay's guidance %+v differs from the first reply's %+v", replay.Failure, f)
	}
	if answers == 0 {
		t.Fatal("no prepare was answered during the stop; the refusal went unchecked")
	}
}

// Reference, caps and the capacity_exhausted refusal (issue 23, sessions
// 4): past sessionCap the stored failure is retryable with retryAfterMs
// and retryRequires new_request_id, and its next step is about the
// session cap, not the host limit and --no-wait.
func TestConfSessionCapRefusalPacesAndNamesTheCap(t *testing.T) {
	w := newWorld(t, sessionsConfig("", `"sessionCap":1`))
	w.mustRun("daemon", "start")
	if one := w.confPrepare("one", "o"); one.Status != "ready" {
		t.Fatalf("first %+v", one)
	}
	two := w.confPrepare("two", "o")
	f := two.Failure
	if two.Status != "failed" || f == nil || f.Code != "CAPACITY_EXHAUSTED" || !f.Retryable || f.RetryAfterMs == nil || *f.RetryAfterMs <= 0 ||
		f.RetryRequires != "new_request_id" {
		t.Fatalf("past the session cap %+v %+v", two, f)
	}
	if !strings.Contains(f.Message, "sessionCap") || strings.Contains(f.NextAction, "--no-wait") || strings.Contains(f.NextAction, "host") {
		t.Fatalf("the refusal talks about %q / %q", f.Message, f.NextAction)
	}
}

// Reference, consumer contract and "Input decoding is strict" (issue 23,
// sessions 5): an unknown key inside a session config is one code on the
// socket, the CLI and MCP, SESSION_CONFIG_INVALID, and each names the
// key's path within the config.
func TestConfSessionUnknownConfigKeyIsOneCodeWithItsPath(t *testing.T) {
	w := newWorld(t, sessionsConfig("", ""))
	w.mustRun("daemon", "start")
	cfg := strings.Replace(sessionJSON("bad"), `"kind":"exact","version":"18.0"`, `"kind":"exact","version":"18.0","hue":"red"`, 1)
	const want = "device.os.hue"
	type refusal struct{ code, field string }
	got := map[string]refusal{}

	m, err := w.confDial(t).send(`{"jsonrpc":"2.0","id":1,"method":"session.prepare","params":{"config":` + cfg + `,"ownerToken":"o"}}`)
	if err != nil {
		t.Fatal(err)
	}
	d := errData(m)
	det, _ := d["details"].(map[string]any)
	f, _ := det["field"].(string)
	got["socket"] = refusal{d["code"].(string), f}

	stderrErr := func(stderr string) refusal {
		var e struct {
			Error struct {
				Code    string         `json:"code"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		line := stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:]
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("stderr %q: %v", stderr, err)
		}
		f, _ := e.Error.Details["field"].(string)
		return refusal{e.Error.Code, f}
	}
	r := w.run("session", "prepare", "--config", cfg, "--owner-token-file", w.tokenFile("o"), "--json")
	if r.code == 0 {
		t.Fatalf("the CLI accepted the config: %s", r.stdout)
	}
	got["cli"] = stderrErr(r.stderr)

	k := w.cmd("mcp", "--session-config", cfg)
	var e bytes.Buffer
	k.Stdin, k.Stderr = strings.NewReader(""), &e
	if err := k.Run(); err == nil {
		t.Fatal("the MCP server accepted the config")
	}
	got["mcp"] = stderrErr(e.String())

	for surface, g := range got {
		if g.code != "SESSION_CONFIG_INVALID" || g.field != want {
			t.Errorf("%s: %+v, want SESSION_CONFIG_INVALID naming %s", surface, g, want)
		}
	}
}

// Reference, daemon/releaseBrokerSession: a proxy whose execution owner
// died sends session_owner_exited; the daemon commits the terminal
// receipt, "answers cleanup_pending, and finishes drain and destruction
// as tracked release work" (issue 23, sessions 6). Here under an erase
// reset, through a real keeper whose parent is killed.
func TestConfSessionOwnerExitReleaseIsCleanupPending(t *testing.T) {
	w := newWorld(t, sessionsConfig(`"ios":"erase"`, `"idlePoolCap":1`))
	w.mustRun("daemon", "start")
	// The keeper's parent is a shell: killing the shell is the owner's
	// exit. The keeper's stdin is handed down as fd 3, since a background
	// job's own stdin is /dev/null.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	sh := exec.Command("/bin/sh", "-c", `"$0" mcp --session-config "$1" 0<&3 3<&- & wait`, bin, sessionJSON("kept"))
	sh.Env = append(append([]string{}, w.env...), "SIMLOCK_SESSION_OWNER_TOKEN=o")
	sh.ExtraFiles = []*os.File{inR}
	var logs syncBuffer
	sh.Stderr = &logs
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	_, _ = inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}` + "\n"))
	eventually(t, "the keeper's session to be ready", 60*time.Second, func() bool { return strings.Contains(logs.String(), "session prepared") })
	if err := sh.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the keeper to release its session", 30*time.Second, func() bool { return strings.Contains(logs.String(), "session released") })
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "session released") {
			line = l
		}
	}
	if !strings.Contains(line, "outcome=cleanup_pending") {
		t.Fatalf("the owner-exit release answered %q, want outcome cleanup_pending", line)
	}
	var st confReceipt
	eventually(t, "the tracked release to finish", 30*time.Second, func() bool {
		st = w.confStatus("kept", "o")
		return !st.CleanupPending
	})
	if st.Status != "failed" || st.Failure == nil || st.Failure.Code != "SESSION_OWNER_EXITED" || st.Timing == nil || st.Timing.Reset == nil ||
		st.Timing.Reset.Outcome != "destroyed" {
		t.Fatalf("after the owner exited %+v", st)
	}
}

// syncBuffer is a bytes.Buffer a child's output goroutine and the test
// read and write under one lock.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
