package ios

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// This file turns simctl's output into values. Every format it accepts is
// one captured from a real Xcode (see testdata/PROVENANCE.md); the shapes
// drift between Xcode 6 and 26, so fields are optional unless every version
// prints them.

// DeviceState is a simulator state as simctl spells it.
type DeviceState string

const (
	StateShutdown     DeviceState = "Shutdown"
	StateBooted       DeviceState = "Booted"
	StateBooting      DeviceState = "Booting"
	StateShuttingDown DeviceState = "Shutting Down" // with a space
	StateCreating     DeviceState = "Creating"
)

// DeviceType is one entry of `simctl list devicetypes`.
type DeviceType struct {
	Name            string
	Identifier      string
	ProductFamily   string // "iPhone", "iPad", ...; empty before Xcode 11
	ModelIdentifier string // "iPhone17,3"; Xcode 14+
	// MinRuntime and MaxRuntime bound the runtimes the type can run. Zero
	// means the listing did not say (Xcode 10 and older); a MaxRuntime with
	// major 65535 means no upper bound.
	MinRuntime Version
	MaxRuntime Version
}

// HasMax reports whether the type declares an upper runtime bound.
func (t DeviceType) HasMax() bool {
	return !t.MaxRuntime.IsZero() && t.MaxRuntime.Major < unboundedMajor
}

// Admits reports whether a runtime of version v lies in the type's range.
func (t DeviceType) Admits(v Version) bool {
	if v.Compare(t.MinRuntime) < 0 {
		return false
	}
	return !t.HasMax() || v.Compare(t.MaxRuntime) <= 0
}

// Runtime is one entry of `simctl list runtimes`.
type Runtime struct {
	Name              string // "iOS 17.0"
	Version           string // "17.0.1": may be newer than the name says
	Build             string
	Identifier        string
	Platform          string // "iOS", "tvOS", "watchOS", "xrOS"
	Available         bool
	AvailabilityError string
	BundlePath        string
	RuntimeRoot       string
	// SupportedDeviceTypes lists device type identifiers the runtime runs.
	// It is only meaningful when SupportedKnown is set (Xcode 13+).
	SupportedDeviceTypes []string
	SupportedKnown       bool
}

// Supports reports whether the runtime can run a device type; a listing
// without supportedDeviceTypes defers to the type's version range.
func (r Runtime) Supports(typeID string) bool {
	if !r.SupportedKnown {
		return true
	}
	for _, id := range r.SupportedDeviceTypes {
		if id == typeID {
			return true
		}
	}
	return false
}

// Device is one simulator in a device set.
type Device struct {
	Name  string
	UDID  string
	State DeviceState
	// RuntimeKey is the key the device was listed under: a runtime
	// identifier (Xcode 10.1+), a runtime name like "iOS 11.2" (older JSON
	// and text headers), or empty for a bare device line.
	RuntimeKey           string
	Available            bool
	AvailabilityError    string
	DeviceTypeIdentifier string // Xcode 11+
	DataPath             string
	LogPath              string
	LastBootedAt         string // Xcode 14+, only once booted
}

// PairMember is the watch or phone side of a pair.
type PairMember struct {
	Name  string
	UDID  string
	State DeviceState
}

// Pair is a watch/phone pairing.
type Pair struct {
	ID    string
	State string // "(active, disconnected)", "(unavailable)", "disconnected"
	Watch PairMember
	Phone PairMember
}

// List is a parsed `simctl list`, in either format. Sections the output did
// not contain stay empty.
type List struct {
	DeviceTypes []DeviceType
	Runtimes    []Runtime
	Devices     []Device
	Pairs       []Pair
	// Unparsed holds text lines no rule recognised (stderr noise such as
	// CoreSimulatorService restart messages), for diagnostics.
	Unparsed []string
}

// Device returns the device with udid.
func (l *List) Device(udid string) (Device, bool) {
	for _, d := range l.Devices {
		if strings.EqualFold(d.UDID, udid) {
			return d, true
		}
	}
	return Device{}, false
}

// ---- JSON ----

type jsonList struct {
	DeviceTypes []jsonDeviceType `json:"devicetypes"`
	Runtimes    []jsonRuntime    `json:"runtimes"`
	Devices     json.RawMessage  `json:"devices"`
	Pairs       json.RawMessage  `json:"pairs"`
}

