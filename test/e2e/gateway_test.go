package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type workerView struct {
	ID      string
	Label   string
	State   string
	Drained bool
	Leases  int
}

func (w *world) workers() []workerView {
	var out struct{ Workers []workerView }
	w.json(&out, "worker", "list", "--json")
	return out.Workers
}

// fleet starts a gateway and n workers that join it over real WebSockets.
func fleet(t *testing.T, n int) (gw *world, workers []*world, base string) {
	return fleetWith(t, n, `{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}`)
}

// fleetWith is fleet with each worker's capacity section.
func fleetWith(t *testing.T, n int, capacity string) (gw *world, workers []*world, base string) {
	return fleetOn(t, n, capacity, "")
}

// fleetOn is fleetWith with more of the gateway's configuration: extra is
// spliced into its top-level object (`,"gateway":{...}`).
func fleetOn(t *testing.T, n int, capacity, extra string) (gw *world, workers []*world, base string) {
	// A fixed port, so workers find a restarted gateway at the same address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	gw = newWorld(t, fmt.Sprintf(`{"mode":"gateway","http":{"listen":%q}%s}`, addr, extra))
	gw.mustRun("daemon", "start")
	var st struct{ Daemon struct{ HTTP, Mode string } }
	gw.json(&st, "status", "--json")
	if st.Daemon.Mode != "gateway" || st.Daemon.HTTP == "" {
		t.Fatalf("gateway status %+v", st)
	}
	base = "http://" + st.Daemon.HTTP
	var tok struct{ Token string }
	gw.json(&tok, "token", "create", "--role", "worker", "--name", "join", "--json")
	for i := 0; i < n; i++ {
		w := newWorld(t, "")
		cfg := fmt.Sprintf(`{"capacity":%s,
 "gateway":{"url":"ws://%s","token":%q,"label":"mac-%d"}}`, capacity, st.Daemon.HTTP, tok.Token, i+1)
		if err := os.WriteFile(filepath.Join(w.home, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		w.mustRun("daemon", "start")
		workers = append(workers, w)
	}
	eventually(t, "every worker to join", 30*time.Second, func() bool {
		ws := gw.workers()
		connected := 0
		for _, v := range ws {
			if v.State == "connected" {
				connected++
			}
		}
		return connected == n
	})
	return gw, workers, base
}

func TestGatewayRoutesLeasesAcrossWorkers(t *testing.T) {
	gw, workers, base := fleet(t, 2)

	var a, b lease
	gw.json(&a, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "agent-a")
	gw.json(&b, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "agent-b")
	wa, _, okA := strings.Cut(a.LeaseID, ".")
	wb, _, okB := strings.Cut(b.LeaseID, ".")
	if !okA || !okB || wa == wb {
		t.Fatalf("leases %s and %s should live on two different workers", a.LeaseID, b.LeaseID)
	}
	// Each worker holds exactly one lease, under the gateway's namespace.
	for _, w := range workers {
		st := w.status()
		if len(st.Leases) != 1 {
			t.Fatalf("worker has %d leases", len(st.Leases))
		}
	}
	// Full fleet: a no-wait request is refused.
	r := gw.run("lease", "--platform", "ios", "--no-wait", "--requester", "agent-c", "--json")
	if !strings.Contains(r.stderr, "NO_CAPACITY") {
		t.Fatalf("full fleet: %s", r.stderr)
	}
	// One lease per requester, fleet-wide.
	r = gw.run("lease", "--platform", "ios", "--no-wait", "--requester", "agent-a", "--json")
	if !strings.Contains(r.stderr, "REQUESTER_ALREADY_LEASED") || !strings.Contains(r.stderr, a.LeaseID) {
		t.Fatalf("second lease for agent-a: %s", r.stderr)
	}
	// Renew, exec and release are forwarded to the owning worker.
	gw.mustRun("lease", "renew", a.LeaseID)
	out := gw.mustRun("exec", a.LeaseID, "--", "simctl", "list", "devices")
	if !strings.Contains(out, a.Device.UDID) {
		t.Fatalf("exec through the gateway: %s", out)
	}
	gw.mustRun("release", a.LeaseID)
	// Views are refreshed from the worker's events: stale by a moment at most.
	eventually(t, "the gateway's view to drop the released lease", 10*time.Second, func() bool { return len(gw.status().Leases) == 1 })

	// A drained worker keeps its lease and receives no new one.
	gw.mustRun("worker", "drain", wb)
	var c lease
	gw.json(&c, "lease", "--platform", "ios", "--detach", "--requester", "agent-c", "--timeout", "30s")
	if strings.HasPrefix(c.LeaseID, wb+".") {
		t.Fatalf("a drained worker got a new lease: %s", c.LeaseID)
	}
	found := false
	for _, v := range gw.workers() {
		found = found || v.ID == wb && v.Drained
	}
	if !found {
		t.Fatal("drain not shown")
	}
	// Machine-wide operations stay per worker.
	if r := gw.run("nuke", "--yes", "--json"); !strings.Contains(r.stderr, "UNSUPPORTED_IN_GATEWAY_MODE") {
		t.Fatalf("nuke on a gateway: %s", r.stderr)
	}
	// An agent token cannot open an uplink.
	var agent struct{ Token string }
	gw.json(&agent, "token", "create", "--role", "agent", "--name", "ci", "--json")
	req, _ := http.NewRequest("GET", base+"/v1/uplink", nil)
	req.Header.Set("Authorization", "Bearer "+agent.Token)
	req.Header.Set("X-Simlock-Worker-Id", "intruder")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("uplink with an agent token: %d", resp.StatusCode)
	}
	// The gateway's events show the fleet.
	out = gw.mustRun("events", "--json")
	for _, want := range []string{"worker.connected", "worker.rejected", "lease.granted"} {
		if !strings.Contains(out, want) {
			t.Errorf("gateway events lack %s", want)
		}
	}
	// Worker facts are republished with the worker's id.
	republished := false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct{ Type, WorkerID string }
		json.Unmarshal([]byte(line), &e)
		republished = republished || e.Type == "lease.granted" && e.WorkerID != ""
	}
	if !republished {
		t.Error("worker lease facts are not republished with a workerId")
	}
}

