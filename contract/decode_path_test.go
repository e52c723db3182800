package contract

import (
	"strings"
	"testing"
)

// Reference, the consumer contract's session config, and DESIGN "input
// decoding is strict": an unknown key anywhere in a session config is one
// code on every surface, SESSION_CONFIG_INVALID, naming the key's path
// within the config.
func TestUnknownSessionConfigKeyIsConfigInvalidWithItsPath(t *testing.T) {
	for _, c := range []struct{ raw, field string }{
		{`{"config":{"contractVersion":1,"requestId":"r","colour":1},"ownerToken":"o"}`, "colour"},
		{`{"config":{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios","hardware":{"kind":"archetype","archetype":"phone","hue":"red"}}},"ownerToken":"o"}`, "device.hardware.hue"},
		{`{"config":{"contractVersion":1,"requestId":"r","idleTimeoutMs":"soon"},"ownerToken":"o"}`, "idleTimeoutMs"},
	} {
		_, err := SessionPrepare.DecodeInput([]byte(c.raw))
		ce := AsError(err)
		if ce == nil || ce.Code != CodeSessionConfigInvalid || ce.Details["field"] != c.field || !strings.Contains(ce.Message, c.field) ||
			strings.Contains(ce.Message, "config."+c.field) {
			t.Errorf("%s: %+v", c.raw, ce)
		}
	}
	// Outside the config the input's own refusal stands, with its path.
	_, err := SessionPrepare.DecodeInput([]byte(`{"config":{"contractVersion":1},"ownerToken":"o","extra":true}`))
	if ce := AsError(err); ce == nil || ce.Code != CodeBadRequest || ce.Details["field"] != "extra" {
		t.Errorf("an unknown top-level key: %+v", ce)
	}
}

// A strict-decode refusal of any operation names the field's path.
func TestDecodeRefusalNamesTheFieldPath(t *testing.T) {
	_, err := LeaseRequest.DecodeInput([]byte(`{"platform":"ios","colour":"red"}`))
	if ce := AsError(err); ce == nil || ce.Code != CodeBadRequest || ce.Details["field"] != "colour" {
		t.Fatalf("%+v", ce)
	}
}
