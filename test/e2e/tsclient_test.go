package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testnpm"
)

// The TypeScript toolchain the test drives, pinned: the generator, the
// fetch client, and the compiler (openapi-typescript asks for ^5).
var tsClientPackages = []string{"openapi-typescript@7.13.0", "openapi-fetch@0.17.0", "typescript@5.9.3"}

// tsTools installs tsClientPackages once per machine (in
// $XDG_CACHE_HOME/simlock-thirdparty when set, else a temp dir for this
// test) and returns their node_modules. Without npm or node the test is
// skipped, or fails when SIMLOCK_NPM_TESTS=require.
func tsTools(ctx context.Context, t *testing.T) string {
	t.Helper()
	npm, errNPM := exec.LookPath("npm")
	_, errNode := exec.LookPath("node")
	if errNPM != nil || errNode != nil {
		if testnpm.Required() {
			t.Fatal("npm or node is not installed and SIMLOCK_NPM_TESTS=require")
		}
		t.Skip("npm or node is not installed: skipping the TypeScript client test (set SIMLOCK_NPM_TESTS=require to make this a failure)")
	}
	root := t.TempDir()
	if c := os.Getenv("XDG_CACHE_HOME"); c != "" {
		root = filepath.Join(c, "simlock-thirdparty")
	}
	dir := filepath.Join(root, "tsclient-"+strings.NewReplacer("@", "-", "/", "-").Replace(strings.Join(tsClientPackages, "_")))
	mods := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(mods, ".bin", "tsc")); err == nil {
		return mods
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// --ignore-scripts: nothing from the packages runs at install time.
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save",
		"--ignore-scripts", "--loglevel=error"}, tsClientPackages...)
	c := exec.CommandContext(ctx, npm, args...)
	c.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(root, "npm-cache"), "npm_config_update_notifier=false")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", strings.Join(tsClientPackages, " "), err, out)
	}
	return mods
}

// TestTypeScriptClientLeasesADevice fetches the document a real daemon
// serves, generates types from it with openapi-typescript, compiles
// test/tsclient/main.ts against them with tsc in strict mode, and runs it
// with node: through openapi-fetch it leases a device (long-polling if it
// must), reads the lease (data.expiresAt, with no media type argument: the
// trap of issue 26 was that this did not compile), streams a command's
// output through a :stream twin, releases the lease and decodes the
// refusal that follows.
func TestTypeScriptClientLeasesADevice(t *testing.T) {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	start := time.Now()
	mods := tsTools(ctx, t)
	w := newWorld(t, httpConfig)
	w.mustRun("daemon", "start")
	var st struct{ Daemon struct{ HTTP string } }
	w.json(&st, "status", "--json")
	base := "http://" + st.Daemon.HTTP
	var tok struct{ Token string }
	w.json(&tok, "token", "create", "--role", "agent", "--name", "tsclient", "--json")

	code, doc := httpDo(t, "GET", base+"/v1/openapi.json", "", "")
	if code != 200 {
		t.Fatalf("GET /v1/openapi.json: %d %.300s", code, doc)
	}
	// A copy of the program beside the unmodified document.
	dir := t.TempDir()
	for _, f := range []string{"main.ts", "tsconfig.json", "package.json"} {
		b, err := os.ReadFile(filepath.Join("..", "tsclient", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, name, args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := c.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	bin := filepath.Join(mods, ".bin")
	run(filepath.Join(bin, "openapi-typescript"), "openapi.json", "-o", "simlock.ts")
	run(filepath.Join(bin, "tsc"), "-p", ".")
	out := run("node", filepath.Join("out", "main.js"), base, tok.Token)

	var rep struct {
		LeaseID, DeviceID, Platform, ExpiresAt string
		Polls                                  int
		Released                               bool
		AfterCode                              string
		StreamContentType                      string
		StreamFirstLine, StreamLastLine        string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if !strings.HasPrefix(rep.LeaseID, "lse_") || rep.DeviceID == "" || rep.Platform != "ios" {
		t.Errorf("lease through the TypeScript client: %+v", rep)
	}
	if _, err := time.Parse(time.RFC3339Nano, rep.ExpiresAt); err != nil {
		t.Errorf("expiresAt %q: %v", rep.ExpiresAt, err)
	}
	if !rep.Released || rep.AfterCode != "UNKNOWN_LEASE" {
		t.Errorf("release and refusal through the TypeScript client: %+v", rep)
	}
	var first struct{ Method string }
	if rep.StreamContentType != "application/x-ndjson" || json.Unmarshal([]byte(rep.StreamFirstLine), &first) != nil ||
		first.Method != "output" || rep.StreamLastLine != `{"result":{"exitCode":0}}` {
		t.Errorf("exec:stream through the TypeScript client: %+v", rep)
	}
	if st := w.status(); len(st.Leases) != 0 {
		t.Errorf("leases after the TypeScript client released: %+v", st.Leases)
	}
	t.Logf("installed, generated, compiled and ran the TypeScript client in %s (%d polls)", time.Since(start).Round(time.Millisecond), rep.Polls)
}
