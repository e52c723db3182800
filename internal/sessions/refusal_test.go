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
