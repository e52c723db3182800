package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/testhost"
)

// A multi-device request over the socket: one lease, devices[] in order
// with device the first member, lease.get showing the same, and a release
// that ends every member's lease.
func TestGroupLeaseOverTheSocket(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 2, MaxManaged: 4} })
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(10*time.Second))
	defer cancel()
	c := f.dial("alice", "")
	in := contract.LeaseRequestIn{Devices: []contract.DeviceSpec{{Platform: "ios"}, {Platform: "ios"}}}
	l, err := c.LeaseRequest(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Devices) != 2 || l.Device == nil || l.Devices[0].ID != l.DeviceID || l.Device.ID != l.DeviceID || l.Devices[0].ID == l.Devices[1].ID {
		t.Fatalf("group lease %+v", l)
	}
	got, err := client.Do(ctx, c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID})
	if err != nil || len(got.Devices) != 2 || got.Devices[1].ID != l.Devices[1].ID || got.Devices[1].Runtime.Lifecycle != contract.StateLeased {
		t.Fatalf("lease.get %+v %v", got, err)
	}
	if _, err := client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	ls, err := client.Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
	if err != nil || len(ls.Leases) != 0 {
		t.Fatalf("after release: %+v %v", ls, err)
	}
	bad := in
	bad.Platform = "ios"
	if _, err := c.LeaseRequest(ctx, bad, nil); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("devices with platform: %v", err)
	}
	three := contract.LeaseRequestIn{Devices: []contract.DeviceSpec{{Platform: "ios"}, {Platform: "ios"}, {Platform: "ios"}}}
	if _, err := c.LeaseRequest(ctx, three, nil); !client.IsCode(err, contract.CodeNoCapacity) {
		t.Fatalf("three iOS devices with maxRunning 2: %v", err)
	}
}
