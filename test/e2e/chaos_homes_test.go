package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// The multi-home chaos drill (issue 22): several homes share one host
// registry and one simulated SDK, two of them one iOS device root, and
// their agents lease plain devices, named devices and groups, prepare
// sessions and run slot executions, while the drill kills daemons with
// SIGKILL (one home is then deleted, as a removed worktree would be),
// restarts others gracefully, clears dead homes' claims with
// `device release --stale` and `--force`, kills device processes and
// injects SDK faults. A host-wide checker samples every home's status,
// the host registry and the simulated SDK's process list all along, and
// reads every home's event journal at the end. docs/testing.md lists what
// it fails on and the bounds it holds each rule to.

// homesPoll is every daemon's host watcher interval in the drill.
const homesPoll = 250 * time.Millisecond

// homesGraceMs is capacity.host.orphanGraceMs: how long a dead owner whose
// home still exists keeps a running device.
const homesGraceMs = 4000

// homesMaxRunning is the host limit (capacity.host.maxRunning), which
// every home's own limit equals: only the host binds.
const homesMaxRunning = 3

// homesSlack is what a loaded two-core machine adds to a bound stated in
// watcher intervals: the watcher is a goroutine in a daemon competing with
// a dozen tool processes, and the checker's own samples are CLI calls.
// A slower machine gets proportionally more (testhost.Scale).
func homesSlack() time.Duration { return testhost.Scale(3 * time.Second) }

