package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/simlock/simlock/internal/osversion"
)

// The sessions section's defaults, in one place: Effective fills them in
// and the broker reads nothing else.
const (
	DefaultSessionKeepBootedMaxUses  = 20
	DefaultSessionResetTimeoutMs     = 600_000
	MaxSessionResetTimeoutMs         = 2_147_483_647
	DefaultSessionReceiptRetentionMs = 30 * 24 * 3_600_000
	DefaultSessionExportMaxAgeMs     = 180 * 24 * 3_600_000
	MaxSessionReleaseReplyBudgetMs   = 30_000
	DefaultSessionHeartbeatTTLMs     = 10_000
	DefaultSessionIdleTimeoutMs      = 3_600_000
	// MinSessionMemoryMB is the least RAM an Android profile may ask for.
	MinSessionMemoryMB = 2048
)

// Effective is the section with every default filled in. The reset keys
// that apply only to one mode keep their defaults whatever the mode, so a
// reader never sees a zero.
func (s Sessions) Effective() Sessions {
	e := s
	if e.Reset.IOS == "" {
		e.Reset.IOS = "destroy"
	}
	if e.Reset.Android == "" {
		e.Reset.Android = "destroy"
	}
	if e.Reset.AndroidKeepBootedMaxUses == 0 {
		e.Reset.AndroidKeepBootedMaxUses = DefaultSessionKeepBootedMaxUses
	}
	if e.Reset.AndroidKeepBootedFallback == "" {
		e.Reset.AndroidKeepBootedFallback = "destroy"
	}
	if e.Reset.AndroidResetTimeoutMs == 0 {
		e.Reset.AndroidResetTimeoutMs = DefaultSessionResetTimeoutMs
	}
	if e.ReceiptRetentionMs == 0 {
		e.ReceiptRetentionMs = DefaultSessionReceiptRetentionMs
	}
	if e.ExportMaxAgeMs == 0 {
		e.ExportMaxAgeMs = DefaultSessionExportMaxAgeMs
	}
	if e.ReleaseReplyBudgetMs == 0 {
		e.ReleaseReplyBudgetMs = MaxSessionReleaseReplyBudgetMs
	}
	if e.HeartbeatTTLMs == 0 {
		e.HeartbeatTTLMs = DefaultSessionHeartbeatTTLMs
	}
	if e.DefaultIdleTimeoutMs == 0 {
		e.DefaultIdleTimeoutMs = DefaultSessionIdleTimeoutMs
	}
	return e
}

// markSessionKeys records which sessions keys (top level and under
// reset) the file spelled out, so a key written as zero is still seen as
// set: refused when its mode is not chosen, or as a non-positive duration,
// rather than quietly read as its default.
func markSessionKeys(explicit map[string]bool, sessions json.RawMessage) {
	var top map[string]json.RawMessage
	if explicit == nil || json.Unmarshal(sessions, &top) != nil {
		return
	}
	for k := range top {
		explicit["sessions."+k] = true
	}
	var reset map[string]json.RawMessage
	if json.Unmarshal(top["reset"], &reset) == nil {
		for k := range reset {
			explicit["sessions.reset."+k] = true
		}
	}
}

func isArchetype(a string) bool { return a == "phone" || a == "tablet" || a == "foldable" }

