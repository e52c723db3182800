package e2e

import (
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// TestAFloodOfIdleConnectionsAtALowFDLimitLocksNobodyOut: a daemon run with
// `ulimit -n 64` whose HTTP port is flooded with idle connections keeps
// serving its unix socket (each listener is capped to a share of the fd
// limit, and an accept that finds no descriptor is retried), serves it once
// the flood ends, and `simlock daemon stop` returns within its deadline.
func TestAFloodOfIdleConnectionsAtALowFDLimitLocksNobodyOut(t *testing.T) {
	w := newWorld(t, httpConfig)
	d := exec.Command("bash", "-c", `ulimit -n 64 && exec "$0" daemon run`, bin)
	d.Env = w.env
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.Process.Kill()
		<-exited
	})
	var st struct{ Daemon struct{ HTTP string } }
	eventually(t, "the daemon to serve", 20*time.Second, func() bool {
		r := w.run("status", "--json")
		return r.code == 0 && strings.Contains(r.stdout, `"http"`)
	})
	w.json(&st, "status", "--json")

	var flood []net.Conn
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", st.Daemon.HTTP, 2*time.Second)
		if err != nil {
			break // the backlog is full: flooded enough
		}
		flood = append(flood, c)
	}
	t.Logf("%d idle connections to %s", len(flood), st.Daemon.HTTP)
	if len(flood) < 60 {
		t.Fatalf("only %d connections opened; the flood does not exceed the fd limit", len(flood))
	}
	start := time.Now()
	if r := w.run("status", "--json"); r.code != 0 {
		t.Fatalf("the socket refused during the flood: %s %s", r.stdout, r.stderr)
	}
	t.Logf("status during the flood answered in %s", time.Since(start))
	for _, c := range flood {
		c.Close()
	}
	start = time.Now()
	eventually(t, "the socket to serve after the flood", 10*time.Second, func() bool { return w.run("status", "--json").code == 0 })
	t.Logf("status after the flood answered in %s", time.Since(start))

	start = time.Now()
	r := w.run("daemon", "stop", "--timeout", "20s", "--grace", "5s")
	took := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stdout, "daemon stopped") {
		t.Fatalf("daemon stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if took > testhost.Scale(30*time.Second) {
		t.Fatalf("daemon stop took %s", took)
	}
	select {
	case <-exited:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the daemon process did not exit")
	}
	t.Logf("daemon stop returned in %s: %s", took, strings.TrimSpace(r.stdout))
}

// TestDaemonStopEndsAFrozenDaemonBySignal: a daemon that accepts nothing
// (SIGSTOP) cannot answer the stop request; `daemon stop` signals the
// verified pid, SIGTERM with a SIGCONT so the stopped daemon runs its own
// shutdown, says so, and returns in bounded time, after which a new daemon
// starts on the home. (SIGKILL escalation, for a daemon that does not end
// on SIGTERM, is internal/cli's TestStopEscalatesToSIGKILL.)
func TestDaemonStopEndsAFrozenDaemonBySignal(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.mustRun("daemon", "start")
	pid := w.status().Daemon.PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	start := time.Now()
	r := w.run("daemon", "stop", "--timeout", "2s", "--grace", "2s", "--json")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("daemon stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, `"mode":"forced"`) || !strings.Contains(r.stdout, `"signal":"SIGTERM"`) {
		t.Fatalf("daemon stop reported %s", r.stdout)
	}
	if took > testhost.Scale(20*time.Second) {
		t.Fatalf("daemon stop took %s", took)
	}
	t.Logf("daemon stop against a frozen daemon returned in %s: %s", took, strings.TrimSpace(r.stdout))
	w.mustRun("daemon", "start") // the home is free again for a fresh daemon
	if got := w.status().Daemon.PID; got == pid || got == 0 {
		t.Fatalf("after the forced stop the daemon pid is %d (was %d)", got, pid)
	}
}
