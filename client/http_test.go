package client

import (
	"testing"

	"github.com/simlock/simlock/contract"
)

func TestHTTPClientTimeouts(t *testing.T) {
	tr := newHTTPTransport("http://127.0.0.1:1", "t", httpConfig{})
	if tr.ordinary.Timeout != ordinaryCallTimeout || tr.waiting.Timeout != 0 {
		t.Fatalf("ordinary %v, waiting %v", tr.ordinary.Timeout, tr.waiting.Timeout)
	}
	for _, op := range []string{contract.LeaseRequest.Name, contract.EventsSubscribe.Name, "device.exec",
		contract.SessionPrepare.Name, contract.SlotAcquire.Name, contract.SlotResetScope.Name, contract.DeviceRelease.Name} {
		if !waitingOps[op] {
			t.Errorf("%s must not be cut by the ordinary timeout", op)
		}
	}
}