func TestWorkerDisconnectKeepsItsViewAndLeases(t *testing.T) {
	gw, workers, _ := fleet(t, 1)
	var l lease
	gw.json(&l, "lease", "--platform", "ios", "--detach", "--requester", "agent-a", "--ttl", "10m")
	pid := workers[0].status().Daemon.PID
	syscall.Kill(pid, syscall.SIGKILL)
	eventually(t, "the view to show the worker disconnected", 20*time.Second, func() bool {
		ws := gw.workers()
		return len(ws) == 1 && ws[0].State == "disconnected"
	})
	r := gw.run("lease", "renew", l.LeaseID, "--json")
	if !strings.Contains(r.stderr, "WORKER_UNREACHABLE") {
		t.Fatalf("renew while the worker is away: %s", r.stderr)
	}
	// The worker comes back (same instance id): its lease is still there.
	workers[0].mustRun("daemon", "start")
	eventually(t, "the worker to rejoin", 30*time.Second, func() bool {
		ws := gw.workers()
		return len(ws) == 1 && ws[0].State == "connected"
	})
	gw.mustRun("lease", "renew", l.LeaseID)
	// A connected worker cannot be forgotten.
	if r := gw.run("worker", "remove", gw.workers()[0].ID, "--json"); r.code == 0 {
		t.Fatal("removed a connected worker")
	}
}

func workerOf(t *testing.T, leaseID string) string {
	id, _, ok := strings.Cut(leaseID, ".")
	if !ok {
		t.Fatalf("%s is not a gateway lease id", leaseID)
	}
	return id
}

