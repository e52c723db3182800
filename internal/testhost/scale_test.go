package testhost

import (
	"testing"
	"time"
)

func TestSlowdownTakesTheOverrideAsGiven(t *testing.T) {
	never := func() time.Duration { t.Fatal("measured despite an override"); return 0 }
	for _, tc := range []struct {
		in   string
		want float64
	}{{"1", 1}, {"0.5", 0.5}, {"12", 12}} {
		got, err := slowdownFrom(tc.in, never)
		if err != nil || got != tc.want {
			t.Errorf("override %q: got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"0", "-2", "fast", "2x"} {
		if _, err := slowdownFrom(bad, never); err == nil {
			t.Errorf("override %q accepted", bad)
		}
	}
}

func TestSlowdownIsTheMedianRunOverTheReferenceClamped(t *testing.T) {
	runs := func(ds ...time.Duration) func() time.Duration {
		return func() time.Duration { d := ds[0]; ds = ds[1:]; return d }
	}
	r := referenceWork
	for _, tc := range []struct {
		name string
		work func() time.Duration
		want float64
	}{
		{"one stall does not count", runs(3*r, 100*r, 3*r), 3},
		{"median of three", runs(2*r, 6*r, 4*r), 4},
		{"a faster machine is 1", runs(r/4, r/2, r/3), 1},
		{"capped", runs(1000*r, 1000*r, 1000*r), maxSlowdown},
	} {
		got, err := slowdownFrom("", tc.work)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestScaleStretchesByTheSlowdown(t *testing.T) {
	// Nothing else in this test binary calls Slowdown, so the override
	// set here is the one its first use reads.
	t.Setenv(SlowdownEnv, "3")
	if got := Scale(2 * time.Second); got != 6*time.Second {
		t.Fatalf("Scale(2s) = %v at slowdown 3, want 6s", got)
	}
	if f := Slowdown(); f != 3 {
		t.Fatalf("slowdown %v, want 3", f)
	}
	t.Logf("this machine now: workload %v (reference %v)", measureWork(), referenceWork)
}
