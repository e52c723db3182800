package slots

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// Results and failure, Concepts: a ready acquisition is published twice,
// in the initialize answer and as the JSON resource, with the same
// payload; it names its scope by the three parts and their SHA-256 key,
// reports the idle window it was granted (the configured one, or the
// two-minute default), and per slot the generation, the device, the lease,
// the requested and the resolved spec (an omitted deviceType stays out of
// the request and is filled in the resolution), the spec fingerprint, the
// disposition and readiness. The next execution on the slot, launched
// from a file named by SIMLOCK_SLOT_CONFIG, reuses the device under a new
// lease, and the unchanged binding keeps its generation.
func TestSlotsAReadyAcquisitionIsPublishedTwiceAndReusedUnderANewLease(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "slots/3.2", "slots/3.3", "slots/3.6", "slots/7.3", "slots/7.17", "slots/8.2", "slots/9.1", "slots/11.1", "slots/11.3")
	w := harness.NewWorld(t, worldConfig)
	w.MustRun("daemon", "start")

	p1 := startProxy(t, w, "--slot-config", launch("runner-A", "boot-1", "", map[string]any{"idleTimeoutMs": 300000}))
	res := p1.initialize
	if res["outcome"] != "ready" || num(res, "contractVersion") != 1 {
		t.Fatalf("first execution: %v", res)
	}
	if got := p1.resource(); !reflect.DeepEqual(got, res) {
		t.Fatalf("the resource differs from the initialize result:\n%v\n%v", got, res)
	}
	sum := sha256.Sum256([]byte("host-1\x00runner-A\x00boot-1"))
	if str(res, "scope", "scopeKey") != hex.EncodeToString(sum[:]) || str(res, "scope", "managedHostScope") != "host-1" ||
		str(res, "scope", "runnerNamespace") != "runner-A" || str(res, "scope", "runnerIncarnation") != "boot-1" {
		t.Fatalf("scope %v, want the three parts and the SHA-256 of them", res["scope"])
	}
	if num(res, "idleTimeoutMs") != 300000 {
		t.Fatalf("idleTimeoutMs %v, want the configured 300000", res["idleTimeoutMs"])
	}
	s1 := slot(res)
	gen, dev, lease := num(s1, "assignmentGeneration"), str(s1, "device", "stableId"), str(s1, "leaseId")
	if s1["disposition"] != "created" || gen < 1 || dev == "" || str(s1, "device", "name") == "" || lease == "" ||
		str(s1, "requestedSpec", "runtime") != iosRuntime || str(s1, "requestedSpec", "deviceType") != "" ||
		str(s1, "resolvedSpec", "deviceType") == "" || str(s1, "specFingerprint", "hash") == "" || num(s1, "specFingerprint", "version") < 1 ||
		s1["readiness"] == nil {
		t.Fatalf("the slot entry: %v", s1)
	}
	p1.end()
	harness.Eventually(t, "the slot to be released and still assigned", 20*time.Second, func() bool {
		var l slotList
		w.JSON(&l, "slot", "list", "--json")
		return len(l.Assignments) == 1 && l.Assignments[0].LeaseID == "" && l.Assignments[0].Device != nil && l.Assignments[0].Device.StableID == dev
	})

	file := filepath.Join(w.Root, "slot.json")
	if err := os.WriteFile(file, []byte(launch("runner-A", "boot-1", "", nil)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.Setenv("SIMLOCK_SLOT_CONFIG", file)
	p2 := startProxy(t, w)
	s2 := slot(p2.initialize)
	if p2.initialize["outcome"] != "ready" || s2["disposition"] != "reused" || str(s2, "device", "stableId") != dev ||
		str(s2, "leaseId") == "" || str(s2, "leaseId") == lease || num(s2, "assignmentGeneration") != gen {
		t.Fatalf("second execution %v; want %s reused under a new lease at generation %v", s2, dev, gen)
	}
	if num(p2.initialize, "idleTimeoutMs") != 120000 {
		t.Fatalf("idleTimeoutMs %v, want the 2-minute default", p2.initialize["idleTimeoutMs"])
	}
	p2.end()
}
