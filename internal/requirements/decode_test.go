package requirements_test

import (
	"encoding/json"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/requirements"
)

func TestDecode(t *testing.T) {
	ok := []string{
		`{"schemaVersion":1,"platform":"ios"}`,
		`{"schemaVersion":1,"platform":"ios","hardware":{"kind":"archetype","archetype":"phone"},"os":{"kind":"omitted"}}`,
		`{"schemaVersion":1,"platform":"ios","hardware":{"kind":"modelType","modelType":{"family":"iphone","variant":"pro"}},"os":{"kind":"exact","version":"26.5"}}`,
		`{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"product-model","value":"iPhone18,1"}},"os":{"kind":"latest"}}`,
		`{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"device-type","value":"com.apple.CoreSimulator.SimDeviceType.iPhone-16"}}}`,
		`{"schemaVersion":1,"platform":"android","hardware":{"kind":"archetype","archetype":"foldable"},"os":{"kind":"atLeast","version":"15"}}`,
		`{"schemaVersion":1,"platform":"android","hardware":{"kind":"model","model":{"namespace":"avd-profile","value":"pixel_9"}}}`,
		`{"schemaVersion":1,"platform":"android","hardware":{"kind":"model","model":{"namespace":"simlock-model","value":"Pixel 9"}}}`,
	}
	for _, s := range ok {
		if _, err := requirements.Decode([]byte(s)); err != nil {
			t.Errorf("Decode(%s) = %v", s, err)
		}
	}
	bad := map[string]string{
		"no schema version":           `{"platform":"ios"}`,
		"schema version 2":            `{"schemaVersion":2,"platform":"ios"}`,
		"unknown platform":            `{"schemaVersion":1,"platform":"watchos"}`,
		"unknown key":                 `{"schemaVersion":1,"platform":"ios","colour":"red"}`,
		"unknown hardware key":        `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"archetype","archetype":"phone","size":1}}`,
		"trailing data":               `{"schemaVersion":1,"platform":"ios"} {}`,
		"not an object":               `[1]`,
		"unknown hardware kind":       `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"brand"}}`,
		"unknown archetype":           `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"archetype","archetype":"watch"}}`,
		"archetype with a model":      `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"archetype","archetype":"phone","model":{"namespace":"product-model","value":"x"}}}`,
		"model type without family":   `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"modelType","modelType":{"variant":"pro"}}}`,
		"model type missing":          `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"modelType"}}`,
		"model without value":         `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"product-model"}}}`,
		"android namespace on ios":    `{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"avd-profile","value":"pixel_9"}}}`,
		"ios namespace on android":    `{"schemaVersion":1,"platform":"android","hardware":{"kind":"model","model":{"namespace":"product-model","value":"iPhone18,1"}}}`,
		"unknown os kind":             `{"schemaVersion":1,"platform":"ios","os":{"kind":"newest"}}`,
		"exact without version":       `{"schemaVersion":1,"platform":"ios","os":{"kind":"exact"}}`,
		"atLeast with a bad version":  `{"schemaVersion":1,"platform":"android","os":{"kind":"atLeast","version":"API 36"}}`,
		"latest with a version":       `{"schemaVersion":1,"platform":"ios","os":{"kind":"latest","version":"18"}}`,
		"omitted with a version":      `{"schemaVersion":1,"platform":"ios","os":{"kind":"omitted","version":"18"}}`,
		"four-part version":           `{"schemaVersion":1,"platform":"ios","os":{"kind":"exact","version":"1.2.3.4"}}`,
		"schemaVersion of wrong type": `{"schemaVersion":"1","platform":"ios"}`,
	}
	for name, s := range bad {
		_, err := requirements.Decode([]byte(s))
		if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeSessionConfigInvalid || ce.Retryable {
			t.Errorf("%s: Decode(%s) = %v, want SESSION_CONFIG_INVALID", name, s, err)
		}
	}
}

// The decoder never panics, refuses only with SESSION_CONFIG_INVALID, and
// what it accepts survives a round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"schemaVersion":1,"platform":"ios"}`,
		`{"schemaVersion":1,"platform":"android","hardware":{"kind":"archetype","archetype":"foldable"},"os":{"kind":"atLeast","version":"15"}}`,
		`{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"product-model","value":"iPhone18,1"}},"os":{"kind":"exact","version":"26.5"}}`,
		`{"schemaVersion":1,"platform":"ios","hardware":{"kind":"modelType","modelType":{"family":"iphone"}}}`,
		`{}`, `null`, `[]`, `{"schemaVersion":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := requirements.Decode(data)
		if err != nil {
			if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeSessionConfigInvalid {
				t.Fatalf("Decode refused with %v", err)
			}
			return
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := requirements.Decode(b)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed %s to %s", b, b2)
		}
	})
}
