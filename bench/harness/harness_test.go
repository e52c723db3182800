package harness

import (
	"os"
	"testing"
	"time"
)

// The process-time reading moves with work done, and the machine reading
// never claims more busy time than there was.
func TestCPUReadingsMoveWithWork(t *testing.T) {
	self0, _, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	busy0, total0, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the process has used a few clock ticks (10 ms each).
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		self, _, err := CPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if self-self0 >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s of spinning moved the process's CPU by %s", self-self0)
		}
	}
	busy1, total1, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if busy1 <= busy0 || total1 <= total0 || busy1-busy0 > total1-total0 {
		t.Fatalf("machine busy %s of %s over the spin (x=%d)", busy1-busy0, total1-total0, x)
	}
}

// Calls on different devices count as one kind of call.
func TestToolVerbDropsDevicesSerialsAndPaths(t *testing.T) {
	for line, want := range map[string]string{
		"xcrun simctl --set /tmp/slb-1/h/devices/ios erase 0B6C1E92-6A51-4F0B-9C66-1D2E3F4A5B6C": "xcrun simctl erase",
		"xcrun simctl --set /tmp/slb-1/h/devices/ios list devices -j":                            "xcrun simctl list",
		"adb -P 5137 -s emulator-5554 shell getprop sys.boot_completed":                          "adb shell getprop",
		"emulator -version": "emulator -version",
	} {
		if got := ToolVerb(line); got != want {
			t.Errorf("ToolVerb(%q) = %q, want %q", line, got, want)
		}
	}
}
