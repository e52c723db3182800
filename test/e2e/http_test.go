package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

const httpConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "http":{"enabled":true,"listen":"127.0.0.1:0"}}`

func httpDo(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestHTTPAPIWithAnAgentToken(t *testing.T) {
	w := newWorld(t, httpConfig)
	w.mustRun("daemon", "start")
	var st struct{ Daemon struct{ HTTP string } }
	w.json(&st, "status", "--json")
	base := "http://" + st.Daemon.HTTP
	var tok struct{ Token string }
	w.json(&tok, "token", "create", "--role", "agent", "--name", "ci", "--json")

	if code, _ := httpDo(t, "GET", base+"/v1/healthz", "", ""); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := httpDo(t, "GET", base+"/v1/status", "", ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, b := httpDo(t, "GET", base+"/v1/devices", tok.Token, ""); code != 403 {
		t.Fatalf("agent on an admin route: %d %s", code, b)
	}
	code, b := httpDo(t, "GET", base+"/v1/openapi.json", tok.Token, "")
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if code != 200 || json.Unmarshal(b, &doc) != nil || !strings.HasPrefix(doc.OpenAPI, "3.") || doc.Paths["/v1/leases"] == nil {
		t.Fatalf("openapi %d: %.300s", code, b)
	}

	// Follow events over SSE with the same agent token.
	req, _ := http.NewRequest("GET", base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	sse, err := http.DefaultClient.Do(req)
	if err != nil || sse.StatusCode != 200 {
		t.Fatalf("sse: %v %v", err, sse.StatusCode)
	}
	defer sse.Body.Close()
	granted := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(sse.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "lease.granted") {
				granted <- sc.Text()
				return
			}
		}
	}()

	// The CLI reaches the daemon over HTTP with --url/--token.
	remote := func(args ...string) []string { return append([]string{"--url", base, "--token", tok.Token}, args...) }
	var l lease
	w.json(&l, remote("lease", "--platform", "ios", "--detach")...)
	if l.Role != "agent" || l.Device.UDID == "" {
		t.Fatalf("lease over HTTP %+v", l)
	}
	select {
	case <-granted:
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("no lease.granted over SSE for the agent's own lease")
	}
	code, b = httpDo(t, "POST", base+"/v1/leases/"+l.LeaseID+"/renew", tok.Token, "{}")
	if code != 200 || !strings.Contains(string(b), `"notices"`) {
		t.Fatalf("renew %d %s", code, b)
	}
	out := w.mustRun(remote("exec", l.LeaseID, "--", "simctl", "list", "devices")...)
	if !strings.Contains(out, l.Device.UDID) {
		t.Fatalf("exec over HTTP: %s", out)
	}
	w.mustRun(remote("release", l.LeaseID)...)
	if code, b := httpDo(t, "POST", base+"/v1/leases/"+l.LeaseID+"/renew", tok.Token, "{}"); code != 404 || !strings.Contains(string(b), "UNKNOWN_LEASE") {
		t.Fatalf("renew after release %d %s", code, b)
	}
}
