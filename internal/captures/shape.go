package captures

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
)

// Shape is what the simulated SDK must reproduce of a capture: not its
// values (device names and counts differ by machine) but its form.
type Shape struct {
	Kind string // "json", "columns", "refusal", "text"
	// Keys are JSON key paths ("devices.*.[].udid") or, for adb device
	// lists, the key:value fields in the order printed.
	Keys []string
	// Text is a refusal's normalised message, or a text listing's
	// section headers.
	Text     string
	ExitCode int
}

// ShapeOf reads the shape of entry i of rec.
func ShapeOf(rec *Recording, i int) Shape {
	e := rec.Manifest.Captures[i]
	out, errOut := rec.Out[i], rec.Err[i]
	switch {
	case e.Refusal:
		msg := errOut
		if len(bytes.TrimSpace(msg)) == 0 {
			msg = out // adb prints some refusals on stdout
		}
		return Shape{Kind: "refusal", Text: normalise(msg), ExitCode: e.ExitCode}
	case json.Valid(out) && len(bytes.TrimSpace(out)) > 0:
		var v any
		_ = json.Unmarshal(out, &v)
		set := map[string]bool{}
		keyPaths("", v, set)
		return Shape{Kind: "json", Keys: sorted(set), ExitCode: e.ExitCode}
	case e.Tool == "adb" && strings.HasPrefix(e.Probe, "devices"):
		return Shape{Kind: "columns", Keys: adbColumns(out), ExitCode: e.ExitCode}
	default:
		return Shape{Kind: "text", Text: headers(out), ExitCode: e.ExitCode}
	}
}

// keyPaths collects every key path of v. Map keys that are data rather
// than names (runtime identifiers keying simctl's device lists) collapse
// to "*", as do array indexes to "[]".
func keyPaths(prefix string, v any, into map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			name := k
			if looksLikeData(k) {
				name = "*"
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			into[p] = true
			keyPaths(p, child, into)
		}
	case []any:
		for _, child := range t {
			keyPaths(prefix+".[]", child, into)
		}
	}
}

var dataKeyRe = regexp.MustCompile(`^(com\.apple\.|iOS |watchOS |tvOS |visionOS |xrOS |\d|(?i)[0-9a-f]{8}-[0-9a-f]{4}-)`)

func looksLikeData(k string) bool { return dataKeyRe.MatchString(k) }

// adbColumns is the sequence of field names adb prints after the state on
// its device lines (product, model, device, transport_id, usb, features).
func adbColumns(out []byte) []string {
	var cols []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(line, "List of") || strings.HasPrefix(line, "*") {
			continue
		}
		for _, kv := range f[2:] {
			k, _, ok := strings.Cut(kv, ":")
			if ok && !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	return cols
}

// headers are the section lines of a text listing ("== Devices ==",
// "-- iOS 26.3 --" reduced to "--"), which say how it is laid out.
func headers(out []byte) string {
	var hs []string
	for _, line := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "== "):
			hs = append(hs, t)
		case strings.HasPrefix(t, "-- ") && (len(hs) == 0 || hs[len(hs)-1] != "--"):
			hs = append(hs, "--")
		}
	}
	return strings.Join(hs, "\n")
}

var (
	normUDID   = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	normPath   = regexp.MustCompile(`(/[^\s'"]+)+`)
	normSerial = regexp.MustCompile(`emulator-\d+`)
	normNum    = regexp.MustCompile(`\b\d+\b`)
)

// normalise reduces a refusal to its wording: device identifiers, paths and
// numbers become placeholders, whitespace is folded, and only the first
// line that says something is kept (later lines are usage text).
func normalise(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		t = normUDID.ReplaceAllString(t, "<udid>")
		t = normSerial.ReplaceAllString(t, "<serial>")
		t = normPath.ReplaceAllString(t, "<path>")
		t = normNum.ReplaceAllString(t, "<n>")
		return strings.Join(strings.Fields(t), " ")
	}
	return ""
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Difference is one way the simulator's shape departs from a capture's.
type Difference struct {
	Tool, Probe string
	What        string
}

// Compare sets the simulator's shape for one probe against a capture's
// and describes each difference: keys the capture has and the simulator
// lacks, keys the simulator invents, a refusal worded otherwise, columns in
// another order, a different exit code.
func Compare(tool, probe string, sim, real Shape) []Difference {
	var ds []Difference
	d := func(what string) { ds = append(ds, Difference{tool, probe, what}) }
	if sim.Kind != real.Kind {
		d("the simulator prints " + sim.Kind + ", the tool prints " + real.Kind)
		return ds
	}
	// A negative exit code is one the capture's source did not record.
	if real.ExitCode >= 0 && ((sim.ExitCode == 0) != (real.ExitCode == 0) || (real.ExitCode != 0 && sim.ExitCode != real.ExitCode)) {
		d("exit code: simulator " + itoa(sim.ExitCode) + ", tool " + itoa(real.ExitCode))
	}
	switch real.Kind {
	case "json":
		have := map[string]bool{}
		for _, k := range sim.Keys {
			have[k] = true
		}
		want := map[string]bool{}
		for _, k := range real.Keys {
			want[k] = true
			if !have[k] {
				d("key missing from the simulator: " + k)
			}
		}
		for _, k := range sim.Keys {
			if !want[k] {
				d("key the tool does not print: " + k)
			}
		}
	case "columns":
		if strings.Join(sim.Keys, " ") != strings.Join(real.Keys, " ") {
			d("device fields: simulator [" + strings.Join(sim.Keys, " ") + "], tool [" + strings.Join(real.Keys, " ") + "]")
		}
	case "refusal", "text":
		if sim.Text != real.Text {
			d("text: simulator " + quote(sim.Text) + ", tool " + quote(real.Text))
		}
	}
	return ds
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
