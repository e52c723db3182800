package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A sketch is one shell snippet of docs/http-api.md: a `$ curl ...` command
// (with its `\` continuation lines) from a text block, or a whole sh block.
type sketch struct {
	line int
	code string
}

// httpSketches reads the snippets in document order.
func httpSketches(t *testing.T) []sketch {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sketch
	lines := strings.Split(string(b), "\n")
	fence := ""
	var sh []string
	shStart := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "```") {
			switch {
			case fence == "":
				fence = strings.TrimPrefix(l, "```")
				sh, shStart = nil, i+2
			case fence == "sh":
				out = append(out, sketch{shStart, strings.Join(sh, "\n")})
				fence = ""
			default:
				fence = ""
			}
			continue
		}
		switch {
		case fence == "sh":
			sh = append(sh, l)
		case fence == "text" && strings.HasPrefix(l, "$ curl "):
			cmd, start := []string{strings.TrimPrefix(l, "$ ")}, i+1
			for strings.HasSuffix(cmd[len(cmd)-1], `\`) && i+1 < len(lines) {
				i++
				cmd = append(cmd, lines[i])
			}
			out = append(out, sketch{start, strings.Join(cmd, "\n")})
		}
	}
	return out
}

// The ids the page uses in its examples, replaced by the real ones the
// sketches before them produced.
const (
	docLease   = "lse_ff2b95317f"
	docRequest = "req_1f1636745f6cee3b"
	docCode    = "9f2c41d07be35a18c6e02f4d9a7b1c33"
)

var (
	leaseLocation   = regexp.MustCompile(`(?m)^Location: /v1/leases/(lse_[A-Za-z0-9]+)`)
	requestLocation = regexp.MustCompile(`(?m)^Location: /v1/requests/(req_[A-Za-z0-9]+)`)
	requestIDField  = regexp.MustCompile(`"requestId":"(req_[A-Za-z0-9]+)"`)
	consoleCode     = regexp.MustCompile(`"code":"([0-9a-f]+)"`)
)

// curlPrelude makes curl fail on an HTTP error status (--fail-with-body),
// so a sketch that the daemon refuses (a missing Content-Type is 400) fails
// the test, and bounds a followed stream: GET /v1/events never ends on its
// own, so it is read for a moment and its timeout is its success.
const curlPrelude = `set -e
curl() {
  case "$*" in
  *"/v1/events"*) rc=0; command curl --fail-with-body --max-time 2 "$@" || rc=$?; [ "$rc" -eq 28 ] && rc=0; return "$rc" ;;
  esac
  command curl --fail-with-body "$@"
}
`

// TestHTTPDocSketchesRun runs every curl command and sh block of
// docs/http-api.md, in order, against a real daemon: tokens are in the
// variables the page names ($AGENT, $OPERATOR, $CI, $T, $URL), the
// daemon's address replaces localhost:7420, and the lease, request and
// console code the sketches make replace the page's example ids in the
// sketches after them. Each must exit 0, and curl fails on any 4xx or 5xx.
func TestHTTPDocSketchesRun(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":6,"maxManaged":8}},
 "http":{"enabled":true,"listen":"127.0.0.1:0"}}`)
	w.mustRun("daemon", "start")
	var st struct{ Daemon struct{ HTTP string } }
	w.json(&st, "status", "--json")
	addr := st.Daemon.HTTP
	token := func(role, name string) string {
		var tok struct{ Token string }
		w.json(&tok, "token", "create", "--role", role, "--name", name, "--json")
		return tok.Token
	}
	env := map[string]string{
		"AGENT": token("agent", "agent"), "OPERATOR": token("operator", "operator"), "CI": token("agent", "ci"),
		"T": token("agent", "poller"), "URL": "http://" + addr,
	}
	// The upload sketch installs an APK: its lease is an Android one, held
	// by an agent of its own (device.exec runs only for the requester).
	android := token("agent", "android")
	code, body := httpDo2(t, "POST", "http://"+addr+"/v1/leases", android, `{"platform":"android"}`, "Prefer", "wait=60")
	var al struct{ LeaseID string }
	if code != 201 || json.Unmarshal(body, &al) != nil || al.LeaseID == "" {
		t.Fatalf("an Android lease for the upload sketch: %d %s", code, body)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.apk"), []byte("not really an apk"), 0o644); err != nil {
		t.Fatal(err)
	}

	ids := map[string]string{}
	sketches := httpSketches(t)
	if len(sketches) < 15 {
		t.Fatalf("found %d sketches in docs/http-api.md; the reader is broken", len(sketches))
	}
	for _, sk := range sketches {
		src := strings.ReplaceAll(sk.code, "localhost:7420", addr)
		vars := env
		if strings.Contains(src, "{upload:") || strings.Contains(src, "/uploads/") {
			vars = map[string]string{}
			for k, v := range env {
				vars[k] = v
			}
			vars["AGENT"] = android
			src = strings.ReplaceAll(src, docLease, al.LeaseID)
		}
		for doc, key := range map[string]string{docLease: "lease", docRequest: "request", docCode: "code"} {
			if strings.Contains(src, doc) {
				if ids[key] == "" {
					t.Fatalf("docs/http-api.md:%d uses %s before any sketch made a %s", sk.line, doc, key)
				}
				src = strings.ReplaceAll(src, doc, ids[key])
			}
		}
		c := exec.CommandContext(t.Context(), "sh", "-c", curlPrelude+src)
		c.Dir = dir
		c.Env = os.Environ()
		for k, v := range vars {
			c.Env = append(c.Env, k+"="+v)
		}
		var out, stderr bytes.Buffer
		c.Stdout, c.Stderr = &out, &stderr
		if err := c.Run(); err != nil {
			t.Errorf("docs/http-api.md:%d: %v\n%s\n--- output:\n%.2000s\n--- stderr:\n%.1000s", sk.line, err, sk.code, out.String(), stderr.String())
			continue
		}
		got := out.String()
		if m := leaseLocation.FindStringSubmatch(got); m != nil && ids["lease"] == "" {
			ids["lease"] = m[1]
		}
		// The poll sketch follows the request of the queued one before it
		// (answered 202, or already granted if a device was ready in time).
		if strings.Contains(src, "$CI") && strings.Contains(src, "Prefer: wait=") {
			if m := requestLocation.FindStringSubmatch(got); m != nil {
				ids["request"] = m[1]
			} else if m := requestIDField.FindStringSubmatch(got); m != nil {
				ids["request"] = m[1]
			}
		}
		if m := consoleCode.FindStringSubmatch(got); m != nil && strings.Contains(src, "/v1/console/codes") {
			ids["code"] = m[1]
		}
	}
}

// httpDo2 is httpDo with one extra header.
func httpDo2(t *testing.T, method, url, token, body, key, val string) (int, []byte) {
	t.Helper()
	c := exec.CommandContext(t.Context(), "curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method, url,
		"-H", "Authorization: Bearer "+token, "-H", "Content-Type: application/json", "-H", key+": "+val, "-d", body)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("curl %s %s: %v", method, url, err)
	}
	i := bytes.LastIndexByte(out, '\n')
	code := 0
	for _, d := range out[i+1:] {
		code = code*10 + int(d-'0')
	}
	return code, out[:i]
}
