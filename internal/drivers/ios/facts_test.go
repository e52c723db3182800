package ios

import (
	"context"
	"reflect"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

func TestFormFactorFromProductFamily(t *testing.T) {
	for fam, want := range map[string]string{"iPhone": "phone", "iPad": "tablet", "iPod": "phone",
		"Apple Watch": "unknown", "Apple TV": "unknown", "Apple Vision": "unknown", "": "unknown"} {
		if got := formFactor(fam); got != want {
			t.Errorf("formFactor(%q) = %q, want %q", fam, got, want)
		}
	}
}

// The facts come from the captured Xcode 16 listing's device types; an
// Xcode too old to list product families states no form factor.
func TestFactsForDeviceTypeFromListing(t *testing.T) {
	l, err := ParseListJSON(readFixture(t, "list-json-xcode16.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	for typeID, want := range map[string]map[string]string{
		"com.apple.CoreSimulator.SimDeviceType.iPhone-6s":   {"fact:modelIdentifier": "iPhone8,1", "fact:formFactor": "phone"},
		"com.apple.CoreSimulator.SimDeviceType.iPad-mini-4": {"fact:modelIdentifier": "iPad5,1", "fact:formFactor": "tablet"},
		"com.apple.CoreSimulator.SimDeviceType.NoSuchType":  nil,
	} {
		if got := factsFor(l, typeID); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: facts %v, want %v", typeID, got, want)
		}
	}
	if got := typeFacts(DeviceType{Identifier: "x"}); len(got) != 0 {
		t.Errorf("a type with nothing listed states %v", got)
	}
}

// Provision states the facts from the listing the spec was resolved from
// and starts no process for them (TestProvision scripts every command).
func TestProvisionStatesFactsFromTheKeptListing(t *testing.T) {
	h := newHarness(t)
	h.expect(fake.Step{Match: h.sim("list -j"), Stdout: string(readFixture(t, "list-json-xcode16.0.json"))})
	if _, ok := h.d.listing.Last(); ok {
		t.Fatal("a listing was kept before any read")
	}
	if f := h.d.provisionFacts("com.apple.CoreSimulator.SimDeviceType.iPhone-6s"); f != nil {
		t.Fatalf("facts without a listing: %v", f)
	}
	if _, _, err := h.d.listing.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := h.d.provisionFacts("com.apple.CoreSimulator.SimDeviceType.iPhone-6s")
	if f[core.AttrFactPrefix+core.FactFormFactor] != "phone" {
		t.Fatalf("facts %v", f)
	}
	h.assertDone()
}
