package simsdk

import (
	"context"
	"testing"
	"time"
)

func TestSlowProbeFaultParsesAndPicksTheProbes(t *testing.T) {
	fs, err := parseFaults("slow-probe=3000@1")
	if err != nil || len(fs) != 1 || fs[0].Name != faultSlowProbe || fs[0].Value != "3000" || fs[0].Count != 1 {
		t.Fatalf("parse: %+v %v", fs, err)
	}
	for _, bad := range []string{"slow-probe", "slow-probe=x", "slow-probe=-5"} {
		if _, err := parseFaults(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, tc := range []struct {
		tool string
		args []string
		want bool
	}{
		{"xcrun", []string{"simctl", "--set", "/r", "list", "devices", "-j"}, true},
		{"xcrun", []string{"simctl", "--set", "/r", "list", "-j"}, false},
		{"xcrun", []string{"simctl", "--set", "/r", "boot", "X"}, false},
		{"adb", []string{"-P", "5137", "devices", "-l"}, true},
		{"adb", []string{"-P", "5137", "-s", "emulator-5554", "shell", "getprop"}, false},
		{"emulator", []string{"-list-avds"}, true},
		{"emulator", []string{"-avd", "x"}, false},
		{"avdmanager", []string{"list", "avd"}, false},
	} {
		if got := isProbe(tc.tool, tc.args); got != tc.want {
			t.Errorf("isProbe(%s %v) = %v, want %v", tc.tool, tc.args, got, tc.want)
		}
	}
}

// The delay honours the caller's context: a probe killed while it waits
// ends at once, like a real process killed mid-read.
func TestSlowProbeDelaysUntilCancelled(t *testing.T) {
	s := &sdk{home: t.TempDir(), faults: []fault{{Name: faultSlowProbe, Value: "600000", Key: "slow-probe=600000"}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.slowProbe(ctx, "adb", []string{"devices"}); err == nil {
		t.Fatal("a cancelled probe waited out its delay")
	}
	if err := s.slowProbe(context.Background(), "adb", []string{"shell"}); err != nil {
		t.Fatalf("a non-probe was delayed: %v", err)
	}
	s.faults[0].Value = "1"
	start := time.Now()
	if err := s.slowProbe(context.Background(), "emulator", []string{"-list-avds"}); err != nil || time.Since(start) < time.Millisecond {
		t.Fatalf("probe not delayed: %v after %v", err, time.Since(start))
	}
}
