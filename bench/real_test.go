package bench

// The Real benchmarks measure what a user gets: the simlock binary built
// from this tree, run as a daemon with the real iOS and Android drivers
// against the simulated SDK at speed 0 (a boot is instant, so what is left
// is simlock's own work plus the SDK tool processes it starts). Each figure
// is reported next to the floor it is judged by, measured in the same run.
// The binary is built on first use, so a plain `go test ./...` (which runs
// no benchmark) pays nothing for them.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/simsdk"
	"github.com/simlock/simlock/internal/testhost"
)

// binDir holds the binary built for this test run; TestMain removes it.
var binDir = filepath.Join(os.TempDir(), fmt.Sprintf("simlock-bench-%d", os.Getpid()))

func TestMain(m *testing.M) {
	// Every daemon these benchmarks start uses a host registry of its own.
	code := testhost.RunIsolated(m)
	os.RemoveAll(binDir)
	os.Exit(code)
}

// buildBinary compiles cmd/simlock once per test process.
var buildBinary = sync.OnceValues(func() (string, error) {
	if err := os.MkdirAll(binDir, 0o700); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "simlock")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/simlock/simlock/cmd/simlock").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// world is one isolated installation: a home, the simulated SDK on PATH, its
// state directory, and a daemon running the real binary.
type world struct {
	b      *testing.B
	bin    string
	root   string
	home   string
	env    []string
	cmdLog string // empty unless the world counts SDK tool processes
	daemon *exec.Cmd
}

// worldOptions says how a world is set up.
type worldOptions struct {
	// devices is the fixed capacity (maxRunning = maxManaged).
	devices int
	// countProcs puts a logging wrapper in front of every SDK tool, so
	// each tool process the daemon starts leaves one line in cmdLog. It
	// costs a shell start per process, so latency is never measured in a
	// counting world.
	countProcs bool
}

func newWorld(b *testing.B, o worldOptions) *world {
	b.Helper()
	bin, err := buildBinary()
	if err != nil {
		b.Fatal(err)
	}
	// Short paths: a unix socket path is limited to about 100 bytes.
	root, err := os.MkdirTemp("", "slb-")
	if err != nil {
		b.Fatal(err)
	}
	w := &world{b: b, bin: bin, root: root, home: filepath.Join(root, "h")}
	sdk := filepath.Join(root, "sdk")
	path := sdk + ":" + os.Getenv("PATH")
	if o.countProcs {
		wrap := filepath.Join(root, "wrap")
		w.cmdLog = filepath.Join(root, "cmd.log")
		if err := os.MkdirAll(wrap, 0o700); err != nil {
			b.Fatal(err)
		}
		for _, t := range simsdk.Tools {
			script := fmt.Sprintf("#!/bin/sh\necho \"%s $*\" >> %s\nexec %s \"$@\"\n", t, w.cmdLog, filepath.Join(sdk, t))
			if err := os.WriteFile(filepath.Join(wrap, t), []byte(script), 0o700); err != nil {
				b.Fatal(err)
			}
		}
		path = wrap + ":" + path
	}
	if err := os.MkdirAll(w.home, 0o700); err != nil {
		b.Fatal(err)
	}
	// Background ticks (health, cleanup) are pushed out of the way so that
	// every tool process counted in a window belongs to the call measured.
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":%d,"maxManaged":%d}},
		"http":{"enabled":false},"health":{"intervalMs":3600000},"cleanup":{"intervalMs":3600000}}`, o.devices, o.devices)
	if err := os.WriteFile(filepath.Join(w.home, "config.json"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	w.env = append(os.Environ(), "PATH="+path, "SIMLOCK_HOME="+w.home, "SIMLOCK_HOST_DIR="+filepath.Join(root, "hostreg"),
		"SIMLOCK_SIMSDK_HOME="+filepath.Join(root, "sim"), "SIMLOCK_SIMSDK_SPEED=0",
		"SIMLOCK_ADMIN_TOKEN=", "SIMLOCK_PRINCIPAL=")
	w.run("simsdk", "install", sdk)
	b.Cleanup(w.close)

	logf, err := os.Create(filepath.Join(root, "daemon.out"))
	if err != nil {
		b.Fatal(err)
	}
	w.daemon = exec.Command(bin, "daemon", "run")
	w.daemon.Env, w.daemon.Stdout, w.daemon.Stderr = w.env, logf, logf
	if err := w.daemon.Start(); err != nil {
		b.Fatal(err)
	}
	logf.Close()
	return w
}

func (w *world) run(args ...string) {
	w.b.Helper()
	c := exec.Command(w.bin, args...)
	c.Env = w.env
	if out, err := c.CombinedOutput(); err != nil {
		w.b.Fatalf("simlock %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (w *world) close() {
	if w.daemon != nil && w.daemon.Process != nil {
		w.daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { w.daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			w.daemon.Process.Kill()
			<-done
		}
	}
	c := exec.Command(w.bin, "simsdk", "reset")
	c.Env = w.env
	c.Run()
	os.RemoveAll(w.root)
}

// dial connects as principal; admin adds the daemon's admin secret.
func (w *world) dial(principal string, admin bool) *client.Client {
	w.b.Helper()
	o := client.Options{Socket: filepath.Join(w.home, "simlock.sock"), Principal: principal, Name: "bench"}
	c, err := client.DialRetry(context.Background(), o, 20*time.Second)
	if err != nil {
		w.b.Fatalf("dial: %v\ndaemon output:\n%s", err, w.daemonOutput())
	}
	if admin {
		c.Close()
		tok, err := os.ReadFile(filepath.Join(w.home, "admin.token"))
		if err != nil {
			w.b.Fatal(err)
		}
		o.Credential = strings.TrimSpace(string(tok))
		if c, err = client.Dial(context.Background(), o); err != nil {
			w.b.Fatal(err)
		}
	}
	w.b.Cleanup(func() { c.Close() })
	return c
}

func (w *world) daemonOutput() string {
	out, _ := os.ReadFile(filepath.Join(w.root, "daemon.out"))
	return string(out)
}

// procs is the number of SDK tool processes started so far, and the last
// ones' command lines.
func (w *world) procs() int {
	f, err := os.Open(w.cmdLog)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		w.b.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		n++
	}
	return n
}

func (w *world) commandsAfter(n int) []string {
	raw, _ := os.ReadFile(w.cmdLog)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if n >= len(lines) {
		return nil
	}
	return lines[n:]
}

// commandKey is a logged command line without the device set or SDK root
// it is scoped to, cut to its first words: "xcrun simctl list -j".
func commandKey(line string) string {
	var keep []string
	f := strings.Fields(line)
	for i := 0; i < len(f) && len(keep) < 4; i++ {
		if f[i] == "--set" {
			i++
			continue
		}
		if strings.HasPrefix(f[i], "--sdk_root=") {
			continue
		}
		keep = append(keep, f[i])
	}
	return strings.Join(keep, " ")
}

// waitPlatformReady polls until n devices of platform are ready (untimed work).
func waitPlatformReady(b *testing.B, c *client.Client, platform string, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := client.Do(context.Background(), c, contract.ListGet, contract.ListGetIn{})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, d := range l.Devices {
			if d.Platform == platform && d.State == contract.StateReady {
				ready++
			}
		}
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d %s devices ready after 2m: %+v", ready, n, platform, l.Devices)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lease(b *testing.B, c *client.Client, platform string) contract.Lease {
	b.Helper()
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: platform, TimeoutMs: 120_000}, nil)
	if err != nil {
		b.Fatalf("lease %s: %v", platform, err)
	}
	return l
}

func release(b *testing.B, c *client.Client, id string) {
	b.Helper()
	if _, err := client.Do(context.Background(), c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: id}); err != nil {
		b.Fatalf("release %s: %v", id, err)
	}
}

// warmUp provisions one device of platform and leaves it ready.
func warmUp(b *testing.B, c *client.Client, platform string) {
	b.Helper()
	release(b, c, lease(b, c, platform).LeaseID)
	waitPlatformReady(b, c, platform, 1)
}

// floor measures what no grant can beat, in the daemon's conditions: one
// request/response over the daemon's unix socket (hello: no decision, no
// store) plus one durable SQLite commit in-process on a file in the same
// directory, with the store's settings (WAL, default synchronous).
type floor struct {
	c  *client.Client
	db *sql.Conn
	n  int64
}

func newFloor(b *testing.B, w *world) *floor {
	b.Helper()
	path := filepath.Join(w.home, "floor.db")
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	u := url.URL{Scheme: "file", OmitHost: true, Path: path, RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), `CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return &floor{c: w.dial("floor", false), db: conn}
}

