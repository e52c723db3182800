package daemon

import (
	"context"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// Over the real dispatcher: list and its booted view describe the leased
// device with its live observation and a complete enrichment; the lease
// grant carries the same description (readiness null: grants never list).
func TestListAndBootedViewDescribeTheLeasedDevice(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	adm := f.dial("op", f.adminToken())
	l, err := adm.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Device == nil || l.Device.Runtime.Lifecycle != "leased" || l.Device.Runtime.Lease == nil || *l.Device.Runtime.Lease != l.LeaseID {
		t.Fatalf("grant's device %+v", l.Device)
	}
	for _, booted := range []bool{false, true} {
		out, err := client.Do(ctx, adm, contract.ListGet, contract.ListGetIn{Booted: booted})
		if err != nil {
			t.Fatal(err)
		}
		if out.Enrichment == nil || !out.Enrichment.Complete {
			t.Fatalf("booted=%v: enrichment %+v", booted, out.Enrichment)
		}
		if len(out.Devices) != 1 || out.Devices[0].ID != l.Device.ID {
			t.Fatalf("booted=%v: devices %+v", booted, out.Devices)
		}
		if r := out.Devices[0].Runtime.Readiness; r == nil || *r != contract.ReadinessRunning {
			t.Fatalf("booted=%v: readiness %v", booted, r)
		}
	}
	// With the listing just read, status shows it too, without listing.
	st, err := client.Do(ctx, adm, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Devices[0].Runtime.Readiness; r == nil || *r != contract.ReadinessRunning {
		t.Fatalf("status readiness %v", r)
	}
	cat, err := client.Do(ctx, adm, contract.CatalogGet, contract.CatalogGetIn{})
	if err != nil || cat.Enrichment == nil || !cat.Enrichment.Complete {
		t.Fatalf("catalog %+v %v", cat.Enrichment, err)
	}
}
