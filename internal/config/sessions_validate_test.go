package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// sessionsDoc is a complete, valid sessions section for both platforms.
func sessionsDoc() map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(`{"sessions": {
	  "limits": {"totalDeviceCap": 2, "sessionCap": 2, "idlePoolCap": 0},
	  "defaults": {
	    "ios": {
	      "policyVersion": "host-ios-26.5-v1",
	      "hardware": {
	        "omitted": "phone",
	        "archetypes": [{"archetype": "phone", "modelType": {"family": "iphone", "variant": "pro"}}],
	        "modelTypes": [{"modelType": {"family": "iphone", "variant": "pro"}, "model": {"namespace": "product-model", "value": "iPhone18,1"}}]
	      },
	      "os": {"selector": {"kind": "exact", "version": "26.5"}, "preferredVersion": "26.5"}
	    },
	    "android": {
	      "policyVersion": "host-android-16-v1",
	      "hardware": {
	        "omitted": "phone",
	        "profiles": [{"archetype": "phone", "profileId": "pixel_9"}, {"archetype": "foldable", "profileId": "pixel_9_pro_fold", "memoryMb": 4096}]
	      },
	      "os": {"selector": {"kind": "atLeast", "version": "15"}, "preferredVersion": "16"}
	    }
	  },
	  "iosClassifications": {"iPhone 17 Pro": "phone"},
	  "androidProfileArchetypes": {"pixel_9": "phone", "pixel_9_pro_fold": "foldable"},
	  "reset": {"ios": "erase", "android": "keep-booted", "androidKeepBootedMaxUses": 20, "androidKeepBootedFallback": "snapshot", "androidResetTimeoutMs": 600000},
	  "releaseReplyBudgetMs": 30000
	}}`), &m); err != nil {
		panic(err)
	}
	return m
}

// edit sets (or, with a nil value, deletes) the key at a dotted path;
// a numeric part indexes an array.
func edit(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	var cur any = m
	for _, p := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := 0
			for _, ch := range p {
				i = i*10 + int(ch-'0')
			}
			cur = c[i]
		}
	}
	last := parts[len(parts)-1]
	obj := cur.(map[string]any)
	if v == nil {
		delete(obj, last)
		return
	}
	obj[last] = v
}

func parseDoc(t *testing.T, m map[string]any) (Config, error) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(b)
}