type jsonDeviceType struct {
	Name            string      `json:"name"`
	Identifier      string      `json:"identifier"`
	ProductFamily   string      `json:"productFamily"`
	ModelIdentifier string      `json:"modelIdentifier"`
	MinPacked       json.Number `json:"minRuntimeVersion"`
	MaxPacked       json.Number `json:"maxRuntimeVersion"`
	MinString       string      `json:"minRuntimeVersionString"`
	MaxString       string      `json:"maxRuntimeVersionString"`
}

type jsonRuntime struct {
	Name                 string      `json:"name"`
	Version              string      `json:"version"`
	Build                string      `json:"buildversion"`
	Identifier           string      `json:"identifier"`
	Platform             string      `json:"platform"`
	Availability         *string     `json:"availability"`
	IsAvailable          *flexBool   `json:"isAvailable"`
	AvailabilityError    string      `json:"availabilityError"`
	BundlePath           string      `json:"bundlePath"`
	RuntimeRoot          string      `json:"runtimeRoot"`
	SupportedDeviceTypes *[]jsonType `json:"supportedDeviceTypes"`
}

type jsonType struct {
	Identifier string `json:"identifier"`
}

type jsonDevice struct {
	Name                 string    `json:"name"`
	UDID                 string    `json:"udid"`
	State                string    `json:"state"`
	Availability         *string   `json:"availability"`
	IsAvailable          *flexBool `json:"isAvailable"`
	AvailabilityError    string    `json:"availabilityError"`
	DeviceTypeIdentifier string    `json:"deviceTypeIdentifier"`
	DataPath             string    `json:"dataPath"`
	LogPath              string    `json:"logPath"`
	LastBootedAt         string    `json:"lastBootedAt"`
}

type jsonPair struct {
	State string     `json:"state"`
	Watch PairMember `json:"watch"`
	Phone PairMember `json:"phone"`
}

// flexBool accepts JSON booleans and the "YES"/"NO" strings some Xcode 10
// builds printed for isAvailable.
type flexBool bool

func (b *flexBool) UnmarshalJSON(p []byte) error {
	switch strings.ToLower(strings.Trim(string(p), `"`)) {
	case "true", "yes", "1":
		*b = true
	case "false", "no", "0", "null":
		*b = false
	default:
		return fmt.Errorf("not a boolean: %s", p)
	}
	return nil
}

// ParseListJSON parses `simctl list -j` and its sub-listings (`list devices
// -j`, `list runtimes -j`, ...). Leading non-JSON lines (stderr merged into
// stdout) are skipped.
func ParseListJSON(out []byte) (*List, error) {
	start := jsonStart(out)
	if start < 0 {
		return nil, errors.New("simctl list: no JSON object in output")
	}
	var raw jsonList
	// A decoder, not Unmarshal: whatever follows the object is not ours.
	if err := json.NewDecoder(bytes.NewReader(out[start:])).Decode(&raw); err != nil {
		return nil, fmt.Errorf("simctl list: %w", err)
	}
	l := &List{}
	for _, t := range raw.DeviceTypes {
		l.DeviceTypes = append(l.DeviceTypes, t.convert())
	}
	for _, r := range raw.Runtimes {
		l.Runtimes = append(l.Runtimes, r.convert())
	}
	if len(raw.Devices) > 0 && string(raw.Devices) != "null" {
		groups, err := orderedObject[[]jsonDevice](raw.Devices)
		if err != nil {
			return nil, fmt.Errorf("simctl list: devices: %w", err)
		}
		for _, g := range groups {
			for _, d := range g.val {
				l.Devices = append(l.Devices, d.convert(g.key))
			}
		}
	}
	if len(raw.Pairs) > 0 && string(raw.Pairs) != "null" {
		pairs, err := orderedObject[jsonPair](raw.Pairs)
		if err != nil {
			return nil, fmt.Errorf("simctl list: pairs: %w", err)
		}
		for _, p := range pairs {
			l.Pairs = append(l.Pairs, Pair{ID: p.key, State: p.val.State, Watch: p.val.Watch, Phone: p.val.Phone})
		}
	}
	return l, nil
}

