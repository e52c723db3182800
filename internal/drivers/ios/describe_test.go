package ios

import (
	"context"
	"errors"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

// Describe reads a listed device's spec from its device type and runtime,
// and its run state; a UDID the set does not list is not found.
func TestDescribeReadsADeviceOfTheSet(t *testing.T) {
	h := newHarness(t)
	raw := readFixture(t, xcode16JSON)
	h.runner.Always(fake.Step{Match: h.sim("list -j"), Stdout: string(raw)})
	h.runner.Always(fake.Step{Match: "xcrun --version", Stdout: "xcrun version 70.\n"})
	l, err := ParseListJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var want Device
	var typeName, version string
	for _, dev := range l.Devices {
		for _, ty := range l.DeviceTypes {
			for _, rt := range l.Runtimes {
				if ty.Identifier == dev.DeviceTypeIdentifier && rt.Identifier == dev.RuntimeKey && want.UDID == "" {
					want, typeName, version = dev, ty.Name, rt.Version
				}
			}
		}
	}
	if want.UDID == "" {
		t.Fatal("the capture has no device with a listed type and runtime")
	}
	got, err := h.d.Describe(context.Background(), want.UDID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Model != typeName || got.Spec.ModelID != want.DeviceTypeIdentifier || got.Spec.OSVersion != version ||
		got.Spec.RuntimeID != want.RuntimeKey || got.Handle != want.UDID || got.Attrs[core.AttrUDID] != want.UDID ||
		got.Attrs[core.AttrDeviceSet] != h.root || got.Run != runState(want.State) {
		t.Fatalf("described %+v, from %+v", got, want)
	}
	if _, err := h.d.Describe(context.Background(), "00000000-0000-0000-0000-000000000000"); !errors.Is(err, core.ErrDeviceNotFound) {
		t.Fatalf("an unlisted UDID: %v", err)
	}
}
