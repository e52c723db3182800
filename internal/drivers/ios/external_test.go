package ios

import (
	"context"
	"testing"

	"github.com/simlock/simlock/internal/ports/fake"
)

const emptySetJSON = `{
  "devices" : {
    "com.apple.CoreSimulator.SimRuntime.iOS-18-0" : [

    ]
  }
}
`

// External simulators are the default set's booted ones, listed without
// --set; simlock's own set is not asked when there are none.
func TestExternalRunningCountsTheDefaultSetsBootedDevices(t *testing.T) {
	h := newHarness(t)
	h.expect(
		fake.Step{Match: "xcrun simctl list devices booted -j", Stdout: string(readFixture(t, "list-devices-json-xcode12.5-booted.json"))},
		fake.Step{Match: h.sim("list devices -j"), Stdout: emptySetJSON},
		fake.Step{Match: "xcrun simctl list devices booted -j", Stdout: emptySetJSON},
	)
	if n, err := h.d.ExternalRunning(context.Background()); err != nil || n != 1 {
		t.Fatalf("with one booted device in the default set: %d, %v", n, err)
	}
	if n, err := h.d.ExternalRunning(context.Background()); err != nil || n != 0 {
		t.Fatalf("with none: %d, %v", n, err)
	}
	h.assertDone()
}

// A device that is simlock's own (the root configured as the default set)
// is not counted as external.
func TestExternalRunningLeavesOutSimlocksOwnSet(t *testing.T) {
	h := newHarness(t)
	booted := string(readFixture(t, "list-devices-json-xcode12.5-booted.json"))
	h.expect(
		fake.Step{Match: "xcrun simctl list devices booted -j", Stdout: booted},
		fake.Step{Match: h.sim("list devices -j"), Stdout: booted},
	)
	if n, err := h.d.ExternalRunning(context.Background()); err != nil || n != 0 {
		t.Fatalf("own device counted as external: %d, %v", n, err)
	}
	h.assertDone()
}

// A failed listing is an error, never a count of zero.
func TestExternalRunningFailureIsAnError(t *testing.T) {
	h := newHarness(t)
	h.expect(fake.Step{Match: "xcrun simctl list devices booted -j", ExitCode: 1, Stderr: "CoreSimulatorService connection became invalid"})
	if _, err := h.d.ExternalRunning(context.Background()); err == nil {
		t.Fatal("a failed simctl list gave a count")
	}
}
