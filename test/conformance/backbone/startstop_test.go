package backbone

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

// journalEvent is one line of `simlock events --json`.
type journalEvent struct {
	Seq      uint64         `json:"seq"`
	Type     string         `json:"type"`
	At       time.Time      `json:"at"`
	DeviceID string         `json:"deviceId"`
	LeaseID  string         `json:"leaseId"`
	Data     map[string]any `json:"data"`
}

// journal reads every event the world's daemons have journalled, across
// restarts. An hour back covers a test's whole life; a sequence number
// would not do, since `--since 0` reads as no --since at all.
func journal(w *harness.World) []journalEvent {
	w.T.Helper()
	var out []journalEvent
	for _, line := range strings.Split(strings.TrimSpace(w.MustRun("events", "--since", "1h", "--json")), "\n") {
		var e journalEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			w.T.Fatalf("events printed %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// lastOf is the last event of type typ (about device, when not ""), or nil.
func lastOf(evs []journalEvent, typ, device string) *journalEvent {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ && (device == "" || evs[i].DeviceID == device) {
			return &evs[i]
		}
	}
	return nil
}

// logTime is when daemon.log last said msg (zero if it never did).
func logTime(t *testing.T, w *harness.World, msg string) time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.Home, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			at = l.Time
		}
	}
	return at
}

// simState is the simulated SDK's own word on a simulator: its state in
// `simctl list devices` of its set ("" when the set does not list it).
func simState(t *testing.T, w *harness.World, set, udid string) string {
	t.Helper()
	c := exec.Command(filepath.Join(w.SDK, "xcrun"), "simctl", "--set", set, "list", "devices", "-j")
	c.Env = w.Env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("simctl list devices: %v", err)
	}
	var l struct {
		Devices map[string][]struct{ UDID, State string }
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("simctl list devices printed %q: %v", out, err)
	}
	for _, ds := range l.Devices {
		for _, d := range ds {
			if d.UDID == udid {
				return d.State
			}
		}
	}
	return ""
}

type leasedDevice struct {
	LeaseID string `json:"leaseId"`
	Device  struct {
		ID        string `json:"id"`
		UDID      string `json:"udid"`
		DeviceSet string `json:"deviceSet"`
	} `json:"device"`
}