func (t jsonDeviceType) convert() DeviceType {
	dt := DeviceType{Name: t.Name, Identifier: t.Identifier, ProductFamily: t.ProductFamily, ModelIdentifier: t.ModelIdentifier}
	// Xcode 14+ prints both forms; the string is the one meant for humans
	// and the one that cannot be misread, so it wins.
	dt.MinRuntime = rangeBound(t.MinString, t.MinPacked)
	dt.MaxRuntime = rangeBound(t.MaxString, t.MaxPacked)
	return dt
}

func rangeBound(s string, packed json.Number) Version {
	if s != "" {
		if v, err := ParseVersion(s); err == nil {
			return v
		}
	}
	if packed != "" {
		if u, err := strconv.ParseUint(packed.String(), 10, 64); err == nil {
			return versionFromPacked(u)
		}
	}
	return Version{}
}

func (r jsonRuntime) convert() Runtime {
	rt := Runtime{
		Name: r.Name, Version: r.Version, Build: r.Build, Identifier: r.Identifier,
		Platform: r.Platform, BundlePath: r.BundlePath, RuntimeRoot: r.RuntimeRoot,
	}
	rt.Available, rt.AvailabilityError = availability(r.IsAvailable, r.Availability, r.AvailabilityError)
	if rt.Platform == "" {
		rt.Platform = runtimePlatform(r.Identifier, r.Name)
	}
	if r.SupportedDeviceTypes != nil {
		rt.SupportedKnown = true
		rt.SupportedDeviceTypes = make([]string, 0, len(*r.SupportedDeviceTypes))
		for _, t := range *r.SupportedDeviceTypes {
			rt.SupportedDeviceTypes = append(rt.SupportedDeviceTypes, t.Identifier)
		}
	}
	return rt
}

func (d jsonDevice) convert(key string) Device {
	dev := Device{
		Name: d.Name, UDID: d.UDID, State: DeviceState(d.State), RuntimeKey: key,
		DeviceTypeIdentifier: d.DeviceTypeIdentifier, DataPath: d.DataPath, LogPath: d.LogPath,
		LastBootedAt: d.LastBootedAt,
	}
	dev.Available, dev.AvailabilityError = availability(d.IsAvailable, d.Availability, d.AvailabilityError)
	return dev
}

// availability reconciles the three generations of availability fields:
// "availability" alone (Xcode ≤ 10.0), all three (10.1–10.2), isAvailable
// plus an optional availabilityError (11+).
func availability(is *flexBool, text *string, errText string) (bool, string) {
	ok := true
	switch {
	case is != nil:
		ok = bool(*is)
	case text != nil:
		ok = !strings.Contains(*text, "unavailable")
	}
	if errText == "" && text != nil {
		errText = unavailableReason(*text)
	}
	return ok, errText
}

// unavailableReason extracts "reason" from "(unavailable, reason)".
func unavailableReason(s string) string {
	i := strings.Index(s, "(unavailable, ")
	if i < 0 {
		return ""
	}
	rest := s[i+len("(unavailable, "):]
	if j := strings.LastIndexByte(rest, ')'); j >= 0 {
		// Xcode 11 prints the suffix twice; keep the first copy.
		if k := strings.Index(rest, ") (unavailable, "); k >= 0 {
			j = k
		}
		rest = rest[:j]
	}
	return strings.TrimSpace(rest)
}

// runtimePlatform derives the platform from "com.apple.CoreSimulator.
// SimRuntime.iOS-17-0", falling back to the name's first word.
func runtimePlatform(id, name string) string {
	const prefix = "com.apple.CoreSimulator.SimRuntime."
	if rest, ok := strings.CutPrefix(id, prefix); ok {
		if i := strings.IndexByte(rest, '-'); i > 0 {
			return rest[:i]
		}
	}
	if f := strings.Fields(name); len(f) > 0 {
		return f[0]
	}
	return ""
}

