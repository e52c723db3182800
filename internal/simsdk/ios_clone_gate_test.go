package simsdk

import (
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// scriptedGate answers every golden build with one verdict and counts the
// questions, as the engine's gate would (ADR 0053).
type scriptedGate struct {
	verdict core.GoldenAdmission
	asked   []bool // inlineOK of each question
}

func (g *scriptedGate) AdmitGoldenBuild(_ string, _ core.Golden, inlineOK bool, start func(core.GoldenAdmission)) core.GoldenAdmission {
	g.asked = append(g.asked, inlineOK)
	v := g.verdict
	if v == core.GoldenInline && !inlineOK {
		v = core.GoldenRefused
	}
	if v != core.GoldenRefused {
		start(v)
	}
	return v
}

// A refused golden is not built: the provision creates, and no command
// touches the golden set. Asked again at the next provision.
func TestRefusedGoldenIsNotBuilt(t *testing.T) {
	r := newCloneRig(t)
	gate := &scriptedGate{verdict: core.GoldenRefused}
	r.d.SetGoldenGate(gate)
	for range 2 {
		if _, cloned := r.provision(); cloned {
			t.Fatal("cloned without a golden")
		}
	}
	r.d.WaitGoldens()
	if n := r.count("--set "+r.goldenSet(), "create"); n != 0 {
		t.Fatalf("%d golden creates after refusals", n)
	}
	if len(gate.asked) < 2 {
		t.Fatalf("gate asked %d times over two provisions", len(gate.asked))
	}
}

// An inline admission builds the golden inside the provision, which then
// clones its device from it: no create in the root, the golden ready when
// Provision returns, and nothing left building.
func TestInlineGoldenBuildThenCloneInOneProvision(t *testing.T) {
	r := newCloneRig(t)
	gate := &scriptedGate{verdict: core.GoldenInline}
	r.d.SetGoldenGate(gate)
	if _, cloned := r.provision(); !cloned {
		t.Fatalf("first provision with an inline golden was not a clone: %q", r.commands())
	}
	if g := r.golden(); g["ready"] != true {
		t.Fatalf("golden after the inline build: %v", g)
	}
	if len(gate.asked) != 1 || !gate.asked[0] {
		t.Fatalf("gate questions %v, want one with inline allowed", gate.asked)
	}
	for _, g := range r.d.Goldens() {
		if g.Building {
			t.Fatalf("golden still reported building: %+v", g)
		}
	}
}