// eraseOnly turns clone resets off, so a purge is always the erase reset
// (shut down, erase, boot) whose steps the command log can follow.
const eraseOnly = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1}},
 "drivers":{"ios":{"clone":{"enabled":false}}}}`

// A graceful stop that arrives while a release's purge is in flight waits
// for the purge to finish before the daemon goes: the simulator is erased
// and booted again (not left shut down or half-erased), the purge is
// settled as device.reclaimed between "daemon stopping" and "daemon
// stopped", nothing is quarantined, and the next daemon has no interrupted
// purge to recover.
func TestBackboneAGracefulStopDrainsAPurgeInFlight(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/28.5")
	w := harness.NewWorld(t, eraseOnly)
	var l leasedDevice
	w.JSON(&l, "lease", "--platform", "ios", "--detach")
	// Something of the holder's, for the erase to remove.
	marker := filepath.Join(l.Device.DeviceSet, l.Device.UDID, "data", "holder-was-here")
	if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The lease survives a graceful stop. The daemon that purges runs the
	// simulated SDK with its modelled durations cut to a fifth, so the
	// erase reset still takes over six seconds (nearly all of it the first
	// boot after the erase), and with every tool call logged.
	w.MustRun("daemon", "stop")
	cmdLog := filepath.Join(w.Root, "commands.log")
	w.Setenv("SIMLOCK_SIMSDK_SPEED", "0.2")
	w.Setenv("SIMLOCK_SIMSDK_COMMAND_LOG", cmdLog)
	w.MustRun("daemon", "start")
	w.MustRun("release", l.LeaseID)
	calls := func() string {
		b, _ := os.ReadFile(cmdLog)
		return string(b)
	}
	// The purge has begun once the driver shuts the simulator down.
	harness.Eventually(t, "the purge to begin", 30*time.Second, func() bool {
		return strings.Contains(calls(), "shutdown "+l.Device.UDID)
	})
	w.MustRun("daemon", "stop")

	stopping, stopped := logTime(t, w, "daemon stopping"), logTime(t, w, "daemon stopped")
	if stopping.IsZero() || stopped.IsZero() {
		t.Fatal("daemon.log does not show the graceful stop")
	}
	// What the stopped daemon left in the simulated SDK: every step of the
	// erase reset ran, the holder's data is gone, the simulator is booted.
	log := calls()
	// The boot is one `bootstatus -b`, which boots and waits (issue 25).
	steps := []string{"shutdown " + l.Device.UDID, "erase " + l.Device.UDID, "bootstatus " + l.Device.UDID + " -b"}
	at := 0
	for _, s := range steps {
		i := strings.Index(log[at:], s)
		if i < 0 {
			t.Fatalf("the purge did not run %q after the steps before it; tool calls:\n%s", s, log)
		}
		at += i + len(s)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the holder's data survived the purge (stat: %v)", err)
	}
	if st := simState(t, w, l.Device.DeviceSet, l.Device.UDID); st != "Booted" {
		t.Fatalf("after the stop the simulator is %q, want Booted (the purge's boot finished)", st)
	}

	// The next daemon runs at full speed and finds nothing to finish.
	w.Setenv("SIMLOCK_SIMSDK_SPEED", "0")
	w.MustRun("daemon", "start")
	evs := journal(w)
	reclaimed := lastOf(evs, "device.reclaimed", l.Device.ID)
	if reclaimed == nil {
		t.Fatalf("no device.reclaimed for %s in the journal: %+v", l.Device.ID, evs)
	}
	// Settled by the stopping daemon: after its stop began, and no later
	// than its last line ("at" has millisecond precision).
	if !reclaimed.At.After(stopping) || reclaimed.At.After(stopped.Add(time.Millisecond)) {
		t.Fatalf("device.reclaimed at %s, the stop ran from %s to %s", reclaimed.At, stopping, stopped)
	}
	if reclaimed.Data["reset"] != "erase" || reclaimed.Data["disposition"] != "ready" {
		t.Fatalf("device.reclaimed: %+v", reclaimed.Data)
	}
	started := lastOf(evs, "daemon.started", "")
	if started == nil || started.Seq < reclaimed.Seq {
		t.Fatalf("the restarted daemon's daemon.started (%+v) is not after device.reclaimed", started)
	}
	for _, typ := range []string{"device.purge-failed", "device.quarantined", "device.reclaim-recovered", "device.found-stopped"} {
		if e := lastOf(evs, typ, l.Device.ID); e != nil {
			t.Fatalf("%s for the purged device: %+v", typ, e)
		}
	}
	for _, e := range evs {
		if e.Seq > started.Seq && e.DeviceID == l.Device.ID {
			t.Fatalf("the restarted daemon did something to the purged device: %+v", e)
		}
	}
	var st struct {
		Devices []struct {
			ID      string
			UDID    string
			Runtime struct{ Lifecycle string }
		}
		Leases []any
	}
	w.JSON(&st, "status", "--json")
	if len(st.Devices) != 1 || st.Devices[0].ID != l.Device.ID || st.Devices[0].UDID != l.Device.UDID ||
		st.Devices[0].Runtime.Lifecycle != "ready" || len(st.Leases) != 0 {
		t.Fatalf("after the restart: %+v", st)
	}
}

// daemonHealth is `simlock daemon status`'s health: it never starts a
// daemon, so it is safe to ask while one is still coming up ("" while
// none answers).
func daemonHealth(w *harness.World) string {
	w.T.Helper()
	r := w.Run("daemon", "status", "--json")
	var st struct{ Health string }
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil {
		return ""
	}
	return st.Health
}

// startInBackground runs `simlock daemon run` without waiting for it, its
// output in a file (a pipe would outlive it: device processes inherit it).
func startInBackground(t *testing.T, w *harness.World) {
	t.Helper()
	out, err := os.Create(filepath.Join(w.Root, "daemon-run.out"))
	if err != nil {
		t.Fatal(err)
	}
	c := w.Cmd("daemon", "run")
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Run("daemon", "stop")
		c.Wait()
		out.Close()
	})
}

// The HTTP listener is up while the daemon converges, and a request that
// needs readiness parks there: with the startup listing held up by the
// simulated SDK, a connection to the HTTP port opens at once, GET
// /v1/status answers at once with health "starting", and GET /v1/leases
// sent on that early connection gets its ordinary 200 only once
// convergence has finished: never while a status read still saw it
// starting, and never as a refusal.
func TestBackboneHTTPListensDuringConvergenceAndParksItsRequests(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/36.4")
	w := harness.NewWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "http":{"enabled":true,"listen":"127.0.0.1:0"}}`)
	var tok struct{ Token string }
	w.JSON(&tok, "token", "create", "--role", "agent", "--name", "early", "--json")
	// A ready device that no lease holds: convergence lists the simulators
	// to check it is still running, and that listing is what we slow down.
	var l leasedDevice
	w.JSON(&l, "lease", "--platform", "ios", "--detach")
	w.MustRun("release", l.LeaseID)
	harness.Eventually(t, "the released device to be ready", 30*time.Second, func() bool {
		return lastOf(journal(w), "device.reclaimed", l.Device.ID) != nil
	})
	w.MustRun("daemon", "stop")

	w.Setenv("SIMLOCK_SIMSDK_FAULTS", "slow-probe=5000")
	startInBackground(t, w)
	harness.Eventually(t, "the daemon to answer while converging", 30*time.Second, func() bool {
		return daemonHealth(w) == "starting"
	})
	var st struct{ Daemon struct{ HTTP string } }
	w.JSON(&st, "status", "--json")
	addr := st.Daemon.HTTP
	if addr == "" {
		t.Fatal("status names no HTTP address")
	}

	// status.get over HTTP, which needs no readiness: the health it reads
	// tells whether convergence is still under way.
	httpHealth := func() string {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /v1/status during startup: %v", err)
		}
		defer resp.Body.Close()
		var s struct{ Daemon struct{ Health string } }
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&s) != nil {
			t.Fatalf("GET /v1/status during startup: %d", resp.StatusCode)
		}
		return s.Daemon.Health
	}

	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("the HTTP port refused a connection during convergence: %v", err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/leases HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", addr, tok.Token); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	type answer struct {
		code int
		body map[string]any
		err  error
		at   time.Time
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- answer{err: err, at: time.Now()}
			return
		}
		defer resp.Body.Close()
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		answered <- answer{code: resp.StatusCode, body: body, err: err, at: time.Now()}
	}()

	// Poll until converged, remembering when the last poll that still
	// read "starting" began: convergence was under way at that moment, so
	// a parked request cannot have been answered before it.
	var lastStarting time.Time
	harness.Eventually(t, "convergence to end", 60*time.Second, func() bool {
		began := time.Now()
		switch h := httpHealth(); h {
		case "starting":
			lastStarting = began
			return false
		case "running":
			return true
		default:
			t.Fatalf("health %q during startup", h)
			return false
		}
	})
	if !lastStarting.After(sent) {
		t.Fatal("convergence ended before a status read could see the request outstanding; the slow listing no longer slows it")
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("GET /v1/leases was not answered after convergence")
	}
	if a.err != nil || a.code != 200 || a.body["leases"] == nil {
		t.Fatalf("GET /v1/leases sent during convergence: %d %v %v", a.code, a.body, a.err)
	}
	if !a.at.After(lastStarting) {
		t.Fatalf("GET /v1/leases was answered at %s, while convergence was still under way (a status read begun at %s saw it starting)",
			a.at.Format(time.StampMicro), lastStarting.Format(time.StampMicro))
	}
}