// jsonStart finds the first line that opens a JSON object, skipping log lines
// a merged stderr put in front of it.
func jsonStart(out []byte) int {
	off := 0
	for off < len(out) {
		end := bytes.IndexByte(out[off:], '\n')
		line := out[off:]
		if end >= 0 {
			line = out[off : off+end]
		}
		if t := bytes.TrimLeft(line, " \t\r\ufeff"); len(t) > 0 && t[0] == '{' {
			return off + (len(line) - len(t))
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return -1
}

type keyed[T any] struct {
	key string
	val T
}

// orderedObject decodes a JSON object keeping simctl's key order, which a Go
// map would lose (the order is runtime order, useful when reading output).
func orderedObject[T any](raw json.RawMessage) ([]keyed[T], error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected object, got %v", tok)
	}
	var out []keyed[T]
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("expected key, got %v", tok)
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, keyed[T]{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// ---- text ----

const udidPattern = `[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`

var (
	sectionRe = regexp.MustCompile(`^== (.+) ==$`)
	groupRe   = regexp.MustCompile(`^-- (.+) --$`)
	// "    iPad Pro (9.7-inch) (C036...) (Shutdown) (unavailable, reason)"
	deviceLineRe = regexp.MustCompile(`^(.+?) \((` + udidPattern + `)\) \(([A-Za-z][A-Za-z ]*)\)(.*)$`)
	// "iOS 10.3 (10.3.1 - 14E8301) (com.apple...)" up to Xcode 8,
	// "iOS 10.3 (10.3.1 - 14E8301) - com.apple..." from Xcode 9.
	runtimeLineRe = regexp.MustCompile(`^(.+?) \(([^()]*) - ([^()]*)\)(?: - (\S+)| \(([^()\s]+)\))(.*)$`)
	typeLineRe    = regexp.MustCompile(`^(.+) \(([^()\s]+)\)$`)
	pairHeadRe    = regexp.MustCompile(`^(` + udidPattern + `) \(([^()]*)\)$`)
	pairMemberRe  = regexp.MustCompile(`^(Watch|Phone): (.+)$`)
	// CoreSimulator log lines that reach stdout when stderr is merged:
	// "2016-08-10 14:10:25.865 simctl[48890:1712880] CoreSimulator is ..."
	logNoiseRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)? \S+\[\d+(:[0-9a-fA-F]+)?\] `)
)

// ParseListText parses the human form of `simctl list` (and of `list
// devices`, `list runtimes`, `list devicetypes`, `list pairs`) as printed by
// Xcode 6 through 26. Lines outside any "== Section ==" header are still
// recognised by shape, so a grep'd device line or a headerless runtime
// listing parses too.
func ParseListText(out string) *List {
	l := &List{}
	section := ""
	group := "" // current "-- iOS 17.0 --" header in Devices
	var pair *Pair
	flushPair := func() {
		if pair != nil {
			l.Pairs = append(l.Pairs, *pair)
			pair = nil
		}
	}
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if m := sectionRe.FindStringSubmatch(trimmed); m != nil {
			flushPair()
			section, group = m[1], ""
			continue
		}
		switch section {
		case "Device Types":
			if m := typeLineRe.FindStringSubmatch(trimmed); m != nil {
				l.DeviceTypes = append(l.DeviceTypes, DeviceType{Name: m[1], Identifier: m[2]})
				continue
			}
		case "Runtimes":
			if rt, ok := parseRuntimeLine(trimmed); ok {
				l.Runtimes = append(l.Runtimes, rt)
				continue
			}
		case "Devices":
			if m := groupRe.FindStringSubmatch(trimmed); m != nil {
				group = m[1]
				if id, ok := strings.CutPrefix(group, "Unavailable: "); ok {
					group = id
				}
				continue
			}
			if d, ok := parseDeviceLine(trimmed); ok {
				d.RuntimeKey = group
				l.Devices = append(l.Devices, d)
				continue
			}
		case "Device Pairs":
			if m := pairHeadRe.FindStringSubmatch(trimmed); m != nil {
				flushPair()
				pair = &Pair{ID: m[1], State: m[2]}
				continue
			}
			if m := pairMemberRe.FindStringSubmatch(trimmed); m != nil && pair != nil {
				if d, ok := parseDeviceLine(m[2]); ok {
					mem := PairMember{Name: d.Name, UDID: d.UDID, State: d.State}
					if m[1] == "Watch" {
						pair.Watch = mem
					} else {
						pair.Phone = mem
					}
					continue
				}
			}
		default:
			// No header yet: accept what is unambiguous by shape.
			if rt, ok := parseRuntimeLine(trimmed); ok && !logNoiseRe.MatchString(trimmed) {
				l.Runtimes = append(l.Runtimes, rt)
				continue
			}
			if d, ok := parseDeviceLine(trimmed); ok && !logNoiseRe.MatchString(trimmed) {
				l.Devices = append(l.Devices, d)
				continue
			}
		}
		l.Unparsed = append(l.Unparsed, trimmed)
	}
	flushPair()
	return l
}

// ParseRuntimesText parses `simctl list runtimes`, with or without its
// "== Runtimes ==" header.
func ParseRuntimesText(out string) []Runtime {
	return ParseListText(out).Runtimes
}

func parseDeviceLine(s string) (Device, bool) {
	m := deviceLineRe.FindStringSubmatch(s)
	if m == nil {
		return Device{}, false
	}
	d := Device{Name: m[1], UDID: m[2], State: DeviceState(m[3]), Available: true}
	if rest := strings.TrimSpace(m[4]); rest != "" {
		if !strings.HasPrefix(rest, "(unavailable") {
			return Device{}, false
		}
		d.Available = false
		d.AvailabilityError = unavailableReason(rest)
	}
	return d, true
}

func parseRuntimeLine(s string) (Runtime, bool) {
	m := runtimeLineRe.FindStringSubmatch(s)
	if m == nil {
		return Runtime{}, false
	}
	id := m[4]
	if id == "" {
		id = m[5]
	}
	rt := Runtime{Name: m[1], Version: m[2], Build: m[3], Identifier: id, Available: true}
	if rest := strings.TrimSpace(m[6]); rest != "" {
		if !strings.HasPrefix(rest, "(unavailable") {
			return Runtime{}, false
		}
		rt.Available = false
		rt.AvailabilityError = unavailableReason(rest)
	}
	rt.Platform = runtimePlatform(rt.Identifier, rt.Name)
	return rt, true
}

// ---- errors ----

// SimError is the error simctl prints on stderr:
//
//	An error was encountered processing the command (domain=D, code=N):
//	<reason lines>
//	Underlying error (domain=D2, code=M):
//		<detail>
//
// Codes for one condition changed across Xcode versions (159/163/164/165 →
// 405), so callers match on the reason text, not the code.
type SimError struct {
	Domain     string // empty in Xcode 6 era output: "(code=146)"
	Code       int
	Reason     string
	Underlying *SimError
	// Preamble holds lines printed before the header, e.g. a wrapper's
	// "Device boot failed". When simctl printed its reason there (create
	// does), Reason repeats it.
	Preamble []string
}

func (e *SimError) Error() string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(e.Reason, "\n", " "))
	if e.Domain != "" {
		fmt.Fprintf(&b, " (domain=%s, code=%d)", e.Domain, e.Code)
	} else {
		fmt.Fprintf(&b, " (code=%d)", e.Code)
	}
	if e.Underlying != nil {
		b.WriteString(": ")
		b.WriteString(e.Underlying.Error())
	}
	return strings.TrimSpace(b.String())
}

