package sessions

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// Consumer contract: the MCP keeper prepares its session before it
// answers initialize and publishes the flat result there, a ready one
// with its session id and resolved profile (sessions/10.3, 10.4); it keeps
// the session alive past its heartbeat TTL (10.6); a session server cannot
// acquire anything else (13.4); `session info` describes the bound device
// (11.7); its stdin's end relinquishes the session (10.8), which zero
// pooling destroys (1.1). The owner token is in no file of the home, logs
// included (2.11).
func TestSessionsKeeperPublishesKeepsAndRelinquishesItsSession(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "sessions/1.1", "sessions/10.3", "sessions/10.4", "sessions/10.6", "sessions/10.8",
		"sessions/11.7", "sessions/13.4", "sessions/2.11")
	const token = "conf-owner-token-5b1f0e9a"
	w := brokerWorld(t, "conf-agent", token)
	k := startKeeper(w, sessionConfig("keeper-1"))
	pub := k.initialize()
	sid, _ := pub["sessionId"].(string)
	prof, _ := pub["profile"].(map[string]any)
	dev, _ := pub["device"].(map[string]any)
	if pub["status"] != "ready" || sid == "" || prof == nil || dev == nil {
		t.Fatalf("the published session: %v", pub)
	}
	if prof["archetype"] != "phone" || prof["model"] != "iPhone 15" || prof["osVersion"] != "18.0" || prof["policyVersion"] != "conf-ios-1" {
		t.Fatalf("the published profile %v, want the phone the operator mapped (iPhone 15, iOS 18.0, conf-ios-1)", prof)
	}
	tools := k.tools()
	if len(tools) == 0 || tools["lease_simulator"] || tools["release_simulator"] {
		t.Fatalf("a ready session's tools %v: want tools, but none that leases or releases", tools)
	}

	// Past the 3 s TTL twice over: only the keeper's heartbeats keep it.
	time.Sleep(7 * time.Second)
	st := status(w, "keeper-1")
	if st.Status != "ready" || st.SessionID != sid || st.CleanupPending {
		t.Fatalf("the kept session past its TTL: %+v", st)
	}
	var info struct {
		SessionID string `json:"sessionId"`
		Status    string `json:"status"`
		Device    *struct {
			UDID string `json:"udid"`
		} `json:"device"`
	}
	w.JSON(&info, "session", "info", sid, "--json")
	if info.SessionID != sid || info.Device == nil || info.Device.UDID != dev["udid"] {
		t.Fatalf("session info %+v, want the device %v", info, dev["udid"])
	}

	k.close()
	harness.Eventually(t, "the relinquished session's device to be destroyed", 60*time.Second, func() bool {
		r := status(w, "keeper-1")
		return r.Status == "released" && !r.CleanupPending
	})
	var s struct {
		Devices []struct{ ID string } `json:"devices"`
		Leases  []struct{ ID string } `json:"leases"`
	}
	w.JSON(&s, "status", "--json")
	if len(s.Devices) != 0 || len(s.Leases) != 0 {
		t.Fatalf("after the release under zero pooling: %+v", s)
	}

	// The token is a credential: no receipt, journal or log holds it.
	err := filepath.WalkDir(w.Home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // a socket or a file gone meanwhile
		}
		if bytes.Contains(b, []byte(token)) {
			t.Errorf("%s holds the owner token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Provider CLI and the abandonment qualification: `session abandon` of a
// request id the daemon never saw consumes it and answers a terminal
// failed receipt (sessions/11.4, 8.2); a prepare that comes later with
// that id is answered from it and allocates nothing, and a new execution
// attempt under a new id is served (10.15).
func TestSessionsAbandonOfAnUnseenRequestConsumesIt(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "sessions/11.4", "sessions/8.2", "sessions/10.15")
	w := brokerWorld(t, "conf-agent", "conf-owner-abandon")
	var ab receipt
	w.JSON(&ab, "session", "abandon", "never-seen", "--json")
	if ab.Status != "failed" || ab.Failure == nil || ab.Failure.Code != "SESSION_ABANDONED" || ab.CleanupPending {
		t.Fatalf("abandon of an unseen request: %+v %+v", ab, ab.Failure)
	}
	var late receipt
	w.JSON(&late, "session", "prepare", "--config", sessionConfig("never-seen"), "--json")
	if late.Status != "failed" || late.Failure == nil || late.Failure.Code != "SESSION_ABANDONED" || late.Device != nil || late.LeaseID != "" {
		t.Fatalf("a late prepare of the abandoned id: %+v %+v", late, late.Failure)
	}
	var s struct {
		Devices []struct{ ID string } `json:"devices"`
	}
	w.JSON(&s, "status", "--json")
	if len(s.Devices) != 0 {
		t.Fatalf("the late prepare allocated: %+v", s.Devices)
	}
	var next receipt
	w.JSON(&next, "session", "prepare", "--config", sessionConfig("attempt-2"), "--json")
	if next.Status != "ready" || next.Device == nil {
		t.Fatalf("a new attempt under a new request id: %+v", next)
	}
	w.MustRun("session", "abandon", "attempt-2", "--json")
}
