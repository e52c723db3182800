package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oapiCodegen is the generator the test drives, pinned.
const oapiCodegen = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"

// TestGeneratedClientLeasesADevice fetches the OpenAPI document a real
// daemon serves (without a token), generates a Go client from it with
// oapi-codegen, builds test/oapigen (a module of its own that imports no
// simlock package) around it, and runs it: it must lease a device, read
// and release the lease, and decode the refusals that follow.
// SIMLOCK_OPENAPI_OUT, when set, also receives the document, for CI's
// redocly lint.
func TestGeneratedClientLeasesADevice(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	start := time.Now()
	w := newWorld(t, httpConfig)
	w.mustRun("daemon", "start")
	var st struct{ Daemon struct{ HTTP string } }
	w.json(&st, "status", "--json")
	base := "http://" + st.Daemon.HTTP
	var tok struct{ Token string }
	w.json(&tok, "token", "create", "--role", "agent", "--name", "oapigen", "--json")

	code, doc := httpDo(t, "GET", base+"/v1/openapi.json", "", "")
	if code != 200 {
		t.Fatalf("GET /v1/openapi.json without a token: %d %.300s", code, doc)
	}
	if out := os.Getenv("SIMLOCK_OPENAPI_OUT"); out != "" {
		if err := os.WriteFile(out, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A copy of the module, with the generated package beside it.
	mod := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join("..", "oapigen", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mod, "openapi.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(mod, "simlockapi"), 0o755); err != nil {
		t.Fatal(err)
	}
	goCmd := func(args ...string) string {
		t.Helper()
		c := exec.Command("go", args...)
		c.Dir = mod
		// The copy is its own module: the main module's -mod=readonly
		// and vendoring choices do not apply to it.
		c.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("run", oapiCodegen, "-generate", "types,client", "-package", "simlockapi",
		"-o", filepath.Join("simlockapi", "client.gen.go"), "openapi.json")
	exe := filepath.Join(mod, "oapigen")
	goCmd("build", "-o", exe, ".")

	run := exec.Command(exe, base, tok.Token)
	out, err := run.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("generated client: %v\n%s%s", err, out, stderr)
	}
	var rep struct {
		LeaseID, DeviceID, Platform, State string
		Released                           bool
		AfterCode                          string
		BadPlatform                        string `json:"badPlatformCode"`
		PublicDoc                          int    `json:"publicDocStatus"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if !strings.HasPrefix(rep.LeaseID, "lse_") || rep.DeviceID == "" || rep.Platform != "ios" || rep.State != "leased" {
		t.Errorf("lease through the generated client: %+v", rep)
	}
	if !rep.Released || rep.AfterCode != "UNKNOWN_LEASE" || rep.PublicDoc != 200 {
		t.Errorf("release and refusal through the generated client: %+v", rep)
	}
	if rep.BadPlatform != "UNSUPPORTED_PLATFORM" && rep.BadPlatform != "BAD_REQUEST" {
		t.Errorf("a bad platform decoded as %q", rep.BadPlatform)
	}
	// The daemon agrees: nothing is held any more.
	if st := w.status(); len(st.Leases) != 0 {
		t.Errorf("leases after the generated client released: %+v", st.Leases)
	}
	t.Logf("generated, built and ran the client in %s", time.Since(start).Round(time.Millisecond))
}