// CurrentState extracts X from a reason "Unable to <verb> in current state: X".
func (e *SimError) CurrentState() (DeviceState, bool) {
	const marker = "in current state: "
	for _, line := range strings.Split(e.Reason, "\n") {
		if i := strings.Index(line, marker); i >= 0 {
			return DeviceState(strings.TrimSpace(line[i+len(marker):])), true
		}
	}
	return "", false
}

var (
	errHeadRe  = regexp.MustCompile(`An error was encountered processing the command \((?:domain=([^,()]*), )?code=(-?\d{1,9})\):`)
	underlayRe = regexp.MustCompile(`^Underlying error \((?:domain=([^,()]*), )?code=(-?\d{1,9})\):(.*)$`)
)

// ParseError finds a simctl error in stderr text; ok is false when there is
// none.
func ParseError(stderr string) (*SimError, bool) {
	lines := strings.Split(stderr, "\n")
	head := -1
	var top *SimError
	for i, l := range lines {
		if m := errHeadRe.FindStringSubmatch(l); m != nil {
			head = i
			top = &SimError{Domain: m[1]}
			top.Code, _ = strconv.Atoi(m[2])
			break
		}
	}
	if top == nil {
		return nil, false
	}
	for _, l := range lines[:head] {
		l = strings.TrimSpace(l)
		if l != "" && !logNoiseRe.MatchString(l) {
			top.Preamble = append(top.Preamble, l)
		}
	}
	cur := top
	var reason []string
	finish := func() { cur.Reason = strings.Join(reason, "\n"); reason = nil }
	for _, l := range lines[head+1:] {
		l = strings.TrimSpace(l)
		if l == "" || logNoiseRe.MatchString(l) {
			continue
		}
		if m := underlayRe.FindStringSubmatch(l); m != nil {
			finish()
			next := &SimError{Domain: m[1]}
			next.Code, _ = strconv.Atoi(m[2])
			cur.Underlying, cur = next, next
			if rest := strings.TrimSpace(m[3]); rest != "" {
				reason = append(reason, rest)
			}
			continue
		}
		reason = append(reason, l)
	}
	finish()
	if top.Reason == "" && len(top.Preamble) > 0 {
		top.Reason = strings.Join(top.Preamble, "\n")
	}
	return top, true
}

