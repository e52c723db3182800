package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Launch-config bounds (managed-slots/v1).
const (
	SlotContractVersion = 1
	// SlotIdleTimeoutMinMs / Max bound idleTimeoutMs: a config may lengthen
	// the idle window up to an hour, never shorten it below the default.
	SlotIdleTimeoutMinMs     = 120_000
	SlotIdleTimeoutMaxMs     = 3_600_000
	DefaultSlotIdleTimeoutMs = SlotIdleTimeoutMinMs
	// MaxSlotPreparationTimeoutMs bounds one acquisition (a cold create and
	// boot of an emulator is tens of seconds; half an hour means a stuck
	// host, not a slow one).
	MaxSlotPreparationTimeoutMs     = 1_800_000
	DefaultSlotPreparationTimeoutMs = 600_000
	// maxSlotConfiguration bounds an Android spec's configuration map.
	maxSlotConfiguration = 64
)

// Slot platforms.
const (
	SlotPlatformIOS     = "ios"
	SlotPlatformAndroid = "android"
)

// wire shapes: pointers tell an explicit zero from an omitted field, and
// the spec stays raw until the platform picks its schema.
type slotConfigWire struct {
	ContractVersion      json.RawMessage `json:"contractVersion"`
	ManagedHostScope     *string         `json:"managedHostScope"`
	RunnerNamespace      *string         `json:"runnerNamespace"`
	RunnerIncarnation    *string         `json:"runnerIncarnation"`
	ExecutionAttempt     *string         `json:"executionAttempt"`
	LocalSlotCapacity    *int            `json:"localSlotCapacity"`
	Requests             *[]slotReqWire  `json:"requests"`
	PreparationTimeoutMs *int64          `json:"preparationTimeoutMs"`
	IdleTimeoutMs        *int64          `json:"idleTimeoutMs"`
	ExecutionOwnerPid    *int            `json:"executionOwnerPid"`
}

type slotReqWire struct {
	SlotIndex       *int            `json:"slotIndex"`
	Role            *string         `json:"role"`
	Platform        *string         `json:"platform"`
	RequestedSpec   json.RawMessage `json:"requestedSpec"`
	PriorDeviceHint *struct {
		StableID *string `json:"stableId"`
	} `json:"priorDeviceHint"`
}

type iosSpecWire struct {
	Runtime       *string `json:"runtime"`
	DeviceType    *string `json:"deviceType"`
	DisplayCutout *string `json:"displayCutout"`
}

type androidSpecWire struct {
	Runtime       *string            `json:"runtime"`
	DeviceType    *string            `json:"deviceType"`
	DisplayCutout *string            `json:"displayCutout"`
	Configuration *map[string]string `json:"configuration"`
}

func slotConfigInvalid(field, format string, args ...any) *Error {
	e := Errorf(CodeSlotConfigInvalid, format, args...)
	if field != "" {
		e = e.WithDetails("field", field)
	}
	return e
}