func TestSessionsValid(t *testing.T) {
	c, err := parseDoc(t, sessionsDoc())
	if err != nil {
		t.Fatal(err)
	}
	if c.Sessions == nil || c.Sessions.Defaults["android"].Hardware.Profiles[1].MemoryMB != 4096 {
		t.Fatalf("%+v", c.Sessions)
	}
	// The zero-pooling minimum: one platform's defaults, nothing else.
	m := sessionsDoc()
	s := m["sessions"].(map[string]any)
	for _, k := range []string{"limits", "reset", "iosClassifications", "androidProfileArchetypes", "releaseReplyBudgetMs"} {
		delete(s, k)
	}
	delete(s["defaults"].(map[string]any), "android")
	if _, err := parseDoc(t, m); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsRefusals(t *testing.T) {
	cases := []struct {
		name string
		path string
		v    any
		// more applies a second edit.
		more func(map[string]any)
		want string
	}{
		{"unknown platform", "sessions.defaults.windows", map[string]any{"policyVersion": "x"}, nil, "defaults.windows: unknown platform"},
		{"unknown key", "sessions.defaults.ios.platform", "ios", nil, "unknown key"},
		{"policyVersion required", "sessions.defaults.ios.policyVersion", nil, nil, "defaults.ios.policyVersion is required"},
		{"policyVersion blank", "sessions.defaults.android.policyVersion", "  ", nil, "defaults.android.policyVersion is required"},
		{"omitted required", "sessions.defaults.ios.hardware.omitted", nil, nil, "hardware.omitted is required"},
		{"omitted not an archetype", "sessions.defaults.ios.hardware.omitted", "watch", nil, `hardware.omitted: "watch" is not phone`},
		{"omitted unmapped", "sessions.defaults.ios.hardware.omitted", "tablet", nil, "archetype tablet is not mapped"},
		{"archetype unknown", "sessions.defaults.ios.hardware.archetypes.0.archetype", "duo", nil, `archetypes[0].archetype: "duo"`},
		{"archetype to an unmapped model type", "sessions.defaults.ios.hardware.archetypes.0.modelType.variant", "max", nil, "model type iphone/max has no modelTypes entry"},
		{"model type without family", "sessions.defaults.ios.hardware.modelTypes.0.modelType.family", "", nil, "modelTypes[0].modelType.family is required"},
		{"model namespace", "sessions.defaults.ios.hardware.modelTypes.0.model.namespace", "avd-profile", nil, `model.namespace: "avd-profile"`},
		{"model value", "sessions.defaults.ios.hardware.modelTypes.0.model.value", "", nil, "modelTypes[0].model.value is required"},
		{"profiles on ios", "sessions.defaults.ios.hardware.profiles", []any{map[string]any{"archetype": "phone", "profileId": "pixel_9"}}, nil, "AVD profiles are Android's"},
		{"model types on android", "sessions.defaults.android.hardware.archetypes", []any{map[string]any{"archetype": "phone", "modelType": map[string]any{"family": "pixel"}}}, nil, "archetypes and modelTypes are iOS's"},
		{"profile archetype", "sessions.defaults.android.hardware.profiles.1.archetype", "flip", nil, `profiles[1].archetype: "flip"`},
		{"profile archetype twice", "sessions.defaults.android.hardware.profiles.1.archetype", "phone", nil, "archetype phone is mapped twice"},
		{"profile id", "sessions.defaults.android.hardware.profiles.0.profileId", "", nil, "profiles[0].profileId is required"},
		{"memoryMb below 2048", "sessions.defaults.android.hardware.profiles.1.memoryMb", 2047, nil, "memoryMb: 2047 is less than 2048"},
		{"memoryMb negative", "sessions.defaults.android.hardware.profiles.1.memoryMb", -1, nil, "memoryMb: -1 is less than 2048"},
		{"selector kind", "sessions.defaults.ios.os.selector.kind", "omitted", nil, `os.selector.kind: "omitted"`},
		{"selector kind missing", "sessions.defaults.ios.os.selector", map[string]any{}, nil, `os.selector.kind: ""`},
		{"selector version missing", "sessions.defaults.ios.os.selector.version", nil, nil, `os.selector.version: ""`},
		{"selector version an API level", "sessions.defaults.android.os.selector.version", "API 35", nil, `os.selector.version: "API 35"`},
		{"latest with a version", "sessions.defaults.android.os.selector.kind", "latest", nil, "latest takes no version"},
		{"preferred not a version", "sessions.defaults.ios.os.preferredVersion", "newest", nil, `preferredVersion: "newest"`},
		{"preferred outside exact", "sessions.defaults.ios.os.preferredVersion", "26.4", nil, "does not satisfy the selector exact 26.5"},
		{"preferred below atLeast", "sessions.defaults.android.os.preferredVersion", "14", nil, "does not satisfy the selector atLeast 15"},
		{"classification", "sessions.iosClassifications.iPad Pro", "slate", nil, `iosClassifications.iPad Pro: "slate"`},
		{"android classification", "sessions.androidProfileArchetypes.pixel_9", "", nil, `androidProfileArchetypes.pixel_9: ""`},
		{"negative cap", "sessions.limits.sessionCap", -1, nil, "must not be negative"},
		{"ios reset mode", "sessions.reset.ios", "keep-booted", nil, `reset.ios: "keep-booted" is not destroy or erase`},
		{"android reset mode", "sessions.reset.android", "erase", nil, `reset.android: "erase" is not destroy, keep-booted or snapshot`},
		{"erase without ios defaults", "sessions.defaults.ios", nil, nil, "erase needs defaults.ios"},
		{"keep-booted without android defaults", "sessions.defaults.android", nil, nil, "keep-booted needs defaults.android"},
		{"maxUses zero", "sessions.reset.androidKeepBootedMaxUses", 0, nil, "androidKeepBootedMaxUses: 0 must be positive"},
		{"maxUses negative", "sessions.reset.androidKeepBootedMaxUses", -3, nil, "androidKeepBootedMaxUses: -3 must be positive"},
		{"maxUses outside keep-booted", "sessions.reset.android", "snapshot", func(m map[string]any) {
			edit(m, "sessions.reset.androidKeepBootedFallback", nil)
		}, "androidKeepBootedMaxUses applies only to reset.android keep-booted"},
		{"fallback outside keep-booted", "sessions.reset.android", "destroy", func(m map[string]any) {
			edit(m, "sessions.reset.androidKeepBootedMaxUses", nil)
			edit(m, "sessions.reset.androidResetTimeoutMs", nil)
		}, "androidKeepBootedFallback applies only to reset.android keep-booted"},
		{"fallback mode", "sessions.reset.androidKeepBootedFallback", "wipe-data", nil, `androidKeepBootedFallback: "wipe-data" is not destroy or snapshot`},
		{"timeout with a destroy fallback", "sessions.reset.androidKeepBootedFallback", "destroy", nil, "androidResetTimeoutMs applies only to"},
		{"timeout with destroy", "sessions.reset", map[string]any{"android": "destroy", "androidResetTimeoutMs": 1000}, nil, "androidResetTimeoutMs applies only to"},
		{"timeout zero", "sessions.reset.androidResetTimeoutMs", 0, nil, "androidResetTimeoutMs: 0 must be positive"},
		{"timeout too long", "sessions.reset.androidResetTimeoutMs", 2147483648, nil, "androidResetTimeoutMs: 2147483648 must be positive and at most 2147483647"},
		{"reply budget over 30 s", "sessions.releaseReplyBudgetMs", 30001, nil, "releaseReplyBudgetMs: 30001 exceeds 30000"},
		{"negative reply budget", "sessions.releaseReplyBudgetMs", -1, nil, "releaseReplyBudgetMs: -1 must be positive"},
		{"negative retention", "sessions.receiptRetentionMs", -5, nil, "receiptRetentionMs: -5 must be positive"},
		{"negative heartbeat", "sessions.heartbeatTtlMs", -5, nil, "heartbeatTtlMs: -5 must be positive"},
		{"negative idle timeout", "sessions.defaultIdleTimeoutMs", -5, nil, "defaultIdleTimeoutMs: -5 must be positive"},
		{"zero retention", "sessions.receiptRetentionMs", 0, nil, "receiptRetentionMs: 0 must be positive"},
		{"zero export age", "sessions.exportMaxAgeMs", 0, nil, "exportMaxAgeMs: 0 must be positive"},
		{"zero reply budget", "sessions.releaseReplyBudgetMs", 0, nil, "releaseReplyBudgetMs: 0 must be positive"},
		{"zero heartbeat", "sessions.heartbeatTtlMs", 0, nil, "heartbeatTtlMs: 0 must be positive"},
		{"zero idle timeout", "sessions.defaultIdleTimeoutMs", 0, nil, "defaultIdleTimeoutMs: 0 must be positive"},
		{"export shorter than retention", "sessions.exportMaxAgeMs", 1000, nil, "exportMaxAgeMs: 1000 is shorter than receiptRetentionMs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := sessionsDoc()
			edit(m, c.path, c.v)
			if c.more != nil {
				c.more(m)
			}
			_, err := parseDoc(t, m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// The defaults are filled in one place.
func TestSessionsEffective(t *testing.T) {
	e := Sessions{}.Effective()
	if e.Reset.IOS != "destroy" || e.Reset.Android != "destroy" || e.Reset.AndroidKeepBootedMaxUses != 20 ||
		e.Reset.AndroidKeepBootedFallback != "destroy" || e.Reset.AndroidResetTimeoutMs != 600_000 ||
		e.ReceiptRetentionMs != 30*24*3_600_000 || e.ExportMaxAgeMs != 180*24*3_600_000 ||
		e.ReleaseReplyBudgetMs != 30_000 || e.HeartbeatTTLMs != 10_000 || e.DefaultIdleTimeoutMs != 3_600_000 {
		t.Fatalf("%+v", e)
	}
	set := Sessions{Reset: SessionReset{IOS: "erase", AndroidKeepBootedMaxUses: 3}, ReleaseReplyBudgetMs: 5000}.Effective()
	if set.Reset.IOS != "erase" || set.Reset.AndroidKeepBootedMaxUses != 3 || set.ReleaseReplyBudgetMs != 5000 {
		t.Fatalf("%+v", set)
	}
}

// A config built in code (no file, so no record of explicit keys) is held
// to the same rules.
func TestSessionsValidateWithoutFile(t *testing.T) {
	c := Default()
	c.Sessions = &Sessions{Reset: SessionReset{AndroidKeepBootedMaxUses: 5}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "applies only to reset.android keep-booted") {
		t.Fatalf("Validate = %v", err)
	}
	c.Sessions = &Sessions{}
	if err := c.Validate(); err != nil {
		t.Fatalf("an empty sessions section: %v", err)
	}
}