// The health monitor is not armed while the daemon converges. A leased
// simulator whose process died while no daemon ran is a crash for the
// monitor to find (convergence leaves leased devices alone), and the
// monitor here looks every 100 ms, two reads to a crash. Convergence is
// held up for seconds by its one listing of the simulators (it checks an
// idle ready device is still running), which the simulated SDK answers
// late; only that first listing is late, so a monitor's listings would not
// be. The crash is detected, but only after daemon.started: an armed
// monitor would have found it long before.
func TestBackboneTheHealthMonitorStartsOnlyAfterConvergence(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/36.5")
	w := harness.NewWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3}},
 "drivers":{"ios":{"clone":{"enabled":false}}},
 "health":{"intervalMs":100,"stableObservations":2,"maxRecoveryAttempts":3}}`)
	var held, idle leasedDevice
	w.JSON(&held, "lease", "--platform", "ios", "--detach", "--ttl", "10m")
	w.JSON(&idle, "lease", "--platform", "ios", "--detach", "--requester", "second")
	w.MustRun("release", idle.LeaseID)
	harness.Eventually(t, "the idle device to be ready", 30*time.Second, func() bool {
		return lastOf(journal(w), "device.reclaimed", idle.Device.ID) != nil
	})
	w.MustRun("daemon", "stop")

	// The held simulator dies while no daemon watches.
	var procs []struct {
		ID  string `json:"id"`
		PID int    `json:"pid"`
	}
	w.JSON(&procs, "simsdk", "ps", "--json")
	pid := 0
	for _, p := range procs {
		if p.ID == held.Device.UDID {
			pid = p.PID
		}
	}
	if pid == 0 {
		t.Fatalf("no process for the held simulator: %+v", procs)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the held simulator to be shut down", 10*time.Second, func() bool {
		return simState(t, w, held.Device.DeviceSet, held.Device.UDID) == "Shutdown"
	})

	// From here on no listing but the daemon's: the fault's one use is
	// convergence's.
	w.Setenv("SIMLOCK_SIMSDK_FAULTS", "slow-probe=5000@1")
	w.MustRun("daemon", "start")
	var evs []journalEvent
	harness.Eventually(t, "the monitor to detect the crash", 60*time.Second, func() bool {
		evs = journal(w)
		return lastOf(evs, "device.crash-detected", held.Device.ID) != nil
	})
	started := lastOf(evs, "daemon.started", "")
	crash := lastOf(evs, "device.crash-detected", held.Device.ID)
	if crash.Seq < started.Seq {
		t.Fatalf("the crash was detected (seq %d) before convergence ended (daemon.started, seq %d)", crash.Seq, started.Seq)
	}
	// The premise: convergence ran long enough (dozens of monitor
	// intervals) for an armed monitor to have acted.
	if began := logTime(t, w, "daemon started"); began.IsZero() || started.At.Sub(began) < 3*time.Second {
		t.Fatalf("convergence was not held up by the slow listing (daemon up at %s, converged at %s)", began, started.At)
	}
	// Convergence did not take the crash for anything itself.
	for _, typ := range []string{"device.found-stopped", "device.vanished"} {
		if e := lastOf(evs, typ, held.Device.ID); e != nil {
			t.Fatalf("convergence acted on the leased device: %+v", e)
		}
	}
}
