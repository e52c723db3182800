package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
)

// status.get shows every golden with its state and a refused build with
// its reason, from the engine's memory: a golden being built, and one
// whose removal for a waiting request failed (stuck, with when it is
// tried again and why). A daemon without goldens has no goldens field.
func TestStatusShowsABuildingAndAStuckGolden(t *testing.T) {
	ctx := context.Background()
	plain := startDaemon(t, nil)
	st, err := client.Do(ctx, plain.dial("op", plain.adminToken()), contract.StatusGet, contract.StatusGetIn{})
	if err != nil || st.Goldens != nil {
		t.Fatalf("status without goldens: goldens %+v, err %v", st.Goldens, err)
	}

	var cl *fakedrv.Cloning
	f := startDaemonWith(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 3, MaxManaged: 3} },
		func(o *Options) {
			cl = fakedrv.NewCloning(fakedrv.New("ios"), nil)
			cl.SetGoldens([]core.Golden{
				{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"},
				{Handle: "G2", ModelID: "Tablet", RuntimeID: "rt-1.0", Building: true, Busy: true},
			})
			cl.SetFail("remove-golden", 1)
			o.Drivers = []core.Driver{cl}
		})
	adm := f.dial("op", f.adminToken())
	if _, err := adm.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil); err != nil {
		t.Fatal(err)
	}
	// The managed slots are the two goldens and the phone: a watch needs
	// G1's, its removal fails, and the watch waits.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := f.dial("w", "")
	go func() {
		_, _ = waiter.LeaseRequest(wctx, contract.LeaseRequestIn{Platform: "ios", Model: "Watch"}, nil)
	}()
	var g *contract.Goldens
	waitFor(t, "a stuck golden in status", func() bool {
		st, err := client.Do(ctx, adm, contract.StatusGet, contract.StatusGetIn{})
		if err != nil {
			t.Fatal(err)
		}
		g = st.Goldens
		return g != nil && len(g.Devices) == 2 && g.Devices[0].State == "stuck"
	})
	stuck, building := g.Devices[0], g.Devices[1]
	if stuck.Handle != "G1" || stuck.RetryAt == nil || stuck.Error == "" || stuck.ModelID != "Phone" || stuck.Platform != "ios" {
		t.Fatalf("stuck golden %+v", stuck)
	}
	if until := time.Until(*stuck.RetryAt); until <= 0 || until > time.Minute {
		t.Fatalf("stuck golden retried in %v, want within the first minute of backoff", until)
	}
	if building.Handle != "G2" || building.State != "building" || building.RetryAt != nil {
		t.Fatalf("building golden %+v", building)
	}
	// A build asked for now is refused (the watch waits) and shown so.
	if v := cl.AskGoldenBuild("G3", "Watch", "rt-1.0", false); v != core.GoldenRefused {
		t.Fatalf("golden admitted while the watch waits: %v", v)
	}
	st, err = client.Do(ctx, adm, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		t.Fatal(err)
	}
	if nb := st.Goldens.NotBuilt; len(nb) != 1 || nb[0].ModelID != "Watch" || nb[0].Reason == "" {
		t.Fatalf("not built %+v", nb)
	}
}
