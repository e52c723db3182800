package simsdk

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// A golden the gate refused at a provision is built when the engine asks
// for it (EnsureGolden) once the gate admits it: the gate is asked again,
// without inline (no provision holds a reservation), the golden is built
// in the background on the simulated SDK, and the next provision clones.
// Asked again with the golden fresh, the driver runs nothing and asks
// nobody.
func TestEnsureGoldenBuildsARefusedGoldenOnceAdmitted(t *testing.T) {
	r := newCloneRig(t)
	ctx := context.Background()
	gate := &scriptedGate{verdict: core.GoldenRefused}
	r.d.SetGoldenGate(gate)
	if _, cloned := r.provision(); cloned {
		t.Fatal("cloned without a golden")
	}
	gate.verdict = core.GoldenBackground
	if err := r.d.EnsureGolden(ctx, r.spec); err != nil {
		t.Fatalf("EnsureGolden admitted: %v", err)
	}
	r.d.WaitGoldens()
	if g := r.golden(); g["ready"] != true {
		t.Fatalf("golden after EnsureGolden: %v", g)
	}
	if len(gate.asked) != 2 || gate.asked[1] {
		t.Fatalf("gate questions %v, want the provision's then one without inline", gate.asked)
	}
	if _, cloned := r.provision(); !cloned {
		t.Fatalf("provision after the ensured golden did not clone: %q", r.commands())
	}
	creates := r.count("--set "+r.goldenSet(), "create")
	asked := len(gate.asked)
	if err := r.d.EnsureGolden(ctx, r.spec); err != nil {
		t.Fatalf("EnsureGolden with a fresh golden: %v", err)
	}
	r.d.WaitGoldens()
	if n := r.count("--set "+r.goldenSet(), "create"); n != creates || len(gate.asked) != asked {
		t.Fatalf("EnsureGolden with a fresh golden built again: creates %d -> %d, gate asked %d -> %d", creates, n, asked, len(gate.asked))
	}
}

// Refused again at EnsureGolden (the engine's view moved), nothing is
// built and the engine is told so by core.ErrGoldenRefused.
func TestEnsureGoldenRefusedBuildsNothing(t *testing.T) {
	r := newCloneRig(t)
	gate := &scriptedGate{verdict: core.GoldenRefused}
	r.d.SetGoldenGate(gate)
	err := r.d.EnsureGolden(context.Background(), r.spec)
	if !errors.Is(err, core.ErrGoldenRefused) {
		t.Fatalf("EnsureGolden refused = %v, want core.ErrGoldenRefused", err)
	}
	r.d.WaitGoldens()
	if n := r.count("--set "+r.goldenSet(), "create"); n != 0 {
		t.Fatalf("%d golden creates after a refusal", n)
	}
	if !slices.Equal(gate.asked, []bool{false}) {
		t.Fatalf("gate questions %v, want one without inline", gate.asked)
	}
	for _, g := range r.d.Goldens() {
		t.Fatalf("a refused build is reported: %+v", g)
	}
}