// sample returns the socket round trip and the commit time.
func (f *floor) sample(b *testing.B) (rtt, commit time.Duration) {
	b.Helper()
	ctx := context.Background()
	hello, _ := json.Marshal(contract.HelloIn{Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}, Principal: "floor"})
	t0 := time.Now()
	if _, err := f.c.Raw(ctx, contract.Hello.Name, hello, nil); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	f.n++
	for _, stmt := range []string{"BEGIN IMMEDIATE", fmt.Sprintf(`INSERT INTO t (at, body) VALUES ('%s', 'lease %d granted')`, t1.UTC().Format(time.RFC3339Nano), f.n), "COMMIT"} {
		if _, err := f.db.ExecContext(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	return t1.Sub(t0), time.Since(t1)
}

// quantile is the nearest-rank q-quantile of sorted durations, in ms.
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

func sortDurations(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

var platforms = []string{"ios", "android"}

// BenchmarkRealWarmGrant: lease.request over the socket when a matching
// device is ready, against the floor (socket round trip + one SQLite
// commit) sampled in alternation with it. ns/op is the mean grant.
func BenchmarkRealWarmGrant(b *testing.B) {
	for _, p := range platforms {
		b.Run(p, func(b *testing.B) {
			w := newWorld(b, worldOptions{devices: 1})
			c := w.dial("bench", true)
			f := newFloor(b, w)
			warmUp(b, c, p)
			ctx := context.Background()
			var grants, floors, rtts, commits []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				rtt, commit := f.sample(b)
				rtts, commits, floors = append(rtts, rtt), append(commits, commit), append(floors, rtt+commit)
				b.StartTimer()
				t0 := time.Now()
				l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: p, NoWait: true}, nil)
				d := time.Since(t0)
				b.StopTimer()
				if err != nil {
					b.Fatalf("warm grant %d: %v", i, err)
				}
				grants = append(grants, d)
				release(b, c, l.LeaseID)
				waitPlatformReady(b, c, p, 1)
				b.StartTimer()
			}
			b.StopTimer()
			g, fl := sortDurations(grants), sortDurations(floors)
			b.ReportMetric(quantile(g, 0.5), "p50-ms")
			b.ReportMetric(quantile(g, 0.9), "p90-ms")
			b.ReportMetric(quantile(g, 0.99), "p99-ms")
			b.ReportMetric(quantile(fl, 0.5), "floor-ms")
			b.ReportMetric(quantile(sortDurations(rtts), 0.5), "rtt-ms")
			b.ReportMetric(quantile(sortDurations(commits), 0.5), "commit-ms")
			b.ReportMetric(quantile(g, 0.5)/quantile(fl, 0.5), "x-floor")
		})
	}
}