// validateSessions checks the sessions section strictly: what the broker
// would ignore or could never serve is refused at load, not at the first
// session.
func (c Config) validateSessions() error {
	s := c.Sessions
	if s == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sessions."+format, args...)) }

	l := s.Limits
	if l.TotalDeviceCap < 0 || l.SessionCap < 0 || l.IdlePoolCap < 0 || l.MaxConcurrentResetBoots < 0 {
		bad("limits: totalDeviceCap, sessionCap, idlePoolCap and maxConcurrentResetBoots must not be negative")
	}

	for _, p := range sortedKeys(s.Defaults) {
		if p != "ios" && p != "android" {
			bad("defaults.%s: unknown platform (ios or android)", p)
			continue
		}
		validateSessionDefaults(p, s.Defaults[p], bad)
	}
	for _, pair := range []struct {
		key string
		m   map[string]string
	}{{"iosClassifications", s.IOSClassifications}, {"androidProfileArchetypes", s.AndroidProfileArchetypes}} {
		for _, k := range sortedKeys(pair.m) {
			if strings.TrimSpace(k) == "" {
				bad("%s: an empty name", pair.key)
			}
			if !isArchetype(pair.m[k]) {
				bad("%s.%s: %q is not phone, tablet or foldable", pair.key, k, pair.m[k])
			}
		}
	}

	validateSessionReset(s, c.explicit, bad)

	for _, d := range []struct {
		key string
		v   int64
	}{{"receiptRetentionMs", s.ReceiptRetentionMs}, {"exportMaxAgeMs", s.ExportMaxAgeMs}, {"heartbeatTtlMs", s.HeartbeatTTLMs},
		{"defaultIdleTimeoutMs", s.DefaultIdleTimeoutMs}, {"releaseReplyBudgetMs", s.ReleaseReplyBudgetMs}} {
		if d.v < 0 || d.v == 0 && c.explicit["sessions."+d.key] {
			bad("%s: %d must be positive (or absent for the default)", d.key, d.v)
		}
	}
	if s.ReleaseReplyBudgetMs > MaxSessionReleaseReplyBudgetMs {
		bad("releaseReplyBudgetMs: %d exceeds %d", s.ReleaseReplyBudgetMs, MaxSessionReleaseReplyBudgetMs)
	}
	if e := s.Effective(); e.ExportMaxAgeMs < e.ReceiptRetentionMs {
		bad("exportMaxAgeMs: %d is shorter than receiptRetentionMs %d, so an export could never pin its receipt", e.ExportMaxAgeMs, e.ReceiptRetentionMs)
	}
	return errors.Join(errs...)
}

func validateSessionDefaults(p string, d SessionDefaults, bad func(string, ...any)) {
	at := "defaults." + p
	if strings.TrimSpace(d.PolicyVersion) == "" {
		bad("%s.policyVersion is required", at)
	} else if len(d.PolicyVersion) > 128 {
		bad("%s.policyVersion is longer than 128 bytes", at)
	}
	h := d.Hardware
	mapped := map[string]bool{}
	if p == "ios" {
		if len(h.Profiles) > 0 {
			bad("%s.hardware.profiles: AVD profiles are Android's; iOS maps archetypes and modelTypes", at)
		}
		types := map[string]bool{}
		for i, mt := range h.ModelTypes {
			k := modelTypeKey(mt.ModelType)
			switch {
			case strings.TrimSpace(mt.ModelType.Family) == "":
				bad("%s.hardware.modelTypes[%d].modelType.family is required", at, i)
			case types[k]:
				bad("%s.hardware.modelTypes[%d]: model type %s is mapped twice", at, i, k)
			}
			types[k] = true
			switch mt.Model.Namespace {
			case "product-model", "device-type", "simlock-model":
			default:
				bad("%s.hardware.modelTypes[%d].model.namespace: %q is not product-model, device-type or simlock-model", at, i, mt.Model.Namespace)
			}
			if strings.TrimSpace(mt.Model.Value) == "" {
				bad("%s.hardware.modelTypes[%d].model.value is required", at, i)
			}
		}
		for i, a := range h.Archetypes {
			switch {
			case !isArchetype(a.Archetype):
				bad("%s.hardware.archetypes[%d].archetype: %q is not phone, tablet or foldable", at, i, a.Archetype)
			case mapped[a.Archetype]:
				bad("%s.hardware.archetypes[%d]: archetype %s is mapped twice", at, i, a.Archetype)
			case !types[modelTypeKey(a.ModelType)]:
				bad("%s.hardware.archetypes[%d]: model type %s has no modelTypes entry, so %s could never be served", at, i, modelTypeKey(a.ModelType), a.Archetype)
			}
			mapped[a.Archetype] = true
		}
	} else {
		if len(h.Archetypes) > 0 || len(h.ModelTypes) > 0 {
			bad("%s.hardware: archetypes and modelTypes are iOS's; Android maps archetypes to AVD profiles in profiles", at)
		}
		for i, pr := range h.Profiles {
			switch {
			case !isArchetype(pr.Archetype):
				bad("%s.hardware.profiles[%d].archetype: %q is not phone, tablet or foldable", at, i, pr.Archetype)
			case mapped[pr.Archetype]:
				bad("%s.hardware.profiles[%d]: archetype %s is mapped twice", at, i, pr.Archetype)
			}
			mapped[pr.Archetype] = true
			if strings.TrimSpace(pr.ProfileID) == "" {
				bad("%s.hardware.profiles[%d].profileId is required", at, i)
			}
			if pr.MemoryMB != 0 && pr.MemoryMB < MinSessionMemoryMB {
				bad("%s.hardware.profiles[%d].memoryMb: %d is less than %d", at, i, pr.MemoryMB, MinSessionMemoryMB)
			}
		}
	}
	switch {
	case h.Omitted == "":
		bad("%s.hardware.omitted is required (phone, tablet or foldable)", at)
	case !isArchetype(h.Omitted):
		bad("%s.hardware.omitted: %q is not phone, tablet or foldable", at, h.Omitted)
	case !mapped[h.Omitted]:
		bad("%s.hardware.omitted: archetype %s is not mapped, so a requirement without hardware could never be served", at, h.Omitted)
	}

	sel := d.OS.Selector
	var v osversion.Version
	parsed := false
	switch sel.Kind {
	case "exact", "atLeast":
		if v, parsed = osversion.Parse(sel.Version); !parsed {
			bad("%s.os.selector.version: %q is not a version such as 26.5 or 16", at, sel.Version)
		}
	case "latest":
		if sel.Version != "" {
			bad("%s.os.selector.version: latest takes no version", at)
		}
	default:
		bad("%s.os.selector.kind: %q is not exact, atLeast or latest", at, sel.Kind)
	}
	if pv := d.OS.PreferredVersion; pv != "" {
		w, ok := osversion.Parse(pv)
		switch {
		case !ok:
			bad("%s.os.preferredVersion: %q is not a version such as 26.5 or 16", at, pv)
		case parsed && sel.Kind == "exact" && w.Compare(v) != 0,
			parsed && sel.Kind == "atLeast" && w.Compare(v) < 0:
			bad("%s.os.preferredVersion: %s does not satisfy the selector %s %s", at, pv, sel.Kind, sel.Version)
		}
	}
}

