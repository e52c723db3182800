package gateway

import (
	"context"
	"testing"

	"github.com/simlock/simlock/contract"
)

// A gateway serves no contract of its own yet: sessions are one worker's
// receipts and devices, so it lists none rather than its workers'.
func TestGatewayCapabilitiesAreItsOwnEmptyList(t *testing.T) {
	h := newHarness(t)
	var out contract.CapabilitiesGetOut
	if err := h.do(context.Background(), admin, contract.CapabilitiesGet.Name, contract.CapabilitiesGetIn{}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if out.Contracts == nil || len(out.Contracts) != 0 {
		t.Fatalf("contracts %#v, want an empty list", out.Contracts)
	}
}