func TestGatewayWarmHitQueueStatusDrainAndRestart(t *testing.T) {
	gw, workers, _ := fleet(t, 2)

	// Warm hit: after a release only one worker has a ready device; the next
	// request goes there although the other has as much free capacity.
	var first lease
	gw.json(&first, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "warm-1")
	warm := workerOf(t, first.LeaseID)
	gw.mustRun("release", first.LeaseID)
	eventually(t, "the released device to be warm", 20*time.Second, func() bool {
		var st struct {
			Devices []struct {
				WorkerID string
				Runtime  struct{ Lifecycle string }
			}
		}
		gw.json(&st, "status", "--json")
		for _, d := range st.Devices {
			if d.WorkerID == warm && d.Runtime.Lifecycle == "ready" {
				return true
			}
		}
		return false
	})
	var hit lease
	gw.json(&hit, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "warm-2", "--ttl", "10m")
	if workerOf(t, hit.LeaseID) != warm || hit.Device.ID != first.Device.ID {
		t.Fatalf("no warm hit: %s on %s, the warm device was %s on %s", hit.LeaseID, hit.Device.ID, first.Device.ID, warm)
	}

	// Both full: a request waits in the fleet queue and is granted when
	// either worker frees a device.
	var other lease
	gw.json(&other, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "full-2", "--ttl", "10m")
	waiter := gw.cmd("lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "queued", "--timeout", "60s", "--ttl", "10m")
	var wout strings.Builder
	waiter.Stdout = &wout
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the request to wait in the fleet queue", 20*time.Second, func() bool { return gw.status().QueueDepth == 1 })

	// Status against the gateway: both workers, every lease with its worker.
	var st struct {
		Workers []workerView
		Leases  []struct {
			LeaseID string
			Worker  *struct{ ID, Label string }
		}
	}
	gw.json(&st, "status", "--json")
	if len(st.Workers) != 2 || len(st.Leases) != 2 {
		t.Fatalf("gateway status: %d workers, %d leases", len(st.Workers), len(st.Leases))
	}
	for _, l := range st.Leases {
		if l.Worker == nil || l.Worker.ID != workerOf(t, l.LeaseID) {
			t.Fatalf("lease %s without its worker: %+v", l.LeaseID, l.Worker)
		}
	}
	gw.mustRun("release", other.LeaseID)
	if err := waiter.Wait(); err != nil {
		t.Fatalf("queued request: %v", err)
	}
	var queued lease
	json.Unmarshal([]byte(wout.String()), &queued)
	if workerOf(t, queued.LeaseID) != workerOf(t, other.LeaseID) {
		t.Fatalf("queued request granted on %s, the freed device was on %s", queued.LeaseID, other.LeaseID)
	}

	// Drain one worker; the drain survives a gateway restart and the
	// worker's reconnect, and every lease renews again afterwards.
	drained := workerOf(t, hit.LeaseID)
	gw.mustRun("worker", "drain", drained)
	gw.mustRun("daemon", "stop")
	gw.mustRun("daemon", "start")
	eventually(t, "both workers to reconnect to the restarted gateway", 30*time.Second, func() bool {
		ws := gw.workers()
		n := 0
		for _, v := range ws {
			if v.State == "connected" {
				n++
			}
		}
		return n == 2
	})
	for _, v := range gw.workers() {
		if v.ID == drained && !v.Drained {
			t.Fatal("the drain did not survive the gateway restart")
		}
	}
	for _, id := range []string{hit.LeaseID, queued.LeaseID} {
		gw.mustRun("lease", "renew", id)
	}
	entries, _ := os.ReadDir(gw.home)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && e.Name() != "workers.json" && e.Name() != "instance.json" && e.Name() != "config.json" &&
			// daemon.json names the running process for `daemon stop` (ADR 0064),
			// like the pid file: who runs, not what the fleet looked like.
			e.Name() != "daemon.json" {
			t.Errorf("gateway keeps state beyond workers.json: %s", e.Name())
		}
	}
	// The drained worker keeps its lease and gets no new one.
	gw.mustRun("release", queued.LeaseID)
	var next lease
	gw.json(&next, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "after-drain", "--timeout", "30s")
	if workerOf(t, next.LeaseID) == drained {
		t.Fatal("a drained worker got a new lease")
	}
	gw.mustRun("lease", "renew", hit.LeaseID)
	_ = workers
}
