// Package harness runs the real simlock binary as a daemon against the
// simulated SDK, for the Real benchmarks (bench/real_test.go) and the report
// (bench/cmd/report). Every figure it helps produce comes from the binary a
// user runs, with the real drivers; a fake driver never stands in.
package harness

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/simsdk"
)

// TB is the part of testing.TB the harness needs, so a benchmark and the
// report program (which has no testing.T) can both drive it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// Binary builds cmd/simlock once into dir.
type Binary struct {
	dir  string
	once func() (string, error)
}

// NewBinary prepares a build of cmd/simlock into dir (done on first Path).
func NewBinary(dir string) *Binary {
	b := &Binary{dir: dir}
	b.once = sync.OnceValues(func() (string, error) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		bin := filepath.Join(dir, "simlock")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/simlock/simlock/cmd/simlock").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return bin, nil
	})
	return b
}

// Path is the built binary.
func (b *Binary) Path() (string, error) { return b.once() }

// Remove deletes the build directory.
func (b *Binary) Remove() { os.RemoveAll(b.dir) }

// Options says how a world is set up.
type Options struct {
	// Devices is the fixed capacity (maxRunning = maxManaged).
	Devices int
	// CountProcs puts a logging wrapper in front of every SDK tool, so each
	// tool process leaves one line in the command log. It costs a shell
	// start per process, so never measure latency in a counting world.
	CountProcs bool
	// Speed is SIMLOCK_SIMSDK_SPEED: 0 makes the SDK instant, 1 is the
	// real tools' measured timing.
	Speed float64
	// HTTP enables the HTTP API on a free loopback port.
	HTTP bool
	// Extra is merged into the config object (top-level keys).
	Extra map[string]any
	// Metrics sets metrics.listen to a free loopback port (World.Metrics),
	// for the forced collection and heap profile of the memory scenario.
	Metrics bool
	// Gateway runs the daemon in gateway mode (HTTP on).
	Gateway bool
	// JoinURL and JoinToken make the daemon a worker of that gateway.
	JoinURL, JoinToken string
	// NoDaemon leaves the daemon unstarted (for raw SDK timing).
	NoDaemon bool
	// Env adds KEY=VALUE entries to the world's environment (the daemon's
	// too), e.g. SIMLOCK_SIMSDK_MACHINE.
	Env []string
	// HostDir, when set, is the host registry directory (a worker sharing
	// its gateway's machine); default: one of the world's own.
	HostDir string
	// QuietTicks pushes the health and cleanup ticks out to an hour, so
	// every tool process counted in a window belongs to the call measured.
	// A counting world (CountProcs) always has it. Every other world keeps
	// the ticks at their defaults (health 5 s, cleanup 60 s): what a user
	// runs.
	QuietTicks bool
}

// World is one isolated installation: a home, the simulated SDK on PATH, its
// state directory, and a daemon running the real binary.
type World struct {
	tb   TB
	Bin  string
	Root string
	Home string
	SDK  string
	Env  []string
	HTTP string // host:port of the HTTP API, when enabled
	// Metrics is host:port of metrics.listen, when Options.Metrics is set.
	Metrics string
	cmdLog  string
	daemon  *exec.Cmd
}

