package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simlock/simlock/bench/harness"
	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// latency is one warm-grant path's samples with the floor sampled next to
// each of them, in its two parts, and the machine's load around them.
type latency struct {
	Path, Platform string
	Grants         []time.Duration
	// Echoes and Commits are the floor's parts, one each before every
	// grant: a bare echo round trip with the socket's framing, and one
	// SQLite commit with the store's pragmas.
	Echoes, Commits []time.Duration
	// Floors is an older samples file's floor (a hello through the daemon
	// plus a commit, per sample), read by -replot only.
	Floors []time.Duration `json:",omitempty"`
	// LoadStart and LoadEnd are the 1-minute load average before the first
	// sample and after the last.
	LoadStart, LoadEnd float64
}

// measureWarmGrants: (c) lease.request when a matching device is ready,
// over the socket (iOS and Android), over HTTP and through a gateway
// (iOS), each sample next to a floor sample (bare echo round trip + one
// SQLite commit) taken just before it, once the previous grant's release
// and purge have settled.
func measureWarmGrants(r *run, bin *harness.Binary, rep *report) {
	for _, p := range rep.Platforms {
		r.scoped(func() {
			w := harness.NewWorld(r, bin, harness.Options{Devices: 1, HTTP: p == "ios"})
			admin := w.Dial("bench", true)
			f := harness.NewFloor(r, w)
			harness.WarmUp(r, admin, p)
			rep.Warm = append(rep.Warm, sampleGrants(r, "socket", p, admin, f, rep.Sizes.Grants, rep.quietWait, admin))
			if p == "ios" {
				h := w.DialHTTP(w.Token("agent"))
				rep.Warm = append(rep.Warm, sampleGrants(r, "HTTP", p, h, f, rep.Sizes.Grants, rep.quietWait, admin))
			}
		})
	}
	r.scoped(func() {
		gw := harness.NewWorld(r, bin, harness.Options{Gateway: true})
		gwAdmin := gw.Dial("bench", true)
		tok := gw.Token("worker")
		wk := harness.NewWorld(r, bin, harness.Options{Devices: 1, JoinURL: "ws://" + gw.HTTP, JoinToken: tok})
		wkAdmin := wk.Dial("bench", true)
		waitWorkers(r, gwAdmin, 1)
		c := gw.Dial("agent", false)
		harness.Release(r, c, harness.Lease(r, c, "ios").LeaseID)
		harness.WaitPlatformReady(r, wkAdmin, "ios", 1)
		f := harness.NewFloor(r, wk)
		// Ready as the gateway sees it: its view of the worker lags the
		// worker by one state push.
		harness.WaitPlatformReady(r, gwAdmin, "ios", 1)
		rep.Warm = append(rep.Warm, sampleGrants(r, "gateway", "ios", c, f, rep.Sizes.Grants, rep.quietWait, wkAdmin, gwAdmin))
	})
}

