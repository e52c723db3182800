package e2e

import (
	"strings"
	"testing"
	"time"
)

// groupLease is a multi-device lease as `simlock lease` prints it.
type groupLease struct {
	LeaseID string `json:"leaseId"`
	Device  device `json:"device"`
	Devices []struct {
		ID       string `json:"id"`
		Platform string `json:"platform"`
		WorkerID string `json:"workerId"`
	} `json:"devices"`
}

// Through a gateway a multi-device lease lives on one worker: a fleet
// whose workers can each run one device refuses an iPhone + emulator pair
// rather than split it, and a worker that can run both holds the whole
// group, renewed and released as one.
func TestGatewayGroupLeaseLivesOnOneWorker(t *testing.T) {
	gw, workers, _ := fleet(t, 2)
	pair := []string{"lease", "--device-spec", "platform=ios,model=iPhone 16", "--device-spec", "platform=android"}
	r := gw.run(append(pair, "--no-wait", "--requester", "pair-a", "--json")...)
	if !strings.Contains(r.stderr, "NO_CAPACITY") {
		t.Fatalf("a pair no single worker can hold: code %d, %s", r.code, r.stderr)
	}
	for _, w := range workers {
		if st := w.status(); len(st.Leases) != 0 {
			t.Fatalf("a worker holds %d leases after the refused pair", len(st.Leases))
		}
	}

	gw2, workers2, _ := fleetWith(t, 1, `{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}}`)
	var l groupLease
	gw2.json(&l, append(pair, "--detach", "--requester", "pair-b", "--timeout", "60s")...)
	wid := workerOf(t, l.LeaseID)
	if len(l.Devices) != 2 || l.Devices[0].Platform != "ios" || l.Devices[1].Platform != "android" || l.Devices[0].ID != l.Device.ID {
		t.Fatalf("group lease %+v", l)
	}
	for _, d := range l.Devices {
		if d.WorkerID != wid {
			t.Fatalf("member %s is shown on worker %q, the lease on %s", d.ID, d.WorkerID, wid)
		}
	}
	if st := workers2[0].status(); len(st.Leases) != 1 {
		t.Fatalf("the worker holds %d leases for one group", len(st.Leases))
	}
	gw2.mustRun("lease", "renew", l.LeaseID)
	gw2.mustRun("release", l.LeaseID)
	eventually(t, "the group's release to reach the worker", 10*time.Second, func() bool { return len(workers2[0].status().Leases) == 0 })
}
