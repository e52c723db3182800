package captures

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Scrubber replaces what identifies a machine or a person with
// placeholders that keep each value's shape, so a scrubbed capture still
// parses: a UDID stays a UDID, a path stays a path.
//
// One Scrubber is used for a whole recording, so the same UDID becomes the
// same placeholder in every file and the captures stay consistent with each
// other (the device in `list -j` is the one in the refusal text).
type Scrubber struct {
	paths   []pathRule // longest first
	words   []*regexp.Regexp
	wordTo  []string
	udids   map[string]string
	serials map[string]string
}

type pathRule struct{ from, to string }

// Identity is what the Scrubber must remove. Empty fields are skipped.
type Identity struct {
	Home    string // the user's home directory
	Scratch string // the selftest's temporary root
	TempDir string // the OS temporary directory (on a Mac it names the user's folder)
	User    string
	Host    string
}

// NewScrubber builds a scrubber for id.
func NewScrubber(id Identity) *Scrubber {
	s := &Scrubber{udids: map[string]string{}, serials: map[string]string{}}
	add := func(from, to string) {
		from = strings.TrimRight(from, "/")
		if len(from) <= 1 {
			return
		}
		forms := []string{from}
		// macOS reports /var/... and /private/var/... for the same place.
		if strings.HasPrefix(from, "/var/") || strings.HasPrefix(from, "/tmp/") || from == "/tmp" {
			forms = append(forms, "/private"+from)
		}
		for _, f := range forms {
			s.paths = append(s.paths, pathRule{f, to},
				// simctl's JSON escapes every slash.
				pathRule{strings.ReplaceAll(f, "/", `\/`), strings.ReplaceAll(to, "/", `\/`)})
		}
	}
	add(id.Scratch, "/SCRATCH")
	add(id.TempDir, "/TMP")
	add(id.Home, "/HOME")
	sort.SliceStable(s.paths, func(i, j int) bool { return len(s.paths[i].from) > len(s.paths[j].from) })
	// Names are replaced as whole words only, and only when long enough
	// not to hit ordinary text ("ci" or "me" would).
	for _, w := range []struct{ v, to string }{{id.User, "USER"}, {id.Host, "HOST"}} {
		if len(w.v) < 3 {
			continue
		}
		s.words = append(s.words, regexp.MustCompile(`(?i)\b`+regexp.QuoteMeta(w.v)+`\b`))
		s.wordTo = append(s.wordTo, w.to)
	}
	return s
}

const udidPlaceholder = "00000000-0000-4000-8000-"

var (
	udidRe = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	macRe  = regexp.MustCompile(`(?i)\b[0-9a-f]{2}(:[0-9a-f]{2}){5}\b`)
	// adb device lines: a serial, whitespace, a state. Emulator serials
	// (emulator-NNNN) and host:port serials say nothing about the machine.
	adbLineRe = regexp.MustCompile(`(?m)^([^\s*]+)(\s+)(device|offline|unauthorized|recovery|sideload|bootloader|host|no permissions|authorizing|connecting)\b`)
	// getprop properties that carry a serial number.
	serialPropRe = regexp.MustCompile(`(?m)^\[(ro\.serialno|ro\.boot\.serialno|ro\.boot\.qemu\.uuid|persist\.sys\.device_name|net\.hostname)\]: \[([^\]]*)\]`)
)

// Scrub returns b with every identifying value replaced. adb's device
// lines are recognised only in adb's own output (tool "adb"): elsewhere
// "Invalid device: …" would read as a serial and a state.
func (s *Scrubber) Scrub(tool string, b []byte) []byte {
	t := string(b)
	for _, p := range s.paths {
		t = strings.ReplaceAll(t, p.from, p.to)
	}
	for i, re := range s.words {
		t = re.ReplaceAllString(t, s.wordTo[i])
	}
	t = udidRe.ReplaceAllStringFunc(t, s.udid)
	t = macRe.ReplaceAllString(t, "02:00:00:00:00:00")
	if tool == "adb" {
		t = adbLineRe.ReplaceAllStringFunc(t, func(line string) string {
			m := adbLineRe.FindStringSubmatch(line)
			return s.serial(m[1]) + m[2] + m[3]
		})
	}
	t = serialPropRe.ReplaceAllStringFunc(t, func(line string) string {
		m := serialPropRe.FindStringSubmatch(line)
		if m[2] == "" {
			return line
		}
		return "[" + m[1] + "]: [" + s.serial(m[2]) + "]"
	})
	return []byte(t)
}

// ScrubString is Scrub for a command line or a message.
func (s *Scrubber) ScrubString(v string) string { return string(s.Scrub("", []byte(v))) }

// udid maps a UDID to the next placeholder, in upper case as simctl
// prints them.
func (s *Scrubber) udid(v string) string {
	k := strings.ToUpper(v)
	if strings.HasPrefix(k, udidPlaceholder) {
		return k // already scrubbed
	}
	if p, ok := s.udids[k]; ok {
		return p
	}
	p := fmt.Sprintf(udidPlaceholder+"%012X", len(s.udids)+1)
	s.udids[k] = p
	return p
}

func (s *Scrubber) serial(v string) string {
	if strings.HasPrefix(v, "emulator-") || strings.Contains(v, ":") || strings.HasPrefix(v, "SERIAL") {
		return v
	}
	if p, ok := s.serials[v]; ok {
		return p
	}
	p := fmt.Sprintf("SERIAL%04d", len(s.serials)+1)
	s.serials[v] = p
	return p
}
