package simsdk

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// simctlList runs: simctl list [-j|--json] [-e|--no-escape-slashes] [-v]
// [devices|devicetypes|runtimes|pairs] [<search term>|available].
func (s *sdk) simctlList(ds deviceSet, args []string) error {
	asJSON, escape := false, true
	var what, term string
	for _, a := range args {
		switch a {
		case "-j", "--json":
			asJSON = true
		case "-e", "--no-escape-slashes":
			escape = false
		case "-v", "--verbose":
		case "devices", "devicetypes", "runtimes", "pairs":
			if what == "" {
				what = a
			} else if term == "" {
				term = a
			}
		default:
			if strings.HasPrefix(a, "-") {
				return usageErr("list [-j | --json] [-v] [devices|devicetypes|runtimes|pairs] [<search term>|available]")
			}
			if term != "" {
				return usageErr("list [-j | --json] [-v] [devices|devicetypes|runtimes|pairs] [<search term>|available]")
			}
			term = a
		}
	}
	v, err := s.snapshot(ds)
	if err != nil {
		return err
	}
	v.filter(term)
	sections := []string{"devicetypes", "runtimes", "devices", "pairs"}
	if what != "" {
		sections = []string{what}
	}
	if asJSON {
		var obj jsonObject
		for _, sec := range sections {
			obj = append(obj, jsonField{sec, v.json(sec)})
		}
		_, err := io.WriteString(s.stdout, renderAppleJSON(obj, escape))
		return err
	}
	var b strings.Builder
	for _, sec := range sections {
		v.text(&b, sec)
	}
	_, err = io.WriteString(s.stdout, b.String())
	return err
}

// listView is what one list invocation prints: a consistent snapshot of
// the catalog and the set, with states derived once.
type listView struct {
	ds       deviceSet
	types    []deviceType
	runtimes []simRuntime // what the runtimes section prints
	// installed groups the devices; a search term does not narrow it.
	installed []simRuntime
	devices   []listedDevice
	filtered  bool
}

type listedDevice struct {
	*iosDevice
	state     string
	available bool
	logSize   int64
}

func (s *sdk) snapshot(ds deviceSet) (*listView, error) {
	rts, err := s.installedRuntimes()
	if err != nil {
		return nil, err
	}
	devs, err := ds.loadAll()
	if err != nil {
		return nil, err
	}
	now := s.now()
	v := &listView{ds: ds, types: iosDeviceTypes, runtimes: rts, installed: rts}
	for _, d := range devs {
		_, ok := runtimeByID(rts, d.Runtime)
		v.devices = append(v.devices, listedDevice{
			iosDevice: d,
			state:     ds.state(d, now),
			available: ok,
			logSize:   dirSize(ds.logPath(d.UDID)),
		})
	}
	return v, nil
}

// filter keeps what matches a search term: "available" keeps available
// devices; anything else is a case-insensitive match on names,
// identifiers, UDIDs and states (so "booted" lists booted devices).
func (v *listView) filter(term string) {
	if term == "" {
		return
	}
	v.filtered = true
	if term == "available" {
		v.devices = slices.DeleteFunc(v.devices, func(d listedDevice) bool { return !d.available })
		return
	}
	t := strings.ToLower(term)
	has := func(ss ...string) bool {
		for _, s := range ss {
			if strings.Contains(strings.ToLower(s), t) {
				return true
			}
		}
		return false
	}
	v.devices = slices.DeleteFunc(v.devices, func(d listedDevice) bool { return !has(d.Name, d.UDID, d.state) })
	v.types = slices.DeleteFunc(slices.Clone(v.types), func(d deviceType) bool { return !has(d.Name, d.Identifier) })
	v.runtimes = slices.DeleteFunc(slices.Clone(v.runtimes), func(r simRuntime) bool { return !has(r.Name, r.Identifier) })
}

// deviceGroup is the devices of one runtime key.
type deviceGroup struct {
	runtimeID string
	runtime   *simRuntime // nil when the runtime is not installed
	devices   []listedDevice
}

// groups orders the devices by runtime: installed runtimes in catalog
// order (present even when empty, as simctl prints them), then runtimes
// that are not installed, whose devices are unavailable.
func (v *listView) groups() []deviceGroup {
	var out []deviceGroup
	for i := range v.installed {
		out = append(out, deviceGroup{runtimeID: v.installed[i].Identifier, runtime: &v.installed[i]})
	}
	for _, d := range v.devices {
		i := slices.IndexFunc(out, func(g deviceGroup) bool { return g.runtimeID == d.Runtime })
		if i < 0 {
			out = append(out, deviceGroup{runtimeID: d.Runtime})
			i = len(out) - 1
		}
		out[i].devices = append(out[i].devices, d)
	}
	// Installed runtimes come first in catalog order; the rest sort by id.
	tail := out[len(v.installed):]
	slices.SortFunc(tail, func(a, b deviceGroup) int { return strings.Compare(a.runtimeID, b.runtimeID) })
	return out
}

