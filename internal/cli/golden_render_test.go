package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

// status prints one goldens block: every golden with its state (the
// handle where it has one, why and until when a stuck one waits), then
// every spec whose golden was refused and why; nothing when there is
// neither, so a status without clone provisioning stays as it was.
func TestStatusShowsGoldensOnlyWhenThereAreSome(t *testing.T) {
	var out bytes.Buffer
	a := &app{env: Env{Stdout: &out}}
	retry := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	a.printGoldens(&contract.Goldens{
		Devices: []contract.GoldenDevice{
			{Platform: "ios", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPhone-16", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-26-3",
				Handle: "building:com.apple.CoreSimulator.SimDeviceType.iPhone-16|com.apple.CoreSimulator.SimRuntime.iOS-26-3", State: "building"},
			{Platform: "ios", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPhone-15", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-26-3",
				Handle: "A1B2", State: "stuck", RetryAt: &retry, Error: "simctl delete: exit 1"},
			{Platform: "ios", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPad-Air", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-26-3",
				Handle: "C3D4", State: "ready"},
		},
		NotBuilt: []contract.GoldenNotBuilt{{Platform: "ios", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPhone-SE", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-18-0",
			Reason: "a request is waiting for capacity", Retrying: true}},
	})
	want := []string{
		"goldens  3 kept, 1 not built (clone sources; never leased, each takes a managed slot)",
		"  ios iPhone-16 on iOS-26-3: building",
		"  ios iPhone-15 on iOS-26-3: stuck A1B2, removal failed (simctl delete: exit 1); tried again from 2026-12-02T01:02:03Z",
		"  ios iPad-Air on iOS-26-3: ready C3D4",
		"  ios iPhone-SE on iOS-18-0: not built, a request is waiting for capacity (retrying now)",
	}
	if got := strings.TrimRight(out.String(), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("status goldens block:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	out.Reset()
	a.printGoldens(nil)
	a.printGoldens(&contract.Goldens{})
	if out.Len() != 0 {
		t.Fatalf("printed %q with no goldens", out.String())
	}
}