// NewWorld sets up a world and starts its daemon.
func NewWorld(tb TB, bin *Binary, o Options) *World {
	tb.Helper()
	path, err := bin.Path()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	// Short paths: a unix socket path is limited to about 100 bytes.
	root, err := os.MkdirTemp("", "slb-")
	if err != nil {
		tb.Fatalf("%v", err)
	}
	w := &World{tb: tb, Bin: path, Root: root, Home: filepath.Join(root, "h"), SDK: filepath.Join(root, "sdk")}
	pathEnv := w.SDK + ":" + os.Getenv("PATH")
	if o.CountProcs {
		wrap := filepath.Join(root, "wrap")
		w.cmdLog = filepath.Join(root, "cmd.log")
		if err := os.MkdirAll(wrap, 0o700); err != nil {
			tb.Fatalf("%v", err)
		}
		for _, t := range simsdk.Tools {
			// One line per process; arguments are separated by the ASCII unit
			// separator (a literal byte in the script: no extra process) so
			// a replay gets them back exactly. The line is built first and
			// written with one printf, so tools started at the same time do
			// not interleave their lines.
			script := fmt.Sprintf("#!/bin/sh\nl=%s\nfor a in \"$@\"; do l=\"$l\x1f$a\"; done\nprintf '%%s\\n' \"$l\" >> %s\nexec %s \"$@\"\n",
				t, w.cmdLog, filepath.Join(w.SDK, t))
			if err := os.WriteFile(filepath.Join(wrap, t), []byte(script), 0o700); err != nil {
				tb.Fatalf("%v", err)
			}
		}
		pathEnv = wrap + ":" + pathEnv
	}
	if err := os.MkdirAll(w.Home, 0o700); err != nil {
		tb.Fatalf("%v", err)
	}
	cfg := map[string]any{
		"capacity": map[string]any{"strategy": "fixed", "fixed": map[string]any{"maxRunning": max(o.Devices, 1), "maxManaged": max(o.Devices, 1)}},
		"http":     map[string]any{"enabled": false},
	}
	if o.QuietTicks || o.CountProcs {
		cfg["health"] = map[string]any{"intervalMs": 3_600_000}
		cfg["cleanup"] = map[string]any{"intervalMs": 3_600_000}
	}
	if o.HTTP || o.Gateway {
		w.HTTP = freePort(tb)
		cfg["http"] = map[string]any{"enabled": true, "listen": w.HTTP}
	}
	if o.Gateway {
		cfg = map[string]any{"mode": "gateway", "http": map[string]any{"listen": w.HTTP}}
	}
	if o.Metrics {
		w.Metrics = freePort(tb)
		cfg["metrics"] = map[string]any{"listen": w.Metrics}
	}
	if o.JoinURL != "" {
		cfg["gateway"] = map[string]any{"url": o.JoinURL, "token": o.JoinToken, "label": "bench"}
	}
	for k, v := range o.Extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(w.Home, "config.json"), raw, 0o600); err != nil {
		tb.Fatalf("%v", err)
	}
	hostDir := o.HostDir
	if hostDir == "" {
		hostDir = filepath.Join(root, "hostreg")
	}
	w.Env = append(os.Environ(), "PATH="+pathEnv, "SIMLOCK_HOME="+w.Home, "SIMLOCK_HOST_DIR="+hostDir,
		"SIMLOCK_SIMSDK_HOME="+filepath.Join(root, "sim"), "SIMLOCK_SIMSDK_SPEED="+strconv.FormatFloat(o.Speed, 'g', -1, 64),
		"SIMLOCK_ADMIN_TOKEN=", "SIMLOCK_PRINCIPAL=")
	w.Env = append(w.Env, o.Env...)
	w.Run("simsdk", "install", w.SDK)
	tb.Cleanup(w.Close)
	if o.NoDaemon {
		return w
	}
	logf, err := os.Create(filepath.Join(root, "daemon.out"))
	if err != nil {
		tb.Fatalf("%v", err)
	}
	w.daemon = exec.Command(path, "daemon", "run")
	w.daemon.Env, w.daemon.Stdout, w.daemon.Stderr = w.Env, logf, logf
	if err := w.daemon.Start(); err != nil {
		tb.Fatalf("%v", err)
	}
	logf.Close()
	return w
}

func freePort(tb TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Run runs the binary with the world's environment and returns stdout.
func (w *World) Run(args ...string) string {
	w.tb.Helper()
	c := exec.Command(w.Bin, args...)
	c.Env = w.Env
	out, err := c.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		w.tb.Fatalf("simlock %s: %v\n%s%s", strings.Join(args, " "), err, out, msg)
	}
	return string(out)
}

// Tool runs an SDK tool of the world's simulated SDK and returns how long
// it took.
func (w *World) Tool(name string, args ...string) (string, time.Duration) {
	w.tb.Helper()
	c := exec.Command(filepath.Join(w.SDK, name), args...)
	c.Env = w.Env
	t0 := time.Now()
	out, err := c.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		w.tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), d
}

// DaemonPID is the daemon process's pid (0 when none was started).
func (w *World) DaemonPID() int {
	if w.daemon == nil || w.daemon.Process == nil {
		return 0
	}
	return w.daemon.Process.Pid
}

