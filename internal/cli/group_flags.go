package cli

import (
	"strings"

	"github.com/simlock/simlock/contract"
)

// groupRequest turns the --device-spec flags into a multi-device request
// (ADR 0043). The single-device flags describe one device, so naming any
// of them next to --device-spec is refused rather than silently dropped.
func (lf *leaseFlags) groupRequest(in contract.LeaseRequestIn) (contract.LeaseRequestIn, error) {
	for _, name := range []string{"platform", "model", "os", "device", "resources", "hardware"} {
		if f := lf.flags.Lookup(name); f != nil && f.Changed {
			return in, contract.Errorf(contract.CodeBadRequest, "--%s cannot be combined with --device-spec", name).
				WithNext("name each device's platform, model and os inside its --device-spec")
		}
	}
	in.Platform, in.Model, in.OSVersion = "", "", ""
	for _, s := range lf.deviceSpecs {
		m, err := parseDeviceSpec(s)
		if err != nil {
			return in, err
		}
		in.Devices = append(in.Devices, m)
	}
	return in, nil
}

// parseDeviceSpec reads one --device-spec: comma-separated key=value pairs
// with the keys platform (required), model and os.
func parseDeviceSpec(s string) (contract.DeviceSpec, error) {
	var m contract.DeviceSpec
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		if !ok || v == "" {
			return m, contract.Errorf(contract.CodeBadRequest, "--device-spec %q: %q is not key=value", s, part).
				WithNext(`write it as platform=ios,model="iPhone 16",os=18.0`)
		}
		switch k {
		case "platform":
			m.Platform = v
		case "model":
			m.Model = v
		case "os", "osVersion":
			m.OSVersion = v
		default:
			return m, contract.Errorf(contract.CodeBadRequest, "--device-spec %q: unknown key %q", s, k).
				WithNext("the keys are platform, model and os")
		}
	}
	if err := checkPlatform(m.Platform, false); err != nil {
		return m, err
	}
	return m, nil
}