// BenchmarkRealProcsPerGrant counts the SDK tool processes the daemon
// starts for a warm grant and for a noWait request refused for lack of
// capacity. Both should be zero: neither needs the SDK.
func BenchmarkRealProcsPerGrant(b *testing.B) {
	for _, p := range platforms {
		b.Run(p, func(b *testing.B) {
			w := newWorld(b, worldOptions{devices: 1, countProcs: true})
			c := w.dial("bench", true)
			other := w.dial("other", false)
			warmUp(b, c, p)
			ctx := context.Background()
			var grantProcs, refusalProcs int
			seen := map[string]int{}
			for i := 0; i < b.N; i++ {
				n0 := w.procs()
				l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: p, NoWait: true}, nil)
				if err != nil {
					b.Fatalf("warm grant %d: %v", i, err)
				}
				n1 := w.procs()
				_, err = other.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: p, NoWait: true}, nil)
				if !client.IsCode(err, contract.CodeNoCapacity) {
					b.Fatalf("noWait request with the only device leased: want NO_CAPACITY, got %v", err)
				}
				n2 := w.procs()
				for _, cmd := range w.commandsAfter(n0) {
					seen[commandKey(cmd)]++
				}
				grantProcs += n1 - n0
				refusalProcs += n2 - n1
				release(b, c, l.LeaseID)
				waitPlatformReady(b, c, p, 1)
			}
			b.ReportMetric(float64(grantProcs)/float64(b.N), "procs/grant")
			b.ReportMetric(float64(refusalProcs)/float64(b.N), "procs/refusal")
			if len(seen) > 0 {
				b.Logf("%s: tool processes started by grants and refusals: %v", p, seen)
			}
		})
	}
}

// BenchmarkRealCycles: lease+release cycles per second over the socket,
// with 1 and with 8 clients (each its own requester and connection), on 8
// devices kept warm. A released device is purged in the background before
// it serves again, so the cycle rate includes that purge's cost.
func BenchmarkRealCycles(b *testing.B) {
	const devices = 8
	for _, p := range platforms {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", p, clients), func(b *testing.B) {
				w := newWorld(b, worldOptions{devices: devices})
				admin := w.dial("bench", true)
				cs := make([]*client.Client, devices)
				for i := range cs {
					cs[i] = w.dial(fmt.Sprintf("bench-%d", i), false)
				}
				// Provision and boot all eight, then release them: the
				// measured cycles start from a full warm pool.
				var wg sync.WaitGroup
				ids := make([]string, devices)
				for i := range cs {
					wg.Add(1)
					go func() { defer wg.Done(); ids[i] = lease(b, cs[i], p).LeaseID }()
				}
				wg.Wait()
				for i, id := range ids {
					release(b, cs[i], id)
				}
				waitPlatformReady(b, admin, p, devices)

				var next atomic.Int64
				errs := make(chan error, clients)
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < clients; i++ {
					wg.Add(1)
					go func(c *client.Client) {
						defer wg.Done()
						ctx := context.Background()
						for next.Add(1) <= int64(b.N) {
							l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: p, TimeoutMs: 120_000}, nil)
							if err == nil {
								_, err = client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
							}
							if err != nil {
								errs <- err
								return
							}
						}
					}(cs[i])
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
			})
		}
	}
}
