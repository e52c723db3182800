package slots

import (
	"testing"

	"github.com/simlock/simlock/contract"
)

// Reference, "Error codes": spec_unsupported answers "the requested spec
// is malformed"; its own failure example is the Android runtime
// "android-36", which is no system image id. The form is judged without
// reading anything, so it can be answered before the scope is admitted.
func TestConfSlotSpecFormRefusesAMalformedRuntime(t *testing.T) {
	cases := []struct {
		platform, runtime, os string
		ok                    bool
	}{
		{"android", "system-images;android-36;google_apis;arm64-v8a", "android-36", true},
		{"android", "system-images;android-35;google_apis_playstore;x86_64", "android-35", true},
		{"android", "android-36", "", false},
		{"android", "system-images;android-36", "", false},
		{"android", "system-images;android-;google_apis;arm64-v8a", "", false},
		{"android", "images;android-36;google_apis;arm64-v8a", "", false},
		{"android", "system-images;android-36;;arm64-v8a", "", false},
		{"ios", "com.apple.CoreSimulator.SimRuntime.iOS-18-0", "18.0", true},
		{"ios", "iOS 26.5", "26.5", true},
		{"ios", "iOS-27-0", "27.0", true},
		{"ios", "18.0", "18.0", true},
		{"ios", "ios-banana", "", false},
		{"ios", "com.apple.CoreSimulator.SimRuntime.iOS-banana", "", false},
		{"ios", "", "", false},
	}
	for _, c := range cases {
		os, ok := RuntimeOS(c.platform, c.runtime)
		if ok != c.ok || (ok && os != c.os) {
			t.Errorf("RuntimeOS(%s, %q) = %q, %v; want %q, %v", c.platform, c.runtime, os, ok, c.os, c.ok)
		}
		err := CheckSpecForm(c.platform, contract.SlotSpec{Runtime: c.runtime})
		if ce := contract.AsError(err); (err == nil) != c.ok || (err != nil && (ce == nil || ce.Code != contract.CodeSpecUnsupported || ce.Info().Retryable)) {
			t.Errorf("CheckSpecForm(%s, %q) = %v", c.platform, c.runtime, err)
		}
	}
}