func waitWorkers(r *run, gw *client.Client, n int) {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := client.Do(context.Background(), gw, contract.WorkerList, contract.WorkerListIn{})
		if err != nil {
			r.Fatalf("worker.list: %v", err)
		}
		up := 0
		for _, v := range out.Workers {
			if v.State == contract.WorkerConnected {
				up++
			}
		}
		if up >= n {
			return
		}
		if time.Now().After(deadline) {
			r.Fatalf("%d of %d workers connected after a minute", up, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sampleGrants times n warm grants through c, interleaved with the floor:
// the device is ready (watched through each of ready in turn: the worker
// that holds it, then the gateway whose view of it lags by a state push),
// the disk settled, then one floor sample, then one grant, whose release
// and purge run untimed before the next pair.
func sampleGrants(r *run, path, p string, c *client.Client, f *harness.Floor, n int, quietWait time.Duration, ready ...*client.Client) latency {
	waitQuiet(r, quietWait)
	out := latency{Path: path, Platform: p, LoadStart: loadAvg(r)}
	ctx := context.Background()
	waitReady := func() {
		for _, rc := range ready {
			harness.WaitPlatformReady(r, rc, p, 1)
		}
	}
	waitReady()
	for i := 0; i < n; i++ {
		harness.Settle()
		echo, commit := f.Sample(r)
		out.Echoes, out.Commits = append(out.Echoes, echo), append(out.Commits, commit)
		t0 := time.Now()
		l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: p, NoWait: true}, nil)
		d := time.Since(t0)
		if err != nil {
			r.Fatalf("%s warm grant %d: %v", path, i, err)
		}
		out.Grants = append(out.Grants, d)
		harness.Release(r, c, l.LeaseID)
		waitReady()
	}
	out.LoadEnd = loadAvg(r)
	return out
}

// waitQuiet waits, up to limit, for the 1-minute load average to fall under
// the quiet rule's bound, checking every 5 s. A machine that stays busy is
// measured anyway, and its ratios are marked busy.
func waitQuiet(r *run, limit time.Duration) {
	bound := 0.5 * float64(runtime.NumCPU())
	deadline := time.Now().Add(limit)
	for l := loadAvg(r); l >= bound && time.Now().Before(deadline); l = loadAvg(r) {
		r.Logf("load average %.2f, waiting for < %.2f (until %s)", l, bound, deadline.Format(time.TimeOnly))
		time.Sleep(5 * time.Second)
	}
}

func loadAvg(r *run) float64 {
	v, err := harness.LoadAvg()
	if err != nil {
		r.Fatalf("%v", err)
	}
	return v
}

// throughput is one cycles/s configuration, repeated.
type throughput struct {
	Platform string
	Clients  int
	// Hold is how long each cycle held its device (scaled): 0 for the rows
	// without a workload, run with the SDK at speed 0.
	Hold  time.Duration
	Speed float64
	Rates []float64
	// Daemon, SDK and Client are the processor time each repeat cost per
	// cycle: the daemon's own, the SDK tool processes it started and
	// waited for, and this process's clients. With NumCPU cores the machine
	// cannot run more than NumCPU/(their sum) cycles a second, whatever the
	// concurrency: that is (d)'s ceiling.
	Daemon, SDK, Client []time.Duration
	// Busy is how busy the whole machine was during each repeat (0 to 1):
	// near 1 the cycles ran out of processor, whoever else used it.
	Busy []float64
}

// cycleProcs is (d)'s process count: SDK tool processes per cycle, counted
// in a world of its own (the counting wrapper costs a shell per process).
type cycleProcs struct {
	Platform string
	Cycles   int
	Procs    int
	ByTool   map[string]int
}

// measureCycles: (d) lease+release cycles per second with 1 and with 8
// clients on 8 warm devices, each repeat next to the processor time it cost
// per cycle, and the SDK processes one cycle starts. Two sets of rows: with
// the declared workload (each cycle holds its device for (a)'s scaled hold,
// the SDK at the declared speed), and without one (released at once, the
// SDK at speed 0), where processor time is all that is left.
func measureCycles(r *run, bin *harness.Binary, rep *report) {
	const devices = 8
	hold := time.Duration(float64(rep.Hold) * rep.Speed)
	for _, p := range rep.Platforms {
		// First with the declared workload at the declared SDK speed (each
		// cycle holds its device as (a)'s executions do), then without a
		// workload and with the SDK at speed 0, where only the processor
		// time of the cycles and their purges is left.
		for _, held := range []bool{true, false} {
			for _, clients := range []int{1, 8} {
				t := throughput{Platform: p, Clients: clients}
				n := rep.Sizes.Cycles
				if held {
					t.Hold, t.Speed, n = hold, rep.Speed, rep.Sizes.HeldCycles*clients
				}
				for range rep.Sizes.Repeats {
					r.scoped(func() { measureCycleRepeat(r, bin, p, devices, clients, n, &t) })
				}
				rep.Cycles = append(rep.Cycles, t)
			}
		}
		r.scoped(func() {
			w := harness.NewWorld(r, bin, harness.Options{Devices: devices, CountProcs: true})
			const n = 40
			var before int
			harness.Cycles(r, w, p, devices, 1, n, func() { before = w.Procs() })
			harness.WaitPlatformReady(r, w.Dial("bench", true), p, devices)
			cp := cycleProcs{Platform: p, Cycles: n, ByTool: map[string]int{}}
			for _, line := range w.CommandLines(before) {
				cp.Procs++
				cp.ByTool[harness.ToolVerb(line)]++
			}
			rep.CycleProcs = append(rep.CycleProcs, cp)
		})
	}
}

// measureCycleRepeat is one repeat of one (d) row: n cycles over clients
// clients on devices warm devices, with t's hold and SDK speed, and the
// processor time they cost.
func measureCycleRepeat(r *run, bin *harness.Binary, p string, devices, clients, n int, t *throughput) {
	w := harness.NewWorld(r, bin, harness.Options{Devices: devices, Speed: t.Speed})
	var d0, s0, c0, b0, t0 time.Duration
	start := func() { d0, s0 = daemonCPU(r, w); c0 = selfCPU(); b0, t0, _ = harness.MachineCPU() }
	elapsed := harness.HeldCycles(r, w, p, devices, clients, n, t.Hold, start)
	b1, t1, _ := harness.MachineCPU()
	// The purges of the last released devices are part of the cycles'
	// cost: wait for them before reading.
	harness.WaitPlatformReady(r, w.Dial("bench", true), p, devices)
	d1, s1 := daemonCPU(r, w)
	c1 := selfCPU()
	per := time.Duration(n)
	t.Rates = append(t.Rates, float64(n)/elapsed.Seconds())
	t.Daemon = append(t.Daemon, (d1-d0)/per)
	t.SDK = append(t.SDK, (s1-s0)/per)
	t.Client = append(t.Client, (c1-c0)/per)
	if t1 > t0 {
		t.Busy = append(t.Busy, float64(b1-b0)/float64(t1-t0))
	}
}

// daemonCPU is the daemon's processor time and its reaped children's.
func daemonCPU(r *run, w *harness.World) (self, children time.Duration) {
	self, children, err := harness.CPU(w.DaemonPID())
	if err != nil {
		r.Fatalf("%v", err)
	}
	return self, children
}

// selfCPU is this process's processor time (the benchmark's clients).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cold is (b): cold grants against the same SDK calls made by hand.
type cold struct {
	Grants, Raw []time.Duration
	Calls       int
	Commands    []string
}

// measureColdGrant: (b) an iOS cold grant (create, boot, readiness) at the
// declared SDK speed, then the exact tool invocations it made, replayed by
// hand in a world with no daemon, with the same logging wrapper in front of
// every tool on both sides.
func measureColdGrant(r *run, bin *harness.Binary, rep *report) {
	for range rep.Sizes.Repeats {
		r.scoped(func() {
			w := harness.NewWorld(r, bin, harness.Options{Devices: 1, CountProcs: true, Speed: rep.Speed})
			c := w.Dial("bench", true)
			// The first status answer proves the daemon is up; its own
			// start-up listings are not part of the grant.
			harness.WaitPlatformReady(r, c, "ios", 0)
			n0 := w.Procs()
			t0 := time.Now()
			l := harness.Lease(r, c, "ios")
			grant := time.Since(t0)
			cmds := w.Commands(n0)
			udid := l.Device.UDID
			set := l.Device.DeviceSet
			harness.Release(r, c, l.LeaseID)

			raw := harness.NewWorld(r, bin, harness.Options{CountProcs: true, Speed: rep.Speed, NoDaemon: true})
			rawSet := filepath.Join(raw.Root, "set")
			if err := os.MkdirAll(rawSet, 0o700); err != nil {
				r.Fatalf("%v", err)
			}
			var total time.Duration
			newUDID := ""
			var shown []string
			for _, argv := range cmds {
				args := make([]string, len(argv)-1)
				for i, a := range argv[1:] {
					a = strings.ReplaceAll(a, set, rawSet)
					if newUDID != "" {
						a = strings.ReplaceAll(a, udid, newUDID)
					}
					args[i] = a
				}
				out, d := runTool(r, raw, argv[0], args)
				total += d
				if slicesContains(args, "create") && newUDID == "" {
					newUDID = strings.TrimSpace(out)
				}
				shown = append(shown, harness.CommandKey(strings.Join(argv, " ")))
			}
			rep.Cold.Grants = append(rep.Cold.Grants, grant)
			rep.Cold.Raw = append(rep.Cold.Raw, total)
			rep.Cold.Calls = len(cmds)
			rep.Cold.Commands = shown
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// runTool runs one tool invocation of a replay; a tool that fails is
// reported, since a replay that errors out early would look fast.
func runTool(r *run, w *harness.World, name string, args []string) (string, time.Duration) {
	c := exec.Command(filepath.Join(w.SDK, name), args...)
	c.Env = w.Env
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	t0 := time.Now()
	err := c.Run()
	d := time.Since(t0)
	if err != nil {
		r.Fatalf("replay %s %s: %v\n%s%s", name, strings.Join(args, " "), err, o.String(), e.String())
	}
	return o.String(), d
}

// execution is (a): time to device over back-to-back executions.
type execution struct {
	Name string
	TTD  []time.Duration
}

// measureTimeToDevice: (a) back-to-back executions on iOS that each hold
// their device for rep.Hold (scaled by the SDK speed), in this order (the
// report reads the rows by position): zero pooling done by hand (create,
// boot, use, delete each time); simlock's warm pool with one running slot
// and the defaults, so clone provisioning is on and its resets may be clone
// resets (ADR 0041, 0053); the warm pool with two running slots; clone
// provisioning by hand (clone of a golden that booted once, boot, use,
// delete); and the one-slot warm pool with clone provisioning off, the
// figure issue 16 started from.
func measureTimeToDevice(r *run, bin *harness.Binary, rep *report) {
	hold := time.Duration(float64(rep.Hold) * rep.Speed)
	r.scoped(func() {
		w := harness.NewWorld(r, bin, harness.Options{Speed: rep.Speed, NoDaemon: true})
		set := filepath.Join(w.Root, "set")
		os.MkdirAll(set, 0o700)
		e := execution{Name: "zero pooling (create, boot, use, delete)"}
		for i := range rep.Sizes.Executions {
			t0 := time.Now()
			out, _ := w.Tool("xcrun", "simctl", "--set", set, "create", fmt.Sprintf("zp-%d", i), "iPhone 16")
			udid := strings.TrimSpace(out)
			w.Tool("xcrun", "simctl", "--set", set, "boot", udid)
			w.Tool("xcrun", "simctl", "--set", set, "bootstatus", udid, "-b")
			e.TTD = append(e.TTD, time.Since(t0))
			time.Sleep(hold)
			w.Tool("xcrun", "simctl", "--set", set, "shutdown", udid)
			w.Tool("xcrun", "simctl", "--set", set, "delete", udid)
		}
		rep.Executions = append(rep.Executions, e)
	})
	warmPool := func(name string, slots int, extra map[string]any, golden bool) {
		r.scoped(func() {
			extra["warmPool"] = map[string]any{"targets": []map[string]any{{"platform": "ios", "model": "iPhone 16", "count": slots}}}
			w := harness.NewWorld(r, bin, harness.Options{Devices: slots, Speed: rep.Speed, Extra: extra})
			c := w.Dial("bench", true)
			harness.WaitPlatformReady(r, c, "ios", slots)
			if golden {
				waitGolden(r, w)
			}
			rep.Executions = append(rep.Executions, backToBack(r, c, name, rep.Sizes.Executions, hold))
		})
	}
	// One running slot with the defaults: clone provisioning is on, and
	// managed room for the device, its clone during a reset and the golden
	// (with managed = running the golden would take the last managed slot,
	// so the engine would never let it be built).
	warmPool("simlock warm pool, 1 running slot", 1, map[string]any{
		"capacity": map[string]any{"strategy": "fixed", "fixed": map[string]any{"maxRunning": 1, "maxManaged": 3}}}, true)
	warmPool("simlock warm pool, 2 running slots", 2, map[string]any{}, false)
	r.scoped(func() {
		w := harness.NewWorld(r, bin, harness.Options{Speed: rep.Speed, NoDaemon: true})
		set := filepath.Join(w.Root, "set")
		os.MkdirAll(set, 0o700)
		out, _ := w.Tool("xcrun", "simctl", "--set", set, "create", "golden", "iPhone 16")
		golden := strings.TrimSpace(out)
		w.Tool("xcrun", "simctl", "--set", set, "bootstatus", golden, "-b")
		w.Tool("xcrun", "simctl", "--set", set, "shutdown", golden)
		e := execution{Name: "clone provisioning by hand (clone a golden that booted once, boot, use, delete)"}
		for i := range rep.Sizes.Executions {
			t0 := time.Now()
			out, _ := w.Tool("xcrun", "simctl", "--set", set, "clone", golden, fmt.Sprintf("cl-%d", i))
			udid := strings.TrimSpace(out)
			w.Tool("xcrun", "simctl", "--set", set, "boot", udid)
			w.Tool("xcrun", "simctl", "--set", set, "bootstatus", udid, "-b")
			e.TTD = append(e.TTD, time.Since(t0))
			time.Sleep(hold)
			w.Tool("xcrun", "simctl", "--set", set, "shutdown", udid)
			w.Tool("xcrun", "simctl", "--set", set, "delete", udid)
		}
		rep.Executions = append(rep.Executions, e)
	})
	warmPool("simlock warm pool, 1 running slot, clone provisioning off", 1, map[string]any{
		"capacity": map[string]any{"strategy": "fixed", "fixed": map[string]any{"maxRunning": 1, "maxManaged": 3}},
		"drivers":  map[string]any{"ios": map[string]any{"clone": map[string]any{"enabled": false}}}}, false)
}

// waitGolden waits until the world's iOS golden is recorded ready, so the
// executions measure the steady state, not the first golden build.
func waitGolden(r *run, w *harness.World) {
	record := filepath.Join(w.Home, "devices", "ios", ".golden.json")
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(record); err == nil && strings.Contains(string(b), `"ready": true`) {
			return
		}
		if time.Now().After(deadline) {
			r.Fatalf("no golden after 5m")
		}
	}
}

// dispatch is (e): one routing decision at fleet scale.
type dispatch struct {
	Queued int
	NsPer  float64
}

// measureDispatch: (e) the gateway's routing decision over 200 worker views
// with 200, 2,000 and 20,000 queued requests, from the gateway package's
// benchmark (in-process: a decision involves no I/O, so there is no binary
// to drive).
func measureDispatch(r *run, _ *harness.Binary, rep *report) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "BenchmarkRoutingDecisions/full", "-benchtime", "5x", "./internal/gateway/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.Fatalf("go test -bench: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`queued=(\d+)\S*\s+\d+\s+.*?([\d.]+) ns/decision`)
	for s := bufio.NewScanner(bytes.NewReader(out)); s.Scan(); {
		if m := line.FindStringSubmatch(s.Text()); m != nil {
			q, _ := strconv.Atoi(m[1])
			ns, _ := strconv.ParseFloat(m[2], 64)
			rep.Dispatch = append(rep.Dispatch, dispatch{Queued: q, NsPer: ns})
		}
	}
	if len(rep.Dispatch) == 0 {
		r.Fatalf("no queued=N results in:\n%s", out)
	}
}

// memory is (f).
type memory struct {
	Idle, Loaded, BeforeCycles, AfterCycles int64
	Leases, Queued, Cycles                  int
	// The same states right after a forced collection (RSS and live heap).
	IdleGC, LoadedGC, BeforeCyclesGC, AfterCyclesGC harness.Memory
	// Refusals counts the cycles' no-wait refusals; ReceiptsBefore and
	// ReceiptsAfter are the stored receipts around the measured cycles,
	// against ReceiptBound (requests.maxReceipts).
	Refusals                                    int
	ReceiptsBefore, ReceiptsAfter, ReceiptBound int
}

// measureMemory: (f) the daemon's RSS idle, with 8 leases and 100 queued
// requests, and before and after rep.Sizes.RSSCycles lease+release cycles.
// Each state is read twice: RSS as it is, and RSS with the live heap right
// after a forced collection that returned freed memory to the system, so
// growth that is only uncollected garbage is told apart from a leak. Heap
// profiles before and after the cycles go to profDir when it is set.
func measureMemory(r *run, bin *harness.Binary, rep *report) {
	const devices = 8
	w := harness.NewWorld(r, bin, harness.Options{Devices: devices, Metrics: true,
		Extra: map[string]any{"requests": map[string]any{"maxReceipts": memReceiptBound}}})
	admin := w.Dial("bench", true)
	harness.WaitPlatformReady(r, admin, "ios", 0)
	time.Sleep(time.Second)
	rss := func() int64 {
		v, err := harness.RSS(w.DaemonPID())
		if err != nil {
			r.Fatalf("%v", err)
		}
		return v
	}
	gc := func() harness.Memory {
		m, err := harness.ForcedGC(w.DaemonPID(), w.Metrics)
		if err != nil {
			r.Fatalf("%v", err)
		}
		return m
	}
	profile := func(name string) {
		if rep.profDir == "" {
			return
		}
		if err := harness.HeapProfile(w.Metrics, filepath.Join(rep.profDir, name)); err != nil {
			r.Fatalf("%v", err)
		}
	}
	rep.Memory.Idle = rss()
	rep.Memory.IdleGC = gc()
	var ids []string
	holders := make([]*client.Client, devices)
	for i := range holders {
		holders[i] = w.Dial(fmt.Sprintf("holder-%d", i), false)
		ids = append(ids, harness.Lease(r, holders[i], "ios").LeaseID)
	}
	const queued = 100
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	waiters := make([]*client.Client, queued)
	for i := range waiters {
		waiters[i] = w.Dial(fmt.Sprintf("waiter-%d", i), false)
		wg.Go(func() {
			_, _ = waiters[i].LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TimeoutMs: 600_000}, nil)
		})
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := client.Do(context.Background(), admin, contract.StatusGet, contract.StatusGetIn{})
		if err != nil {
			r.Fatalf("%v", err)
		}
		if st.QueueDepth >= queued {
			break
		}
		if time.Now().After(deadline) {
			r.Fatalf("queue depth %d, want %d", st.QueueDepth, queued)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep.Memory.Loaded, rep.Memory.Leases, rep.Memory.Queued = rss(), devices, queued
	rep.Memory.LoadedGC = gc()
	for i := range waiters {
		_, _ = client.Do(context.Background(), waiters[i], contract.LeaseCancel, contract.LeaseCancelIn{})
	}
	cancel()
	wg.Wait()
	for i, id := range ids {
		harness.Release(r, holders[i], id)
	}
	harness.WaitPlatformReady(r, admin, "ios", devices)
	// The cycles are mixed, the way real traffic is: half the devices stay
	// held, so the other half rotate through grant and release, and every
	// grant is followed by a --no-wait request that finds nothing free and
	// is refused. Every eighth grant carries an idempotency key, so keyed
	// receipts pile up past requests.maxReceipts (set low for this world)
	// and the bound has to hold them.
	pinned := devices / 2
	var pins []string
	for i := range pinned {
		pins = append(pins, harness.Lease(r, holders[devices-1-i], "ios").LeaseID)
	}
	refuser := w.Dial("refuser", false)
	seq := 0
	// A round grants every rotating device, is refused once per grant
	// (nothing is free then: the rest are pinned), and releases them; n is
	// rounded up to whole rounds.
	cycle := func(n int) {
		rot := devices - pinned
		for done := 0; done < n; done += rot {
			held := make([]string, rot)
			for i := range held {
				seq++
				in := contract.LeaseRequestIn{Platform: "ios", TimeoutMs: 300_000}
				if seq%8 == 0 {
					in.IdempotencyKey = fmt.Sprintf("mem-%d", seq)
				}
				l, err := holders[i].LeaseRequest(context.Background(), in, nil)
				if err != nil {
					r.Fatalf("mixed cycle %d: lease: %v", seq, err)
				}
				held[i] = l.LeaseID
			}
			for range held {
				_, err := refuser.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", NoWait: true}, nil)
				if err == nil {
					r.Fatalf("mixed cycle %d: a no-wait request was granted with every device held", seq)
				}
				if !client.IsCode(err, contract.CodeNoCapacity) && !client.IsCode(err, contract.CodeCapacityExhausted) {
					r.Fatalf("mixed cycle %d: no-wait refusal: %v", seq, err)
				}
				rep.Memory.Refusals++
			}
			for i, id := range held {
				harness.Release(r, holders[i], id)
			}
		}
		harness.WaitPlatformReady(r, admin, "ios", devices-pinned)
	}
	cycle(min(1000, rep.Sizes.RSSCycles/5))
	rep.Memory.BeforeCycles = rss()
	rep.Memory.BeforeCyclesGC = gc()
	rep.Memory.ReceiptsBefore = receiptRows(r, w)
	rep.Memory.Refusals = 0
	profile("heap-before.pb.gz")
	cycle(rep.Sizes.RSSCycles)
	rep.Memory.AfterCycles, rep.Memory.Cycles = rss(), rep.Sizes.RSSCycles
	rep.Memory.AfterCyclesGC = gc()
	rep.Memory.ReceiptsAfter = receiptRows(r, w)
	rep.Memory.ReceiptBound = memReceiptBound
	profile("heap-after.pb.gz")
	for i, id := range pins {
		harness.Release(r, holders[devices-1-i], id)
	}
}

// memReceiptBound is requests.maxReceipts in the memory world: low, so the
// mixed cycles' keyed grants overrun it many times.
const memReceiptBound = 200

// receiptRows counts the stored lease-request receipts in w's database,
// read-only beside the running daemon (WAL lets a reader in).
func receiptRows(r *run, w *harness.World) int {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(w.Home, "simlock.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		r.Fatalf("%v", err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM lease_requests`).Scan(&n); err != nil {
		r.Fatalf("count receipts: %v", err)
	}
	return n
}

// density is (g): iOS devices the resource strategy admits on one pretended
// machine, stock and slim.
type density struct {
	Machine     string
	Stock, Slim int
}

// measureDensity: (g) lease iOS devices with noWait until the daemon
// refuses, on a pretended machine (SIMLOCK_SIMSDK_MACHINE) under the
// resource strategy, with slim simulators off and on; every grant is a
// booted device that passed readiness.
func measureDensity(r *run, bin *harness.Binary, rep *report) {
	for _, m := range []struct{ name, spec string }{{"16 GiB, 8 cores", "16:8"}, {"16 GiB, 32 cores", "16:32"}} {
		d := density{Machine: m.name}
		for _, slim := range []bool{false, true} {
			r.scoped(func() {
				w := harness.NewWorld(r, bin, harness.Options{Env: []string{"SIMLOCK_SIMSDK_MACHINE=" + m.spec},
					Extra: map[string]any{"capacity": map[string]any{"strategy": "resource"},
						"drivers": map[string]any{"ios": map[string]any{"slim": map[string]any{"enabled": slim}}}}})
				n := 0
				for ; n < 64; n++ {
					c := w.Dial(fmt.Sprintf("dense-%d", n), false)
					_, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16", NoWait: true}, nil)
					if client.IsCode(err, contract.CodeNoCapacity) || client.IsCode(err, contract.CodeCapacityExhausted) {
						break
					}
					if err != nil {
						r.Fatalf("density lease %d (slim %v): %v", n, slim, err)
					}
				}
				if slim {
					d.Slim = n
				} else {
					d.Stock = n
				}
			})
		}
		rep.Density = append(rep.Density, d)
	}
}

// backToBack runs n executions one after another through simlock: each
// leases an iPhone 16 (the time to device), holds it for hold, releases it.
func backToBack(r *run, c *client.Client, name string, n int, hold time.Duration) execution {
	e := execution{Name: name}
	for range n {
		t0 := time.Now()
		l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16", TimeoutMs: 300_000}, nil)
		if err != nil {
			r.Fatalf("lease: %v", err)
		}
		e.TTD = append(e.TTD, time.Since(t0))
		time.Sleep(hold)
		harness.Release(r, c, l.LeaseID)
	}
	return e
}
