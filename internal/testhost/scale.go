package testhost

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// SlowdownEnv names the variable that sets the machine's slowdown factor
// by hand (a positive number, 1 for a quiet reference machine). When it is
// unset the factor is measured.
const SlowdownEnv = "SIMLOCK_TEST_SLOWDOWN"

// referenceWork is how long the calibration workload takes on a quiet
// reference machine: one core of the 2-core box the suite was tuned on,
// idle (6.9 ms there, with or without -race). A faster machine measures
// below it and keeps the factor 1; a reference set too fast would only
// lengthen bounds, one set too slow would leave them as tight as before.
const referenceWork = 7 * time.Millisecond

// maxSlowdown caps the factor: a bound scaled further would stop telling
// "slow" from "stuck", and a machine 50 times slower than the reference
// runs the suite in hours anyway.
const maxSlowdown = 50

// slowdown is computed once per test binary: the calibration costs a few
// milliseconds and should see the machine as the tests start, not change
// from one test to the next. A sync.OnceValue keeps the result without a
// mutable package variable anyone could write.
var slowdown = sync.OnceValue(func() float64 {
	f, err := slowdownFrom(os.Getenv(SlowdownEnv), measureWork)
	if err != nil {
		// A malformed override is the developer's mistake; saying so
		// beats silently ignoring it.
		panic(err)
	}
	return f
})

// Slowdown is how many times slower than the reference machine this one
// runs right now: SIMLOCK_TEST_SLOWDOWN when set, otherwise a fixed CPU
// workload timed at first use against its time on the reference machine.
// It is never below 1.
func Slowdown() float64 { return slowdown() }

// Scale stretches a wall-clock bound by the machine's slowdown. Use it for
// bounds a test fails on ("the answer came within 10 s"), so that a loaded
// or slow machine gets proportionally more room; never for how long a test
// waits to see that nothing happens, which a slow machine does not shorten.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Slowdown())
}

// slowdownFrom picks the factor: the override when given, otherwise the
// median of three timed runs of the workload (one stall alone does not
// set it), clamped to [1, maxSlowdown].
func slowdownFrom(override string, work func() time.Duration) (float64, error) {
	if override != "" {
		f, err := strconv.ParseFloat(override, 64)
		if err != nil || f <= 0 {
			return 0, fmt.Errorf("testhost: %s=%q: want a positive number", SlowdownEnv, override)
		}
		return f, nil
	}
	var runs [3]time.Duration
	for i := range runs {
		runs[i] = work()
	}
	med := median3(runs[0], runs[1], runs[2])
	f := float64(med) / float64(referenceWork)
	return min(max(f, 1), maxSlowdown), nil
}

func median3(a, b, c time.Duration) time.Duration {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}

// measureWork times a fixed, allocation-free integer workload on the
// calling goroutine. It measures what the tests feel: a CPU shared with
// other processes (a hog, a parallel package, a browser) stretches it as
// it stretches everything else.
func measureWork() time.Duration {
	start := time.Now()
	x := uint64(88172645463325252)
	for range 1 << 22 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	// KeepAlive makes the result observable, so the loop cannot be
	// optimised away.
	runtime.KeepAlive(x)
	return time.Since(start)
}
