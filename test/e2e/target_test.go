package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// A `--device` naming a simulator its home's root does not hold (never
// made, or deleted by a home sharing the root since it was listed) is a
// typed UNKNOWN_DEVICE with a next step, not an internal error. The
// multi-home drill found it: 24 such requests answered INTERNAL in a long
// run, each naming a device the sibling home had just destroyed.
func TestADeviceNotInTheRootIsUnknownNotInternal(t *testing.T) {
	w := newWorld(t, oneRunning)
	w.mustRun("daemon", "start")
	r := w.run("lease", "--platform", "ios", "--device", "0A0A0A0A-0000-4000-8000-000000000000", "--no-wait", "--detach", "--json")
	var out struct {
		Error struct {
			Code       string `json:"code"`
			NextAction string `json:"nextAction"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr+r.stdout)), &out); err != nil || r.code == 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if out.Error.Code != "UNKNOWN_DEVICE" || out.Error.NextAction == "" {
		t.Fatalf("a device not in the root answered %+v", out.Error)
	}
}
