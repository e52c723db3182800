package core

import (
	"testing"
	"time"
)

type estDriver struct{ Driver }

func (estDriver) Platform() string                   { return "ios" }
func (estDriver) Estimate(op DriverOp) time.Duration { return 30 * time.Second }

// A progress ETA starts at the driver's guess and then follows what this
// machine measured, smoothed so one outlier does not own it.
func TestEstimatesFollowMeasuredTimings(t *testing.T) {
	var s estimates
	d := estDriver{}
	if got := s.of(d, OpBoot); got != 30*time.Second {
		t.Fatalf("before any measurement: %v, want the driver's 30s", got)
	}
	s.observe("ios", OpBoot, 4*time.Second)
	if got := s.of(d, OpBoot); got != 4*time.Second {
		t.Fatalf("after one 4s boot: %v", got)
	}
	s.observe("ios", OpBoot, 8*time.Second)
	if got := s.of(d, OpBoot); got != 6*time.Second {
		t.Fatalf("after 4s and 8s: %v, want 6s", got)
	}
	s.observe("android", OpBoot, time.Second)
	if got := s.of(d, OpBoot); got != 6*time.Second {
		t.Fatalf("another platform's boot changed ios's figure: %v", got)
	}
}
