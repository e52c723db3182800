package gateway

import (
	"context"
	"slices"
	"testing"

	"github.com/simlock/simlock/contract"
)

// simlock-architecture, Aggregation: catalog.get is the union of the
// workers' catalogs "each model and runtime annotated with the workers that
// have it", and status.get has "every device and lease carrying a workerId".
func TestCatalogNamesTheWorkersOfEachEntryAndLeasesCarryWorkerID(t *testing.T) {
	h := newHarness(t)
	a, b := newFakeWorker("wa", h.clock), newFakeWorker("wb", h.clock)
	a.addDevice("ios", "iPhone 16", "18.2")
	b.catalog = append(b.catalog, androidCatalog()...)
	b.catalog[0].Runtimes = append(b.catalog[0].Runtimes, contract.CatalogRuntime{Name: "iOS 17.5", Version: "17.5", Identifier: "rt-17-5", Available: true})
	h.attach(a)
	h.attach(b)

	var cat contract.CatalogGetOut
	if err := h.do(context.Background(), agent("x"), contract.CatalogGet.Name, contract.CatalogGetIn{}, &cat, nil); err != nil {
		t.Fatal(err)
	}
	both := []string{"wa", "wb"}
	for _, pc := range cat.Platforms {
		for _, m := range pc.Models {
			want := both
			if pc.Platform == "android" {
				want = []string{"wb"}
			}
			if got := slices.Sorted(slices.Values(m.Workers)); !slices.Equal(got, want) {
				t.Errorf("%s model %s: workers %v, want %v", pc.Platform, m.Identifier, m.Workers, want)
			}
		}
		for _, r := range pc.Runtimes {
			want := both
			if pc.Platform == "android" || r.Identifier == "rt-17-5" {
				want = []string{"wb"}
			}
			if got := slices.Sorted(slices.Values(r.Workers)); !slices.Equal(got, want) {
				t.Errorf("%s runtime %s: workers %v, want %v", pc.Platform, r.Identifier, r.Workers, want)
			}
		}
	}
	// A worker's own catalog is not changed by the annotation.
	for _, pc := range a.catalog {
		for _, m := range pc.Models {
			if len(m.Workers) != 0 {
				t.Fatalf("the worker's catalog was written to: %+v", m)
			}
		}
	}

	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16"})
	if l.WorkerID != "wa" || l.Worker == nil || l.Worker.ID != "wa" {
		t.Fatalf("granted lease %+v", l)
	}
	eventually(t, "the grant reaches the view", func() bool { return len(h.status(admin).Leases) == 1 })
	if st := h.status(admin); st.Leases[0].WorkerID != "wa" {
		t.Fatalf("status lease %+v", st.Leases[0])
	}
}
