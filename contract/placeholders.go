package contract

import "strings"

// Placeholder is a name in a command's arguments that stands for one of the
// lease's values. simlock run replaces them in the command it starts, and
// device.exec (simlock exec, MCP device_exec, POST /v1/leases/{id}/exec) in
// the tool's arguments, both through ExpandPlaceholders.
type Placeholder struct {
	Name string
	// Platform is the platform whose devices have a value for it; empty
	// for every platform.
	Platform string
}

// Placeholders lists every lease placeholder.
var Placeholders = []Placeholder{
	{Name: "{udid}", Platform: "ios"},
	{Name: "{deviceSet}", Platform: "ios"},
	{Name: "{serial}", Platform: "android"},
	{Name: "{leaseId}"},
}

// PlaceholderValues are what the placeholders stand for.
type PlaceholderValues struct {
	// Platform is the lease's platform: a placeholder of another platform
	// is refused. Empty expands only the values given and leaves the other
	// placeholders for a later hop (a gateway names its own lease id and
	// the worker the device's).
	Platform  string
	LeaseID   string
	UDID      string
	DeviceSet string
	Serial    string
}

// LeaseValues are the values of l's placeholders: its id and its (first)
// device's identifiers.
func LeaseValues(l Lease) PlaceholderValues {
	v := PlaceholderValues{Platform: l.Platform, LeaseID: l.LeaseID}
	if d := l.Device; d != nil {
		v.UDID, v.DeviceSet, v.Serial = d.UDID, d.DeviceSet, d.Serial
		if v.Platform == "" {
			v.Platform = d.Platform
		}
	}
	return v
}

func (v PlaceholderValues) value(name string) string {
	switch name {
	case "{udid}":
		return v.UDID
	case "{deviceSet}":
		return v.DeviceSet
	case "{serial}":
		return v.Serial
	case "{leaseId}":
		return v.LeaseID
	}
	return ""
}

// CheckPlaceholders refuses a placeholder in args that a device of platform
// has no value for (BAD_REQUEST), before anything is leased or run.
func CheckPlaceholders(platform string, args []string) error {
	for _, arg := range args {
		for _, ph := range Placeholders {
			if ph.Platform != "" && ph.Platform != platform && strings.Contains(arg, ph.Name) {
				on := "a " + platform + " device"
				if platform == "" {
					on = "a lease that names no platform"
				}
				return Errorf(CodeBadRequest, "%s has no value on %s (it is a %s placeholder)", ph.Name, on, ph.Platform).
					WithDetails("placeholder", ph.Name, "platform", platform).
					WithNext("use {udid} and {deviceSet} with an iOS lease, {serial} with an Android one; {leaseId} with any")
			}
		}
	}
	return nil
}

// ExpandPlaceholders replaces every placeholder in args by its value. With
// v.Platform set, a placeholder of another platform is BAD_REQUEST; with it
// empty, only the values v holds are replaced.
func ExpandPlaceholders(args []string, v PlaceholderValues) ([]string, error) {
	if v.Platform != "" {
		if err := CheckPlaceholders(v.Platform, args); err != nil {
			return nil, err
		}
	}
	var pairs []string
	for _, ph := range Placeholders {
		val := v.value(ph.Name)
		if v.Platform == "" && val == "" {
			continue
		}
		pairs = append(pairs, ph.Name, val)
	}
	r := strings.NewReplacer(pairs...)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.Replace(a)
	}
	return out, nil
}
