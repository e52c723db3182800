// Command cpuhog keeps the CPU busy until it is killed, to run the test
// suite on a machine as loaded as a developer's laptop during a build or a
// video call. .ci/run starts it beside the README's test command when
// SIMLOCK_CI_HOG=1:
//
//	go run ./internal/tools/cpuhog -n 4 &
//
// Each busy goroutine spins on integer work and never sleeps; GOMAXPROCS
// is raised to the goroutine count so every one of them holds an OS thread
// the kernel has to share with the tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
)

func main() {
	n := flag.Int("n", 2*runtime.GOMAXPROCS(0), "busy goroutines (default: twice GOMAXPROCS)")
	flag.Parse()
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "cpuhog: -n must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.Info("cpuhog: spinning until killed", "goroutines", *n, "pid", os.Getpid())
	run(ctx, *n)
}

// run spins n goroutines until ctx ends and waits for all of them.
func run(ctx context.Context, n int) {
	runtime.GOMAXPROCS(max(n, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { spin(ctx) })
	}
	wg.Wait()
}

// spin burns CPU in chunks small enough (a millisecond or so) to notice
// the end of ctx promptly.
func spin(ctx context.Context) {
	x := uint64(0x9e3779b97f4a7c15)
	for ctx.Err() == nil {
		for range 1 << 18 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	runtime.KeepAlive(x)
}
