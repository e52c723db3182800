package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

func sessionFixture(t *testing.T) (*daemontest.Stack, *httptest.Server, string) {
	t.Helper()
	st := daemontest.Start(t, daemontest.Options{Devices: 2, Config: func(c *config.Config) {
		c.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000}
	}})
	secret, _ := st.Token(contract.TokenRoleAgent, "agent1")
	s := httpapi.New(httpapi.Options{Backend: st.Backend(), Clock: st.Clock, Version: "1.2.3"})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(s.Close)
	return st, ts, secret
}

// The session routes reach the broker with the owner token in the body and
// the path's ids filled in.
func TestSessionRoutesOverHTTP(t *testing.T) {
	st, ts, tok := sessionFixture(t)
	f := &fixture{t: t, st: st, ts: ts}
	var caps contract.CapabilitiesGetOut
	if resp := f.call("GET", "/v1/capabilities", tok, "", &caps); resp.StatusCode != http.StatusOK || len(caps.Contracts) < 2 || caps.Contracts[0] != contract.ContractSessionBroker {
		t.Fatalf("capabilities %d %+v", resp.StatusCode, caps)
	}
	cfg := `{"contractVersion":1,"requestId":"r1","device":{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model","model":{"namespace":"simlock-model","value":"Phone"}}}}`
	var r contract.SessionReceipt
	if resp := f.call("POST", "/v1/sessions", tok, `{"config":`+cfg+`,"ownerToken":"o"}`, &r); resp.StatusCode != http.StatusOK || r.Status != contract.SessionReady {
		t.Fatalf("prepare %d %+v", resp.StatusCode, r)
	}
	var again contract.SessionReceipt
	f.call("POST", "/v1/session-requests/r1/status", tok, `{"ownerToken":"o"}`, &again)
	if again.SessionID != r.SessionID {
		t.Fatalf("status %+v, want %s", again, r.SessionID)
	}
	var info contract.SessionInfoOut
	if f.call("GET", "/v1/sessions/"+r.SessionID, tok, "", &info); info.Device == nil || info.Device.ID != r.Device.ID {
		t.Fatalf("info %+v", info)
	}
	var hb contract.SessionHeartbeatOut
	if resp := f.call("POST", "/v1/sessions/"+r.SessionID+"/heartbeat", tok, `{"ownerToken":"o"}`, &hb); resp.StatusCode != http.StatusOK || hb.SessionID != r.SessionID {
		t.Fatalf("heartbeat %d %+v", resp.StatusCode, hb)
	}
	ce, resp := f.refusal("POST", "/v1/sessions/"+r.SessionID+"/heartbeat", tok, `{"ownerToken":"x"}`)
	if ce.Code != contract.CodeSessionOwnerMismatch || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("heartbeat by another token: %d %+v", resp.StatusCode, ce)
	}
	// Another token's release reads the session as unknown (ADR 0058).
	var foreign contract.SessionReleaseOut
	if resp := f.call("POST", "/v1/sessions/"+r.SessionID+"/release", tok, `{"ownerToken":"x"}`, &foreign); resp.StatusCode != http.StatusOK || foreign.Outcome != contract.ReleaseUnknownSession {
		t.Fatalf("release by another token: %d %+v", resp.StatusCode, foreign)
	}
	var rel contract.SessionReleaseOut
	if f.call("POST", "/v1/sessions/"+r.SessionID+"/release", tok, `{"ownerToken":"o"}`, &rel); rel.Outcome != contract.ReleaseReleased {
		t.Fatalf("release %+v", rel)
	}
	var stats contract.SessionStatsOut
	if f.call("GET", fmt.Sprintf("/v1/sessions/stats?windowMs=%d&limit=10", 3600000), tok, "", &stats); stats.Limit != 10 || len(stats.Groups) != 1 {
		t.Fatalf("stats %+v", stats)
	}
	var ab contract.SessionReceipt
	if f.call("POST", "/v1/session-requests/never/abandon", tok, `{"ownerToken":"o"}`, &ab); ab.Failure == nil || ab.Failure.Code != contract.CodeSessionAbandoned {
		t.Fatalf("abandon %+v", ab)
	}
	var ack contract.SessionAcknowledgeOut
	if f.call("POST", "/v1/session-exports/p/acknowledge", tok, `{"requestDigest":"d","ownerToken":"o"}`, &ack); ack.Outcome != "unknown_export" {
		t.Fatalf("acknowledge %+v", ack)
	}
}