func (v *listView) json(section string) any {
	switch section {
	case "devicetypes":
		out := []any{}
		for _, t := range v.types {
			out = append(out, jsonObject{
				{"productFamily", t.ProductFamily},
				{"bundlePath", t.bundlePath()},
				{"maxRuntimeVersion", t.maxVersion()},
				{"maxRuntimeVersionString", t.Max},
				{"identifier", t.Identifier},
				{"modelIdentifier", t.ModelIdentifier},
				{"minRuntimeVersionString", t.Min},
				{"minRuntimeVersion", t.minVersion()},
				{"name", t.Name},
			})
		}
		return out
	case "runtimes":
		out := []any{}
		for _, r := range v.runtimes {
			types := []any{}
			for _, t := range r.supportedDeviceTypes() {
				types = append(types, jsonObject{
					{"bundlePath", t.bundlePath()},
					{"name", t.Name},
					{"identifier", t.Identifier},
					{"productFamily", t.ProductFamily},
				})
			}
			out = append(out, jsonObject{
				{"bundlePath", r.bundlePath()},
				{"buildversion", r.Build},
				{"platform", r.Platform},
				{"runtimeRoot", r.runtimeRoot()},
				{"identifier", r.Identifier},
				{"version", r.Version},
				{"isInternal", false},
				{"isAvailable", true},
				{"name", r.Name},
				{"supportedDeviceTypes", types},
			})
		}
		return out
	case "devices":
		obj := jsonObject{}
		for _, g := range v.groups() {
			if g.runtime == nil && len(g.devices) == 0 {
				continue
			}
			devs := []any{}
			for _, d := range g.devices {
				devs = append(devs, v.deviceJSON(d))
			}
			obj = append(obj, jsonField{g.runtimeID, devs})
		}
		return obj
	case "pairs":
		return jsonObject{}
	}
	return nil
}

// deviceJSON follows the key order of the Xcode 14+ captures, which
// depends on which optional keys are present.
func (v *listView) deviceJSON(d listedDevice) jsonObject {
	var o jsonObject
	if d.LastBootedAt != nil {
		o = append(o, jsonField{"lastBootedAt", d.LastBootedAt.UTC().Format(time.RFC3339)})
	} else if !d.available {
		o = append(o, jsonField{"availabilityError", unavailableNote})
	}
	o = append(o,
		jsonField{"dataPath", v.ds.dataPath(d.UDID)},
		jsonField{"dataPathSize", d.DataPathSize},
		jsonField{"logPath", v.ds.logPath(d.UDID)},
		jsonField{"udid", d.UDID},
		jsonField{"isAvailable", d.available},
	)
	if d.LastBootedAt != nil && !d.available {
		o = append(o, jsonField{"availabilityError", unavailableNote})
	}
	if d.logSize > 0 {
		o = append(o, jsonField{"logPathSize", d.logSize})
	}
	return append(o,
		jsonField{"deviceTypeIdentifier", d.DeviceType},
		jsonField{"state", d.state},
		jsonField{"name", d.Name},
	)
}

func (v *listView) text(b *strings.Builder, section string) {
	switch section {
	case "devicetypes":
		b.WriteString("== Device Types ==\n")
		for _, t := range v.types {
			fmt.Fprintf(b, "%s (%s)\n", t.Name, t.Identifier)
		}
	case "runtimes":
		b.WriteString("== Runtimes ==\n")
		for _, r := range v.runtimes {
			b.WriteString(r.describe())
			b.WriteByte('\n')
		}
	case "devices":
		b.WriteString("== Devices ==\n")
		for _, g := range v.groups() {
			if len(g.devices) == 0 && (g.runtime == nil || v.filtered) {
				continue
			}
			if g.runtime != nil {
				fmt.Fprintf(b, "-- %s --\n", g.runtime.Name)
			} else {
				fmt.Fprintf(b, "-- Unavailable: %s --\n", g.runtimeID)
			}
			for _, d := range g.devices {
				// Xcode 10+ ends the line with a space; the unavailability
				// reason, when there is one, follows it.
				fmt.Fprintf(b, "    %s (%s) (%s) ", d.Name, d.UDID, d.state)
				if !d.available {
					fmt.Fprintf(b, "(unavailable, %s)", unavailableNote)
				}
				b.WriteByte('\n')
			}
		}
	case "pairs":
		b.WriteString("== Device Pairs ==\n")
	}
}
