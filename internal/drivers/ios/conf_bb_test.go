package ios

import (
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

// simlock-architecture, device identity: "An OS version outside a model's
// supported range fails immediately with the range named in the error".
// A runtime that dropped the model (iOS 26 and the iPhone XS) bounds the
// range by the newest installed runtime that still runs it.
func TestOutOfRangeNamesTheRangeEvenWhenARuntimeDroppedTheModel(t *testing.T) {
	xc16 := parseFixture(t, "list-json-xcode16.0.json")
	// The Xcode 16 capture with iOS 18.0 dropping the iPhone Xs: 17.5 is
	// the newest installed runtime left that runs it.
	dropped := &List{DeviceTypes: xc16.DeviceTypes}
	for _, r := range xc16.Runtimes {
		if r.Identifier == "com.apple.CoreSimulator.SimRuntime.iOS-18-0" {
			r.SupportedDeviceTypes = slices.DeleteFunc(slices.Clone(r.SupportedDeviceTypes), func(id string) bool {
				return id == "com.apple.CoreSimulator.SimDeviceType.iPhone-XS"
			})
		}
		dropped.Runtimes = append(dropped.Runtimes, r)
	}
	_, err := resolve(dropped, "iPhone Xs", "18.0")
	se := specErr(t, err, core.ErrOSOutOfRange)
	if se.Details["min"] != "12.0" || se.Details["max"] != "17.5" {
		t.Fatalf("details %v", se.Details)
	}
	for _, want := range []string{"12.0", "17.5", "dropped"} {
		if !strings.Contains(se.Msg, want) {
			t.Errorf("message %q lacks %q", se.Msg, want)
		}
	}
	if !strings.Contains(se.Next, "--os 17.5") {
		t.Errorf("next step %q", se.Next)
	}

	// With no installed runtime left that runs it, the device type's floor
	// and the runtime that dropped it are all there is to name.
	only := &List{DeviceTypes: xc16.DeviceTypes}
	for _, r := range dropped.Runtimes {
		if r.Identifier == "com.apple.CoreSimulator.SimRuntime.iOS-18-0" {
			only.Runtimes = append(only.Runtimes, r)
		}
	}
	_, err = resolve(only, "iPhone Xs", "18.0")
	se = specErr(t, err, core.ErrOSOutOfRange)
	if se.Details["min"] != "12.0" || !strings.Contains(se.Msg, "12.0") || !strings.Contains(se.Next, "older than") {
		t.Fatalf("%q %q %v", se.Msg, se.Next, se.Details)
	}

	// Outside the device type's own range: the range and a next step that
	// names it.
	_, err = resolve(xc16, "iPhone 16", "17.5")
	se = specErr(t, err, core.ErrOSOutOfRange)
	if !strings.Contains(se.Msg, "iOS 18.0 and later") || !strings.Contains(se.Next, "iOS 18.0 and later") {
		t.Fatalf("%q / %q", se.Msg, se.Next)
	}
}

// A bounded range reads as a person would write it: simctl's 15.255.255
// is "15.x".
func TestShownMaxReadsAsAnyMinor(t *testing.T) {
	for in, want := range map[Version]string{{15, 255, 255}: "15.x", {9, 3, 255}: "9.3.x", {17, 5, 0}: "17.5"} {
		if got := shownMax(in); got != want {
			t.Errorf("shownMax(%v) = %q, want %q", in, got, want)
		}
	}
}
