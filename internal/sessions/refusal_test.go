package sessions

import (
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// Reference, caps and "Shutdown refusals": a cap refusal names the full
// cap and paces its retry; a stored stopping failure's advice agrees with
// its retryRequires (a new request id).
func TestStoredRefusalsAgreeWithTheirRetryRequirement(t *testing.T) {
	l := Limits{SessionCap: 2, TotalDeviceCap: 3}
	for _, c := range []struct {
		r    Refusal
		name string
	}{{SessionCapReached, "sessionCap is 2"}, {DeviceCapReached, "totalDeviceCap is 3"}} {
		f := CapRefusal(c.r, l, 5000)
		if f.Code != contract.CodeCapacityExhausted || !f.Retryable || f.RetryAfterMs == nil || *f.RetryAfterMs != 5000 ||
			f.RetryRequires != RetryNewRequest || !strings.Contains(f.Message, c.name) || !strings.Contains(f.NextAction, "new request id") {
			t.Errorf("%v: %+v", c.r, f)
		}
	}
	f := StoppedFailure(5000)
	if f.Code != contract.CodeSessionBrokerStopping || f.RetryRequires != RetryNewRequest || !strings.Contains(f.NextAction, "new request id") ||
		f.RetryAfterMs == nil || *f.RetryAfterMs != 5000 || !f.Retryable {
		t.Errorf("stopped: %+v", f)
	}
}

// A config file with an unknown key (the CLI's --config, the MCP server's
// --session-config) is refused as the socket refuses it: one code,
// SESSION_CONFIG_INVALID, and the key's path within the config.
func TestDecodeConfigNamesTheUnknownKeysPath(t *testing.T) {
	_, err := DecodeConfig([]byte(`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios","os":{"kind":"omitted","hue":1}}}`))
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeSessionConfigInvalid || ce.Details["field"] != "device.os.hue" || !strings.Contains(ce.Message, "device.os.hue") {
		t.Fatalf("%+v", ce)
	}
}