// strictDecode decodes one JSON value into out, refusing unknown fields and
// anything after the value.
func strictDecode(raw []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// ParseSlotLaunchConfig decodes and validates a launch configuration. It is
// pure: no process, file or daemon is consulted (executionOwnerPid's
// liveness is the launcher's check). contractVersion is read before any
// other field so that a newer contract's shape reports
// CONTRACT_UNSUPPORTED rather than a schema error.
func ParseSlotLaunchConfig(raw []byte) (SlotLaunchConfig, error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil || head == nil {
		return SlotLaunchConfig{}, slotConfigInvalid("", "the launch configuration is not a JSON object")
	}
	v, ok := head["contractVersion"]
	if !ok {
		return SlotLaunchConfig{}, slotConfigInvalid("contractVersion", "contractVersion is required")
	}
	if err := checkContractVersion(v); err != nil {
		return SlotLaunchConfig{}, err
	}

	var w slotConfigWire
	if err := strictDecode(raw, &w); err != nil {
		return SlotLaunchConfig{}, slotConfigInvalid("", "the launch configuration does not fit the managed-slots/v1 schema: %v", err)
	}
	cfg := SlotLaunchConfig{ContractVersion: SlotContractVersion}
	req := func(field string, p *string) (string, error) {
		if p == nil {
			return "", slotConfigInvalid(field, "%s is required", field)
		}
		return *p, nil
	}
	var err error
	if cfg.ManagedHostScope, err = req("managedHostScope", w.ManagedHostScope); err != nil {
		return SlotLaunchConfig{}, err
	}
	if cfg.RunnerNamespace, err = req("runnerNamespace", w.RunnerNamespace); err != nil {
		return SlotLaunchConfig{}, err
	}
	if cfg.RunnerIncarnation, err = req("runnerIncarnation", w.RunnerIncarnation); err != nil {
		return SlotLaunchConfig{}, err
	}
	if w.ExecutionAttempt != nil {
		if err := checkSlotText("executionAttempt", *w.ExecutionAttempt); err != nil {
			return SlotLaunchConfig{}, err
		}
		cfg.ExecutionAttempt = *w.ExecutionAttempt
	}
	if w.LocalSlotCapacity == nil {
		return SlotLaunchConfig{}, slotConfigInvalid("localSlotCapacity", "localSlotCapacity is required")
	}
	cfg.LocalSlotCapacity = *w.LocalSlotCapacity
	// Explicit zeros are refused here; in the typed config zero means
	// "default", so Validate cannot see them.
	if p := w.PreparationTimeoutMs; p != nil {
		if *p <= 0 {
			return SlotLaunchConfig{}, slotConfigInvalid("preparationTimeoutMs", "preparationTimeoutMs must be positive, got %d", *p)
		}
		cfg.PreparationTimeoutMs = *p
	}
	if p := w.IdleTimeoutMs; p != nil {
		if *p < SlotIdleTimeoutMinMs || *p > SlotIdleTimeoutMaxMs {
			return SlotLaunchConfig{}, idleOutOfRange(*p)
		}
		cfg.IdleTimeoutMs = *p
	}
	if p := w.ExecutionOwnerPid; p != nil {
		if *p <= 0 {
			return SlotLaunchConfig{}, slotConfigInvalid("executionOwnerPid", "executionOwnerPid must be a positive process id, got %d", *p)
		}
		cfg.ExecutionOwnerPid = *p
	}
	if w.Requests == nil {
		return SlotLaunchConfig{}, slotConfigInvalid("requests", "requests is required")
	}
	for i, rw := range *w.Requests {
		r, err := parseSlotRequest(fmt.Sprintf("requests[%d]", i), rw)
		if err != nil {
			return SlotLaunchConfig{}, err
		}
		cfg.Requests = append(cfg.Requests, r)
	}
	if err := cfg.Validate(); err != nil {
		return SlotLaunchConfig{}, err
	}
	return cfg, nil
}

func checkContractVersion(v json.RawMessage) error {
	// Only the integer literal 1 is version 1: "1" (a string), 1.0 and 1e0
	// are another writer's idea of a version, and guessing would be worse
	// than refusing.
	if string(bytes.TrimSpace(v)) == strconv.Itoa(SlotContractVersion) {
		return nil
	}
	return Errorf(CodeContractUnsupported, "contractVersion %s is not supported; this build speaks managed-slots contract version %d", truncateRaw(v), SlotContractVersion).
		WithDetails("supported", []int{SlotContractVersion})
}

func truncateRaw(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return strconv.Quote(s)
}

func idleOutOfRange(ms int64) *Error {
	return slotConfigInvalid("idleTimeoutMs", "idleTimeoutMs %d is outside %d..%d (2 to 60 minutes); it is refused, not clamped", ms, SlotIdleTimeoutMinMs, SlotIdleTimeoutMaxMs).
		WithDetails("min", SlotIdleTimeoutMinMs, "max", SlotIdleTimeoutMaxMs)
}

func parseSlotRequest(path string, w slotReqWire) (SlotRequest, error) {
	var r SlotRequest
	if w.SlotIndex == nil {
		return r, slotConfigInvalid(path+".slotIndex", "%s.slotIndex is required", path)
	}
	r.SlotIndex = *w.SlotIndex
	if w.Role == nil {
		return r, slotConfigInvalid(path+".role", "%s.role is required", path)
	}
	r.Role = *w.Role
	if w.Platform == nil {
		return r, slotConfigInvalid(path+".platform", "%s.platform is required", path)
	}
	r.Platform = *w.Platform
	if len(w.RequestedSpec) == 0 || string(bytes.TrimSpace(w.RequestedSpec)) == "null" {
		return r, slotConfigInvalid(path+".requestedSpec", "%s.requestedSpec is required", path)
	}
	specPath := path + ".requestedSpec"
	switch r.Platform {
	case SlotPlatformIOS:
		var s iosSpecWire
		if err := strictDecode(w.RequestedSpec, &s); err != nil {
			return r, slotConfigInvalid(specPath, "%s does not fit the iOS spec (runtime, deviceType, displayCutout): %v", specPath, err)
		}
		r.RequestedSpec = SlotSpec{Runtime: deref(s.Runtime), DeviceType: deref(s.DeviceType), DisplayCutout: deref(s.DisplayCutout)}
		if err := presentNonEmpty(specPath, "deviceType", s.DeviceType, "displayCutout", s.DisplayCutout); err != nil {
			return r, err
		}
	case SlotPlatformAndroid:
		var s androidSpecWire
		if err := strictDecode(w.RequestedSpec, &s); err != nil {
			return r, slotConfigInvalid(specPath, "%s does not fit the Android spec (runtime, deviceType, displayCutout, configuration): %v", specPath, err)
		}
		r.RequestedSpec = SlotSpec{Runtime: deref(s.Runtime), DeviceType: deref(s.DeviceType), DisplayCutout: deref(s.DisplayCutout)}
		if err := presentNonEmpty(specPath, "deviceType", s.DeviceType, "displayCutout", s.DisplayCutout); err != nil {
			return r, err
		}
		if s.Configuration != nil {
			if *s.Configuration == nil {
				return r, slotConfigInvalid(specPath+".configuration", "%s.configuration must be an object", specPath)
			}
			r.RequestedSpec.Configuration = *s.Configuration
		}
	default:
		// Validate reports the platform; the spec cannot be judged without one.
	}
	if w.PriorDeviceHint != nil {
		if w.PriorDeviceHint.StableID == nil {
			return r, slotConfigInvalid(path+".priorDeviceHint.stableId", "%s.priorDeviceHint.stableId is required", path)
		}
		r.PriorDeviceHint = &SlotDeviceHint{StableID: *w.PriorDeviceHint.StableID}
	}
	return r, nil
}

// presentNonEmpty refuses an optional spec field that is present but empty:
// in the typed spec "" means unconstrained, so an explicit "" would silently
// widen the match.
func presentNonEmpty(path string, kv ...any) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if p, _ := kv[i+1].(*string); p != nil && *p == "" {
			return slotConfigInvalid(path+"."+kv[i].(string), "%s.%s must not be empty (omit it to leave it unconstrained)", path, kv[i])
		}
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// checkSlotText bounds a launch-config string: 1..MaxIdentifierBytes bytes
// of printable UTF-8 (the same rule every identifier on the wire follows,
// so a config that parses also passes the dispatcher's input check).
func checkSlotText(field, v string) error {
	if v == "" {
		return slotConfigInvalid(field, "%s must not be empty", field)
	}
	if len(v) > MaxIdentifierBytes {
		return slotConfigInvalid(field, "%s is %d bytes; at most %d are allowed", field, len(v), MaxIdentifierBytes).
			WithDetails("maxBytes", MaxIdentifierBytes)
	}
	if !utf8.ValidString(v) {
		return slotConfigInvalid(field, "%s is not valid UTF-8", field)
	}
	for i, r := range v {
		if forbiddenRune(r) {
			return slotConfigInvalid(field, "%s holds the control character %U at byte %d", field, r, i)
		}
	}
	return nil
}

// Validate checks a typed launch configuration (one built in code, or one
// ParseSlotLaunchConfig decoded). Zero optional numbers mean the default.
func (c SlotLaunchConfig) Validate() error {
	if c.ContractVersion != SlotContractVersion {
		return Errorf(CodeContractUnsupported, "contractVersion %d is not supported; this build speaks managed-slots contract version %d", c.ContractVersion, SlotContractVersion).
			WithDetails("supported", []int{SlotContractVersion})
	}
	for _, f := range []struct{ name, v string }{
		{"managedHostScope", c.ManagedHostScope},
		{"runnerNamespace", c.RunnerNamespace},
		{"runnerIncarnation", c.RunnerIncarnation},
	} {
		if err := checkSlotText(f.name, f.v); err != nil {
			return err
		}
	}
	if c.ExecutionAttempt != "" {
		if err := checkSlotText("executionAttempt", c.ExecutionAttempt); err != nil {
			return err
		}
	}
	if c.PreparationTimeoutMs < 0 || c.PreparationTimeoutMs > MaxSlotPreparationTimeoutMs {
		return slotConfigInvalid("preparationTimeoutMs", "preparationTimeoutMs %d is outside 1..%d", c.PreparationTimeoutMs, MaxSlotPreparationTimeoutMs).
			WithDetails("max", MaxSlotPreparationTimeoutMs)
	}
	if c.IdleTimeoutMs != 0 && (c.IdleTimeoutMs < SlotIdleTimeoutMinMs || c.IdleTimeoutMs > SlotIdleTimeoutMaxMs) {
		return idleOutOfRange(c.IdleTimeoutMs)
	}
	if c.ExecutionOwnerPid < 0 {
		return slotConfigInvalid("executionOwnerPid", "executionOwnerPid must be a positive process id, got %d", c.ExecutionOwnerPid)
	}
	if c.LocalSlotCapacity < 1 {
		return slotConfigInvalid("localSlotCapacity", "localSlotCapacity must be at least 1, got %d", c.LocalSlotCapacity)
	}
	if len(c.Requests) == 0 {
		return slotConfigInvalid("requests", "requests must name at least one slot")
	}
	seen := map[int]bool{}
	for i, r := range c.Requests {
		path := fmt.Sprintf("requests[%d]", i)
		if err := r.validate(path); err != nil {
			return err
		}
		if seen[r.SlotIndex] {
			return slotConfigInvalid(path+".slotIndex", "slotIndex %d appears more than once", r.SlotIndex)
		}
		seen[r.SlotIndex] = true
	}
	// Group limits come after the schema: a malformed config is invalid
	// whatever its size.
	if c.LocalSlotCapacity != 1 || len(c.Requests) != 1 {
		return Errorf(CodeSlotGroupUnsupported, "managed-slots/v1 serves exactly one slot and one device per execution (localSlotCapacity %d, %d requests)", c.LocalSlotCapacity, len(c.Requests)).
			WithDetails("localSlotCapacity", c.LocalSlotCapacity, "requests", len(c.Requests), "max", 1)
	}
	return nil
}

func (r SlotRequest) validate(path string) error {
	if r.SlotIndex < 0 {
		return slotConfigInvalid(path+".slotIndex", "%s.slotIndex must be >= 0, got %d", path, r.SlotIndex)
	}
	if err := checkSlotText(path+".role", r.Role); err != nil {
		return err
	}
	if r.Platform != SlotPlatformIOS && r.Platform != SlotPlatformAndroid {
		return slotConfigInvalid(path+".platform", "%s.platform must be \"ios\" or \"android\", got %q", path, r.Platform)
	}
	sp := path + ".requestedSpec"
	if err := checkSlotText(sp+".runtime", r.RequestedSpec.Runtime); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"deviceType", r.RequestedSpec.DeviceType}, {"displayCutout", r.RequestedSpec.DisplayCutout}} {
		if f.v == "" {
			continue
		}
		if err := checkSlotText(sp+"."+f.name, f.v); err != nil {
			return err
		}
	}
	if len(r.RequestedSpec.Configuration) > 0 && r.Platform != SlotPlatformAndroid {
		return slotConfigInvalid(sp+".configuration", "%s.configuration is an Android-only key", sp)
	}
	if len(r.RequestedSpec.Configuration) > maxSlotConfiguration {
		return slotConfigInvalid(sp+".configuration", "%s.configuration has %d entries; at most %d are allowed", sp, len(r.RequestedSpec.Configuration), maxSlotConfiguration)
	}
	keys := make([]string, 0, len(r.RequestedSpec.Configuration))
	for k := range r.RequestedSpec.Configuration {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := checkSlotText(sp+".configuration key", k); err != nil {
			return err
		}
		if err := checkSlotText(sp+".configuration["+k+"]", r.RequestedSpec.Configuration[k]); err != nil {
			return err
		}
	}
	if r.PriorDeviceHint != nil {
		if err := checkSlotText(path+".priorDeviceHint.stableId", r.PriorDeviceHint.StableID); err != nil {
			return err
		}
	}
	return nil
}

// EffectiveIdleTimeoutMs is the idle window an execution is held with.
func (c SlotLaunchConfig) EffectiveIdleTimeoutMs() int64 {
	if c.IdleTimeoutMs == 0 {
		return DefaultSlotIdleTimeoutMs
	}
	return c.IdleTimeoutMs
}

// EffectivePreparationTimeoutMs is the one deadline of an acquisition.
func (c SlotLaunchConfig) EffectivePreparationTimeoutMs() int64 {
	if c.PreparationTimeoutMs == 0 {
		return DefaultSlotPreparationTimeoutMs
	}
	return c.PreparationTimeoutMs
}