func homesConfig(iosRoot string) string {
	root := ""
	if iosRoot != "" {
		root = fmt.Sprintf(`,"root":%q`, iosRoot)
	}
	return fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":%d,"maxManaged":6},
 "host":{"maxRunning":%d,"pollIntervalMs":%d,"orphanGraceMs":%d}},
 "lease":{"defaultTtlMs":120000,"maxTtlMs":3600000},
 "health":{"intervalMs":250,"stableObservations":2,"maxRecoveryAttempts":1},
 "cleanup":{"intervalMs":250,"idleShutdownMs":30000,"idleDestroyMs":600000},
 "warmPool":{"quarantine":{"retries":1,"backoffMs":200,"multiplier":1,"capMs":200}},
 "drivers":{"ios":{"clone":{"enabled":false}%s}},
 "sessions":{"heartbeatTtlMs":600000,"limits":{"totalDeviceCap":1},`+sessionDefaults+`},
 "slots":{"maxDevicesPerPrincipal":2}}`, homesMaxRunning, homesMaxRunning, homesPoll.Milliseconds(), homesGraceMs, root)
}

type homesMode struct {
	name       string
	ops        int // operations, at least
	kills      int // daemon kill -9s, at least
	recoveries int // --stale or --force recoveries, at least
	deletions  int // homes killed and then deleted, at least
	actors     int // per home
	wall       time.Duration
	mustReach  bool
}

func homesModeFor() homesMode {
	switch {
	case os.Getenv("SIMLOCK_CHAOS_HOMES_LONG") == "1":
		return homesMode{name: "long", ops: 10000, kills: 30, recoveries: 20, deletions: 5, actors: 4, wall: 75 * time.Minute, mustReach: true}
	case testing.Short():
		return homesMode{name: "short", ops: 120, kills: 2, recoveries: 1, deletions: 1, actors: 2, wall: 30 * time.Second}
	default:
		return homesMode{name: "default", ops: 300, kills: 4, recoveries: 2, deletions: 1, actors: 2, wall: 60 * time.Second}
	}
}

// home is one simlock home of the drill and the agents working in it.
type home struct {
	d         *homesDrill
	name      string
	w         *world
	sock      string
	shared    bool // shares the iOS device root with its sibling
	ephemeral bool // killed and deleted, then replaced by a fresh home
	// leaseOnly: its agents only lease through their own connections, so
	// nothing but the drill starts its daemon (the CLI's session commands
	// and the slot proxy start one when none runs).
	leaseOnly bool

	mu      sync.Mutex
	alive   bool // the drill's view: a daemon it started is up
	runs    []daemonRun
	deleted bool
	journal string // where the journal was copied before the home was deleted

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// daemonRun is one daemon of a home, as the drill started and ended it.
type daemonRun struct {
	pid        int
	start, end time.Time // end zero: still running
	killed     bool
}

func (h *home) isAlive() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alive && !h.deleted
}

func (h *home) startDaemon(t *testing.T) {
	t.Helper()
	d := h.d
	d.mu.Lock()
	d.epoch++
	faults := chaosFaults(d.epoch, 1)
	d.mu.Unlock()
	c := h.w.cmd("daemon", "start")
	c.Env = append(append([]string(nil), h.w.env...), "SIMLOCK_SIMSDK_FAULTS="+faults)
	out, err := c.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "already running") {
		t.Fatalf("home %s: daemon start: %v\n%s", h.name, err, out)
	}
	// daemon.pid is the new daemon's once it runs; a previous run's
	// stale file would misdate every lease of this run.
	h.mu.Lock()
	prev := 0
	if n := len(h.runs); n > 0 {
		prev = h.runs[n-1].pid
	}
	h.mu.Unlock()
	var pid int
	eventually(t, "home "+h.name+"'s new daemon to write its pid", 20*time.Second, func() bool {
		pid = h.w.daemonPID()
		return pid > 0 && pid != prev && syscall.Kill(pid, 0) == nil
	})
	h.mu.Lock()
	h.alive = true
	h.runs = append(h.runs, daemonRun{pid: pid, start: time.Now()})
	h.mu.Unlock()
}

// kill ends the home's daemon with SIGKILL and waits for it to be gone.
func (h *home) kill(t *testing.T) bool {
	t.Helper()
	pid := h.w.daemonPID()
	if pid <= 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
		return false
	}
	eventually(t, "the killed daemon to exit", 20*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	h.ended(true)
	return true
}

func (h *home) ended(killed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.alive = false
	if n := len(h.runs); n > 0 && h.runs[n-1].end.IsZero() {
		h.runs[n-1].end, h.runs[n-1].killed = time.Now(), killed
	}
}

func (h *home) startActors(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	h.cancel = cancel
	for i := 0; i < h.d.mode.actors; i++ {
		a := &homeActor{h: h, d: h.d, name: fmt.Sprintf("%s-agent-%d", h.name, i+1),
			rng: rand.New(rand.NewPCG(h.d.seed, uint64(len(h.d.homes())*10+i+1)))}
		h.wg.Add(1)
		go func() { defer h.wg.Done(); a.run(ctx) }()
	}
}

func (h *home) stopActors(t *testing.T) {
	if h.cancel != nil {
		h.cancel()
	}
	waitGroup(t, &h.wg, "home "+h.name+"'s agents to stop", 2*time.Minute)
}

// homesDrill is the whole drill: the homes, the checker's records and the
// counts the summary reports.
type homesDrill struct {
	t     *testing.T
	seed  uint64
	mode  homesMode
	start time.Time

	mu         sync.Mutex
	all        []*home
	epoch      int
	ops        map[string]map[string]int
	faults     map[string]int // what the drill did to the host, by kind
	violations []string
	notes      int
	chk        *hostChecker
	side       sync.WaitGroup // the drill's own lessees (takeRecovered)
	// taking counts takeovers (takeRecovered) whose lease request has not
	// been answered yet: the dead home stays down until then, so its
	// restart meets the new holder, the order scenario 1 of issue 22 needs.
	taking atomic.Int32
	// asking is every actor's plain single-device request not yet
	// answered, by requester: the checker's own view of who waits.
	asking map[string]string
}

func (d *homesDrill) homes() []*home {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*home(nil), d.all...)
}

// ask records (platform set) or forgets (platform "") an actor's plain
// request in flight.
func (d *homesDrill) ask(requester, platform string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if platform == "" {
		delete(d.asking, requester)
	} else {
		d.asking[requester] = platform
	}
}

// asks reports whether requester has a plain request in flight.
func (d *homesDrill) asks(requester string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asking[requester] != ""
}

func (d *homesDrill) live() []*home {
	var out []*home
	for _, h := range d.homes() {
		if h.isAlive() {
			out = append(out, h)
		}
	}
	return out
}

func (d *homesDrill) count(kind, outcome string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ops[kind] == nil {
		d.ops[kind] = map[string]int{}
	}
	d.ops[kind][outcome]++
}

func (d *homesDrill) did(kind string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults[kind]++
}

func (d *homesDrill) done(kind string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.faults[kind]
}

func (d *homesDrill) totalOps() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, byOutcome := range d.ops {
		for _, c := range byOutcome {
			n += c
		}
	}
	return n
}

func (d *homesDrill) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.mu.Lock()
	d.violations = append(d.violations, msg)
	d.mu.Unlock()
	d.t.Errorf("seed %d: %s", d.seed, msg)
}

func (d *homesDrill) note(format string, args ...any) {
	d.mu.Lock()
	d.notes++
	n := d.notes
	d.mu.Unlock()
	if n <= 40 {
		d.t.Logf("note: "+format, args...)
	}
}

// newHome makes a home on the drill's host: the first one owns the host
// registry and the simulated SDK's state, every later one shares them.
func (d *homesDrill) newHome(name, iosRoot string, ephemeral bool) *home {
	w := newWorld(d.t, homesConfig(iosRoot))
	if all := d.homes(); len(all) > 0 {
		shareHost(all[0].w, w)
	}
	h := &home{d: d, name: name, w: w, sock: filepath.Join(w.home, "simlock.sock"), shared: iosRoot != "", ephemeral: ephemeral,
		leaseOnly: ephemeral}
	d.mu.Lock()
	d.all = append(d.all, h)
	d.mu.Unlock()
	return h
}

func TestChaosHomesDrill(t *testing.T) {
	seed := uint64(20261202)
	if s := os.Getenv("SIMLOCK_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	m := homesModeFor()
	t.Logf("multi-home chaos seed %d (replay with SIMLOCK_CHAOS_SEED=%d), %s mode: %d+ operations, %d+ daemon kills, %d+ recoveries, %d+ deleted homes",
		seed, seed, m.name, m.ops, m.kills, m.recoveries, m.deletions)
	d := &homesDrill{t: t, seed: seed, mode: m, ops: map[string]map[string]int{}, faults: map[string]int{},
		asking: map[string]string{}}
	d.chk = newHostChecker(d)

	shared, err := os.MkdirTemp("", "slh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	iosRoot := filepath.Join(shared, "ios")
	a := d.newHome("A", iosRoot, false)
	a.leaseOnly = true
	b := d.newHome("B", iosRoot, false)
	c := d.newHome("C", "", false)
	gen := 1
	e := d.newHome("E1", "", true)
	for _, h := range d.homes() {
		h.startDaemon(t)
	}
	d.start = time.Now()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); d.chk.run(ctx) }()
	actx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	for _, h := range d.homes() {
		h.startActors(actx)
	}

	rng := rand.New(rand.NewPCG(seed, seed^0xface))
	permanent := []*home{a, b, c}
	lastKill := time.Now()
	for {
		ops := d.totalOps()
		reached := ops >= m.ops && d.done("kill") >= m.kills && d.done("stale")+d.done("force") >= m.recoveries &&
			d.done("delete") >= m.deletions
		if reached {
			break
		}
		if time.Since(d.start) > m.wall {
			msg := fmt.Sprintf("the %s run stopped at its %s cap with %d operations, %d kills, %d recoveries, %d deletions (wanted %d, %d, %d, %d)",
				m.name, m.wall, ops, d.done("kill"), d.done("stale")+d.done("force"), d.done("delete"), m.ops, m.kills, m.recoveries, m.deletions)
			if m.mustReach {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
			break
		}
		sleepCtx(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)

		// A dead permanent home is brought back at the next turn.
		for _, h := range permanent {
			if h.isAlive() || h == a && d.taking.Load() > 0 {
				continue
			}
			h.startDaemon(t)
		}

		// Kills are spread over the run's operations.
		// Once the kills are done, A is still killed every few seconds
		// while the run lacks recoveries: a recovery needs a dead owner.
		perKill := m.ops / (m.kills + 1)
		due := d.done("kill") < m.kills && ops >= perKill*(d.done("kill")+1)
		short := d.done("kill") >= m.kills && d.done("stale")+d.done("force") < m.recoveries && time.Since(lastKill) > 3*time.Second
		if (due || short) && time.Since(lastKill) > 1500*time.Millisecond {
			lastKill = time.Now()
			if d.done("delete") < m.deletions && d.done("kill")%3 == 1 {
				// Kill -9 the ephemeral home and delete it, as a removed
				// worktree or a cleaned CI home; a fresh home takes its place.
				d.holdOne(e, []string{"ios", "android"}[rng.IntN(2)])
				e.kill(t)
				d.did("kill")
				e.stopActors(t)
				d.deleteHome(e)
				d.did("delete")
				gen++
				e = d.newHome(fmt.Sprintf("E%d", gen), "", true)
				e.startDaemon(t)
				e.startActors(actx)
				continue
			}
			// A's agents never start a daemon (no MCP server, no session
			// CLI), so a killed A stays dead until the drill restarts it:
			// the window a recovery needs. Kill it while recoveries are
			// short; B and C otherwise (their agents' slot proxies and
			// session keepers may start the daemon again themselves).
			h := permanent[rng.IntN(len(permanent))]
			if d.done("stale")+d.done("force") < m.recoveries {
				h = a
			}
			held := ""
			if h == a && h.isAlive() {
				// A dies holding an iPhone of the shared root, for B to
				// recover and take (scenario 1 of issue 22).
				held = d.holdOne(a, "ios")
			}
			if h.isAlive() && h.kill(t) {
				d.did("kill")
				// Recover one of its devices at once, before its agents'
				// CLI calls can start a daemon there again.
				if rng.IntN(3) > 0 || d.done("stale")+d.done("force") < m.recoveries {
					d.recover(h, held, rng)
				}
			}
			continue
		}

		switch r := rng.IntN(100); {
		case r < 8:
			// Kill one simulated device process, any home's.
			procs := d.chk.procs()
			if len(procs) > 0 {
				p := procs[rng.IntN(len(procs))]
				// A device a recovery just handed over is spared: its
				// taker's lease must end only by the taker's release.
				if d.chk.recentlyRecovered(p.key(), 10*time.Second) {
					continue
				}
				if syscall.Kill(p.PID, syscall.SIGKILL) == nil {
					d.did("device-kill")
				}
			}
		case r < 11:
			// A graceful restart of a permanent home.
			h := permanent[rng.IntN(len(permanent))]
			if h.isAlive() {
				res := h.w.run("daemon", "stop")
				h.ended(false)
				if res.code != 0 {
					d.note("home %s: daemon stop exited %d: %s", h.name, res.code, res.stderr)
				}
				d.did("restart")
				h.startDaemon(t)
			}
		}
	}

	stopAll()
	for _, h := range d.homes() {
		h.stopActors(t)
	}
	waitGroup(t, &d.side, "the drill's own lessees to finish", time.Minute)
	for _, h := range permanent {
		if !h.isAlive() {
			h.startDaemon(t)
		}
	}
	// The host settles: the checker goes on sampling while every dead
	// owner's claim is reclaimed and every waiter is served or gone.
	d.chk.settle(ctx)
	stop()
	bg.Wait()
	for _, h := range d.homes() {
		if !h.isAlive() {
			continue
		}
		if r := h.w.run("daemon", "stop"); r.code != 0 {
			d.note("home %s: final daemon stop exited %d: %s", h.name, r.code, r.stderr)
		}
		h.ended(false)
	}
	d.chk.analyseJournals()
	t.Log(d.summary())
}

// recover clears one of a dead home's claims from a live home, with
// --stale (the owner is proven gone) or, one time in three, --force: the
// key held when the drill made the home hold one, else a leased device's.
func (d *homesDrill) recover(dead *home, held string, rng *rand.Rand) bool {
	// The sibling that shares the dead home's device root recovers, when
	// it runs: it can then take the very device (scenario 1 of issue 22).
	var from *home
	for _, h := range d.live() {
		if h.ephemeral {
			continue
		}
		if from == nil || dead.shared && h.shared {
			from = h
		}
	}
	if from == nil {
		return false
	}
	// A leased device first: its lease is what the dead home's restart
	// must not bring back.
	var keys, leased []string
	for _, cl := range d.chk.claimsNow(from) {
		if cl.OwnerHome == dead.w.home {
			keys = append(keys, cl.DeviceKey)
			if cl.LeaseID != "" {
				leased = append(leased, cl.DeviceKey)
			}
		}
	}
	if len(leased) > 0 {
		keys = leased
	}
	if i := slices.IndexFunc(keys, func(k string) bool { return normKey(k) == held }); held != "" && i >= 0 {
		// The lease the drill made the home hold across its death: the
		// one a restart must not bring back beside the taker's.
		keys = keys[i : i+1]
	}
	if len(keys) == 0 {
		d.note("home %s is dead with no claim to recover", dead.name)
		return false
	}
	key := keys[rng.IntN(len(keys))]
	if held != "" && normKey(key) != held {
		d.note("home %s died holding %s, which its claims (%v) do not show; recovering %s", dead.name, held, keys, key)
	}
	kind, flag := "stale", "--stale"
	if rng.IntN(3) == 0 {
		kind, flag = "force", "--force"
	}
	r := from.w.run("device", "release", flag, key, "--json")
	d.count("recovery-"+kind, fmt.Sprintf("exit-%d", r.code))
	if r.code == 0 {
		d.did(kind)
		d.chk.recovered(key)
		if udid, ok := strings.CutPrefix(key, "ios:udid:"); ok && from.shared && dead.shared {
			d.side.Add(1)
			d.taking.Add(1)
			go func() { defer d.side.Done(); d.takeRecovered(from, dead, udid) }()
		}
		return true
	}
	d.note("home %s: device release %s %s exited %d: %s", from.name, flag, key, r.code, lastLine(r.stdout+r.stderr))
	return false
}

// takeRecovered leases the device a recovery just freed from the home that
// recovered it, with --device, and holds it until the dead home runs again
// and answers (its restart has judged its old lease on the device by then)
// and a moment more, so that a restart bringing that lease back overlaps
// this one.
func (d *homesDrill) takeRecovered(h, dead *home, udid string) {
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(45*time.Second))
	defer cancel()
	answered := sync.OnceFunc(func() { d.taking.Add(-1) })
	defer answered()
	c, err := client.Dial(ctx, client.Options{Socket: h.sock, Principal: h.name + "-recoverer", Name: "chaos-homes"})
	if err != nil {
		d.count("take-recovered", "no-daemon")
		return
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Device: udid, TTLMs: 60000, TimeoutMs: 5000}, nil)
	answered()
	d.count("take-recovered", outcome(err))
	if err != nil {
		return
	}
	d.chk.granted(h, "take-recovered", l)
	// Scenario 1 checked as the issue tells it: once the dead home runs
	// again, its status must not list a lease on the device while this
	// one holds it.
	back := time.Now().Add(testhost.Scale(20 * time.Second))
	for time.Now().Before(back) {
		st, ok := d.chk.status(ctx, dead)
		if !ok || !dead.isAlive() || st.Daemon.Health != "running" {
			// Not back yet, or still starting: a status answered before
			// the gate opens lists no leases at all.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, old := range st.Leases {
			for _, dv := range leaseKeys(old) {
				if dv.UDID != udid {
					continue
				}
				if _, err := client.Do(ctx, c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID}); err == nil {
					d.violate("home %s's restart lists a live lease %s on %s while home %s's lease %s holds it (scenario 1 of issue 22)",
						dead.name, old.LeaseID, udid, h.name, l.LeaseID)
				}
			}
		}
		break
	}
	time.Sleep(time.Second)
	// Nothing but this release may end the lease: the dead home's restart
	// in the meantime must leave the device alone (the drill spares it
	// from its device kills).
	if _, err := client.Do(ctx, c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID}); client.IsCode(err, contract.CodeUnknownLease) {
		d.violate("home %s's lease %s on %s, a device a recovery had just handed it, ended while it held it (the old owner's restart reached the device)",
			h.name, l.LeaseID, udid)
		return
	}
	_, err = client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
	d.count("release", outcome(err))
}

// holdOne has the home lease a device through its own connection and keep
// it: the home is about to be killed (and perhaps deleted) with a device
// that runs.
func (d *homesDrill) holdOne(h *home, platform string) string {
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(30*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Socket: h.sock, Principal: h.name + "-holder", Name: "chaos-homes"})
	if err != nil {
		return ""
	}
	defer c.Close()
	// The host is contended: two tries, each queued for a while.
	for try := 0; try < 2; try++ {
		l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: platform, TTLMs: 600000, TimeoutMs: 12000}, nil)
		d.count("hold-before-kill", outcome(err))
		fresh := err == nil
		if client.IsCode(err, contract.CodeRequesterLeased) {
			// Still holding the one from the last kill (a restart kept it).
			out, lerr := client.Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
			if lerr == nil && len(out.Leases) > 0 {
				l, err = out.Leases[0], nil
			}
		}
		if err == nil {
			if fresh {
				d.chk.granted(h, "hold-before-kill", l)
			}
			if dvs := leaseKeys(l); len(dvs) == 1 {
				return keyOf(dvs[0])
			}
			return ""
		}
	}
	return ""
}

// deleteHome keeps a copy of a killed home's journal for the end, then
// removes the home directory with everything in it (its device roots too).
func (d *homesDrill) deleteHome(h *home) {
	dst := filepath.Join(filepath.Dir(h.w.home), "journal")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		d.t.Fatal(err)
	}
	for _, f := range []string{"simlock.db", "simlock.db-wal", "simlock.db-shm", "daemon.log"} {
		b, err := os.ReadFile(filepath.Join(h.w.home, f))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o600); err != nil {
			d.t.Fatal(err)
		}
	}
	if err := os.RemoveAll(h.w.home); err != nil {
		d.t.Fatal(err)
	}
	h.mu.Lock()
	h.deleted, h.journal = true, filepath.Join(dst, "simlock.db")
	h.mu.Unlock()
}

// explain logs what every home's daemon log says about a device (by its
// name: a UDID or an AVD name), so a violation names who touched it last.
func (d *homesDrill) explain(key string) {
	name := strings.ToUpper(key[strings.LastIndex(key, ":")+1:])
	for _, h := range d.homes() {
		h.mu.Lock()
		path := filepath.Join(h.w.home, "daemon.log")
		if h.deleted {
			path = filepath.Join(filepath.Dir(h.journal), "daemon.log")
		}
		h.mu.Unlock()
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(strings.ToUpper(l), name) {
				lines = append(lines, l)
			}
		}
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		if len(lines) > 0 {
			d.t.Logf("home %s's log on %s:\n%s", h.name, key, strings.Join(lines, "\n"))
		}
	}
}

func (d *homesDrill) summary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "multi-home chaos summary (seed %d, %s mode, %s):\n", d.seed, d.mode.name, time.Since(d.start).Round(time.Second))
	n := 0
	for kind, byOutcome := range d.ops {
		var parts []string
		for o, c := range byOutcome {
			parts = append(parts, fmt.Sprintf("%s=%d", o, c))
			n += c
		}
		fmt.Fprintf(&b, "  %-16s %s\n", kind, strings.Join(parts, " "))
	}
	fmt.Fprintf(&b, "  operations %d; host faults %v; homes %d\n", n, d.faults, len(d.all))
	fmt.Fprintf(&b, "  %s\n", d.chk.summaryLocked())
	fmt.Fprintf(&b, "  violations %d, notes %d", len(d.violations), d.notes)
	return b.String()
}

// simsdkPS lists the simulated SDK's running device processes, host-wide.
func simsdkPS(w *world) ([]simProc, error) {
	c := exec.Command(bin, "simsdk", "ps", "--json")
	c.Env = w.env
	out, err := c.Output()
	if err != nil {
		return nil, err
	}
	var procs []simProc
	if err := json.Unmarshal(out, &procs); err != nil {
		return nil, err
	}
	return procs, nil
}
