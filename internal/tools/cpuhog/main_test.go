package main

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano())
}

// The hog burns CPU while it runs and stops when asked: .ci/run relies on
// killing it to end the load, and a hog that outlived its context would
// keep the machine busy after the tests.
func TestRunBurnsCPUUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	before := cpuTime(t)
	go func() { run(ctx, 3); close(done) }()
	guard := time.After(2 * time.Minute) // a hang guard only
	for cpuTime(t)-before < 300*time.Millisecond {
		select {
		case <-done:
			t.Fatal("run returned before its context ended")
		case <-guard:
			t.Fatal("the hog used less than 300 ms of CPU in two minutes")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-guard:
		t.Fatal("run still spinning after its context ended")
	}
}