// Close stops the daemon and removes the world.
func (w *World) Close() {
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
		w.daemon = nil
	}
	c := exec.Command(w.Bin, "simsdk", "reset")
	c.Env = w.Env
	c.Run()
	os.RemoveAll(w.Root)
}

// Dial connects over the socket as principal; admin adds the admin secret.
func (w *World) Dial(principal string, admin bool) *client.Client {
	w.tb.Helper()
	o := client.Options{Socket: filepath.Join(w.Home, "simlock.sock"), Principal: principal, Name: "bench"}
	c, err := client.DialRetry(context.Background(), o, 20*time.Second)
	if err != nil {
		w.tb.Fatalf("dial: %v\ndaemon output:\n%s", err, w.DaemonOutput())
	}
	if admin {
		c.Close()
		o.Credential = w.AdminToken()
		if c, err = client.Dial(context.Background(), o); err != nil {
			w.tb.Fatalf("%v", err)
		}
	}
	w.tb.Cleanup(func() { c.Close() })
	return c
}

// AdminToken reads the running daemon's admin secret.
func (w *World) AdminToken() string {
	w.tb.Helper()
	tok, err := os.ReadFile(filepath.Join(w.Home, "admin.token"))
	if err != nil {
		w.tb.Fatalf("%v", err)
	}
	return strings.TrimSpace(string(tok))
}

// Token mints an API token of role on the daemon.
func (w *World) Token(role string) string {
	w.tb.Helper()
	var out struct{ Token string }
	if err := json.Unmarshal([]byte(w.Run("token", "create", "--role", role, "--name", "bench-"+role, "--json")), &out); err != nil {
		w.tb.Fatalf("token create: %v", err)
	}
	return out.Token
}

// DialHTTP connects to the world's HTTP API with an agent token.
func (w *World) DialHTTP(token string) *client.Client {
	w.tb.Helper()
	c, err := client.DialHTTP(context.Background(), "http://"+w.HTTP, token)
	if err != nil {
		w.tb.Fatalf("dial http: %v", err)
	}
	w.tb.Cleanup(func() { c.Close() })
	return c
}

// DaemonOutput is what the daemon printed.
func (w *World) DaemonOutput() string {
	out, _ := os.ReadFile(filepath.Join(w.Root, "daemon.out"))
	return string(out)
}

// Procs is the number of SDK tool processes started so far.
func (w *World) Procs() int {
	f, err := os.Open(w.cmdLog)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		w.tb.Fatalf("%v", err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		n++
	}
	return n
}

// CommandsAfter lists the raw log lines after the first n.
func (w *World) CommandsAfter(n int) []string {
	raw, _ := os.ReadFile(w.cmdLog)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if n >= len(lines) || len(raw) == 0 {
		return nil
	}
	return lines[n:]
}

// CommandLines is CommandsAfter with the arguments joined by spaces.
func (w *World) CommandLines(n int) []string {
	var out []string
	for _, c := range w.Commands(n) {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

// Commands lists the tool processes logged after the first n, each as its
// argv (tool name first).
func (w *World) Commands(n int) [][]string {
	var out [][]string
	for _, line := range w.CommandsAfter(n) {
		out = append(out, strings.Split(line, "\x1f"))
	}
	return out
}

// CommandKey is a logged command line without the device set or SDK root it
// is scoped to, cut to its first words: "xcrun simctl list -j".
func CommandKey(line string) string {
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

// ToolVerb is CommandKey without device ids, serials, ports or paths, so the
// calls a cycle makes on different devices count as one kind:
// "xcrun simctl erase", "adb shell getprop".
func ToolVerb(line string) string {
	var keep []string
	f := strings.Fields(line)
	for i := 0; i < len(f) && len(keep) < 3; i++ {
		switch {
		case f[i] == "--set" || f[i] == "-s" || f[i] == "-P":
			i++
		case strings.HasPrefix(f[i], "-") && len(keep) > 0 && keep[0] != "emulator":
		case strings.ContainsAny(f[i], "/=") || isDeviceID(f[i]):
		default:
			keep = append(keep, f[i])
		}
	}
	return strings.Join(keep, " ")
}

// isDeviceID reports a simulator UDID-like word (hex and dashes, 36 long).
func isDeviceID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for _, r := range s {
		if r != '-' && !strings.ContainsRune("0123456789ABCDEFabcdef", r) {
			return false
		}
	}
	return true
}

// WaitPlatformReady polls until n devices of platform are ready.
func WaitPlatformReady(tb TB, c *client.Client, platform string, n int) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		l, err := client.Do(context.Background(), c, contract.ListGet, contract.ListGetIn{})
		if err != nil {
			tb.Fatalf("%v", err)
		}
		ready := 0
		for _, d := range l.Devices {
			if d.Platform == platform && d.Runtime.Lifecycle == contract.StateReady {
				ready++
			}
		}
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d %s devices ready after 5m: %+v", ready, n, platform, l.Devices)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Lease asks for a device of platform, waiting up to 5 minutes.
func Lease(tb TB, c *client.Client, platform string) contract.Lease {
	tb.Helper()
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: platform, TimeoutMs: 300_000}, nil)
	if err != nil {
		tb.Fatalf("lease %s: %v", platform, err)
	}
	return l
}

