// Command report measures simlock side by side with its baselines and writes
// docs/benchmarks.md and its plots. Every figure comes from the real binary
// with the real drivers on the simulated SDK, in one run, next to the
// baseline it is judged by; see bench/README.md for the method.
//
//	GOTOOLCHAIN=go1.27.3 go run ./bench/cmd/report [-quick] [-out docs]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/simlock/simlock/bench/harness"
)

// run is the report's harness.TB: a failed step ends the program, cleanups
// run in reverse at exit.
type run struct {
	log      *slog.Logger
	cleanups []func()
}

func (r *run) Helper() {}
func (r *run) Fatalf(format string, args ...any) {
	r.log.Error(fmt.Sprintf(format, args...))
	r.cleanup()
	os.Exit(1)
}
func (r *run) Logf(format string, args ...any) { r.log.Info(fmt.Sprintf(format, args...)) }
func (r *run) Cleanup(f func())                { r.cleanups = append(r.cleanups, f) }
func (r *run) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// scoped runs f with its own cleanups, so each scenario's daemons stop
// before the next scenario measures anything.
func (r *run) scoped(f func()) {
	outer := r.cleanups
	r.cleanups = nil
	defer func() { r.cleanup(); r.cleanups = outer }()
	f()
}

func main() {
	quick := flag.Bool("quick", false, "fewer samples (a smoke run; figures are noisier)")
	out := flag.String("out", "docs", "directory for benchmarks.md and img/")
	speed := flag.Float64("speed", 0.01, "SIMLOCK_SIMSDK_SPEED for the scenarios that model real SDK timing (a, b)")
	plats := flag.String("platforms", "ios,android", "platforms for the scenarios that cover both")
	hold := flag.Duration("hold", 2*time.Minute, "how long each execution of (a) holds its device, at real speed (scaled by -speed)")
	only := flag.String("only", "", "run only these scenarios, by letter (e.g. \"ag\"); the report then lacks the others")
	profiles := flag.String("heapprofiles", "", "directory for (f)'s daemon heap profiles before and after the cycles (go tool pprof -base)")
	rssCycles := flag.Int("rsscycles", 0, "mixed cycles (grant, no-wait refusal, release) for (f)'s growth figure (0: 10000, or 500 with -quick)")
	quietWait := flag.Duration("quietwait", 2*time.Minute, "before each (c) path, wait up to this long for the 1-minute load average to fall below 0.5 per CPU (0 with -quick unless set)")
	replot := flag.String("replot", "", "rewrite the report from a samples file of an earlier run, measuring nothing")
	flag.Parse()
	if *replot != "" {
		raw, err := os.ReadFile(*replot)
		var rep report
		if err == nil {
			err = json.Unmarshal(raw, &rep)
		}
		if err == nil {
			err = rep.write(*out)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	r := &run{log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	defer r.cleanup()
	bin := harness.NewBinary(filepath.Join(os.TempDir(), fmt.Sprintf("simlock-report-%d", os.Getpid())))
	r.Cleanup(bin.Remove)
	if _, err := bin.Path(); err != nil {
		r.Fatalf("%v", err)
	}
	n := sizes{Grants: 200, Cycles: 400, HeldCycles: 12, Executions: 50, RSSCycles: 10_000, Repeats: 3}
	if *quick {
		n = sizes{Grants: 30, Cycles: 60, HeldCycles: 3, Executions: 6, RSSCycles: 500, Repeats: 1}
	}
	if *rssCycles > 0 {
		n.RSSCycles = *rssCycles
	}
	rep := &report{Started: time.Now().UTC(), Speed: *speed, Hold: *hold, Sizes: n, Platforms: strings.Split(*plats, ",")}
	rep.Machine, rep.CPUs = machine(), runtime.NumCPU()
	rep.profDir = *profiles
	rep.quietWait = *quietWait
	if *quick && !flagSet("quietwait") {
		rep.quietWait = 0
	}
	steps := []struct {
		name string
		f    func(*run, *harness.Binary, *report)
	}{
		{"(c) warm grant latency", measureWarmGrants},
		{"(d) lease+release cycles", measureCycles},
		{"(b) cold grant overhead", measureColdGrant},
		{"(a) time to device", measureTimeToDevice},
		{"(e) gateway dispatch", measureDispatch},
		{"(f) memory", measureMemory},
		{"(g) density", measureDensity},
	}
	for _, s := range steps {
		if *only != "" && !strings.Contains(*only, s.name[1:2]) {
			continue
		}
		t0 := time.Now()
		r.Logf("measuring %s", s.name)
		r.scoped(func() { s.f(r, bin, rep) })
		r.Logf("%s took %s", s.name, time.Since(t0).Round(time.Second))
	}
	rep.Finished = time.Now().UTC()
	// The raw samples go next to the report, so it can be re-rendered
	// (-replot) and compared without measuring again.
	raw, _ := json.MarshalIndent(rep, "", " ")
	if err := os.MkdirAll(filepath.Join(*out, "img"), 0o755); err != nil {
		r.Fatalf("%v", err)
	}
	if err := os.WriteFile(filepath.Join(*out, "benchmarks.json"), raw, 0o644); err != nil {
		r.Fatalf("%v", err)
	}
	if err := rep.write(*out); err != nil {
		r.Fatalf("%v", err)
	}
	r.Logf("wrote %s", filepath.Join(*out, "benchmarks.md"))
}

type sizes struct {
	Grants, Cycles, Executions, RSSCycles, Repeats int
	// HeldCycles is how many cycles each client runs in (d)'s rows with a
	// workload (every cycle holds its device for the scaled hold).
	HeldCycles int
}

func machine() string {
	model := ""
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d CPUs (%s), %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, runtime.Version())
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
