package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// tmuxPane runs one command in a detached tmux session on a server of its
// own, so the command sees a real terminal and the test reads the screen.
type tmuxPane struct {
	t      *testing.T
	socket string
}

func newTmuxPane(t *testing.T, script string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("SIMLOCK_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is required (SIMLOCK_REQUIRE_TMUX) but missing")
		}
		t.Skip("tmux not installed")
	}
	p := &tmuxPane{t: t, socket: fmt.Sprintf("sl-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())}
	out, err := exec.Command("tmux", "-L", p.socket, "-f", "/dev/null", "new-session", "-d", "-x", "220", "-y", "30",
		"sh", script).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	if out, err := exec.Command("tmux", "-L", p.socket, "set-option", "-g", "remain-on-exit", "on").CombinedOutput(); err != nil {
		t.Fatalf("tmux set-option: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", p.socket, "kill-server").Run() })
	return p
}

func (p *tmuxPane) screen() string {
	out, err := exec.Command("tmux", "-L", p.socket, "capture-pane", "-p").Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// progressRow is the screen row carrying the progress line, if any: the
// one showing the elapsed counter.
func progressRow(screen string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "elapsed") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// On a terminal at simulated speed 0.2 (a boot of about 6s) the progress
// line keeps moving through the boot, and the grant replaces it with a
// one-line human summary naming device, UDID and expiry.
func TestTerminalProgressTicksAndGrantSummary(t *testing.T) {
	// The line ticks every 250ms; a stall of the CLI, tmux or the test of
	// 2-3s on a loaded machine must not read as a frozen line, so up to 3s
	// without a change passes. The boot must stay on screen a second longer
	// than that, so a line frozen for the whole boot still fails.
	const maxStill = 3 * time.Second
	w := newWorld(t, oneRunning)
	w.env = append(w.env, "SIMLOCK_SIMSDK_SPEED=0.2")
	w.mustRun("daemon", "start")
	script := filepath.Join(w.home, "lease.sh")
	var sh strings.Builder
	sh.WriteString("#!/bin/sh\n")
	for _, kv := range w.env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SIMLOCK_") || k == "PATH" || k == "HOME" {
			fmt.Fprintf(&sh, "export %q\n", kv)
		}
	}
	out := filepath.Join(w.home, "lease.out")
	fmt.Fprintf(&sh, "exec %s lease --platform ios --ttl 10m > %s\n", bin, out)
	if err := os.WriteFile(script, []byte(sh.String()), 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pane := newTmuxPane(t, script)

	// Sample the screen every 100ms; group samples by whole seconds of the
	// boot and require a change of the progress row in each.
	var rows []string
	var stamps []time.Duration
	summary := ""
	deadline := time.Now().Add(testhost.Scale(60 * time.Second))
	for summary == "" && time.Now().Before(deadline) {
		s := pane.screen()
		if r := progressRow(s); r != "" {
			rows = append(rows, r)
			stamps = append(stamps, time.Since(start))
		}
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "simlock: leased") {
				summary = strings.TrimSpace(l)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if summary == "" {
		t.Fatalf("no grant summary within 60s; screen:\n%s", pane.screen())
	}
	if len(rows) == 0 {
		t.Fatal("no progress line was ever on screen")
	}
	booting := 0
	lastChange := stamps[0]
	worstGap := time.Duration(0)
	for i := 1; i < len(rows); i++ {
		if strings.Contains(rows[i], "booting") {
			booting++
		}
		if rows[i] != rows[i-1] {
			worstGap = max(worstGap, stamps[i]-lastChange)
			lastChange = stamps[i]
		}
	}
	worstGap = max(worstGap, stamps[len(stamps)-1]-lastChange)
	t.Logf("progress visible for %s in %d samples (%d booting); longest time without a change %s; last row %q",
		stamps[len(stamps)-1]-stamps[0], len(rows), booting, worstGap, rows[len(rows)-1])
	if booting == 0 {
		t.Fatalf("never saw the booting phase; rows: %q", rows)
	}
	if on := stamps[len(stamps)-1] - stamps[0]; on < maxStill+time.Second {
		t.Fatalf("the boot was on screen only %s (%d samples): a frozen line would pass at this speed", on, len(rows))
	}
	if worstGap > maxStill {
		t.Fatalf("the progress line stood still for %s (> %s); rows: %q", worstGap, maxStill, rows)
	}
	for _, want := range []string{"iPhone", "udid ", "lse_", "expires"} {
		if !strings.Contains(summary, want) {
			t.Fatalf("summary %q lacks %q", summary, want)
		}
	}
	// Ctrl-C ends the hold, and the release is said.
	if out, err := exec.Command("tmux", "-L", pane.socket, "send-keys", "C-c").CombinedOutput(); err != nil {
		t.Fatalf("send-keys: %v %s", err, out)
	}
	released := false
	for end := time.Now().Add(testhost.Scale(15 * time.Second)); !released && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		released = strings.Contains(pane.screen(), "simlock: released lse_")
	}
	if !released {
		t.Fatalf("no released line after Ctrl-C; screen:\n%s", pane.screen())
	}
	// stdout (redirected to a file) still carries the JSON grant line.
	b, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(b), `{"leaseId":"lse_`) {
		t.Fatalf("stdout of lease: %q (%v)", b, err)
	}

	// The next boot's ETA is this machine's measured boot, not the iOS
	// driver's fixed 30 s: another model evicts, provisions and boots.
	r := w.run("lease", "--platform", "ios", "--model", "iPhone 15", "--detach", "--json")
	if r.code != 0 {
		t.Fatalf("second lease: exit %d %s", r.code, r.stderr)
	}
	eta := int64(0)
	for _, line := range strings.Split(r.stderr, "\n") {
		var p struct {
			Progress struct {
				Phase string
				EtaMs int64
			}
		}
		if json.Unmarshal([]byte(line), &p) == nil && p.Progress.Phase == "booting" {
			eta = p.Progress.EtaMs
		}
	}
	t.Logf("second boot's ETA %dms", eta)
	if eta <= 0 || eta >= 30000 {
		t.Fatalf("second boot's ETA %dms: want the measured boot (about 6s at speed 0.2), not the driver's 30s\n%s", eta, r.stderr)
	}
}

