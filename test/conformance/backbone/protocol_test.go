package backbone

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

const quiet = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`

// raw is a hand-written client of the socket protocol.
type raw struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, w *harness.World) *raw {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(w.Home, "simlock.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, c: c, r: bufio.NewReader(c)}
}

// call sends one line and returns the answer to it, skipping pushes.
func (rc *raw) call(line string) map[string]any {
	rc.t.Helper()
	if _, err := rc.c.Write([]byte(line + "\n")); err != nil {
		rc.t.Fatal(err)
	}
	for {
		b, err := rc.r.ReadBytes('\n')
		if err != nil {
			rc.t.Fatalf("reading the answer to %s: %v", line, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			rc.t.Fatalf("daemon sent %q: %v", b, err)
		}
		if _, push := m["method"]; !push {
			return m
		}
	}
}

// simlockError is the simlock error carried in a JSON-RPC error's data.
func simlockError(m map[string]any) map[string]any {
	e, _ := m["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	return d
}

// Protocol versions: a client whose range does not overlap the daemon's
// is refused at hello with PROTOCOL_VERSION_UNSUPPORTED, and the refusal
// carries both ranges (the daemon's is {5,5}); every other operation on
// that connection stays refused, except daemon.stop, which is what lets an
// old client stop a new daemon (or the reverse) to upgrade.
func TestBackboneAnOldClientIsToldBothRangesAndMayStillStopTheDaemon(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/4.1", "backbone/4.2")
	w := harness.NewWorld(t, quiet)
	w.MustRun("daemon", "start")
	var st struct {
		Daemon struct{ PID int }
	}
	w.JSON(&st, "status", "--json")
	secret, err := os.ReadFile(filepath.Join(w.Home, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}

	rc := dial(t, w)
	hello := simlockError(rc.call(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":3,"max":4},"credential":"` +
		strings.TrimSpace(string(secret)) + `"}}`))
	det, _ := hello["details"].(map[string]any)
	client, _ := det["client"].(map[string]any)
	daemon, _ := det["daemon"].(map[string]any)
	if hello["code"] != "PROTOCOL_VERSION_UNSUPPORTED" || client["min"] != 3.0 || client["max"] != 4.0 || daemon["min"] != 5.0 || daemon["max"] != 5.0 {
		t.Fatalf("hello with protocol 3-4: %v", hello)
	}
	if got := simlockError(rc.call(`{"jsonrpc":"2.0","id":2,"method":"status.get"}`)); got["code"] != "PROTOCOL_VERSION_UNSUPPORTED" {
		t.Fatalf("status.get on the incompatible connection: %v", got)
	}
	if m := rc.call(`{"jsonrpc":"2.0","id":3,"method":"daemon.stop","params":{}}`); m["result"] == nil {
		t.Fatalf("daemon.stop on the incompatible connection: %v", m)
	}
	harness.Eventually(t, "the daemon to stop", 20*time.Second, func() bool { return syscall.Kill(st.Daemon.PID, 0) != nil })
}

// Roles: what doctor.run requires depends on what it is asked to do. An
// agent session may run the read-only doctor; asking it to fix is
// FORBIDDEN. The admin secret the CLI presented all along is nowhere in
// what the daemon answers or logs.
func TestBackboneDoctorsRoleFollowsFixAndTheSecretIsNeverEchoed(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/5.2", "backbone/7.7")
	w := harness.NewWorld(t, quiet)
	var l struct {
		LeaseID string `json:"leaseId"`
	}
	w.JSON(&l, "lease", "--platform", "ios", "--detach")
	secret, err := os.ReadFile(filepath.Join(w.Home, "admin.token"))
	if err != nil || len(strings.TrimSpace(string(secret))) < 16 {
		t.Fatalf("admin.token: %q %v", secret, err)
	}

	rc := dial(t, w)
	if m := rc.call(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":5,"max":5},"principal":"doc"}}`); m["result"] == nil {
		t.Fatalf("agent hello: %v", m)
	}
	if m := rc.call(`{"jsonrpc":"2.0","id":2,"method":"doctor.run","params":{}}`); m["result"] == nil {
		t.Fatalf("a read-only doctor as an agent: %v", m)
	}
	if got := simlockError(rc.call(`{"jsonrpc":"2.0","id":3,"method":"doctor.run","params":{"fix":true}}`)); got["code"] != "FORBIDDEN" {
		t.Fatalf("doctor --fix as an agent: %v", got)
	}

	s := strings.TrimSpace(string(secret))
	for _, args := range [][]string{{"status", "--json"}, {"lease", "get", l.LeaseID, "--json"}, {"config", "get", "--json"}, {"events", "--json"}} {
		if r := w.Run(args...); strings.Contains(r.Stdout+r.Stderr, s) {
			t.Fatalf("simlock %s answered the admin secret", strings.Join(args, " "))
		}
	}
	log, err := os.ReadFile(filepath.Join(w.Home, "daemon.log"))
	if err != nil || len(log) == 0 || strings.Contains(string(log), s) {
		t.Fatalf("daemon.log (%d bytes, %v) holds the admin secret or nothing", len(log), err)
	}
}
