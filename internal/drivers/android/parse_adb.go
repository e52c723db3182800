package android

import (
	"errors"
	"strings"
)

// adbDevice is one row of `adb devices [-l]`.
type adbDevice struct {
	Serial string
	// State is adb's connection state: device, offline, unauthorized, host,
	// "no permissions", recovery, sideload, bootloader, ...
	State string
	// Props holds the key:value words -l adds (usb, product, model, device,
	// features, transport_id); nil without -l.
	Props map[string]string
}

// errNoDeviceList means the output never reached adb's "List of devices
// attached" header, so it is an error text rather than an empty list.
var errNoDeviceList = errors.New("adb devices: no device list in output")

const adbListHeader = "List of devices attached"

// parseADBDevices decodes `adb devices [-l]`. Anything before the header is
// noise (the "* daemon not running; starting now" lines, a pasted shell
// transcript); older adb printed the header with a trailing space. Serial
// and state are TAB-separated, but captures pasted through a browser show
// runs of spaces, so any whitespace separates them.
func parseADBDevices(out []byte) ([]adbDevice, error) {
	var devs []adbDevice
	inList := false
	for _, l := range lines(out) {
		if !inList {
			if strings.TrimSpace(l) == adbListHeader {
				inList = true
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) < 2 || strings.HasPrefix(f[0], "*") || strings.TrimSpace(l) == adbListHeader {
			continue
		}
		d := adbDevice{Serial: f[0], State: f[1]}
		rest := f[2:]
		if d.State == "no" && len(rest) > 0 && rest[0] == "permissions" {
			// "no permissions (reason); see [url]": the reason is prose,
			// not key:value words.
			d.State = "no permissions"
			rest = nil
		}
		for _, w := range rest {
			k, v, ok := strings.Cut(w, ":")
			if !ok || k == "" {
				continue
			}
			if d.Props == nil {
				d.Props = map[string]string{}
			}
			d.Props[k] = v
		}
		devs = append(devs, d)
	}
	if !inList {
		return nil, errNoDeviceList
	}
	return devs, nil
}

// parseGetprop decodes a full `adb shell getprop` dump: "[key]: [value]"
// lines, where a value may span several lines (the closing bracket ends it)
// and may be empty ("[]").
func parseGetprop(out []byte) map[string]string {
	props := map[string]string{}
	var key string
	var val []string
	open := false
	for _, l := range lines(out) {
		if open {
			if v, ok := strings.CutSuffix(l, "]"); ok {
				val = append(val, v)
				props[key] = strings.Join(val, "\n")
				open = false
			} else {
				val = append(val, l)
			}
			continue
		}
		if !strings.HasPrefix(l, "[") {
			continue
		}
		k, rest, ok := strings.Cut(l[1:], "]: [")
		if !ok || k == "" {
			continue
		}
		if v, ok := strings.CutSuffix(rest, "]"); ok {
			props[k] = v
			continue
		}
		key, val, open = k, []string{rest}, true
	}
	// A value still open at the end was cut off; keep what arrived rather
	// than dropping the key.
	if open {
		props[key] = strings.Join(val, "\n")
	}
	return props
}

// adbVersion is what `adb version` reports.
type adbVersion struct {
	Protocol string // "1.0.41"
	Version  string // platform-tools version, "36.0.0-13206524"
	// Simulated is set when the simulated SDK answered: it says so in its
	// version text, and devices it serves are reported as simulated.
	Simulated bool
}

func parseADBVersion(out []byte) adbVersion {
	var v adbVersion
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		if p, ok := strings.CutPrefix(t, "Android Debug Bridge version "); ok {
			v.Protocol = strings.TrimSpace(p)
		} else if p, ok := strings.CutPrefix(t, "Version "); ok {
			v.Version = strings.TrimSpace(p)
		}
		if strings.Contains(strings.ToLower(t), "simulated") {
			v.Simulated = true
		}
	}
	return v
}

// consoleReply is the answer of an emulator console command, as `adb emu`
// relays it: payload lines, then "OK" or "KO: reason", all CR LF terminated.
type consoleReply struct {
	Lines []string
	OK    bool
	// Err is the text after "KO:" when the console refused.
	Err string
}

func parseConsoleReply(out []byte) consoleReply {
	var r consoleReply
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		switch {
		case t == "OK" || strings.HasPrefix(t, "OK:"):
			r.OK = true
			return r
		case t == "KO" || strings.HasPrefix(t, "KO:"):
			r.Err = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(t, "KO"), ":"))
			if r.Err == "" {
				r.Err = "console refused the command"
			}
			return r
		case t == "":
		default:
			r.Lines = append(r.Lines, t)
		}
	}
	return r
}
