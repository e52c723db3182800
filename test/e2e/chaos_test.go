package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// The chaos drill: concurrent clients on both platforms lease, wait,
// refuse, cancel, renew and release against the real daemon over the
// simulated SDK, while SDK faults fire, device processes and the daemon
// itself are killed with SIGKILL, and foreign clients stop reading their
// socket. Status snapshots check the instantaneous invariants all along;
// the full event log of every daemon run, read with what the clients saw,
// checks the rest at the end. docs/testing.md describes the modes.
//
// It is seeded (SIMLOCK_CHAOS_SEED): each actor and the chaos schedule
// draw from their own stream, so a failing run's decisions can be
// replayed, though process timing still varies from run to run.

// Two running slots, one of them at most for Android, and three managed
// devices for four specs: almost every switch of platform or spec has to
// evict or destroy something.
const chaosConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3,"platforms":{"android":{"maxRunning":1}}}},
 "lease":{"defaultTtlMs":600000,"maxTtlMs":3600000},
 "health":{"intervalMs":200,"stableObservations":2,"maxRecoveryAttempts":1},
 "warmPool":{"quarantine":{"retries":2,"backoffMs":200,"multiplier":1,"capMs":200}},
 "eventBuffer":{"size":1000000}}`

// chaosMaxRunning mirrors chaosConfig: "" is the overall limit.
var chaosMaxRunning = map[string]int{"": 2, "ios": 2, "android": 1}

type chaosMode struct {
	name        string
	actors      int
	ops         int           // operations to run, at least
	kills       int           // daemon kill -9s, at least
	faults      int           // injected SDK faults, at least (long mode)
	perFault    int           // budget per fault kind per daemon run
	wall        time.Duration // the run stops here whatever the counts
	mustReach   bool          // falling short of the counts fails the run
	stallBound  time.Duration // no renew, release or status call may take longer
	maxSlow     int           // slow readers at once
	slowStallMs int
}

func chaosModeFor(t *testing.T) chaosMode {
	switch {
	case os.Getenv("SIMLOCK_CHAOS_LONG") == "1":
		return chaosMode{name: "long", actors: 16, ops: 10000, kills: 24, faults: 200, perFault: 3,
			wall: 35 * time.Minute, mustReach: true, stallBound: testhost.Scale(5 * time.Second), maxSlow: 3, slowStallMs: 6000}
	case testing.Short():
		return chaosMode{name: "short", actors: 4, ops: 150, kills: 1, perFault: 2,
			wall: 15 * time.Second, stallBound: testhost.Scale(5 * time.Second), maxSlow: 1, slowStallMs: 2000}
	default:
		return chaosMode{name: "default", actors: 6, ops: 400, kills: 3, perFault: 2,
			wall: 45 * time.Second, stallBound: testhost.Scale(5 * time.Second), maxSlow: 2, slowStallMs: 3000}
	}
}

type chaos struct {
	t          *testing.T
	w          *world
	sock       string
	seed       uint64
	mode       string
	actors     int
	stallBound time.Duration

	bg         sync.WaitGroup // follower and watcher
	fillNow    chan chan struct{}
	slowActive atomic.Int32

	mu          sync.Mutex
	ops         map[string]map[string]int
	incs        map[int]*incarnation
	leases      map[string]*leaseRec
	refusals    []refusal
	evictions   []contract.Event
	kills       []time.Time
	deviceKills int
	slowStarted int
	snapshots   int
	maxQueue    int
	gapsFilled  int
	slowest     time.Duration
	violations  int
	notes       int
}

func (ch *chaos) adminToken() string {
	b, _ := os.ReadFile(filepath.Join(ch.w.home, "admin.token"))
	return strings.TrimSpace(string(b))
}

func (ch *chaos) violate(format string, args ...any) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.violateLocked(format, args...)
}

func (ch *chaos) violateLocked(format string, args ...any) {
	ch.violations++
	if ch.violations <= 40 {
		ch.t.Errorf("invariant violated (seed %d): %s", ch.seed, fmt.Sprintf(format, args...))
	}
}

// note logs a diagnostic (the first few of them).
func (ch *chaos) note(format string, args ...any) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.notes++
	if ch.notes <= 10 {
		ch.t.Logf(format, args...)
	}
}

func (ch *chaos) count(kind, outcome string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.ops[kind] == nil {
		ch.ops[kind] = map[string]int{}
	}
	ch.ops[kind][outcome]++
}

func (ch *chaos) totalOps() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := 0
	for _, outs := range ch.ops {
		for _, c := range outs {
			n += c
		}
	}
	return n
}

// fastOp records the duration of a call that never waits for devices.
func (ch *chaos) fastOp(d time.Duration) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if d > ch.slowest {
		ch.slowest = d
	}
	if d > ch.stallBound {
		ch.violateLocked("a renew, release or status call took %s (bound %s, %d slow readers active): one client stalled the daemon", d, ch.stallBound, ch.slowActive.Load())
	}
}

// chaosFaults is the SDK fault list for the epoch-th daemon run. The
// simulated SDK counts a fault's uses by the entry as written, so padding
// the count with one more zero per run gives every run a fresh budget.
func chaosFaults(epoch, per int) string {
	var parts []string
	for _, f := range []struct {
		name string
		n    int
	}{{"boot-fail", per}, {"erase-fail", per}, {"snapshot-fail", per}, {"create-fail", 1}, {"crash-after=400", 1}} {
		parts = append(parts, fmt.Sprintf("%s@%0*d", f.name, epoch+1, f.n))
	}
	return strings.Join(parts, ",")
}

// faultsFired reads how often each fault fired, from the simulated SDK's
// own count (its home state), by fault name.
func (w *world) faultsFired() (map[string]int, int) {
	var st struct {
		FaultsFired map[string]int `json:"faultsFired"`
	}
	b, _ := os.ReadFile(filepath.Join(w.simHome, "state.json"))
	_ = json.Unmarshal(b, &st)
	out, total := map[string]int{}, 0
	for key, n := range st.FaultsFired {
		name, _, _ := strings.Cut(key, "@")
		name, _, _ = strings.Cut(name, "=")
		out[name] += n
		total += n
	}
	return out, total
}

func (w *world) daemonPID() int {
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(w.home, "daemon.pid"))))
	return pid
}

func TestChaosDrill(t *testing.T) {
	seed := uint64(20261129)
	if s := os.Getenv("SIMLOCK_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	m := chaosModeFor(t)
	t.Logf("chaos seed %d (replay with SIMLOCK_CHAOS_SEED=%d), %s mode: %d actors, %d+ operations, %d+ daemon kills",
		seed, seed, m.name, m.actors, m.ops, m.kills)
	w := newWorld(t, chaosConfig)
	base := w.env
	epoch := 0
	withFaults := func() {
		w.env = append(append([]string(nil), base...), "SIMLOCK_SIMSDK_FAULTS="+chaosFaults(epoch, m.perFault))
	}
	withFaults()
	w.mustRun("daemon", "start")
	start := time.Now()

	ch := &chaos{t: t, w: w, sock: filepath.Join(w.home, "simlock.sock"), seed: seed, mode: m.name, actors: m.actors,
		stallBound: m.stallBound, fillNow: make(chan chan struct{}), ops: map[string]map[string]int{},
		incs: map[int]*incarnation{}, leases: map[string]*leaseRec{}}
	ctx, stop := context.WithCancel(context.Background())
	actx, stopActors := context.WithCancel(ctx)
	var actors, slow sync.WaitGroup
	defer func() { stopActors(); slow.Wait(); actors.Wait(); stop(); ch.bg.Wait() }()
	ch.bg.Add(2)
	go ch.follow(ctx)
	go ch.watch(ctx)
	for i := 0; i < m.actors; i++ {
		a := &actor{ch: ch, name: fmt.Sprintf("agent-%02d", i+1), rng: rand.New(rand.NewPCG(seed, uint64(i+1)))}
		actors.Add(1)
		go func() { defer actors.Done(); a.run(actx) }()
	}

	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	opsAtKill, lastKill := 0, time.Now()
	for {
		ops := ch.totalOps()
		_, faults := w.faultsFired()
		ch.mu.Lock()
		kills := len(ch.kills)
		ch.mu.Unlock()
		if ops >= m.ops && kills >= m.kills && faults >= m.faults {
			break
		}
		if time.Since(start) > m.wall {
			msg := fmt.Sprintf("the %s run stopped at its %s cap with %d operations, %d daemon kills, %d faults (wanted %d, %d, %d)",
				m.name, m.wall, ops, kills, faults, m.ops, m.kills, m.faults)
			if m.mustReach {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
			break
		}
		sleepCtx(ctx, time.Duration(50+rng.IntN(200))*time.Millisecond)
		switch r := rng.IntN(100); {
		case r < 10:
			// Kill a random simulated device process, either platform.
			var procs []struct {
				Platform string
				ID       string
				PID      int
			}
			w.json(&procs, "simsdk", "ps", "--json")
			if len(procs) > 0 {
				p := procs[rng.IntN(len(procs))]
				if syscall.Kill(p.PID, syscall.SIGKILL) == nil {
					ch.mu.Lock()
					ch.deviceKills++
					ch.mu.Unlock()
				}
			}
		case r < 16 && int(ch.slowActive.Load()) < m.maxSlow:
			ch.mu.Lock()
			ch.slowStarted++
			n := ch.slowStarted
			ch.mu.Unlock()
			platform := []string{"ios", "android"}[rng.IntN(2)]
			stall := time.Duration(m.slowStallMs/2+rng.IntN(m.slowStallMs)) * time.Millisecond
			slow.Add(1)
			go func() { defer slow.Done(); ch.slowReader(actx, n, platform, stall) }()
		}
		if ops-opsAtKill >= m.ops/(m.kills+1) && time.Since(lastKill) > time.Second {
			// Kill the daemon once the follower has its run's events, then
			// bring a new one up on the same home with a fresh fault budget.
			pid := w.daemonPID()
			eventually(t, "the follower to reach the daemon", 20*time.Second, func() bool { return ch.followerSees(pid) })
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -9 the daemon %d: %v", pid, err)
			}
			ch.mu.Lock()
			ch.kills = append(ch.kills, time.Now())
			if inc := ch.incs[pid]; inc != nil {
				inc.killed = true
			}
			ch.mu.Unlock()
			eventually(t, "the killed daemon to exit", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
			epoch++
			withFaults()
			w.mustRun("daemon", "start")
			opsAtKill, lastKill = ops, time.Now()
		}
	}
	stopActors()
	waitGroup(t, &actors, "the actors to stop", 90*time.Second)
	waitGroup(t, &slow, "the slow readers to stop", 30*time.Second)
	ch.settle(ctx)

	// Reset: the roots must hold nothing afterwards.
	admin, err := ch.dial(ctx, "chaos-admin", true)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	nukeAt := time.Now()
	rep, err := client.Do(ctx, admin, contract.NukeRun, contract.NukeRunIn{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) > 0 {
		ch.violate("nuke failures: %v", rep.Failed)
	}
	ch.checkEmpty(ctx, admin)
	reply := make(chan struct{})
	select {
	case ch.fillNow <- reply:
		<-reply
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Error("the follower did not answer the final re-read")
	}
	stop()
	ch.bg.Wait()
	grants, lost := ch.analyse(nukeAt)
	byName, _ := w.faultsFired()
	t.Log(ch.summary(time.Since(start), grants, lost, byName))
}

// settle waits for the daemon to finish everything in flight: no device
// stays provisioning, reclaiming or quarantined, and the queue drains.
func (ch *chaos) settle(ctx context.Context) {
	admin, err := ch.dial(ctx, "chaos-admin", true)
	if err != nil {
		ch.t.Fatal(err)
	}
	defer admin.Close()
	deadline := time.Now().Add(testhost.Scale(30 * time.Second))
	for {
		st, err := client.Do(ctx, admin, contract.StatusGet, contract.StatusGetIn{})
		if err != nil {
			ch.t.Fatal(err)
		}
		var busy []string
		for _, d := range st.Devices {
			if d.Runtime.Lifecycle == "provisioning" || d.Runtime.Lifecycle == "reclaiming" || d.Runtime.Lifecycle == "quarantined" {
				busy = append(busy, d.ID+"="+d.Runtime.Lifecycle)
			}
		}
		if len(busy) == 0 && st.QueueDepth == 0 {
			return
		}
		if time.Now().After(deadline) {
			ch.violate("30s after the last client stopped, devices are still %v and %d requests queued", busy, st.QueueDepth)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkEmpty: after the nuke nothing is left anywhere: no device in the
// registry, no simulator in the iOS set, no AVD in the Android root, no
// device process, and doctor finds nothing.
func (ch *chaos) checkEmpty(ctx context.Context, admin *client.Client) {
	w := ch.w
	st, err := client.Do(ctx, admin, contract.StatusGet, contract.StatusGetIn{})
	if err != nil || len(st.Devices) != 0 || len(st.Leases) != 0 {
		ch.violate("after nuke the registry still has %d devices, %d leases (%v)", len(st.Devices), len(st.Leases), err)
	}
	out, _ := exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "--set", filepath.Join(w.home, "devices", "ios"), "list", "devices", "-j").Output()
	if strings.Contains(string(out), `"udid"`) {
		ch.violate("devices left in the iOS set after nuke:\n%s", out)
	}
	entries, _ := os.ReadDir(filepath.Join(w.home, "devices", "android"))
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".ini") || strings.HasSuffix(n, ".avd") || strings.HasSuffix(n, ".simlock.json") {
			ch.violate("left in the AVD root after nuke: %s", n)
		}
	}
	var procs []struct{ ID string }
	w.json(&procs, "simsdk", "ps", "--json")
	if len(procs) > 0 {
		ch.violate("device processes still running after nuke: %+v", procs)
	}
	doc, err := client.Do(ctx, admin, contract.DoctorRun, contract.DoctorRunIn{})
	if err != nil || !doc.Healthy {
		ch.violate("doctor after nuke: %+v %v", doc, err)
	}
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, what string, within time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testhost.Scale(within)):
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
