package simsdk

import (
	"context"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/drivers/ios"
)

// A reset removes the goldens the registry never held: RemoveGoldens
// deletes every device of the golden set on the simulated SDK and empties
// the record, so a restarted driver sees none and a later clone rebuilds.
// A driver whose clone provisioning is now off still removes them.
func TestRemoveGoldensEmptiesTheGoldenSet(t *testing.T) {
	r := newCloneRig(t)
	ctx := context.Background()
	if _, err := r.d.CloneDevice(ctx, r.spec); err == nil {
		t.Fatal("CloneDevice without a golden should fail")
	}
	r.d.WaitGoldens()
	udid, _ := r.golden()["udid"].(string)
	if udid == "" || !strings.Contains(r.h.must("--set", r.goldenSet(), "list", "devices"), udid) {
		t.Fatalf("no golden built in %s", r.goldenSet())
	}
	off, err := ios.New(ios.Options{Root: r.root, Runner: inProcRunner{r.h}})
	if err != nil {
		t.Fatal(err)
	}
	removed, err := off.RemoveGoldens(ctx)
	if err != nil || len(removed) != 1 || removed[0] != udid {
		t.Fatalf("RemoveGoldens = %v, %v; want [%s]", removed, err, udid)
	}
	if out := r.h.must("--set", r.goldenSet(), "list", "devices"); strings.Contains(out, udid) {
		t.Fatalf("golden %s still in its set:\n%s", udid, out)
	}
	if gs := r.goldens(); len(gs) != 0 {
		t.Fatalf("golden record after removal: %v", gs)
	}
	again, err := ios.New(ios.Options{Root: r.root, Runner: inProcRunner{r.h}, Clone: ios.Clone{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if gs := again.Goldens(); len(gs) != 0 || again.CloneReady(r.spec) {
		t.Fatalf("restarted driver after removal: Goldens() = %+v, CloneReady %v", gs, again.CloneReady(r.spec))
	}
	// Nothing left to remove: no error, nothing reported.
	if removed, err := again.RemoveGoldens(ctx); err != nil || len(removed) != 0 {
		t.Fatalf("second RemoveGoldens = %v, %v", removed, err)
	}
}