func validateSessionReset(s *Sessions, explicit map[string]bool, bad func(string, ...any)) {
	r := s.Reset
	set := func(key string, nonZero bool) bool { return nonZero || explicit["sessions.reset."+key] }
	_, iosDefaults := s.Defaults["ios"]
	_, androidDefaults := s.Defaults["android"]
	switch r.IOS {
	case "", "destroy":
	case "erase":
		if !iosDefaults {
			bad("reset.ios: erase needs defaults.ios")
		}
	default:
		bad("reset.ios: %q is not destroy or erase", r.IOS)
	}
	switch r.Android {
	case "", "destroy":
	case "keep-booted", "snapshot":
		if !androidDefaults {
			bad("reset.android: %s needs defaults.android", r.Android)
		}
	default:
		bad("reset.android: %q is not destroy, keep-booted or snapshot", r.Android)
	}
	keepBooted := r.Android == "keep-booted"
	if set("androidKeepBootedMaxUses", r.AndroidKeepBootedMaxUses != 0) {
		switch {
		case !keepBooted:
			bad("reset.androidKeepBootedMaxUses applies only to reset.android keep-booted")
		case r.AndroidKeepBootedMaxUses <= 0:
			bad("reset.androidKeepBootedMaxUses: %d must be positive", r.AndroidKeepBootedMaxUses)
		}
	}
	if set("androidKeepBootedFallback", r.AndroidKeepBootedFallback != "") {
		switch {
		case !keepBooted:
			bad("reset.androidKeepBootedFallback applies only to reset.android keep-booted")
		case r.AndroidKeepBootedFallback != "destroy" && r.AndroidKeepBootedFallback != "snapshot":
			bad("reset.androidKeepBootedFallback: %q is not destroy or snapshot", r.AndroidKeepBootedFallback)
		}
	}
	if set("androidResetTimeoutMs", r.AndroidResetTimeoutMs != 0) {
		switch {
		case r.Android != "snapshot" && !(keepBooted && r.AndroidKeepBootedFallback == "snapshot"):
			bad("reset.androidResetTimeoutMs applies only to reset.android snapshot, or keep-booted with androidKeepBootedFallback snapshot")
		case r.AndroidResetTimeoutMs <= 0 || r.AndroidResetTimeoutMs > MaxSessionResetTimeoutMs:
			bad("reset.androidResetTimeoutMs: %d must be positive and at most %d", r.AndroidResetTimeoutMs, MaxSessionResetTimeoutMs)
		}
	}
}

func modelTypeKey(mt SessionModelType) string {
	if mt.Variant == "" {
		return strings.ToLower(mt.Family)
	}
	return strings.ToLower(mt.Family + "/" + mt.Variant)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
