package slots

import (
	"strings"

	"github.com/simlock/simlock/contract"
)

// RuntimeOS is the OS version a slot spec's runtime names, and whether the
// runtime is well formed for platform: an Android system image
// "system-images;android-<API>;<tag>;<abi>" names API <API>; an iOS
// runtime "com.apple.CoreSimulator.SimRuntime.iOS-27-0", "iOS 27.0" or
// "27.0" names 27.0.
func RuntimeOS(platform, runtime string) (string, bool) {
	switch platform {
	case contract.SlotPlatformAndroid:
		parts := strings.Split(runtime, ";")
		if len(parts) != 4 || parts[0] != "system-images" {
			return runtime, false
		}
		api, ok := strings.CutPrefix(parts[1], "android-")
		if !ok || api == "" || parts[2] == "" || parts[3] == "" {
			return runtime, false
		}
		return parts[1], true
	case contract.SlotPlatformIOS:
		r := runtime
		if i := strings.LastIndex(r, "."); strings.HasPrefix(r, "com.apple.") && i >= 0 {
			r = r[i+1:]
		}
		v := r
		for _, p := range []string{"iOS-", "iOS ", "iOS"} {
			if rest, ok := strings.CutPrefix(r, p); ok {
				v = strings.ReplaceAll(rest, "-", ".")
				break
			}
		}
		return v, dotted(v)
	}
	return runtime, false
}

// dotted says v is a version of numbers joined by dots ("27", "27.0").
func dotted(v string) bool {
	if v == "" {
		return false
	}
	for _, part := range strings.Split(v, ".") {
		if part == "" || strings.Trim(part, "0123456789") != "" {
			return false
		}
	}
	return true
}

// CheckSpecForm refuses a requested spec whose runtime is malformed for
// its platform with SPEC_UNSUPPORTED. It reads nothing and changes
// nothing, so the daemon asks it before the scope is admitted: a
// malformed spec is answered at once, with no tool run and no device made.
func CheckSpecForm(platform string, spec contract.SlotSpec) error {
	if spec.Runtime == "" {
		return contract.Errorf(contract.CodeSpecUnsupported, "requestedSpec.runtime is required").
			WithNext(formHint(platform))
	}
	if _, ok := RuntimeOS(platform, spec.Runtime); !ok {
		return contract.Errorf(contract.CodeSpecUnsupported, "requestedSpec.runtime %q is not a well-formed %s runtime", spec.Runtime, platform).
			WithNext(formHint(platform)).WithDetails("runtime", spec.Runtime, "platform", platform)
	}
	return nil
}

func formHint(platform string) string {
	if platform == contract.SlotPlatformAndroid {
		return "name an installed system image as system-images;android-<API>;<tag>;<abi> (`simlock catalog`)"
	}
	return "name an installed iOS runtime, such as com.apple.CoreSimulator.SimRuntime.iOS-18-0 (`simlock catalog`)"
}