// Release gives a lease back.
func Release(tb TB, c *client.Client, id string) {
	tb.Helper()
	if _, err := client.Do(context.Background(), c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: id}); err != nil {
		tb.Fatalf("release %s: %v", id, err)
	}
}

// WarmUp provisions one device of platform and leaves it ready.
func WarmUp(tb TB, c *client.Client, platform string) {
	tb.Helper()
	Release(tb, c, Lease(tb, c, platform).LeaseID)
	WaitPlatformReady(tb, c, platform, 1)
}

// Floor is the physical minimum a grant must pay, measured with none of
// simlock's own code in the way: one bare round trip over a unix socket with
// the daemon's framing (Echo) plus one durable commit of a small row in a
// SQLite file with the daemon's pragmas, through the same driver. A grant
// answered at once cannot be cheaper than one request line in, one response
// line out and one commit of its lease.
type Floor struct {
	echo  *Echo
	conn  net.Conn
	r     *bufio.Reader
	frame []byte
	db    *sql.DB
	tx    *sql.Conn
	n     int64
}

// floorFrame is one request line the size and shape of a warm
// lease.request as the client writes it (json.Encoder: the object, then a
// newline).
const floorFrame = `{"jsonrpc":"2.0","id":"7","method":"lease.request","params":{"platform":"ios","noWait":true,"timeoutMs":0}}` + "\n"

// StorePragmas is what internal/store sets on every connection of the
// daemon's database (its DSN: busy_timeout from its 5 s busyTimeout, and
// foreign_keys) plus the journal mode it switches the file to (WAL).
// synchronous is left at the driver's default, as the store leaves it.
var StorePragmas = []string{"busy_timeout(5000)", "foreign_keys(1)"}