// A daemon whose HTTP port is taken exits during startup; `simlock daemon
// start` reports its bind error at once instead of waiting out the dial.
func TestDaemonStartReportsBindErrorAtOnce(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	w := newWorld(t, fmt.Sprintf(`{"http":{"enabled":true,"listen":%q}}`, taken.Addr().String()))
	start := time.Now()
	c := w.cmd("daemon", "start")
	done := make(chan result, 1)
	go func() {
		o, err := c.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		done <- result{stdout: string(o), code: code}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(testhost.Scale(10 * time.Second)):
		_ = c.Process.Kill()
		t.Fatal("daemon start still waiting after 10s")
	}
	took := time.Since(start)
	t.Logf("daemon start failed after %s: %s", took, r.stdout)
	if r.code == 0 {
		t.Fatalf("daemon start succeeded with its port taken: %s", r.stdout)
	}
	for _, want := range []string{"DAEMON_STARTUP_FAILED", "address already in use", taken.Addr().String()} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// Shell completion asks a running daemon for models and lease ids (and
// never starts one); a mistyped model is refused with the catalog's
// nearest name before any request is queued.
func TestCompletionAndModelSuggestionFromTheDaemon(t *testing.T) {
	w := newWorld(t, oneRunning)
	if out := w.mustRun("__complete", "lease", "--model", ""); strings.Contains(out, "iPhone") {
		t.Fatalf("models completed without a daemon: %q", out)
	}
	if _, err := os.Stat(filepath.Join(w.home, "daemon.pid")); !os.IsNotExist(err) {
		t.Fatal("completion started a daemon")
	}
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	if out := w.mustRun("__complete", "lease", "--platform", "ios", "--model", ""); !strings.Contains(out, "iPhone 16") {
		t.Fatalf("model completion: %q", out)
	}
	if out := w.mustRun("__complete", "lease", "renew", ""); !strings.Contains(out, l.LeaseID) {
		t.Fatalf("lease id completion lacks %s: %q", l.LeaseID, out)
	}
	r := w.run("lease", "--platform", "ios", "--model", "iPhnoe 16", "--detach")
	if r.code == 0 || !strings.Contains(r.stderr, "UNKNOWN_MODEL") || !strings.Contains(r.stderr, `did you mean --model "iPhone 16"?`) {
		t.Fatalf("mistyped model: exit %d, stderr %q", r.code, r.stderr)
	}
}
