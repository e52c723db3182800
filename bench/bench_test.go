// Package bench measures simlock's speed and memory. Figures live here, in
// Go benchmarks, never in timed test assertions (README.md says how to run
// and compare them).
//
// The Real benchmarks (real_test.go) are the figures simlock is judged by:
// the real binary, the real drivers, the simulated SDK, each figure beside
// its floor. The FakeDriver benchmarks in this file run an in-process daemon
// with an instant fake driver: they isolate simlock's own overhead (socket,
// dispatcher, core, SQLite) and say nothing about what a user waits for.
package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// startDaemon runs an in-process daemon over the real socket and a real
// SQLite file, with an instant fake driver so the figures are simlock's own
// overhead rather than a simulator's boot time.
func startDaemon(b *testing.B, maxRunning int) (*daemon.Daemon, *client.Client) {
	b.Helper()
	home, err := os.MkdirTemp("", "slb-")
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: maxRunning, MaxManaged: maxRunning}
	d, err := daemon.Start(context.Background(), daemon.Options{Home: home, Config: cfg, Version: "bench", HostDir: filepath.Join(home, "hostreg"), Drivers: []core.Driver{fakedrv.New("ios")}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop(); os.RemoveAll(home) })
	tok, _ := os.ReadFile(filepath.Join(home, "admin.token"))
	c, err := client.Dial(context.Background(), client.Options{Socket: d.Paths().Socket, Principal: "bench", Credential: strings.TrimSpace(string(tok))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return d, c
}

func waitReady(b *testing.B, c *client.Client, id string) {
	for {
		st, err := client.Do(context.Background(), c, contract.ListGet, contract.ListGetIn{})
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range st.Devices {
			if d.ID == id && d.Runtime.Lifecycle == contract.StateReady {
				return
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkFakeDriverWarmGrant: request to grant over the socket when a
// matching device is already ready. Overhead only: the fake driver resolves
// a spec without starting a process, which the real drivers did not always
// do; BenchmarkRealWarmGrant is the user's figure.
func BenchmarkFakeDriverWarmGrant(b *testing.B) {
	_, c := startDaemon(b, 1)
	ctx := context.Background()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	dev := l.Device.ID
	client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
	waitReady(b, c, dev)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
		waitReady(b, c, dev)
		b.StartTimer()
	}
}

// BenchmarkFakeDriverLeaseReleaseCycle: full request+release cycles per
// second over the socket with the purge in the background and eight warm
// devices. Overhead only (an instant fake driver and purge);
// BenchmarkRealCycles is the user's figure.
func BenchmarkFakeDriverLeaseReleaseCycle(b *testing.B) {
	_, c := startDaemon(b, 8)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TimeoutMs: 60000}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
}

// BenchmarkIdleDaemonRSS starts the real binary as a daemon over the
// simulated SDK, lets it settle, and reports its resident memory.
func BenchmarkIdleDaemonRSS(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "simlock")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/simlock/simlock/cmd/simlock").CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	home, _ := os.MkdirTemp("", "slr-")
	defer os.RemoveAll(home)
	sdk := filepath.Join(home, "sdk")
	env := append(os.Environ(), "SIMLOCK_HOME="+home+"/h", "SIMLOCK_HOST_DIR="+home+"/hostreg", "SIMLOCK_SIMSDK_HOME="+home+"/s", "PATH="+sdk+":"+os.Getenv("PATH"))
	install := exec.Command(bin, "simsdk", "install", sdk)
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	d := exec.Command(bin, "daemon", "run")
	d.Env = env
	if err := d.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	st := exec.Command(bin, "status", "--json")
	st.Env = env
	if out, err := st.CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	time.Sleep(500 * time.Millisecond)
	var rss int64
	for i := 0; i < b.N; i++ {
		rss = vmRSS(b, d.Process.Pid)
	}
	b.ReportMetric(float64(rss)/(1<<20), "MiB-rss")
}

func vmRSS(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