// OpenFloor starts an echo server on a socket in sockDir and opens (creating)
// the floor's SQLite file at dbPath, on the disk whose commits it measures.
func OpenFloor(sockDir, dbPath string) (*Floor, error) {
	e, err := NewEcho(filepath.Join(sockDir, "echo.sock"))
	if err != nil {
		return nil, err
	}
	f := &Floor{echo: e, frame: []byte(floorFrame)}
	if f.conn, err = net.Dial("unix", e.Path); err != nil {
		f.Close()
		return nil, err
	}
	// The daemon's client reads through a 64 KiB buffered reader too.
	f.r = bufio.NewReaderSize(f.conn, 64<<10)
	q := url.Values{}
	for _, p := range StorePragmas {
		q.Add("_pragma", p)
	}
	u := url.URL{Scheme: "file", OmitHost: true, Path: filepath.ToSlash(dbPath), RawQuery: q.Encode()}
	if f.db, err = sql.Open("sqlite", u.String()); err != nil {
		f.Close()
		return nil, err
	}
	// One connection, as the store keeps.
	f.db.SetMaxOpenConns(1)
	ctx := context.Background()
	if f.tx, err = f.db.Conn(ctx); err != nil {
		f.Close()
		return nil, err
	}
	var mode string
	if err := f.tx.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil || mode != "wal" {
		f.Close()
		return nil, fmt.Errorf("floor: journal mode %q: %v", mode, err)
	}
	if _, err := f.tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, body TEXT NOT NULL) STRICT`); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// NewFloor opens a floor for world w: its echo socket in the world's root,
// its database in the world's home, next to the daemon's own.
func NewFloor(tb TB, w *World) *Floor {
	tb.Helper()
	f, err := OpenFloor(w.Root, filepath.Join(w.Home, "floor.db"))
	if err != nil {
		tb.Fatalf("floor: %v", err)
	}
	tb.Cleanup(f.Close)
	return f
}

// Close stops the echo server and closes the database.
func (f *Floor) Close() {
	if f.conn != nil {
		f.conn.Close()
	}
	if f.tx != nil {
		f.tx.Close()
	}
	if f.db != nil {
		f.db.Close()
	}
	f.echo.Close()
}

// RoundTrip writes one frame to the echo server and reads it back.
func (f *Floor) RoundTrip() (time.Duration, error) {
	t0 := time.Now()
	if _, err := f.conn.Write(f.frame); err != nil {
		return 0, err
	}
	line, err := f.r.ReadSlice('\n')
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if string(line) != string(f.frame) {
		return 0, fmt.Errorf("floor: echo returned %q", line)
	}
	return d, nil
}

// Commit makes one durable commit of a small row, as the store does one:
// BEGIN IMMEDIATE, one insert, COMMIT.
func (f *Floor) Commit() (time.Duration, error) {
	ctx := context.Background()
	f.n++
	t0 := time.Now()
	if _, err := f.tx.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, err
	}
	if _, err := f.tx.ExecContext(ctx, `INSERT INTO floor (at, body) VALUES (?, ?)`, t0.UnixMilli(), fmt.Sprintf("lease %d granted", f.n)); err != nil {
		f.tx.ExecContext(ctx, "ROLLBACK") //nolint:errcheck // the insert's error matters more
		return 0, err
	}
	if _, err := f.tx.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// Sample returns one echo round trip and one commit. Call it when the
// daemon is idle (after Settle), never right after device work.
func (f *Floor) Sample(tb TB) (echo, commit time.Duration) {
	tb.Helper()
	echo, err := f.RoundTrip()
	if err == nil {
		commit, err = f.Commit()
	}
	if err != nil {
		tb.Fatalf("floor: %v", err)
	}
	return echo, commit
}

// Settle flushes every dirty page on the machine to disk (sync(2)) so the
// next commit, the floor's or a grant's, pays for its own writes and not for
// a purge's state files or the daemon's last transaction. Call it after the
// device is ready again and before a floor sample and its grant.
func Settle() { syscall.Sync() }

// Echo is a bare echo server on a unix socket with the daemon's socket
// framing (internal/transport/socket: JSON-RPC, one message per line, read
// through a 64 KiB buffered reader). It writes every line it reads back as
// it is, decoding nothing, each connection served by its own goroutine.
type Echo struct {
	Path   string
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	cs     []net.Conn
	closed bool
}

// NewEcho listens on path and serves until Close.
func NewEcho(path string) (*Echo, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	e := &Echo{Path: path, ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			if e.closed {
				e.mu.Unlock()
				c.Close()
				return
			}
			e.cs = append(e.cs, c)
			e.mu.Unlock()
			e.wg.Go(func() { echoLines(c) })
		}
	})
	return e, nil
}

func echoLines(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return // EOF, a closed connection, or a line over 64 KiB
		}
		if _, err := c.Write(line); err != nil {
			return
		}
	}
}

// Close stops listening, closes every connection and waits for the
// goroutines.
func (e *Echo) Close() {
	if e == nil {
		return
	}
	e.ln.Close()
	e.mu.Lock()
	e.closed = true
	for _, c := range e.cs {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// LoadAvg is the machine's 1-minute load average (/proc/loadavg).
func LoadAvg() (float64, error) {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/loadavg: empty")
	}
	return strconv.ParseFloat(f[0], 64)
}

// QuietLoad is the rule a ratio is judged by: the 1-minute load average
// below half a CPU per CPU at both ends of its measurement.
func QuietLoad(start, end float64, cpus int) bool {
	limit := 0.5 * float64(max(cpus, 1))
	return start < limit && end < limit
}

// Quantile is the nearest-rank q-quantile of sorted durations, in ms.
func Quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// Sorted returns a sorted copy.
func Sorted(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// RSS reads a process's resident set size in bytes from /proc.
func RSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// Cycles measures lease+release cycles: it leases and releases devices
// devices of platform p once (so the measured cycles start from a full warm
// pool), calls start, then runs n cycles spread over clients connections
// (each its own requester) and returns how long they took.
func Cycles(tb TB, w *World, p string, devices, clients, n int, start func()) time.Duration {
	tb.Helper()
	return HeldCycles(tb, w, p, devices, clients, n, 0, start)
}

// HeldCycles is Cycles with a workload: each client holds every device it
// is granted for hold before it releases it, as an execution that uses its
// device would.
func HeldCycles(tb TB, w *World, p string, devices, clients, n int, hold time.Duration, start func()) time.Duration {
	tb.Helper()
	admin := w.Dial("bench", true)
	cs := make([]*client.Client, max(devices, clients))
	for i := range cs {
		cs[i] = w.Dial(fmt.Sprintf("bench-%d", i), false)
	}
	var wg sync.WaitGroup
	ids := make([]string, devices)
	for i := range ids {
		wg.Go(func() { ids[i] = Lease(tb, cs[i], p).LeaseID })
	}
	wg.Wait()
	for i, id := range ids {
		Release(tb, cs[i], id)
	}
	WaitPlatformReady(tb, admin, p, devices)

	var next atomic.Int64
	errs := make(chan error, clients)
	if start != nil {
		start()
	}
	t0 := time.Now()
	for i := range clients {
		wg.Go(func() {
			ctx := context.Background()
			for next.Add(1) <= int64(n) {
				l, err := cs[i].LeaseRequest(ctx, contract.LeaseRequestIn{Platform: p, TimeoutMs: 120_000}, nil)
				if err == nil {
					time.Sleep(hold)
					_, err = client.Do(ctx, cs[i], contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("cycles: %v", err)
	}
	return elapsed
}

// CPU is the processor time a process has used: its own, and that of its
// children it has waited for (the SDK tool processes a daemon starts), read
// from /proc/<pid>/stat. The difference of two readings over a run is what
// that run cost the machine, whatever the wall clock says.
func CPU(pid int) (self, children time.Duration, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces; the numeric fields start
	// after its closing parenthesis.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime, stime, cutime, cstime are fields
	// 14 to 17.
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ticks [4]int64
	for k := range ticks {
		if ticks[k], err = strconv.ParseInt(f[11+k], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	// USER_HZ is 100 on every Linux this runs on.
	const tick = 10 * time.Millisecond
	return time.Duration(ticks[0]+ticks[1]) * tick, time.Duration(ticks[2]+ticks[3]) * tick, nil
}

// Memory is the daemon's memory right after a forced collection that handed
// freed memory back to the operating system (POST /debug/gc on the metrics
// listener): what it really holds, not garbage waiting for the collector.
type Memory struct {
	RSS           int64
	HeapLiveBytes uint64 `json:"heapLiveBytes"`
	HeapObjects   uint64 `json:"heapObjects"`
	Goroutines    int    `json:"goroutines"`
}

// ForcedGC collects the daemon's garbage through its metrics listener at
// addr and reads its RSS after.
func ForcedGC(pid int, addr string) (Memory, error) {
	var m Memory
	resp, err := http.Post("http://"+addr+"/debug/gc", "", nil)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("POST /debug/gc: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return m, fmt.Errorf("POST /debug/gc: %w", err)
	}
	m.RSS, err = RSS(pid)
	return m, err
}

// HeapProfile saves the daemon's heap profile (live objects, after a
// collection) to file, for `go tool pprof -base before after`.
func HeapProfile(addr, file string) error {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// MachineCPU is the processor time the whole machine has spent busy (every
// state but idle and iowait) and in all, summed over its CPUs, from
// /proc/stat. Two readings around a run say how busy the machine was,
// whoever kept it busy: a shared machine's other jobs included.
func MachineCPU() (busy, total time.Duration, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	const tick = 10 * time.Millisecond
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		// Fields: user nice system idle iowait irq softirq steal guest
		// guest_nice; guest time is already inside user and nice.
		if i >= 8 {
			continue
		}
		total += time.Duration(n) * tick
		if i != 3 && i != 4 {
			busy += time.Duration(n) * tick
		}
	}
	return busy, total, nil
}
