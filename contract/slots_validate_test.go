package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

const goodSlotConfig = `{
  "contractVersion": 1,
  "managedHostScope": "host-1",
  "runnerNamespace": "runner-A",
  "runnerIncarnation": "boot-1",
  "executionAttempt": "p1",
  "localSlotCapacity": 1,
  "preparationTimeoutMs": 820000,
  "requests": [
    {"slotIndex": 0, "role": "main", "platform": "android",
     "requestedSpec": {"runtime": "system-images;android-36;google_apis;arm64-v8a", "deviceType": "pixel_6"}}
  ]
}`

func TestParseSlotLaunchConfigAcceptsTheWorkedExample(t *testing.T) {
	cfg, err := ParseSlotLaunchConfig([]byte(goodSlotConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RunnerIncarnation != "boot-1" || len(cfg.Requests) != 1 || cfg.Requests[0].RequestedSpec.DeviceType != "pixel_6" {
		t.Fatalf("decoded %+v", cfg)
	}
	if cfg.EffectiveIdleTimeoutMs() != 120000 || cfg.EffectivePreparationTimeoutMs() != 820000 {
		t.Fatalf("effective timeouts %d %d", cfg.EffectiveIdleTimeoutMs(), cfg.EffectivePreparationTimeoutMs())
	}
}

// mutate edits the worked example's JSON as a map.
func mutate(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(goodSlotConfig), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func req0(m map[string]any) map[string]any { return m["requests"].([]any)[0].(map[string]any) }
func spec0(m map[string]any) map[string]any {
	return req0(m)["requestedSpec"].(map[string]any)
}

func TestParseSlotLaunchConfigRefusals(t *testing.T) {
	long := strings.Repeat("x", 257)
	cases := []struct {
		name string
		raw  []byte
		code Code
	}{
		{"not json", []byte(`{"contractVersion":1,`), CodeSlotConfigInvalid},
		{"array", []byte(`[]`), CodeSlotConfigInvalid},
		{"null", []byte(`null`), CodeSlotConfigInvalid},
		{"version missing", mutate(t, func(m map[string]any) { delete(m, "contractVersion") }), CodeSlotConfigInvalid},
		{"version 2", mutate(t, func(m map[string]any) { m["contractVersion"] = 2 }), CodeContractUnsupported},
		{"version string", mutate(t, func(m map[string]any) { m["contractVersion"] = "1" }), CodeContractUnsupported},
		// A newer contract's shape must report the version, not its unknown fields.
		{"version 2 with new shape", mutate(t, func(m map[string]any) { m["contractVersion"] = 2; m["slots"] = []any{}; delete(m, "requests") }), CodeContractUnsupported},
		{"unknown top field", mutate(t, func(m map[string]any) { m["name"] = "x" }), CodeSlotConfigInvalid},
		{"trailing data", []byte(goodSlotConfig + ` {}`), CodeSlotConfigInvalid},
		{"scope missing", mutate(t, func(m map[string]any) { delete(m, "managedHostScope") }), CodeSlotConfigInvalid},
		{"namespace empty", mutate(t, func(m map[string]any) { m["runnerNamespace"] = "" }), CodeSlotConfigInvalid},
		{"incarnation too long", mutate(t, func(m map[string]any) { m["runnerIncarnation"] = long }), CodeSlotConfigInvalid},
		{"incarnation control char", mutate(t, func(m map[string]any) { m["runnerIncarnation"] = "a\x1bb" }), CodeSlotConfigInvalid},
		{"attempt empty", mutate(t, func(m map[string]any) { m["executionAttempt"] = "" }), CodeSlotConfigInvalid},
		{"attempt too long", mutate(t, func(m map[string]any) { m["executionAttempt"] = long }), CodeSlotConfigInvalid},
		{"capacity missing", mutate(t, func(m map[string]any) { delete(m, "localSlotCapacity") }), CodeSlotConfigInvalid},
		{"capacity 0", mutate(t, func(m map[string]any) { m["localSlotCapacity"] = 0 }), CodeSlotConfigInvalid},
		{"capacity 2", mutate(t, func(m map[string]any) { m["localSlotCapacity"] = 2 }), CodeSlotGroupUnsupported},
		{"no requests", mutate(t, func(m map[string]any) { m["requests"] = []any{} }), CodeSlotConfigInvalid},
		{"requests missing", mutate(t, func(m map[string]any) { delete(m, "requests") }), CodeSlotConfigInvalid},
		{"two requests", mutate(t, func(m map[string]any) {
			r := map[string]any{"slotIndex": 1, "role": "b", "platform": "ios", "requestedSpec": map[string]any{"runtime": "iOS-27-0"}}
			m["requests"] = append(m["requests"].([]any), r)
		}), CodeSlotGroupUnsupported},
		{"duplicate slotIndex", mutate(t, func(m map[string]any) {
			r := map[string]any{"slotIndex": 0, "role": "b", "platform": "ios", "requestedSpec": map[string]any{"runtime": "iOS-27-0"}}
			m["requests"] = append(m["requests"].([]any), r)
		}), CodeSlotConfigInvalid},
		{"negative slotIndex", mutate(t, func(m map[string]any) { req0(m)["slotIndex"] = -1 }), CodeSlotConfigInvalid},
		{"fractional slotIndex", mutate(t, func(m map[string]any) { req0(m)["slotIndex"] = 0.5 }), CodeSlotConfigInvalid},
		{"slotIndex missing", mutate(t, func(m map[string]any) { delete(req0(m), "slotIndex") }), CodeSlotConfigInvalid},
		{"role missing", mutate(t, func(m map[string]any) { delete(req0(m), "role") }), CodeSlotConfigInvalid},
		{"role too long", mutate(t, func(m map[string]any) { req0(m)["role"] = long }), CodeSlotConfigInvalid},
		{"platform windows", mutate(t, func(m map[string]any) { req0(m)["platform"] = "windows" }), CodeSlotConfigInvalid},
		{"platform missing", mutate(t, func(m map[string]any) { delete(req0(m), "platform") }), CodeSlotConfigInvalid},
		{"unknown request field", mutate(t, func(m map[string]any) { req0(m)["operationId"] = "x" }), CodeSlotConfigInvalid},
		{"spec missing", mutate(t, func(m map[string]any) { delete(req0(m), "requestedSpec") }), CodeSlotConfigInvalid},
		{"spec name key", mutate(t, func(m map[string]any) { spec0(m)["name"] = "mine" }), CodeSlotConfigInvalid},
		{"spec runtime missing", mutate(t, func(m map[string]any) { delete(spec0(m), "runtime") }), CodeSlotConfigInvalid},
		{"spec deviceType empty", mutate(t, func(m map[string]any) { spec0(m)["deviceType"] = "" }), CodeSlotConfigInvalid},
		{"ios with configuration", mutate(t, func(m map[string]any) {
			req0(m)["platform"] = "ios"
			spec0(m)["configuration"] = map[string]any{"hw.ramSize": "2048"}
		}), CodeSlotConfigInvalid},
		{"android configuration not strings", mutate(t, func(m map[string]any) { spec0(m)["configuration"] = map[string]any{"a": 1} }), CodeSlotConfigInvalid},
		{"hint without stableId", mutate(t, func(m map[string]any) { req0(m)["priorDeviceHint"] = map[string]any{} }), CodeSlotConfigInvalid},
		{"hint extra key", mutate(t, func(m map[string]any) { req0(m)["priorDeviceHint"] = map[string]any{"stableId": "a", "trust": true} }), CodeSlotConfigInvalid},
		{"idle too short", mutate(t, func(m map[string]any) { m["idleTimeoutMs"] = 119999 }), CodeSlotConfigInvalid},
		{"idle too long", mutate(t, func(m map[string]any) { m["idleTimeoutMs"] = 3600001 }), CodeSlotConfigInvalid},
		{"idle zero", mutate(t, func(m map[string]any) { m["idleTimeoutMs"] = 0 }), CodeSlotConfigInvalid},
		{"preparation zero", mutate(t, func(m map[string]any) { m["preparationTimeoutMs"] = 0 }), CodeSlotConfigInvalid},
		{"preparation negative", mutate(t, func(m map[string]any) { m["preparationTimeoutMs"] = -5 }), CodeSlotConfigInvalid},
		{"preparation unbounded", mutate(t, func(m map[string]any) { m["preparationTimeoutMs"] = MaxSlotPreparationTimeoutMs + 1 }), CodeSlotConfigInvalid},
		{"owner pid zero", mutate(t, func(m map[string]any) { m["executionOwnerPid"] = 0 }), CodeSlotConfigInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSlotLaunchConfig(c.raw)
			ce := AsError(err)
			if ce == nil {
				t.Fatalf("accepted %s", c.raw)
			}
			if ce.Code != c.code {
				t.Fatalf("code %s, want %s (%v)", ce.Code, c.code, err)
			}
		})
	}
}

func TestParseSlotLaunchConfigAcceptsBounds(t *testing.T) {
	for _, ms := range []int64{SlotIdleTimeoutMinMs, SlotIdleTimeoutMaxMs} {
		raw := mutate(t, func(m map[string]any) { m["idleTimeoutMs"] = ms })
		cfg, err := ParseSlotLaunchConfig(raw)
		if err != nil || cfg.EffectiveIdleTimeoutMs() != ms {
			t.Fatalf("idle %d: %v %d", ms, err, cfg.EffectiveIdleTimeoutMs())
		}
	}
	exact := mutate(t, func(m map[string]any) {
		m["runnerIncarnation"] = strings.Repeat("y", 256)
		spec0(m)["configuration"] = map[string]any{"hw.ramSize": "2048"}
		spec0(m)["displayCutout"] = "none"
		req0(m)["priorDeviceHint"] = map[string]any{"stableId": "simlock-slot-abc"}
	})
	cfg, err := ParseSlotLaunchConfig(exact)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Requests[0].RequestedSpec.Configuration["hw.ramSize"] != "2048" || cfg.Requests[0].PriorDeviceHint.StableID != "simlock-slot-abc" {
		t.Fatalf("decoded %+v", cfg.Requests[0])
	}
	ios := mutate(t, func(m map[string]any) {
		req0(m)["platform"] = "ios"
		req0(m)["requestedSpec"] = map[string]any{"runtime": "com.apple.CoreSimulator.SimRuntime.iOS-27-0"}
	})
	if _, err := ParseSlotLaunchConfig(ios); err != nil {
		t.Fatalf("ios without deviceType: %v", err)
	}
}

func TestSlotLaunchConfigValidateTyped(t *testing.T) {
	cfg, err := ParseSlotLaunchConfig([]byte(goodSlotConfig))
	if err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.ContractVersion = 0
	if ce := AsError(bad.Validate()); ce == nil || ce.Code != CodeContractUnsupported {
		t.Fatalf("version 0: %v", bad.Validate())
	}
	bad = cfg
	bad.Requests = []SlotRequest{{SlotIndex: 0, Role: "r", Platform: "ios", RequestedSpec: SlotSpec{Runtime: "x", Configuration: map[string]string{"a": "b"}}}}
	if ce := AsError(bad.Validate()); ce == nil || ce.Code != CodeSlotConfigInvalid {
		t.Fatalf("ios configuration: %v", bad.Validate())
	}
	bad = cfg
	bad.IdleTimeoutMs = 60_000
	if ce := AsError(bad.Validate()); ce == nil || ce.Code != CodeSlotConfigInvalid {
		t.Fatalf("idle 60000: %v", bad.Validate())
	}
}

func TestScopeKeyAndFingerprint(t *testing.T) {
	a := ScopeKey("h", "ab", "c")
	if len(a) != 64 || a == ScopeKey("h", "a", "bc") || a != ScopeKey("h", "ab", "c") {
		t.Fatalf("scope key not a boundary-safe sha256: %s", a)
	}
	s := SlotSpec{Runtime: "r", DeviceType: "pixel_6"}
	f1 := SlotSpecFingerprint("android", s)
	s.DeviceType = "pixel_7"
	if f1 == SlotSpecFingerprint("android", s) || f1.Version != SpecFingerprintVersion {
		t.Fatal("fingerprint ignores the device type")
	}
	s.DeviceType = "pixel_6"
	if f1 != SlotSpecFingerprint("android", s) || f1 == SlotSpecFingerprint("ios", s) {
		t.Fatal("fingerprint is not a function of (platform, spec)")
	}
}

// FuzzParseSlotLaunchConfig: the parser never panics, always answers one
// of its three codes, and whatever it accepts validates and re-parses to
// the same config.
func FuzzParseSlotLaunchConfig(f *testing.F) {
	f.Add([]byte(goodSlotConfig))
	f.Add([]byte(`{"contractVersion":2}`))
	f.Add([]byte(`{"contractVersion":1,"requests":[{"requestedSpec":{"configuration":null}}]}`))
	f.Add([]byte(`{"contractVersion":1e0}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := ParseSlotLaunchConfig(raw)
		if err != nil {
			ce := AsError(err)
			if ce == nil {
				t.Fatalf("untyped error %v", err)
			}
			switch ce.Code {
			case CodeSlotConfigInvalid, CodeContractUnsupported, CodeSlotGroupUnsupported:
			default:
				t.Fatalf("unexpected code %s", ce.Code)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseSlotLaunchConfig(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed %s to %s", b, b2)
		}
	})
}