// ---- create, bootstatus, runtime match ----

var udidRe = regexp.MustCompile(`^` + udidPattern + `$`)

// IsUDID reports whether s is a UDID in simctl's spelling.
func IsUDID(s string) bool { return udidRe.MatchString(s) }

// ParseCreateOutput extracts the UDID `simctl create` prints (a bare UDID and
// a newline). The last UDID-shaped line wins so that stray noise before it
// does not matter.
func ParseCreateOutput(out string) (string, error) {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); IsUDID(s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("simctl create: no UDID in output %q", truncate(out, 200))
}

// BootProgress is one status block `simctl bootstatus` prints while a
// device comes up.
type BootProgress struct {
	At       string // "2021-04-21 14:08:21 +0000"
	Status   int
	Terminal bool
	Elapsed  string
	Detail   []string // "Waiting on Data Migration", "Reason:..." lines
}

// BootStatus is parsed `simctl bootstatus <udid> [-b]` output.
type BootStatus struct {
	Name          string
	UDID          string
	AlreadyBooted bool
	Finished      bool
	Progress      []BootProgress
}

var (
	bootMonitorRe  = regexp.MustCompile(`^Monitoring boot status for (.+) \((` + udidPattern + `)\)\.?$`)
	bootProgressRe = regexp.MustCompile(`^\[([^\]]*)\] Status=(-?\d{1,9}), isTerminal=(YES|NO), Elapsed=([^ ]*?)\.?$`)
)

// ParseBootStatus reads bootstatus output, which is informational: the exit
// status is what says whether the device booted.
func ParseBootStatus(out string) BootStatus {
	var bs BootStatus
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
		case bootMonitorRe.MatchString(line):
			m := bootMonitorRe.FindStringSubmatch(line)
			bs.Name, bs.UDID = m[1], m[2]
		case strings.HasPrefix(line, "Device already booted"):
			bs.AlreadyBooted, bs.Finished = true, true
		case strings.HasPrefix(line, "Finished"):
			bs.Finished = true
		case bootProgressRe.MatchString(line):
			m := bootProgressRe.FindStringSubmatch(line)
			st, _ := strconv.Atoi(m[2])
			bs.Progress = append(bs.Progress, BootProgress{At: m[1], Status: st, Terminal: m[3] == "YES", Elapsed: m[4]})
		default:
			if n := len(bs.Progress); n > 0 {
				bs.Progress[n-1].Detail = append(bs.Progress[n-1].Detail, line)
			}
		}
	}
	return bs
}

// RuntimeMatch is one SDK entry of `simctl runtime match list -j` (Xcode
// 14+): which simulator runtime build an SDK resolves to.
type RuntimeMatch struct {
	SDK                string `json:"-"`
	Platform           string `json:"platform"`
	SDKVersion         string `json:"sdkVersion"`
	SDKBuild           string `json:"sdkBuild"`
	SDKDirectory       string `json:"sdkDirectory"`
	DefaultBuild       string `json:"defaultBuild"`
	PreferredBuild     string `json:"preferredBuild"`
	ChosenRuntimeBuild string `json:"chosenRuntimeBuild"`
}

// ParseRuntimeMatchJSON parses `simctl runtime match list -j`.
func ParseRuntimeMatchJSON(out []byte) ([]RuntimeMatch, error) {
	start := jsonStart(out)
	if start < 0 {
		return nil, errors.New("simctl runtime match list: no JSON object in output")
	}
	entries, err := orderedObject[RuntimeMatch](out[start:])
	if err != nil {
		return nil, fmt.Errorf("simctl runtime match list: %w", err)
	}
	res := make([]RuntimeMatch, 0, len(entries))
	for _, e := range entries {
		e.val.SDK = e.key
		res = append(res, e.val)
	}
	return res, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
